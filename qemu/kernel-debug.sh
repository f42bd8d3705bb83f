#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds the `debug` flavour: linux-source-7.3 from Debian, x86_64_defconfig + qemu/config/*.config,
# compiled with clang-19 (Rust with KASAN needs clang) inside the build root.
# Output, cached by a key over source version, fragments, toolchain versions and this script:
#   $ROXE_CACHE/kernel-debug-<key>/{bzImage,build/,modules/lib/modules/<release>}
# and the link $ROXE_CACHE/kernel-debug pointing at it. Prints the output directory.
. "$(dirname "$0")/lib.sh"
"$ROXE_TOP/qemu/buildroot.sh"

src_ver=$(in_buildroot dpkg-query -W -f='${Version}' linux-source-7.3)
tools=$(in_buildroot sh -c 'clang-19 --version | head -1; rustc --version; bindgen --version')
key=$( { echo "$src_ver"; echo "$tools"; cat "$ROXE_TOP"/qemu/config/base.config \
	"$ROXE_TOP"/qemu/config/debug.config "$0"; } | key_of)
out="$ROXE_CACHE/kernel-debug-$key"
if [ -e "$out/.complete" ]; then
	ln -sfn "$out" "$ROXE_CACHE/kernel-debug"
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

# A build of the same source with the same toolchain whose options differ seeds this one: Kbuild
# recompiles only what the changed options reach (it tracks each file's CONFIG_ dependencies), so
# adding a driver to the fragments costs minutes, not a full build.
toolchain="$src_ver
$tools"
build() {
	local b="$out/build" mk prev
	prev=$(readlink -f "$ROXE_CACHE/kernel-debug" || true)
	rm -rf "$out"; mkdir -p "$out"
	if [ -e "$prev/.complete" ] && [ "$(cat "$prev/toolchain" 2>/dev/null)" = "$toolchain" ]; then
		log "seeding the build from $prev"
		cp -a "$prev/build" "$b"
	fi
	mkdir -p "$b"
	mk="make -C $src O=$b LLVM=-19 -j$(nproc)"
	in_buildroot $mk -s x86_64_defconfig
	cat "$ROXE_TOP"/qemu/config/base.config "$ROXE_TOP"/qemu/config/debug.config >>"$b/.config"
	in_buildroot $mk -s olddefconfig
	# olddefconfig drops options whose dependencies are missing without a word: check each one.
	local missing=0 line
	while IFS= read -r line; do
		case "$line" in CONFIG_*=*) ;; *) continue ;; esac
		grep -qxF "$line" "$b/.config" || { log "config option lost: $line"; missing=1; }
	done < <(cat "$ROXE_TOP"/qemu/config/base.config "$ROXE_TOP"/qemu/config/debug.config)
	[ $missing = 0 ] || die "requested kernel options did not survive olddefconfig (see above)"
	log "building the debug kernel (about 14 minutes on 2 cores from scratch)"
	in_buildroot $mk bzImage modules >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; die "kernel build failed"; }
	in_buildroot $mk -s INSTALL_MOD_PATH="$out/modules" INSTALL_MOD_STRIP=1 modules_install >>"$out/build.log" 2>&1
	cp "$b/arch/x86/boot/bzImage" "$out/bzImage"
	printf '%s\n' "$toolchain" >"$out/toolchain"
	touch "$out/.complete"
}
with_lock kernel-build build
ln -sfn "$out" "$ROXE_CACHE/kernel-debug"
log "debug kernel ready: $out"
echo "$out"
