#!/bin/bash
# Duplicate RDMA READ requests at full speed: what one duplicate costs the responder must stay
# small. A request whose PSN is behind the responder's expected PSN is a duplicate (IBA
# 9.7.5.1); a duplicate READ is answered by replaying its responses from the responder
# resources (rdma_rxe `duplicate_request`). A peer (or anyone who can send as the peer) that
# replays a READ request of 1 MiB (a 60-byte IP packet) must not make the device build and send
# a burst of MTU-sized responses per request, with the QP's responder lock held and interrupts
# off: the flood would turn into egress of thousands of times its size and starve everything
# else on the CPU. Arguments: the driver (roxe, or rxe by hand to see rdma_rxe's behaviour),
# the seconds of flood (30 in the long form; 10 is enough to see the cost).
#
# The device sits on a veth (vpc0, 10.99.1.1) whose other end (vpc1) is in namespace duprd with
# the peer's address 10.99.1.2 (veth_peer in qemu/guest/lib.sh). qemu/tests/py/dup_read.py
# connects an RC QP to that peer, sends it a 1 MiB READ from the namespace (checking every
# response), floods it with the READ's duplicate and checks that the flood reached the
# responder (duplicate_request rose by at least half the duplicates sent) and that the device
# sent at most 16 packets towards the peer per duplicate counted; afterwards, that READs sent
# behind a long one are held and answered in order (reads-queued). Beside the flood (which goes
# on until it is over), ibv_rc_pingpong between two other QPs of the device (loopback through
# its own GID), on a CPU other than the flood's sender, must keep within 3x of its usec/iter
# without the flood: the slowest of three runs in the same boot, just before the flood, beside a
# busy loop on the flood's CPU, and just after. The kernel must report no soft lockup, RCU stall
# or hung task (the harness's dmesg check covers the boot too).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
FLOOD=${2:-30}
NS=duprd ADDR=10.99.1.1 PEER=10.99.1.2
PY=/roxe/qemu/tests/py/dup_read.py
# The pingpong without the flood, just before and just after it: enough iterations for a few
# seconds under TCG. The one beside the flood gets as many as take half the flood's time at the
# pace before it, and the flood goes on until it is over.
BASE_ITERS=1000
# Logs written while the flood runs go to tmpfs and are copied to /out afterwards (/out is 9p,
# whose writers would compete with the flood for the CPUs).
W=/tmp/dupread
# The flood's sender runs on the last CPU; the duplicates' receive processing runs there too (a
# veth delivers a packet on the CPU that sent it). The pingpong runs on CPU 0.
FLOOD_CPU=$(($(nproc) - 1))
rm -rf $W; mkdir -p $W

step "$DRV-dupread-setup" veth_peer "$DRV" $NS $ADDR $PEER || finish_tests
RDMA_DEV=${DRV}0
gid=$(gid_index_with "$RDMA_DEV" 0000:0000:0000:0000:0000:ffff:0a63:0101) || { fail "no RoCE v2 GID for $ADDR"; finish_tests; }

# A validating ibv_rc_pingpong pair on CPU 0, both sides waiting for completion events. The
# flood's sender has the last CPU to itself: the pingpong does not compete with the sender's
# own CPU time (no cost of the device's), nor does it starve the sender (on the debug kernel a
# pingpong iteration costs milliseconds of CPU), so that what slows the pingpong down is the
# device's work for the duplicates wherever it runs (the paced replies of the device tick, the
# QP's lock, interrupts held off).
# pp_server ITERS NAME TIMEOUT: starts the server (pid in $srv) and waits until it listens.
pp_server() {
	local i
	timeout "$3" taskset -c 0 ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -n "$1" -e -c >$W/pp-$2-server.log 2>&1 &
	srv=$!
	for i in $(seq 1 300); do
		# Port 18515 (0x4853) in state LISTEN (0A).
		awk '$2 ~ /:4853$/ && $4 == "0A" { found = 1 } END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null &&
			return 0
		kill -0 $srv 2>/dev/null || return 1
		sleep 0.2
	done
	kill $srv 2>/dev/null
	return 1
}
# pp_client ITERS NAME TIMEOUT: runs the client against the server pp_server started and waits
# for both; sets $pp_usec to the client's usec/iter, fails if either side failed.
pp_client() {
	local rc=0
	pp_usec=""
	timeout "$3" taskset -c 0 ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -n "$1" -e -c 127.0.0.1 \
		>$W/pp-$2-client.log 2>&1 || rc=1
	wait $srv || rc=1
	[ $rc = 0 ] || return 1
	pp_usec=$(awk '/usec\/iter/ { print $(NF - 1) }' $W/pp-$2-client.log)
	[ -n "$pp_usec" ]
}

alone() { # alone NAME: a pingpong without the flood; sets $alone_usec
	say "pingpong without the flood ($BASE_ITERS iterations)"
	if pp_server $BASE_ITERS "$1" 300 && pp_client $BASE_ITERS "$1" 300; then
		alone_usec=$pp_usec
		pass "$DRV-dupread-pingpong-$1 ($BASE_ITERS iters, $alone_usec usec/iter)"
	else
		fail "$DRV-dupread-pingpong-$1: $(tail -3 $W/pp-$1-client.log $W/pp-$1-server.log | tr '\n' ' ')"
		alone_usec=""
	fi
}
alone alone-before
before=$alone_usec
# The same beside a busy loop in user space on the flood's CPU: under TCG each vCPU is a host
# thread, and when other VMs load the host's cores too, a busy vCPU takes host time from the
# pingpong's vCPU whatever it runs. This run prices that in, so that the flood is charged only
# with what the device's work for the duplicates adds (the flood's own run took 4.2x the pace
# alone once, beside a debug-kernel VM, where on a quiet host it takes 0.8x).
taskset -c $FLOOD_CPU bash -c 'while :; do :; done' &
spin=$!
alone busy-beside
busy=$alone_usec
kill $spin; wait $spin 2>/dev/null

iters=$(awk -v f="$FLOOD" -v u="${before:-1000}" 'BEGIN { n = int(f * 1e6 / 2 / u); print (n < 200 ? 200 : n) }')
say "flood of $FLOOD s or until the pingpong beside it ($iters iterations) is done"
# The server listens before the flood starts; the client connects once it runs.
pp_server "$iters" flood $((FLOOD * 4 + 300)) || fail "$DRV-dupread-pingpong-beside: the server did not start"
timeout -k 5 $((FLOOD * 4 + 400)) taskset -c $FLOOD_CPU python3 -X faulthandler "$PY" "$RDMA_DEV" "$gid" $NS $ADDR $PEER "$FLOOD" $W/flooding $W/stop >$W/dupread.log 2>&1 &
py=$!
for i in $(seq 1 600); do
	[ -e $W/flooding ] && break
	kill -0 $py 2>/dev/null || break
	sleep 0.2
done
pp_ok=0 flood="" flood_start=0 pp_start=0 pp_end=0
if [ -e $W/flooding ]; then
	pp_start=$(date +%s.%N)
	pp_client "$iters" flood $((FLOOD * 4 + 50)) && flood=$pp_usec pp_ok=1
	pp_end=$(date +%s.%N)
	read -r flood_start <$W/flooding
	# The flood lasts at least $FLOOD s; it stops once the pingpong is over.
	sleep "$(awk -v s="$flood_start" -v F="$FLOOD" -v now="$(date +%s.%N)" 'BEGIN { d = s + F - now; print (d > 0 ? d : 0) }')"
fi
touch $W/stop
rc=0; wait $py || rc=$?
cp $W/* /out/ 2>/dev/null
case_results "$DRV" dupread $W/dupread.log
grep -E '^(PASS|FAIL|SKIP) dupread:|^dupread:' $W/dupread.log
[ $rc = 0 ] || fail "$DRV-dupread-cases (exit $rc)"

alone alone-after
after=$alone_usec
if [ ! -e $W/flooding ]; then
	fail "$DRV-dupread-pingpong-beside (no flood)"
elif [ $pp_ok = 0 ]; then
	fail "$DRV-dupread-pingpong-beside: the pingpong failed during the flood: $(tail -3 $W/pp-flood-client.log $W/pp-flood-server.log | tr '\n' ' ')"
elif [ -z "$before" ] || [ -z "$after" ]; then
	fail "$DRV-dupread-pingpong-beside ($flood usec/iter beside the flood; no measure without it)"
elif [ -z "$busy" ]; then
	fail "$DRV-dupread-pingpong-beside ($flood usec/iter beside the flood; no measure beside the busy loop)"
else
	# Against the slowest of the runs without the flood: the host's own load (a debug-kernel VM
	# beside this one under TCG) moves a pingpong's pace by itself, by 1.8x between the runs
	# before and after once (842 and 1498 usec/iter).
	verdict=$(awk -v b1="$before" -v b2="$busy" -v b3="$after" -v f="$flood" -v s="$flood_start" -v ps="$pp_start" -v pe="$pp_end" -v n="$iters" 'BEGIN {
		b = b1 > b2 ? b1 : b2; b = b > b3 ? b : b3; r = f / b
		printf "%s %s usec/iter beside the flood, %.2f without (the slowest of %s before, %s beside a busy loop, %s after): %.2fx, want <= 3; %d iters, started %.1f s and ended %.1f s into the flood\n",
			r <= 3 ? "PASS" : "FAIL", f, b, b1, b2, b3, r, n, ps - s, pe - s }')
	if [ "${verdict%% *}" = PASS ]; then pass "$DRV-dupread-pingpong-beside (${verdict#* })"; else
		fail "$DRV-dupread-pingpong-beside (${verdict#* })"; fi
fi

stalls=$(dmesg | grep -E 'soft lockup|rcu: INFO|detected stall|hung task|blocked for more than' | head -5)
if [ -z "$stalls" ]; then
	pass "$DRV-dupread-no-stall-reports"
else
	fail "$DRV-dupread-no-stall-reports: $(echo "$stalls" | head -1)"
	echo "$stalls" | sed 's/^/    /'
fi
grep -H . /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/* 2>/dev/null | sed 's|.*/||' | tr '\n' ' '; echo
ip -s link show dev vpc0
check "$DRV-dupread-unload" 60 veth_peer_unload "$DRV" $NS
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
