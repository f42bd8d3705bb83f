#!/bin/bash
# Runs several guest test scripts one after another in one boot, so that `make test` pays the
# debug kernel's boot (about 45 s under TCG) once for them. Each argument names a script of
# qemu/tests, its own timeout and its arguments, joined by '+': `hostile-ring.sh@420+roxe`.
# Each script runs as it would alone (loads and unloads its driver, records its PASS/FAIL
# lines, sees ROXE_TIMEOUT as its own timeout), except that kmemleak is scanned once, after the
# last one; the series fails if any of them fails or times out, and the harness's dmesg check
# covers the whole boot.
. /roxe/qemu/guest/lib.sh
export ROXE_KMEMLEAK_AT_END=1
for item in "$@"; do
	IFS=+ read -r -a parts <<<"$item"
	script=${parts[0]%@*} tmo=${parts[0]#*@}
	[ "$tmo" = "${parts[0]}" ] && tmo=600
	say "== series: $script (timeout $tmo s) ${parts[*]:1}"
	rc=0
	ROXE_TIMEOUT=$tmo timeout -k 10 "$tmo" bash "/roxe/qemu/tests/$script" "${parts[@]:1}" </dev/null || rc=$?
	if [ $rc = 0 ]; then pass "series: $script"; else
		fail "series: $script (exit $rc$([ $rc = 124 ] && echo ', timed out'))"
		# Whatever it left loaded would spoil the next script.
		grep -q '^roxe ' /proc/modules && { rdma link delete roxe0 2>/dev/null; rmmod roxe; }
		grep -q '^rdma_rxe ' /proc/modules && { rdma link delete rxe0 2>/dev/null; rmmod rdma_rxe; }
	fi
done
unset ROXE_KMEMLEAK_AT_END
kmemleak_check
finish_tests
