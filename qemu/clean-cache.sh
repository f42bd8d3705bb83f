#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Empties the cache. The build root has the project and /tmp bind-mounted into it: unmount
# everything below the cache first, and never cross a file-system boundary while deleting.
. "$(dirname "$0")/lib.sh"
findmnt -rn -o TARGET | grep "^$ROXE_CACHE/" | sort -r | while read -r m; do
	umount -R "$m" 2>/dev/null || umount -l "$m"
done
if findmnt -rn -o TARGET | grep -q "^$ROXE_CACHE/"; then
	die "something is still mounted below $ROXE_CACHE; not deleting"
fi
rm -rf --one-file-system "$ROXE_CACHE"
log "cache $ROXE_CACHE removed"
