#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Creates the trixie build root: Debian's own kernel toolchain (gcc-14, clang-19, rustc, rust-src,
# bindgen, pahole) plus linux-source-7.3 from trixie-backports. Both kernels and roxe.ko are built
# with it, so the stock kernel's Rust metadata and our modules come from one compiler.
# Cached in $ROXE_CACHE/buildroot-<key>; the key covers the package list and a recipe version.
# With ROXE_SUITE=sid: the unstable build root ($ROXE_CACHE/sidroot-<key>), with unstable's
# compilers, for unstable's kernels in make matrix (no kernel source: kernel-stock.sh fetches the
# one it needs). The mirror's unstable Release may be past its Valid-Until date (a frozen mirror):
# apt in that root does not check it.
# User-space test programs (tools/verbs-fuzz) also need the rdma-core headers: DEV_PKGS, kept out
# of the key and installed into an existing build root when missing, so that adding them does not
# rebuild the build root (and with it both kernels).
. "$(dirname "$0")/lib.sh"

PKGS=(
	build-essential gcc-14 clang-19 lld-19 llvm-19 libclang-19-dev
	rustc rust-src bindgen rustfmt rust-clippy
	flex bison bc libelf-dev libssl-dev dwarves kmod cpio rsync python3 xz-utils zstd
	ca-certificates
)
# Bump when the recipe below changes what the build root holds.
RECIPE=1
prefix=buildroot
if [ "$ROXE_SUITE" = sid ]; then
	PKGS=(
		build-essential gcc-16 rustc rust-src bindgen
		flex bison bc libelf-dev libssl-dev dwarves kmod cpio rsync python3 xz-utils zstd
		ca-certificates
	)
	prefix=sidroot
fi
key_in="${PKGS[*]} recipe $RECIPE"
[ "$ROXE_SUITE" = trixie ] || key_in="$ROXE_SUITE $key_in"
key=$(echo "$key_in" | key_of)
root="$ROXE_CACHE/$prefix-$key"
# Not part of the key (see above): installed idempotently by ensure_dev_pkgs.
DEV_PKGS=(libibverbs-dev librdmacm-dev)

# Installs whichever of DEV_PKGS the build root lacks (nothing to do, and no network, when all
# are there). Locked: two scripts may ask at once, and dpkg allows one installer.
ensure_dev_pkgs() {
	local r=$1 p missing=()
	for p in "${DEV_PKGS[@]}"; do
		chroot "$r" dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
			missing+=("$p")
	done
	[ ${#missing[@]} = 0 ] && return 0
	exec {devlock}>"$ROXE_CACHE/.buildroot-dev-pkgs.lock"
	flock "$devlock"
	log "installing ${missing[*]} in the build root"
	mount_buildroot "$r"
	{ chroot "$r" apt-get update -qq -o Acquire::Retries=3 &&
		chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			"${missing[@]}" && chroot "$r" apt-get clean; } >>"$ROXE_CACHE/buildroot.log" 2>&1 ||
		{ tail -20 "$ROXE_CACHE/buildroot.log"; die "cannot install ${missing[*]} in the build root"; }
	exec {devlock}>&-
}

if [ -e "$root/.complete" ]; then
	ln -sfn "$root" "$BUILDROOT_LINK"
	if [ "$ROXE_SUITE" = trixie ]; then ensure_dev_pkgs "$root"; fi
	exit 0
fi

mirror=$(debian_mirror)
tmp="$root.tmp"
umount -R "$tmp"/{proc,sys,dev} 2>/dev/null || true
rm -rf "$tmp"
# The host's keyring may predate the keys that sign unstable: the trixie root's is newer.
keyring=()
trixie_keys="$(buildroot_link trixie)/usr/share/keyrings/debian-archive-keyring.gpg"
[ "$ROXE_SUITE" = sid ] && [ -f "$trixie_keys" ] && keyring=(--keyring="$trixie_keys")
log "debootstrap $ROXE_SUITE build root (about 3 minutes)"
debootstrap "${keyring[@]}" --variant=minbase "$ROXE_SUITE" "$tmp" "$mirror" >"$ROXE_CACHE/$prefix.log" 2>&1 ||
	{ tail -20 "$ROXE_CACHE/$prefix.log"; die "debootstrap failed"; }
if [ "$ROXE_SUITE" = sid ]; then
	echo "deb $mirror sid main" >"$tmp/etc/apt/sources.list"
	echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99roxe-frozen-mirror"
else
	cat >"$tmp/etc/apt/sources.list" <<SRC
deb $mirror trixie main
deb $mirror trixie-updates main
deb $mirror trixie-backports main
SRC
fi
cp /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
for d in proc sys dev; do mount --rbind "/$d" "$tmp/$d"; done
trap 'umount -R "$tmp"/{proc,sys,dev} 2>/dev/null || true' EXIT
chroot "$tmp" apt-get update -qq -o Acquire::Retries=3
log "installing the toolchain in the build root"
chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	"${PKGS[@]}" >>"$ROXE_CACHE/$prefix.log" 2>&1 || { tail -20 "$ROXE_CACHE/$prefix.log"; die "toolchain install failed"; }
if [ "$ROXE_SUITE" = trixie ]; then
	# linux-source-7.3 exists only in trixie-backports: take the newest 7.3 the suite offers.
	src_pkg=$(chroot "$tmp" apt-cache search --names-only '^linux-source-7\.3$' | awk '{print $1}' | head -1)
	[ -n "$src_pkg" ] || die "linux-source-7.3 is not offered by trixie-backports"
	chroot "$tmp" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		-t trixie-backports "$src_pkg" >>"$ROXE_CACHE/$prefix.log" 2>&1 || die "cannot install $src_pkg"
fi
chroot "$tmp" apt-get clean
umount -R "$tmp"/{proc,sys,dev}
trap - EXIT
touch "$tmp/.complete"
mv "$tmp" "$root"
ln -sfn "$root" "$BUILDROOT_LINK"
prune_old "$prefix" "$root"
if [ "$ROXE_SUITE" = trixie ]; then ensure_dev_pkgs "$root"; fi
log "build root ready: $root"
