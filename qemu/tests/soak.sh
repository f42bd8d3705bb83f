#!/bin/bash
# Soak: mixed traffic on one VM (loopback through the device's own GID) for SECONDS (argument,
# default 120). Two streams run side by side until the time is up, each
# tool a short run whose success is checked:
#   stream A: ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong, all
#             validating their buffers (-c);
#   stream B: ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw (reports must show completed
#             iterations), rping with data checking (rdma_cm over
#             roxe's kernel verbs).
# Every run of every tool must succeed; the harness fails the run on any KASAN, lockdep,
# kmemleak or RCU-stall report in dmesg, and kmemleak is scanned at the end. Pinned pages must be
# back to their count before the soak.
#   make test: 60 s on Debian's kernel in `loopback-stock` (qemu/tests/extra.list); make soak:
#   `soak-long` (1800 s) on the debug kernel.
. /roxe/qemu/guest/lib.sh
DURATION=${1:-120}
step roxe-load load_driver roxe || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
base_pins=$(pin_balance)
END=$((SECONDS + DURATION))
mkdir -p /tmp/soak

# run1 STREAM N TOOL ARGS...: one server/client run on TCP port N; appends "ok TOOL" or
# "FAIL TOOL ..." to /tmp/soak/STREAM.
run1() {
	local stream=$1 port=$2 tool=$3; shift 3
	local gflag=-g; case $tool in ib_*) gflag=-x ;; esac
	local log=/tmp/soak/$stream-$tool
	timeout -k 5 150 $tool -d "$RDMA_DEV" $gflag "$gid" -p "$port" "$@" >"$log.server" 2>&1 &
	local srv=$! ok=1
	timeout -k 5 150 bash -c "$(declare -f retry_client); retry_client 30 $tool -d $RDMA_DEV $gflag $gid -p $port $* 127.0.0.1" >"$log.client" 2>&1 || ok=0
	wait $srv || ok=0
	case $tool in
	# The report line must be there with its iterations. Not its rates: perftest derives them
	# from per-vCPU TSCs that TCG does not keep in step (a clean 300-iteration ib_read_bw here
	# printed 0.00 MiB/s).
	ib_*_bw) awk '$1 ~ /^[0-9]+$/ && NF >= 5 { if ($2 > 0) good = 1 } END { exit !good }' "$log.client" || ok=0 ;;
	esac
	if [ $ok = 1 ]; then echo "ok $tool" >>/tmp/soak/$stream; else
		echo "FAIL $tool" >>/tmp/soak/$stream
		{ echo "== $tool client"; tail -8 "$log.client"; echo "== $tool server"; tail -8 "$log.server"; } >>/out/soak-failures.log
	fi
}
rping1() {
	local log=/tmp/soak/B-rping ok=1
	timeout -k 5 150 rping -s -a "$SELF_IP" -v -C 50 -S 512 >"$log.server" 2>&1 &
	local srv=$!
	timeout -k 5 150 bash -c "$(declare -f retry_client); retry_client 20 rping -c -a $SELF_IP -v -C 50 -S 512" >"$log.client" 2>&1 || ok=0
	wait $srv || ok=0
	if [ $ok = 1 ]; then echo "ok rping" >>/tmp/soak/B; else
		echo "FAIL rping" >>/tmp/soak/B; { echo "== rping"; tail -8 "$log.client" "$log.server"; } >>/out/soak-failures.log
	fi
}
streamA() {
	while [ $SECONDS -lt $END ]; do
		run1 A 18701 ibv_rc_pingpong -n 200 -s 4096 -c
		[ $SECONDS -lt $END ] || break
		run1 A 18702 ibv_uc_pingpong -n 200 -s 4096 -c
		[ $SECONDS -lt $END ] || break
		run1 A 18703 ibv_ud_pingpong -n 200 -s 512 -c
		[ $SECONDS -lt $END ] || break
		run1 A 18704 ibv_srq_pingpong -n 100 -q 4 -c
	done
}
streamB() {
	while [ $SECONDS -lt $END ]; do
		run1 B 18711 ib_write_bw -s 16384 -n 300 -F -u 20
		[ $SECONDS -lt $END ] || break
		run1 B 18712 ib_read_bw -s 16384 -n 300 -F -u 20
		[ $SECONDS -lt $END ] || break
		run1 B 18713 ib_send_bw -s 16384 -n 300 -F -u 20
		[ $SECONDS -lt $END ] || break
		run1 B 18714 ib_atomic_bw -n 300 -F -u 20
		[ $SECONDS -lt $END ] || break
		rping1
	done
}
# perftest runs with -u 20 (local ACK timeout 4.096 us * 2^20 = 4.3 s instead of 67 ms, which
# roxe raises to 500 ms), so that a stall of the emulated CPUs on a loaded host is not taken for
# a failure. ACK timers that expired with nothing lost, and resends that never went out, were a
# requester bug, fixed in 4cf0043 (a QP's retransmissions waited behind a loopback drainer):
# the 30-minute soak after it counted no retransmission at all, the pingpongs running with
# their default 500 ms.
say "soak for $DURATION s"
streamA & a=$!
streamB & b=$!
wait $a $b
touch /tmp/soak/A /tmp/soak/B
runs=$(cat /tmp/soak/A /tmp/soak/B | grep -c '^ok')
fails=$(cat /tmp/soak/A /tmp/soak/B | grep -c '^FAIL')
sort /tmp/soak/A /tmp/soak/B | uniq -c | tee /out/soak-summary.txt
say "soak: $runs runs succeeded, $fails failed, in $DURATION s"
if [ "$fails" = 0 ] && [ "$runs" -ge 4 ]; then pass "soak-${DURATION}s ($runs runs, each tool: $(sort /tmp/soak/A /tmp/soak/B | uniq -c | awk '{printf "%s %s, ", $1, $3}'))"
else fail "soak-${DURATION}s ($fails of $((runs + fails)) runs failed)"; cat /out/soak-failures.log 2>/dev/null | head -40; fi
grep -H . /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/* | sed 's|.*/||' | tr '\n' ' '; echo
for i in $(seq 1 20); do [ "$(pin_balance)" = "$base_pins" ] && break; sleep 0.5; done
check soak-pins-released 5 test "$(pin_balance)" = "$base_pins"
if [ "$(pin_balance)" != "$base_pins" ]; then
	# Who holds them: MRs the RDMA core still owns (a process's uverbs file still open) are
	# listed with their owner; pins outside RDMA show in a process's VmPin.
	say "pins: balance $(pin_balance), was $base_pins"
	rdma res show mr 2>&1 | head -20
	grep -H VmPin /proc/[0-9]*/status 2>/dev/null | grep -v ' 0 kB' | head
fi
check roxe-unload 60 unload_driver roxe
kmemleak_check
finish_tests
