#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds the project's kernel modules for a harness kernel flavour inside the build root (the
# compiler must be the one that built the kernel's Rust metadata). Sources are mirrored into
# build/<flavour>/ so the two flavours' objects and generated bindings never mix.
#   qemu/build-module.sh debug|stock|stock-RELEASE
# (stock-RELEASE: a Debian kernel of make matrix, prepared by `qemu/kernel-stock.sh RELEASE`.)
# With ROXE_CLIPPY=1 the sources are compiled through clippy-driver (the kernel's `make CLIPPY=1`,
# with the kernel's own lint set) into build/<flavour>-clippy/, and any warning fails the build.
. "$(dirname "$0")/lib.sh"
flavour=${1:?usage: build-module.sh debug|stock|stock-RELEASE}
kdir="$(flavour_kernel "$flavour")/build"
[ -d "$kdir" ] || die "no $flavour kernel tree: run qemu/kernel-$flavour.sh"
use_kernel_suite "$(flavour_kernel "$flavour")"
read -ra mkargs <<<"$(kernel_make_args "$flavour" "$kdir")"
kdir=$(readlink -f "$kdir")
out="$ROXE_TOP/build/$flavour"
if [ "${ROXE_CLIPPY:-0}" = 1 ]; then
	out="$out-clippy"
	mkargs+=(CLIPPY=1 KRUSTFLAGS=-Dwarnings)
fi
mkdir -p "$out"
build() {
	module_sources "$out"
	in_buildroot make -C "$kdir" M="$out" "${mkargs[@]}" -j"$(nproc)" modules
}
# Two runners (a long form beside a single test) may build the same flavour at once: one at a time
# per output directory, or they would delete each other's generated files mid-build.
with_lock "module-$(basename "$out")" build
# The kernel's rdma selftests that qemu/tests/kselftest-rdma.sh runs, with the helper they
# source, taken from the source tree the modules are built against (both flavours share it),
# never kept in the project.
ksrc=$(readlink -f "$kdir/source")
mkdir -p "$ROXE_TOP/build/kselftest/rdma" "$ROXE_TOP/build/kselftest/kselftest"
install -m 0755 "$ksrc"/tools/testing/selftests/rdma/*.sh "$ROXE_TOP/build/kselftest/rdma/"
install -m 0644 "$ksrc/tools/testing/selftests/kselftest/ktap_helpers.sh" "$ROXE_TOP/build/kselftest/kselftest/"
ls "$out"/*.ko
