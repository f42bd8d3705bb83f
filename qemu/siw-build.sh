#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# siw (soft iWARP, the other in-tree soft RDMA driver) for a harness kernel that lacks it: Debian's
# stock kernel has no CONFIG_RDMA_SIW. siw is self-contained, so it is built out of tree from the
# very source the kernel tree was prepared from (drivers/infiniband/sw/siw, unmodified) against
# that tree, with Debian's compiler. Cached as $ROXE_CACHE/siw-<key> (key: the kernel tree and
# this script); copied to build/<flavour>-siw/siw.ko, where the guest's load_driver and
# install_module find it. The debug kernel builds siw itself (qemu/config/debug.config).
#   qemu/siw-build.sh stock|stock-RELEASE
. "$(dirname "$0")/lib.sh"
flavour=${1:?usage: siw-build.sh stock|stock-RELEASE}
case $flavour in debug*) die "siw-build.sh is for the stock kernels (the debug kernels have siw built in their tree)" ;; esac
kdir="$(flavour_kernel "$flavour")/build"
[ -d "$kdir" ] || die "no $flavour kernel tree: run qemu/kernel-stock.sh"
use_kernel_suite "$(flavour_kernel "$flavour")"
kdir=$(readlink -f "$kdir")
ksrc=$(readlink -f "$kdir/source")
read -ra ccargs <<<"$(debian_cc "$kdir")"
self=$(readlink -f "$0")
key=$( { echo "$kdir"; cat "$self"; } | key_of)
out="$ROXE_CACHE/siw-$key"
build() {
	[ -e "$out/.complete" ] && return 0
	rm -rf "$out"; mkdir -p "$out"
	cp -a "$ksrc/drivers/infiniband/sw/siw/." "$out/"
	log "building siw for $flavour"
	in_buildroot make -C "$kdir" M="$out" CONFIG_RDMA_SIW=m "${ccargs[@]}" \
		-j"$(nproc)" modules >"$out/build.log" 2>&1 ||
		{ tail -20 "$out/build.log"; die "siw build failed"; }
	touch "$out/.complete"
}
with_lock "siw-$key" build
mkdir -p "$ROXE_TOP/build/$flavour-siw"
install -m 0644 "$out/siw.ko" "$ROXE_TOP/build/$flavour-siw/siw.ko"
echo "$out"
