#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The `stock` flavour: Debian's own Rust-enabled kernel (the one users run), made usable for
# out-of-tree Rust modules. Debian's headers package carries no Rust metadata, so we regenerate it
# with tools/rust-kernel-prep: `make modules_prepare` on the matching linux-source package with
# Debian's .config, Module.symvers and compiler settings, using Debian's own rustc (the .rmeta files
# are tied to the exact compiler). This works for any Rust-enabled Debian kernel whose rustc the
# build root has.
#
# Usage: [ROXE_SUITE=sid] qemu/kernel-stock.sh [RELEASE]
#   Without RELEASE: the newest 7.3 amd64 kernel the suites offer, linked as
#   $ROXE_CACHE/kernel-stock (the `stock` flavour of make test).
#   With RELEASE (e.g. 7.2.12+deb13-amd64): that kernel, linked as $ROXE_CACHE/matrix-RELEASE
#   (the flavour `stock-RELEASE` of make matrix).
#   With ROXE_SUITE=sid: a kernel of Debian unstable, prepared in the unstable build root (its
#   compilers built it); the output's `suite` file says so, for the scripts that build against it.
# Output: a directory with vmlinuz, initrd.img, build/ (point `make KDIR=` at it) and
# modules/lib/modules/<release>. Prints the output directory.
. "$(dirname "$0")/lib.sh"
rel=${1:-}
# A kernel prepared before is prepared again in the suite it was prepared in (its `suite` file),
# unless ROXE_SUITE says otherwise: `qemu/test-all.sh --stock-as stock-RELEASE` needs no suite.
if [ -n "$rel" ] && [ -z "$ROXE_SUITE_GIVEN" ] && [ -f "$ROXE_CACHE/matrix-$rel/suite" ]; then
	use_kernel_suite "$ROXE_CACHE/matrix-$rel"
fi
"$ROXE_TOP/qemu/buildroot.sh"

if [ -n "$rel" ]; then
	link="$ROXE_CACHE/matrix-$rel" prefix="matrix-$rel"
else
	link="$ROXE_CACHE/kernel-stock" prefix=kernel-stock
	rel=$(in_buildroot apt-cache search --names-only '^linux-headers-7\.3\.[0-9]+\+deb[0-9]+-amd64$' |
		awk '{print $1}' | sed 's/^linux-headers-//' | sort -V | tail -1)
	[ -n "$rel" ] || die "no Debian 7.3 amd64 kernel offered by the configured suites"
fi
series=$(echo "$rel" | cut -d. -f1,2)
hdr_ver=$(in_buildroot apt-cache policy "linux-headers-$rel" | awk '/Candidate:/ {print $2}')
[ -n "$hdr_ver" ] && [ "$hdr_ver" != "(none)" ] || die "Debian offers no linux-headers-$rel here"
# The source must be the very version the headers come from, or the metadata would not match.
src_ver=$hdr_ver
# Bump when the preparation recipe below changes what it produces.
RECIPE=3
key=$( { echo "$rel $hdr_ver recipe $RECIPE"; in_buildroot rustc --version; } | key_of)
out="$ROXE_CACHE/$prefix-$key"
if [ -e "$out/.complete" ]; then
	ln -sfn "$out" "$link"
	echo "$out"
	exit 0
fi

src="$ROXE_CACHE/linux-source-$src_ver"
unpack_source() {
	[ -e "$src/.complete" ] && return 0
	log "unpacking linux-source-$series $src_ver"
	rm -rf "$src" "$src.deb"; mkdir -p "$src" "$src.deb"
	in_buildroot sh -c "cd '$src.deb' && apt-get download -q -o APT::Sandbox::User=root \
		'linux-source-$series=$src_ver'" >/dev/null || die "cannot download linux-source-$series $src_ver"
	dpkg-deb --fsys-tarfile "$src.deb"/*.deb | tar -xO --wildcards './usr/src/linux-source-*.tar.*' |
		tar -xJf - -C "$src" --strip-components=1 || die "cannot unpack linux-source-$series"
	rm -rf "$src.deb"
	touch "$src/.complete"
}

# Debian's kernel has virtio-blk, ext4 and 9p as modules: boot it through a small initramfs
# (static busybox + those modules, decompressed, in dependency order) that mounts the guest image
# and hands over to its /sbin/roxe-boot, as the debug kernel does directly.
make_initrd() {
	local rel=$1 ir="$out/initrd.tmp" i=0 m
	rm -rf "$ir"; mkdir -p "$ir"/{bin,m,proc,sys,dev,newroot}
	cp /bin/busybox "$ir/bin/busybox"
	# Debian ships no modules.builtin, so modprobe cannot tell a built-in driver from a missing
	# one: the kernel's .config can (Debian's cloud kernel has ext4 and virtio built in).
	for m in virtio_blk:VIRTIO_BLK ext4:EXT4_FS 9p:9P_FS 9pnet_virtio:NET_9P_VIRTIO virtio_net:VIRTIO_NET; do
		grep -q "^CONFIG_${m#*:}=y" "$out/build/.config" && continue
		in_buildroot modprobe -d "$out/modules" -S "$rel" --show-depends "${m%%:*}" ||
			die "no ${m%%:*} module for the initramfs of $rel"
	done | awk '!seen[$2]++' >"$out/initrd.deps"
	while read -r cmd m _; do
		[ "$cmd" = insmod ] || continue
		i=$((i + 1))
		case "$m" in
		*.xz) xz -dc "$m" ;; *.zst) zstd -qdc "$m" ;; *.gz) gzip -dc "$m" ;; *) cat "$m" ;;
		esac >"$ir/m/$(printf %02d $i)-$(basename "${m%.ko*}").ko"
	done <"$out/initrd.deps"
	cat >"$ir/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in /m/*.ko; do insmod "$m" || echo "initramfs: insmod $m failed"; done
mount -t ext4 -o rw /dev/vda /newroot || { echo "initramfs: cannot mount /dev/vda"; echo o >/proc/sysrq-trigger; }
umount /proc /sys /dev
exec switch_root /newroot /sbin/roxe-boot
INIT
	chmod +x "$ir/init"
	(cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/initrd.img"
	rm -rf "$ir"
}

# build_9p RELEASE: 9p (net/9p, fs/9p, unmodified, from the very source the tree was prepared
# from) built out of tree into the kernel's extra/ for a kernel without it: Debian's cloud kernel
# has no CONFIG_NET_9P, and the harness shares the project, the modules and the results with the
# guest over 9p. A harness need only: nothing of roxe uses 9p.
build_9p() {
	local rel=$1 b="$out/9p" ccargs
	read -ra ccargs <<<"$(debian_cc "$out/build")"
	rm -rf "$b"; mkdir -p "$b"
	cp -a "$src/net/9p" "$b/net"; cp -a "$src/fs/9p" "$b/fs"
	log "building 9p for $rel, which has none (the harness's shares use it)"
	in_buildroot make -C "$out/build" M="$b/net" CONFIG_NET_9P=m CONFIG_NET_9P_VIRTIO=m \
		"${ccargs[@]}" -j"$(nproc)" modules >"$b/build.log" 2>&1 &&
		in_buildroot make -C "$out/build" M="$b/fs" CONFIG_9P_FS=m \
			KBUILD_EXTRA_SYMBOLS="$b/net/Module.symvers" "${ccargs[@]}" -j"$(nproc)" modules \
			>>"$b/build.log" 2>&1 || { tail -20 "$b/build.log"; die "9p build failed for $rel"; }
	install -D -m 0644 -t "$out/modules/lib/modules/$rel/extra" \
		"$b/net/9pnet.ko" "$b/net/9pnet_virtio.ko" "$b/fs/9p.ko"
	rm -rf "$b"
}

prepare() {
	rm -rf "$out"; mkdir -p "$out/debs" "$out/pkg"
	log "downloading Debian's $rel kernel, modules and headers"
	(cd "$out/debs" && in_buildroot sh -c "cd '$out/debs' && apt-get download -q -o APT::Sandbox::User=root \
		linux-binary-$rel linux-modules-$rel linux-headers-$rel" >/dev/null) || die "download failed"
	local d
	for d in "$out"/debs/*.deb; do dpkg-deb -x "$d" "$out/pkg"; done
	local vmlinuz
	vmlinuz=$(ls "$out/pkg/boot/vmlinuz-$rel" "$out/pkg/usr/lib/modules/$rel/vmlinuz" 2>/dev/null | head -1 || true)
	[ -n "$vmlinuz" ] || die "no vmlinuz-$rel in Debian's packages"
	cp "$vmlinuz" "$out/vmlinuz"
	local hdr="$out/pkg/usr/src/linux-headers-$rel"
	# tools/rust-kernel-prep checks Debian's CONFIG_RUST and CONFIG_RUSTC_VERSION_TEXT against the
	# build root's compiler, runs modules_prepare in $out/build with Debian's .config,
	# Module.symvers and .kernelvariables (log: $out/prepare.log) and keeps Debian's Module.symvers.
	# The real check that the regenerated metadata matches Debian's binary kernel is loading a
	# module built against it into that kernel: the selftest-stock and roxe-device-stock tests do.
	log "regenerating the Rust metadata for $rel (about two minutes)"
	in_buildroot "$ROXE_TOP/tools/rust-kernel-prep" --headers "$hdr" --source "$src" --out "$out" \
		--jobs "$(nproc)" "$rel" >/dev/null || die "cannot prepare a Rust tree for $rel"

	mkdir -p "$out/modules/lib/modules"
	cp -a "$out/pkg/lib/modules/$rel" "$out/modules/lib/modules/" 2>/dev/null ||
		cp -a "$out/pkg/usr/lib/modules/$rel" "$out/modules/lib/modules/"
	grep -q '^CONFIG_NET_9P=' "$out/build/.config" || build_9p "$rel"
	in_buildroot depmod -b "$out/modules" "$rel"
	make_initrd "$rel"
	echo "$rel" >"$out/release"
	echo "$ROXE_SUITE" >"$out/suite"
	rm -rf "$out/debs"
	touch "$out/.complete"
}
with_lock kernel-build unpack_source
with_lock kernel-build prepare
ln -sfn "$out" "$link"
prune_old "$prefix" "$out"
log "stock kernel ready: $out"
echo "$out"
