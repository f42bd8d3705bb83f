#!/bin/bash
# A process whose second process keeps the producer index of its SQ, RQ or SRQ just behind the
# consumer index the kernel publishes, so that the rings look full at every read, while the
# first moves its QP to the error state, rings the doorbell, polls and destroys everything
# (qemu/tests/py/hostile_producer.py: one case with the QP's own RQ, one with an SRQ). Every
# verb must return within 30 s; meanwhile validating ibv_rc_pingpong runs back to back must all
# pass, a ticker pinned to each CPU must never go 5 s without running, and the kernel must report
# no soft lockup, RCU stall or hung task (the harness checks dmesg for splats too).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
export gid
PY=/roxe/qemu/tests/py/hostile_producer.py
rm -rf /tmp/pp.stop /tmp/tick.* /tmp/hp
# Logs written during the hostile phase go to tmpfs and are copied to /out afterwards: /out is
# 9p, whose virtio interrupt may be served by the CPU the kernel is stuck on, and a writer
# blocked there would hide what the test measures.
mkdir -p /tmp/hp

# A real-time ticker per CPU, pinned: it preempts any normal task at once, so a gap means the
# CPU was in the kernel with preemption off (the hostile child spins at nice -20, which would
# starve a normal ticker on its CPU).
tickers=()
ncpu=$(nproc)
for ((c = 0; c < ncpu; c++)); do
	chrt -f 50 taskset -c "$c" bash -c 'while sleep 0.2; do date +%s.%N; done' >/tmp/tick.$c 2>/dev/null &
	tickers+=($!)
done

# Validating ibv_rc_pingpong pairs (loopback through the device's own GID), back to back until
# /tmp/pp.stop appears. A client that could not connect yet is retried; any other failure ends
# the loop with an error. 500 iterations a run: on the debug kernel, with the hostile children
# spinning on both vCPUs and other VMs on the host, an iteration has taken 72 ms, and a run
# must end well inside its 150 s limit.
pp_client() { # pp_client LOG: the client, retried only while the server is not listening
	local log=$1 t
	for t in $(seq 1 30); do
		ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -n 500 -c 127.0.0.1 >"$log" 2>&1 && return 0
		grep -q "Couldn't connect" "$log" || return 1
		sleep 1
	done
	return 1
}
export -f pp_client
pingpong_loop() {
	local i=0 srv
	while :; do
		i=$((i + 1))
		timeout 150 ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -n 500 -c >/tmp/hp/pp-server-$i.log 2>&1 &
		srv=$!
		if ! timeout 150 bash -c 'pp_client "$1"' pp /tmp/hp/pp-client-$i.log; then
			echo "run $i: client failed: $(tail -5 /tmp/hp/pp-client-$i.log | tr '\n' ' ')"
			kill $srv 2>/dev/null; wait $srv
			return 1
		fi
		if ! wait $srv; then
			echo "run $i: server failed: $(tail -5 /tmp/hp/pp-server-$i.log | tr '\n' ' ')"
			return 1
		fi
		echo "run $i: $(grep -h 'bytes in' /tmp/hp/pp-client-$i.log | head -1) (ended $(date +%s.%N))"
		[ -e /tmp/pp.stop ] && { echo "$i runs passed"; return 0; }
	done
}
pingpong_loop >/tmp/hp/pingpong.log 2>&1 &
pp=$!

t_start=$(date +%s.%N)
say "hostile phase starts"
run_case() { # the case's output reaches /out (check's log) only once it is over
	local rc=0
	python3 -X faulthandler "$PY" "$RDMA_DEV" "$gid" "$1" 30 >/tmp/hp/producer-$1.log 2>&1 || rc=$?
	cat /tmp/hp/producer-$1.log
	return $rc
}
export -f run_case; export PY
for c in rq srq; do
	check producer-$c 400 run_case $c
	cp /tmp/hp/producer-$c.log /out/ # also when the check's timeout ended it
	grep -E '^(PASS|FAIL) producer-' /out/producer-$c.log >>/out/results
done
t_end=$(date +%s.%N)
say "hostile phase ends"

touch /tmp/pp.stop
if timeout 200 tail --pid=$pp -f /dev/null && wait $pp; then
	pass "rc-pingpong-beside: $(tail -1 /tmp/hp/pingpong.log)"
else
	fail "rc-pingpong-beside (exit $?): $(tail -1 /tmp/hp/pingpong.log)"
fi
cp /tmp/hp/pingpong.log /out/

sleep 0.5
kill "${tickers[@]}" 2>/dev/null
wait "${tickers[@]}" 2>/dev/null
for ((c = 0; c < ncpu; c++)); do
	# The largest gap between ticks during the hostile phase (and up to one tick around it).
	gap=$(awk -v s="$t_start" -v e="$t_end" 'prev != "" && $1 >= s && prev <= e { g = $1 - prev; if (g > m) m = g }
		{ prev = $1 } END { printf "%.2f", m }' /tmp/tick.$c)
	n=$(wc -l </tmp/tick.$c)
	if awk -v g="$gap" 'BEGIN { exit !(g < 5) }'; then
		pass "cpu$c-responsive (largest gap between 0.2 s ticks ${gap} s, $n ticks)"
	else
		fail "cpu$c-responsive (largest gap between 0.2 s ticks ${gap} s, $n ticks)"
	fi
done

stalls=$(dmesg | grep -E 'soft lockup|rcu: INFO|detected stall|hung task|blocked for more than' | head -5)
if [ -z "$stalls" ]; then
	pass "no-stall-reports"
else
	fail "no-stall-reports: $(echo "$stalls" | head -1)"
	echo "$stalls" | sed 's/^/    /'
fi

check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
