#!/bin/bash
# Where the CPU goes: perf samples of the whole guest (cpu-clock, call graphs) while perftest
# runs a bandwidth test through the device's own GID. Output: /out/profile-DRV-TOOL.txt (symbols
# by self time) for each driver named. By hand, to aim performance work, not by make test:
#   qemu/run-vm.sh --flavour stock --script qemu/tests/profile.sh --args roxe+rxe,ib_write_bw,65536,15
# Under QEMU TCG the samples may all land in the idle loop (pv_native_safe_halt), with one vCPU
# or two, as on the development machine: then use fgraph.sh.
# Arguments: DRIVERS (joined by +, e.g. roxe+rxe) TOOL SIZE SECONDS
. /roxe/qemu/guest/lib.sh
IFS=+ read -r -a DRVS <<<"${1:-roxe}"
TOOL=${2:-ib_write_bw} SIZE=${3:-65536} SECS=${4:-15}
command -v perf >/dev/null || { fail "no perf in the guest image"; finish_tests; }
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
for drv in "${DRVS[@]}"; do
	step "load-$drv" load_driver "$drv" || continue
	gid=$(gid_index_v4)
	args="-d $RDMA_DEV -x $gid -s $SIZE -D $((SECS + 10)) -F"
	timeout $((SECS + 60)) $TOOL $args >/dev/null 2>&1 &
	srv=$!
	timeout $((SECS + 60)) $TOOL $args 127.0.0.1 >/out/profile-$drv-$TOOL-perftest.txt 2>&1 &
	cli=$!
	sleep 5
	perf record -q -a -g -F 499 -e cpu-clock -o /tmp/perf.data -- sleep "$SECS" >/dev/null 2>&1
	wait $cli $srv
	perf report -i /tmp/perf.data --stdio --no-children --sort sym --percent-limit 0.7 -g none \
		>/out/profile-$drv-$TOOL.txt 2>&1
	perf report -i /tmp/perf.data --stdio --no-children --sort dso --percent-limit 0.5 -g none \
		>/out/profile-$drv-$TOOL-dso.txt 2>&1
	# Under TCG a sample lands where interrupts are enabled again: time spent with them off
	# shows up on the unlock, so its callers say which critical sections cost.
	perf report -i /tmp/perf.data --stdio --no-children --sort sym --percent-limit 2 -G \
		>/out/profile-$drv-$TOOL-callers.txt 2>&1
	check "profile-$drv-$TOOL" 5 test -s /out/profile-$drv-$TOOL.txt
	tail -n 3 /out/profile-$drv-$TOOL-perftest.txt
	unload_driver "$drv"
done
finish_tests
