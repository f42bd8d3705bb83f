#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Makes this machine's own Rust toolchain (rustup's `stable`) usable for kernel builds in the
# build root, the way a kernel developer builds a kernel today with a current rustc:
#   $ROXE_CACHE/rust-toolchain-<key>/   rustup's sysroot (documentation left out), with
#     lib/rustlib/src/rust/library       the standard library's source of the same upstream version
#                                        (the kernel compiles `core` from it); rustup's rust-src
#                                        component cannot be fetched here, so it comes from
#                                        Debian's rust-src package of that version
#     bin/bindgen                        bindgen-cli from crates.io ($BINDGEN_VERSION)
# The key covers `rustc -vV`, the bindgen version and this script. Prints the directory; the
# kernel is then built with its bin/ first on PATH (qemu/kernel-debug.sh with ROXE_RUST=rustup).
. "$(dirname "$0")/lib.sh"
BINDGEN_VERSION=0.73.2
"$ROXE_TOP/qemu/buildroot.sh"
command -v rustup >/dev/null || die "no rustup on this machine: the rustup-built kernel needs it"
sysroot=$(rustc +stable --print sysroot) || die "rustup has no stable toolchain"
ver=$(rustc +stable --version | awk '{print $2}')
key=$( { rustc +stable -vV; echo "bindgen-cli $BINDGEN_VERSION"; cat "$0"; } | key_of)
out="$ROXE_CACHE/rust-toolchain-$key"
if [ -e "$out/.complete" ]; then
	echo "$out"
	exit 0
fi
prepare() {
	rm -rf "$out"; mkdir -p "$out"
	log "copying rustup's stable toolchain (rustc $ver) into $out"
	rsync -a --exclude 'share/doc' "$sysroot/" "$out/"
	local debver tmp lib
	debver=$(in_buildroot apt-cache madison rust-src |
		awk -v v="$ver" 'index($3, v "+") == 1 { print $3; exit }')
	[ -n "$debver" ] || die "Debian offers no rust-src of $ver, and rustup cannot fetch its own here"
	log "the library source of $ver: Debian's rust-src $debver"
	tmp="$out/.rust-src"; mkdir -p "$tmp"
	in_buildroot sh -c "cd '$tmp' && apt-get download -qq 'rust-src=$debver'" >/dev/null 2>&1 ||
		die "cannot download rust-src $debver"
	dpkg-deb -x "$tmp"/rust-src_*.deb "$tmp/x"
	# Debian's rust-src holds the whole rustc source tree; the kernel needs its library/.
	lib=""
	for c in "$tmp"/x/usr/src/rustc-*/library "$tmp"/x/usr/lib/rustlib/src/rust/library; do
		[ -f "$c/core/src/lib.rs" ] && lib=$c
	done
	[ -n "$lib" ] || die "rust-src $debver has no library/core"
	mkdir -p "$out/lib/rustlib/src/rust"
	mv "$lib" "$out/lib/rustlib/src/rust/library"
	rm -rf "$tmp"
	log "building bindgen-cli $BINDGEN_VERSION from crates.io"
	cargo +stable install --locked --quiet bindgen-cli --version "$BINDGEN_VERSION" \
		--root "$out/bindgen" >"$out/bindgen.log" 2>&1 || { tail -20 "$out/bindgen.log"; die "bindgen-cli build failed"; }
	ln -s ../bindgen/bin/bindgen "$out/bin/bindgen"
	touch "$out/.complete"
}
with_lock rust-toolchain prepare
prune_old rust-toolchain "$out"
echo "$out"
