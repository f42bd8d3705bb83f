#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The module index (modules.dep, modules.alias, ...) a guest of FLAVOUR has once roxe.ko, and
# siw.ko and rdma_rxe.ko where the harness builds them (qemu/soft-rdma-build.sh), are installed
# in /lib/modules/RELEASE/extra: made on the host with the build root's depmod, over a tree of
# links to the kernel's modules plus those. The guest's install_module copies it into its
# writable /lib/modules instead of running depmod there, which reads every module of the kernel
# over 9p and took minutes under TCG on a busy host. Output: build/FLAVOUR-modules/ (extra/*.ko
# and the modules.* files), and `config`, the kernel's build configuration, for guest tools that
# read it (blktests' srp group requires /proc/config.gz or /boot/config-RELEASE, and neither
# kernel has the former).
#   qemu/module-index.sh debug|stock|stock-RELEASE
. "$(dirname "$0")/lib.sh"
flavour=${1:?usage: module-index.sh debug|stock|stock-RELEASE}
kdir=$(readlink -f "$(flavour_kernel "$flavour")")
use_kernel_suite "$kdir"
rel=$(ls "$kdir/modules/lib/modules")
[ -n "$rel" ] && [ -d "$kdir/modules/lib/modules/$rel" ] || die "no modules for $flavour"
out="$ROXE_TOP/build/$flavour-modules"
tree="$out.tree"
rm -rf "$out" "$tree"
mkdir -p "$tree/lib/modules/$rel/extra" "$out/extra"
cp -rs "$kdir/modules/lib/modules/$rel/." "$tree/lib/modules/$rel/"
# depmod replaces the links to the kernel's own index files (it renames new files into place).
for ko in "$ROXE_TOP/build/$flavour/roxe.ko" "$ROXE_TOP/build/$flavour-soft-rdma/"*.ko; do
	[ -f "$ko" ] || continue
	cp "$ko" "$tree/lib/modules/$rel/extra/"
	cp "$ko" "$out/extra/"
done
in_buildroot depmod -b "$tree" "$rel" 2>/dev/null || die "depmod failed for $flavour"
cp "$tree/lib/modules/$rel"/modules.* "$out/"
rm -rf "$tree"
echo "$rel" >"$out/release"
[ -f "$kdir/build/.config" ] && cp "$kdir/build/.config" "$out/config"
echo "$out"
