#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# What the DKMS guest test (qemu/tests/dkms.sh, `make dkms`) installs, put where the guest sees it
# (the project share, /roxe/build/dkms/):
#   debs/  Debian's packages a user installs to build roxe with DKMS for the stock kernel: dkms,
#          linux-headers-RELEASE, linux-source-X.Y of the headers' version, the rustc, rust-src
#          and bindgen that built the kernel, and what modules_prepare needs; with every dependency
#          the guest image lacks (apt resolves them against the image's own dpkg status, in the
#          build root, whose suites are the guest's plus trixie-backports). The guest has no
#          network: it installs these files.
#   src/   roxe's source as the documented install takes it: `git archive HEAD`.
# The packages are downloaded again only when the image, the release or the package list changed.
#   qemu/dkms-debs.sh    prints the output directory
. "$(dirname "$0")/lib.sh"
"$ROXE_TOP/qemu/buildroot.sh"
kdir=$("$ROXE_TOP/qemu/kernel-stock.sh")
img=$(readlink -f "$("$ROXE_TOP/qemu/guest-image.sh")")
rel=$(cat "$kdir/release")
series=$(echo "$rel" | cut -d. -f1,2)
out="$ROXE_TOP/build/dkms"
mkdir -p "$out"

hdr_ver=$(in_buildroot apt-cache policy "linux-headers-$rel" | awk '/Candidate:/ {print $2}')
[ -n "$hdr_ver" ] && [ "$hdr_ver" != "(none)" ] || die "Debian offers no linux-headers-$rel here"
# The rustc of the kernel's CONFIG_RUSTC_VERSION_TEXT, by its Debian version (rust-src and
# libstd-rust-dev must be the same); bindgen likewise.
config=$(ls "$kdir"/pkg/usr/src/linux-headers-"$rel"/.config)
want() { sed -n "s/^$1=\"[a-z]* \([^ \"]*\).*/\1/p" "$config"; }
deb_version() { # deb_version PKG UPSTREAM: the newest version of PKG with that upstream version
	in_buildroot apt-cache madison "$1" | awk -F'|' -v u="$2" '{ gsub(/ /, "", $2); if (index($2, u "+") == 1 || index($2, u "-") == 1) print $2 }' |
		sort -V | tail -1
}
rustc_ver=$(deb_version rustc "$(want CONFIG_RUSTC_VERSION_TEXT)")
bindgen_ver=$(deb_version bindgen "$(want CONFIG_BINDGEN_VERSION_TEXT)")
[ -n "$rustc_ver" ] || die "Debian offers no rustc $(want CONFIG_RUSTC_VERSION_TEXT) here"
[ -n "$bindgen_ver" ] || die "Debian offers no bindgen $(want CONFIG_BINDGEN_VERSION_TEXT) here"
PKGS=(
	dkms "linux-headers-$rel=$hdr_ver" "linux-source-$series=$hdr_ver"
	"rustc=$rustc_ver" "rust-src=$rustc_ver" "libstd-rust-dev=$rustc_ver" "bindgen=$bindgen_ver"
	make flex bison bc pahole xz-utils openssl libelf-dev libssl-dev
)
key=$( { echo "${PKGS[*]}"; basename "$img"; } | key_of)

download_debs "$out/debs" "$img" "$key" "the packages the DKMS guest installs" "${PKGS[@]}"

rm -rf "$out/src"
mkdir -p "$out/src"
git -C "$ROXE_TOP" archive HEAD | tar -x -C "$out/src"
log "DKMS test inputs: $(ls "$out"/debs/*.deb | wc -l) packages, source of $(git -C "$ROXE_TOP" rev-parse --short HEAD)"
echo "$out"
