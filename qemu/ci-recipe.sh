#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make ci-recipe`: the commands of Documentation/install.md's CI recipe ("RDMA on a CI runner or
# cloud VM"), as written there, in a guest booted on Debian's cloud kernel (no rdma_rxe, no siw),
# so that the recipe cannot rot. The host takes the code block after the `<!-- ci-recipe` comment
# into build/ci-recipe/recipe.sh, and its `apt-get install` line, `$(uname -r)` read as the cloud
# kernel's release, gives the packages: downloaded with every dependency the guest image lacks
# (the guest has no network) into build/ci-recipe/repo, a flat apt repository with its Packages
# index, which the guest's apt is pointed at in place of Debian's mirror. The guest
# (qemu/tests/ci-recipe.sh) then runs the recipe in the project's checkout.
#   qemu/ci-recipe.sh [RELEASE]   (default: the newest cloud-amd64 kernel trixie offers)
. "$(dirname "$0")/lib.sh"
cd "$ROXE_TOP"
qemu/buildroot.sh
rel=${1:-$(newest_release cloud-amd64)}
[ -n "$rel" ] || die "no cloud-amd64 kernel offered here"
qemu/kernel-stock.sh "$rel" >/dev/null
img=$(readlink -f "$(qemu/guest-image.sh)")
out=build/ci-recipe
mkdir -p "$out"

# The block: from the comment's line to the end of the first fenced block after it.
awk '/^<!-- ci-recipe/ { on = 1; next }
	on == 1 && /^```/ { on = 2; next }
	on == 2 && /^```/ { exit }
	on == 2 { print }' Documentation/install.md >"$out/recipe.sh"
[ -s "$out/recipe.sh" ] || die "no ci-recipe block in Documentation/install.md"
# The apt-get install command, continuation lines joined; its words after `install` that are not
# options, with `uname` answering as the cloud kernel would.
line=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$out/recipe.sh" | grep -m1 '^apt-get install ') ||
	die "the recipe has no apt-get install line"
mapfile -t pkgs < <(uname() { if [ "${1:-}" = -r ]; then echo "$rel"; else command uname "$@"; fi; }
	eval "printf '%s\n' ${line#apt-get install }" | grep -v '^-')
[ ${#pkgs[@]} -gt 0 ] || die "no packages in: $line"
key=$( { echo "$rel ${pkgs[*]}"; basename "$img"; } | key_of)
download_debs "$out/repo" "$img" "$key" "the CI recipe's packages for $rel" "${pkgs[@]}"
# The Packages index of a flat repository (`deb [trusted=yes] file:DIR ./`): each package's
# control fields, its file name and size, and its checksum.
(
	cd "$out/repo" || exit 1
	for d in *.deb; do
		dpkg-deb -f "$d"
		printf 'Filename: ./%s\nSize: %s\nSHA256: %s\n\n' "$d" "$(stat -c %s "$d")" \
			"$(sha256sum "$d" | cut -d' ' -f1)"
	done >Packages
)
log "CI recipe: $(wc -l <"$out/recipe.sh") lines, $(ls "$out"/repo/*.deb | wc -l) packages for $rel"
qemu/test-all.sh --stock-as "stock-$rel" --list qemu/tests/ci-recipe.list
