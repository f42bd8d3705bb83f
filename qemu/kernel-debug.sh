#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds the `debug` flavour: linux-source-7.3 from Debian, x86_64_defconfig + qemu/config/*.config,
# compiled with clang-19 (Rust with KASAN needs clang) inside the build root, with the build root's
# Rust toolchain (Debian's rustc and bindgen).
# With ROXE_RUST=rustup, the `debug-rustup` flavour (make matrix): the same source and options
# built with this machine's rustup toolchain (stable) and bindgen from crates.io
# (qemu/rustup-toolchain.sh), the way a kernel developer builds a debug kernel today.
# With ROXE_DEBUG_RT=1, the `debug-rt` flavour (make matrix): the same kernel with PREEMPT_RT
# (qemu/config/rt.config), Debian's rustc.
# Output, cached by a key over source version, fragments, toolchain versions and this script:
#   $ROXE_CACHE/kernel-debug-<key>/{bzImage,build/,modules/lib/modules/<release>}
# (rustup: kernel-rustup-debug-<key>/, with a `toolchain-bin` file naming the toolchain; rt:
# kernel-rt-debug-<key>/) and the link $ROXE_CACHE/kernel-debug (kernel-rustup-debug,
# kernel-rt-debug) pointing at it. Prints the output directory.
. "$(dirname "$0")/lib.sh"
"$ROXE_TOP/qemu/buildroot.sh"

name=kernel-debug
case "${ROXE_RUST:-debian}" in
debian) ROXE_TOOLCHAIN_BIN="" ;;
rustup)
	tc=$("$ROXE_TOP/qemu/rustup-toolchain.sh") || die "no rustup toolchain"
	ROXE_TOOLCHAIN_BIN="$tc/bin"
	name=kernel-rustup-debug
	;;
*) die "ROXE_RUST is debian or rustup" ;;
esac
fragments=("$ROXE_TOP"/qemu/config/base.config "$ROXE_TOP"/qemu/config/debug.config)
if [ "${ROXE_DEBUG_RT:-0}" = 1 ]; then
	[ "$name" = kernel-debug ] || die "ROXE_DEBUG_RT=1 is built with Debian's rustc only"
	name=kernel-rt-debug
	fragments+=("$ROXE_TOP"/qemu/config/rt.config)
fi
link="$ROXE_CACHE/$name"
src_ver=$(in_buildroot dpkg-query -W -f='${Version}' linux-source-7.3)
tools=$(in_buildroot sh -c 'clang-19 --version | head -1; rustc --version; bindgen --version')
key=$( { echo "$src_ver"; echo "$tools"; cat "${fragments[@]}" "$0"; } | key_of)
out="$ROXE_CACHE/$name-$key"
if [ -e "$out/.complete" ]; then
	ln -sfn "$out" "$link"
	echo "$out"
	exit 0
fi

src="$ROXE_CACHE/linux-source-$src_ver"
if [ ! -e "$src/.complete" ]; then
	log "unpacking linux-source $src_ver"
	rm -rf "$src"; mkdir -p "$src"
	in_buildroot sh -c "tar -xaf /usr/src/linux-source-7.3.tar.* -C '$src' --strip-components=1"
	touch "$src/.complete"
fi

# A build of the same source with the same C compiler seeds this one: Kbuild recompiles only what
# the changed options reach (it tracks each file's CONFIG_ dependencies), so adding a driver to
# the fragments costs minutes, not a full build. A build of the other Rust toolchain seeds it too
# (the rustup flavour from the Debian one, or back): `core` depends on RUSTC_VERSION_TEXT and
# every other crate on `core`, so Kbuild compiles all Rust code again with this toolchain and
# keeps the C objects; a crate left behind would fail the build (rustc refuses crates of another
# compiler), never pass silently. Our own link is preferred, being the closest.
toolchain="$src_ver
$tools"
build() {
	local b="$out/build" mk prev="" cand p
	for cand in "$link" "$ROXE_CACHE/kernel-debug" "$ROXE_CACHE/kernel-rustup-debug" "$ROXE_CACHE/kernel-rt-debug"; do
		p=$(readlink -f "$cand" || true)
		if [ -e "$p/.complete" ] && [ "$p" != "$out" ] &&
			[ "$(head -2 "$p/toolchain" 2>/dev/null)" = "$(printf '%s\n' "$toolchain" | head -2)" ]; then
			prev=$p
			break
		fi
	done
	rm -rf "$out"; mkdir -p "$out"
	if [ -n "$prev" ]; then
		log "seeding the build from $prev"
		cp -a "$prev/build" "$b"
	fi
	mkdir -p "$b"
	mk="make -C $src O=$b LLVM=-19 -j$(nproc)"
	in_buildroot $mk -s x86_64_defconfig
	cat "${fragments[@]}" >>"$b/.config"
	in_buildroot $mk -s olddefconfig
	# olddefconfig drops options whose dependencies are missing without a word: check each one.
	local missing=0 line
	while IFS= read -r line; do
		case "$line" in CONFIG_*=*) ;; *) continue ;; esac
		grep -qxF "$line" "$b/.config" || { log "config option lost: $line"; missing=1; }
	done < <(cat "${fragments[@]}")
	[ $missing = 0 ] || die "requested kernel options did not survive olddefconfig (see above)"
	log "building the debug kernel (about 14 minutes on 2 cores from scratch)"
	in_buildroot $mk bzImage modules >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; die "kernel build failed"; }
	in_buildroot $mk -s INSTALL_MOD_PATH="$out/modules" INSTALL_MOD_STRIP=1 modules_install >>"$out/build.log" 2>&1
	cp "$b/arch/x86/boot/bzImage" "$out/bzImage"
	printf '%s\n' "$toolchain" >"$out/toolchain"
	[ -z "$ROXE_TOOLCHAIN_BIN" ] || printf '%s\n' "$ROXE_TOOLCHAIN_BIN" >"$out/toolchain-bin"
	touch "$out/.complete"
}
with_lock kernel-build build
ln -sfn "$out" "$link"
log "debug kernel ready: $out"
echo "$out"
