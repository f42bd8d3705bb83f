#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The in-tree soft RDMA drivers a harness kernel lacks, as the peers roxe is tested and measured
# against: siw (soft iWARP), which no Debian kernel ships (no CONFIG_RDMA_SIW), and rdma_rxe where
# the kernel has none (Debian's cloud kernel). Both are self-contained, so each is built out of
# tree from the very source the kernel tree was prepared from (drivers/infiniband/sw/siw or rxe,
# unmodified) against that tree, with Debian's compiler. Cached as $ROXE_CACHE/soft-rdma-<key>
# (key: the kernel tree and this script); copied to build/<flavour>-soft-rdma/, where the guest
# finds them (qemu/guest/lib.sh: install_siw; qemu/guest/init installs rdma_rxe.ko at boot, so
# that every `modprobe rdma_rxe`, blktests' too, works as on a kernel that ships it). The debug
# kernels build both in their tree (qemu/config/debug.config).
#   qemu/soft-rdma-build.sh stock|stock-RELEASE
. "$(dirname "$0")/lib.sh"
flavour=${1:?usage: soft-rdma-build.sh stock|stock-RELEASE}
case $flavour in debug*) die "soft-rdma-build.sh is for the stock kernels (the debug kernels have siw and rdma_rxe in their tree)" ;; esac
kdir="$(flavour_kernel "$flavour")/build"
[ -d "$kdir" ] || die "no $flavour kernel tree: run qemu/kernel-stock.sh"
use_kernel_suite "$(flavour_kernel "$flavour")"
kdir=$(readlink -f "$kdir")
ksrc=$(readlink -f "$kdir/source")
read -ra ccargs <<<"$(debian_cc "$kdir")"
self=$(readlink -f "$0")
key=$( { echo "$kdir"; cat "$self"; } | key_of)
out="$ROXE_CACHE/soft-rdma-$key"
# drivers: "directory:module:Kconfig symbol" of each driver the kernel lacks.
drivers=()
for d in siw:siw:RDMA_SIW rxe:rdma_rxe:RDMA_RXE; do
	grep -q "^CONFIG_${d##*:}=[ym]" "$kdir/.config" || drivers+=("$d")
done
build() {
	[ -e "$out/.complete" ] && return 0
	rm -rf "$out"; mkdir -p "$out"
	local d dir mod sym
	for d in "${drivers[@]}"; do
		IFS=: read -r dir mod sym <<<"$d"
		cp -a "$ksrc/drivers/infiniband/sw/$dir" "$out/$dir"
		log "building $mod for $flavour"
		in_buildroot make -C "$kdir" M="$out/$dir" "CONFIG_$sym=m" "${ccargs[@]}" \
			-j"$(nproc)" modules >"$out/$dir/build.log" 2>&1 ||
			{ tail -20 "$out/$dir/build.log"; die "$dir build failed"; }
	done
	touch "$out/.complete"
}
with_lock "soft-rdma-$key" build
rm -rf "$ROXE_TOP/build/$flavour-soft-rdma"
mkdir -p "$ROXE_TOP/build/$flavour-soft-rdma"
for d in "${drivers[@]}"; do
	IFS=: read -r dir mod _ <<<"$d"
	install -m 0644 "$out/$dir/$mod.ko" "$ROXE_TOP/build/$flavour-soft-rdma/$mod.ko"
done
echo "$out"
