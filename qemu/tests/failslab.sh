#!/bin/bash
# Every posted WR gets exactly one completion while slab allocations fail (failslab, on the debug
# kernel: CONFIG_FAILSLAB). The traffic process is the only task made to fail (task-filter), and
# only its non-sleeping allocations (ignore-gfp-wait): the data path's, not the syscalls' that
# create objects. Cases: qemu/tests/py/completions.py. Arguments: driver, seconds.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe} SECS=${2:-40}
F=/sys/kernel/debug/failslab
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
if [ ! -d $F ]; then
	fail "no $F: the kernel lacks CONFIG_FAILSLAB/CONFIG_FAULT_INJECTION_DEBUG_FS"
	finish_tests
fi
echo Y >$F/task-filter
echo Y >$F/ignore-gfp-wait
echo 10 >$F/probability
echo 1 >$F/interval
echo -1 >$F/times
# No report per injected failure (each would print a call trace, which the splat check fails).
echo 0 >$F/verbose
run_failing() { echo 1 >/proc/self/make-it-fail && exec python3 -X faulthandler "$@"; }
export -f run_failing
check "$DRV-completions-under-failslab" $((SECS + 240)) run_failing /roxe/qemu/tests/py/completions.py "$RDMA_DEV" "$gid" "$SECS"
echo 0 >$F/probability
case_results "$DRV" completions "/out/$DRV-completions-under-failslab.log"
grep -E '^posted' "/out/$DRV-completions-under-failslab.log"
# The device still works for a process that is not made to fail.
check "$DRV-pingpong-after" 120 bash -c "ibv_rc_pingpong -d $RDMA_DEV -g $gid -n 200 >/tmp/srv.log 2>&1 & sleep 1; ibv_rc_pingpong -d $RDMA_DEV -g $gid -n 200 127.0.0.1; rc=\$?; wait; exit \$rc"
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
