#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Installs what the host needs (idempotent): apt sources for bookworm-backports and trixie
# (pinned low, so nothing is upgraded by accident), QEMU, debootstrap and small tools.
# Everything that compiles runs inside the trixie build root (qemu/buildroot.sh), not here.
. "$(dirname "$0")/lib.sh"

mirror=$(debian_mirror)
src=/etc/apt/sources.list.d/roxe-extra.sources
want=$(cat <<SRC
Types: deb
URIs: $mirror
Suites: bookworm-backports trixie trixie-updates trixie-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
)
pins=$(cat <<PIN
Package: *
Pin: release n=trixie
Pin-Priority: 100

Package: *
Pin: release n=trixie-updates
Pin-Priority: 100

Package: *
Pin: release n=trixie-backports
Pin-Priority: 100

Package: *
Pin: release n=bookworm-backports
Pin-Priority: 100
PIN
)
changed=0
if [ "$(cat "$src" 2>/dev/null)" != "$want" ]; then
	printf '%s\n' "$want" >"$src"; changed=1
fi
if [ "$(cat /etc/apt/preferences.d/roxe-pin 2>/dev/null)" != "$pins" ]; then
	printf '%s\n' "$pins" >/etc/apt/preferences.d/roxe-pin; changed=1
fi
stamp=/var/lib/apt/lists/.roxe-updated
if [ $changed = 1 ] || [ ! -e "$stamp" ] || [ -n "$(find "$stamp" -mmin +1440)" ]; then
	log "apt-get update"
	apt-get update -qq -o Acquire::Retries=3
	touch "$stamp"
fi

need=()
for p in debootstrap qemu-system-x86 e2fsprogs zstd xz-utils cpio rsync python3 gnuplot-nox busybox-static; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	log "installing host packages: ${need[*]}"
	# QEMU and debootstrap from bookworm-backports: trixie-aware debootstrap and a QEMU with
	# `-netdev dgram` and a faster TCG.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Options::=--force-confold \
		-t bookworm-backports "${need[@]}" >/dev/null
fi
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing after install"
command -v debootstrap >/dev/null || die "debootstrap missing after install"
