#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds blktests, unmodified, for the guest: its helper programs (src/) compiled in the trixie
# build root, whose libc is the guest's. Source: $BLKTESTS_SRC, else the copy beside the project
# (../shared/peer/blktests from the clone, or /work/shared/peer/blktests). Cached as
# $ROXE_CACHE/blktests-<key> (key: the source's file contents and this script), then packed into
# build/blktests.tar, which the guest reads over the project's 9p share (one file: a copy of the
# tree's thousand files over 9p takes minutes under TCG). Prints the cache directory.
. "$(dirname "$0")/lib.sh"
"$ROXE_TOP/qemu/buildroot.sh"

src=${BLKTESTS_SRC:-}
if [ -z "$src" ]; then
	for d in "$ROXE_TOP/../shared/peer/blktests" /work/shared/peer/blktests; do
		[ -x "$d/check" ] && { src=$d; break; }
	done
fi
[ -n "$src" ] && [ -x "$src/check" ] ||
	die "no blktests source: set BLKTESTS_SRC to a blktests checkout (its ./check script)"
src=$(cd "$src" && pwd)

self=$(readlink -f "$0")
key=$( { cd "$src" && find . -path ./.git -prune -o -path ./results -prune -o -type f -print0 |
	sort -z | xargs -0 sha256sum; cat "$self"; } | key_of)
out="$ROXE_CACHE/blktests-$key"
build() {
	[ -e "$out/.complete" ] && return 0
	rm -rf "$out"; mkdir -p "$out"
	(cd "$src" && tar --exclude=./.git --exclude=./results -cf - .) | tar -xf - -C "$out"
	log "building blktests' helper programs"
	in_buildroot make -C "$out" -j"$(nproc)" >"$out/build.log" 2>&1 ||
		{ tail -20 "$out/build.log"; die "blktests build failed"; }
	touch "$out/.complete"
}
with_lock blktests build
prune_old blktests "$out"
mkdir -p "$ROXE_TOP/build"
tar -C "$out" --exclude=./.complete --exclude=./build.log -cf "$ROXE_TOP/build/blktests.tar.tmp" .
mv "$ROXE_TOP/build/blktests.tar.tmp" "$ROXE_TOP/build/blktests.tar"
echo "$out"
