#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Fails (exit 1) when a guest's kernel log shows a warning, bug, oops, sanitizer report, lockdep
# splat, kmemleak report or RCU stall. Takes the serial console log and/or a saved dmesg.
set -u
pat='WARNING:|BUG:|Oops|KASAN:|BUG: KFENCE|UBSAN:|kernel BUG|Kernel panic|general protection fault'
pat+='|possible circular locking|possible recursive locking|inconsistent lock state|DEBUG_LOCKS_WARN_ON'
pat+='|turning off the locking correctness validator|INFO: trying to register non-static key|INFO: possible'
pat+='|suspected memory leaks|unreferenced object'
pat+='|rcu: INFO:|detected stalls|self-detected stall|soft lockup|hung_task|blocked for more than'
pat+='|list_add corruption|list_del corruption|refcount_t:|ODEBUG:|Call Trace:'
found=0
for f in "$@"; do
	[ -f "$f" ] || continue
	if grep -aE "$pat" "$f" >/tmp/.roxe-splat.$$; then
		if [ -s /tmp/.roxe-splat.$$ ]; then
			echo "splat in $f:" >&2
			head -20 /tmp/.roxe-splat.$$ | sed 's/^/  /' >&2
			found=1
		fi
	fi
done
rm -f /tmp/.roxe-splat.$$
exit $found
