#!/bin/bash
# Guest side of tools/bench.sh: the same perftest sweep on rdma_rxe, siw and roxe, rotating the
# drivers in one boot (rxe, siw, roxe, rxe, ...; never two loaded), so that the comparison sees
# the same emulated CPU. Loopback through the device's own address (one VM) or, with --two-vm,
# VM 0 serving and VM 1 measuring. Every run connects through rdma_cm (perftest -R): siw, an
# iWARP device, connects no other way. Writes /out/bench.csv: round,driver,test,size,value,unit.
# Arguments: ROUNDS QUICK(0|1) [DRIVERS [ROUND [MTU]]]: DRIVERS ("+" between) replaces the
# rotation, MTU sets eth0's MTU before any driver loads (a jumbo wire; default 1500), and ROUND
# numbers a single round (tools/bench.sh boots the two-VM setup once per driver and
# round, so that a driver that hangs a VM costs only its own runs); iperf3 and ping run in a
# round's first driver's boot, the memcpy measurement in round 1's.
#
# Besides perftest's figures, per round and driver:
# - cpu_s_<op> and moved_<op> (the 64 KiB bandwidth runs, which last BULK_SECS: perftest -D):
#   this VM's CPU seconds over the run (/proc/stat, all CPUs, everything but idle and iowait),
#   perftest's start and stop included, and the GiB moved; tools/bench_report.py divides the
#   two VMs' CPU time by the bytes.
# - qps_write_bw, size N: 64 KiB WRITE bandwidth summed over N QPs (perftest -q N);
#   window_write_bw, window_sent_per_needed and window_host_drops, size 8 (two VMs, roxe): 8 QPs'
#   64 KiB WRITEs by count, the packets sent per packet needed and the host's socket drops
#   (window());
#   idle_write_bw: one QP's 64 KiB WRITEs with IDLE_QPS more connected QPs idle on the device
#   (qemu/tests/py/idle_qps.py; not siw, whose QPs connect through the iWARP CM only).
# - check_<op> (the 64 KiB bandwidth runs): the same bandwidth by a second method, which neither
#   perftest's clock nor its arithmetic enters: a run of N messages (-n N, N sized to last about
#   BULK_SECS at the -D run's rate) timed by this script on the client's side, less the time of a
#   short run (the tool's start, connection and stop): N * 64 KiB over the difference (check()).
# And once: the guest's memcpy bandwidth for 64 KiB and 64 MiB buffers (tools/memcpy-bench.c),
# and between two VMs, per round, iperf3's TCP bandwidth and ping's round trip, drivers unloaded;
# iperf3's figure is checked by the bytes the client's netdev sent over the run's time
# (iperf3_netdev: headers included, about 4% above the payload at a 1500-byte MTU).
. /roxe/qemu/guest/lib.sh
ROUNDS=${1:-3} QUICK=${2:-0} DRIVERS=${3:-rxe+siw+roxe} ROUND=${4:-} MTU=${5:-}
[ -z "$MTU" ] || ip link set "$NETDEV" mtu "$MTU" || fail "mtu $MTU"
DRIVERS=${DRIVERS//+/ }
TWO=0; grep -qw 'roxe.two=1' /proc/cmdline && TWO=1
ROUND_LIST=$(seq 1 "$ROUNDS")
[ -n "$ROUND" ] && ROUND_LIST=$ROUND
# Whether this boot measures what is measured once per round (the wire) and once per run (memcpy).
FIRST=1; [ -n "$ROUND" ] && [ "${3%%+*}" != rxe ] && FIRST=0
IDLE_QPS=64
if [ "$QUICK" = 1 ]; then
	BW_SIZES="64 65536"; LAT_SIZES="2"; ITERS_BW=300; ITERS_LAT=200; BULK_SECS=4; QPS="1 4"
	WINDOW_MSGS=50
else
	BW_SIZES="64 1024 4096 65536 1048576"; LAT_SIZES="2 64 4096"; ITERS_BW=20000; ITERS_LAT=2000
	BULK_SECS=4; QPS="1 2 4 8"; WINDOW_MSGS=250
fi
# Iterations of a bandwidth run: ITERS_BW, but at most about 64 MiB per run for large messages
# (and at least 100), so that a sweep round stays within minutes on the emulated wire. Small
# messages need the many: a run of 1000 64-byte messages lasts some 50 ms in one VM, about as
# long as perftest's own start and stop, and its rate varies by a third from run to run.
bw_iters() { local n=$((67108864 / $1)); [ $n -gt $ITERS_BW ] && n=$ITERS_BW; [ $n -lt 100 ] && n=100; echo $n; }
# peer_sync NAME TIMEOUT: a barrier with the peer; once one times out (the peer is stuck, e.g. in a
# driver's teardown), the peer is given up: the rest of the sweep is skipped, not waited for
# barrier by barrier.
LOST=0
peer_sync() { [ $LOST = 0 ] && barrier "$@" && return 0; LOST=1; return 1; }
csv=/out/bench.csv
echo "round,driver,test,size,value,unit" >$csv
# Where the client connects: this VM's own address (loopback) or the peer's.
if [ $TWO = 0 ]; then DEST=$SELF_IP; else DEST=$PEER_IP; fi
# busy: jiffies (USER_HZ) all CPUs spent on anything but idle and iowait.
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
HZ=$(getconf CLK_TCK)
k=0 RUN_RC=1 RUN_WALL=0 RUN_T0=0 CHECK_BASE=200
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { print b - a }'; } # since T0: seconds from T0 to now
# stamped CMD...: CMD, with RUN_T0 set to the time it started (retry_client's last attempt).
stamped() { RUN_T0=$(now); "$@"; }
# run DRV TOOL SIZE ARGS...: one perftest run, server and client; the client's output goes to
# /tmp/run.out, RUN_BUSY is this VM's busy jiffies right after it, RUN_RC the client's status
# and RUN_WALL the seconds its last attempt took (VM 1's, between two VMs). Between two VMs, VM 0
# serves and its /tmp/run.out is empty.
run() {
	local drv=$1 tool=$2 size=$3; shift 3
	local args=(-d "$RDMA_DEV" -R -F "$@")
	[ "$tool" != ib_atomic_bw ] && args+=(-s "$size")
	k=$((k + 1))
	: >/tmp/run.out
	[ $LOST = 0 ] || return 1
	if [ $TWO = 0 ]; then
		timeout 150 $tool "${args[@]}" >/dev/null 2>&1 &
		local srv=$!
		wait_listening
		retry_client 20 stamped timeout 150 $tool "${args[@]}" "$DEST" >/tmp/run.out 2>/dev/null
		RUN_RC=$?
		RUN_BUSY=$(busy)
		RUN_WALL=$(since "$RUN_T0")
		wait $srv
	elif [ "$ROXE_VM" = 0 ]; then
		peer_sync "b$k" 120
		timeout 180 $tool "${args[@]}" >/dev/null 2>&1 &
		local srv=$!
		wait_listening
		peer_sync "l$k" 120
		wait $srv
		RUN_BUSY=$(busy)
		peer_sync "e$k" 240
	else
		peer_sync "b$k" 120
		peer_sync "l$k" 120
		retry_client 30 stamped timeout 150 $tool "${args[@]}" "$DEST" >/tmp/run.out 2>/dev/null
		RUN_RC=$?
		RUN_BUSY=$(busy)
		RUN_WALL=$(since "$RUN_T0")
		peer_sync "e$k" 240
	fi
	# Between two VMs only VM 1 reports; VM 0's part ends here.
	[ $TWO = 0 ] || [ "$ROXE_VM" = 1 ]
}
row() { echo "$1,$2,$3,$4,${5:-nan},$6" >>$csv; say "round $1 $2 $3 $4: ${5:-failed} $6"; }
# kept RUN-NAME: a run without a result keeps perftest's output for a look afterwards.
kept() { cp /tmp/run.out "/out/failed-$k-$1.txt"; }
# bw_value [SECS]: MiB/s of perftest's result line (BW average) in /tmp/run.out; a run that
# moved nothing has no value, and its output is kept. In duration mode (-D SECS) perftest
# sometimes prints an average of 0.00 (its cycle counts under TCG) beside the iterations it
# completed: those of its sample window only, between a warm-up and a cool-down margin of
# SECS/4 each (perftest's default margin in duration mode), so the rate is their bytes over
# SECS - 2 * (SECS / 4) seconds, not over SECS.
bw_value() {
	awk -v d="${1:-0}" '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ {
		w = d - 2 * int(d / 4)
		v = $4; if (v == 0 && w > 0) v = sprintf("%.2f", $1 * $2 / w / 1048576) }
		END { if (v != "" && v > 0) print v }' /tmp/run.out
}
bulk() { # bulk ROUND DRV OP: 64 KiB for BULK_SECS, with the CPU time it took
	local r=$1 drv=$2 op=$3 cpu0 v=""
	[ $LOST = 0 ] || return 0
	cpu0=$(busy)
	if run "$drv" "ib_$op" 65536 -D "$BULK_SECS"; then
		v=$(bw_value "$BULK_SECS"); [ -n "$v" ] || kept "$drv-$op-bulk"
		row "$r" "$drv" "$op" 65536 "$v" MiB/s
		[ -n "$v" ] && row "$r" "$drv" "moved_$op" 65536 "$(awk -v m="$v" -v t="$BULK_SECS" 'BEGIN { print m * t / 1024 }')" GiB
	fi
	row "$r" "$drv" "cpu_s_$op" 65536 "$(awk -v b="$((RUN_BUSY - cpu0))" -v hz="$HZ" 'BEGIN { print b / hz }')" s
	check "$r" "$drv" "$op" "$v"
}
# check ROUND DRV OP MIBS: the 64 KiB bandwidth again, timed here (check_OP): N more messages
# over the time a run of CHECK_BASE + N took more than one of CHECK_BASE (perftest's least
# useful count: it wants at least a send queue's worth). Between two VMs both call it, and VM 1,
# which measured MIBS, tells VM 0 how many messages (0: none).
check() {
	local r=$1 drv=$2 op=$3 n=0 one f=/sync/n-$1-$2-$3
	[ -n "$4" ] && n=$(awk -v m="$4" -v t="$BULK_SECS" 'BEGIN { n = int(m * 16 * t); print (n < 100 ? 100 : n) }')
	if [ $TWO = 1 ]; then
		[ "$ROXE_VM" = 1 ] && echo "$n" >$f.tmp && mv $f.tmp $f
		peer_sync "n-$r-$drv-$op" 120 || return 0
		n=$(cat $f 2>/dev/null || echo 0)
	fi
	[ "$n" -gt 0 ] || return 0
	# Both runs on both VMs, whatever the first gave: VM 0's part of a run always "fails".
	run "$drv" "ib_$op" 65536 -n $CHECK_BASE
	one=$RUN_WALL; [ $RUN_RC = 0 ] || one=""
	run "$drv" "ib_$op" 65536 -n $((n + CHECK_BASE)) || return 0
	[ $RUN_RC = 0 ] && [ -n "$one" ] || { kept "$drv-$op-check"; return 0; }
	row "$r" "$drv" "check_$op" 65536 "$(awk -v n="$n" -v w="$RUN_WALL" -v o="$one" 'BEGIN {
		if (w > o) printf "%.2f", n / 16 / (w - o); else print "nan" }')" MiB/s
}
small() { # small ROUND DRV OP SIZE: a bandwidth run of bw_iters messages
	local r=$1 drv=$2 op=$3 size=$4 v
	run "$drv" "ib_$op" "$size" -n "$(bw_iters "$size")" || return 0
	if [ "$op" = atomic_bw ]; then
		v=$(awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { v = $5 * 1000 } END { if (v != "") print v }' /tmp/run.out)
		[ -n "$v" ] || kept "$drv-$op"
		row "$r" "$drv" "$op" 8 "$v" kops/s
	else
		v=$(bw_value); [ -n "$v" ] || kept "$drv-$op-$size"
		row "$r" "$drv" "$op" "$size" "$v" MiB/s
	fi
}
lat() { # lat ROUND DRV OP SIZE: typical and 99th percentile (perftest's t_typical, 99%)
	local r=$1 drv=$2 op=$3 size=$4 line
	run "$drv" "ib_$op" "$size" -n "$ITERS_LAT" || return 0
	line=$(awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { l = $0 } END { print l }' /tmp/run.out)
	[ -n "$line" ] || kept "$drv-$op-$size"
	row "$r" "$drv" "$op" "$size" "$(awk '{ print $5 }' <<<"$line")" us
	row "$r" "$drv" "${op}_p99" "$size" "$(awk '{ print $8 }' <<<"$line")" us
}
qps() { # qps ROUND DRV N: 64 KiB WRITE bandwidth over N QPs
	run "$2" ib_write_bw 65536 -q "$3" -D "$BULK_SECS" || return 0
	local v; v=$(bw_value "$BULK_SECS"); [ -n "$v" ] || kept "$2-qps-$3"
	row "$1" "$2" qps_write_bw "$3" "$v" MiB/s
}
# window ROUND DRV: the window roxe's QPs to one peer share, between two VMs: 8 QPs' 64 KiB
# WRITEs by count (WINDOW_MSGS per QP), with the packets the client sent (the device counter
# sent_pkts, retransmissions included) per packet the messages needed, and the datagrams the
# host's sockets dropped meanwhile (host_udp_drops), which no guest sees.
window() {
	local r=$1 drv=$2 q=8 c=/sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/sent_pkts
	local mtu p0="" d0="" d1=""
	mtu=$(ibv_devinfo -d "$RDMA_DEV" | awk '/active_mtu/ { print $2; exit }')
	[ "$ROXE_VM" = 1 ] && { p0=$(cat $c); d0=$(host_udp_drops "w0-$r"); }
	run "$drv" ib_write_bw 65536 -q $q -n "$WINDOW_MSGS" || return 0
	local p1; p1=$(cat $c); d1=$(host_udp_drops "w1-$r")
	[ $RUN_RC = 0 ] || { kept "$drv-window"; return 0; }
	row "$r" "$drv" window_write_bw $q "$(bw_value)" MiB/s
	row "$r" "$drv" window_sent_per_needed $q "$(awk -v s=$((p1 - p0)) -v n="$WINDOW_MSGS" -v q=$q -v m="$mtu" \
		'BEGIN { if (m > 0) printf "%.4f", s / (n * q * int((65536 + m - 1) / m)) }')" x
	row "$r" "$drv" window_host_drops $q "$([ -n "$d0" ] && [ -n "$d1" ] && echo $((d1 - d0)))" datagrams
}
idle() { # idle ROUND DRV: one QP's 64 KiB WRITEs beside IDLE_QPS connected idle QPs
	local fifo=/tmp/idle.fifo p n=0
	rm -f $fifo; mkfifo $fifo
	python3 /roxe/qemu/tests/py/idle_qps.py "$RDMA_DEV" "$(gid_index_v4)" "$IDLE_QPS" <$fifo >/tmp/idle.out 2>&1 &
	p=$!
	exec 9>$fifo
	while ! grep -q '^ready' /tmp/idle.out && [ $n -lt 120 ]; do sleep 0.5; n=$((n + 1)); done
	grep -q '^ready' /tmp/idle.out || { say "idle QPs: $(tail -3 /tmp/idle.out)"; }
	local rc=0
	run "$2" ib_write_bw 65536 -D "$BULK_SECS" || rc=1
	exec 9>&-
	wait $p
	[ $rc = 0 ] && row "$1" "$2" idle_write_bw "$IDLE_QPS" "$(bw_value "$BULK_SECS")" MiB/s
}
wire() { # wire ROUND: iperf3's TCP bandwidth and ping's round trip between the VMs
	peer_sync "w-$1" 120
	if [ "$ROXE_VM" = 0 ]; then
		timeout 60 iperf3 -s -1 >/dev/null 2>&1 &
		local p=$!
		peer_sync "ws-$1" 120; wait $p; peer_sync "we-$1" 120
		return
	fi
	peer_sync "ws-$1" 120
	local t tx=/sys/class/net/$NETDEV/statistics/tx_bytes b0
	b0=$(cat $tx)
	retry_client 20 stamped timeout 40 iperf3 -c "$PEER_IP" -t "$BULK_SECS" -J >/tmp/iperf3.json 2>/dev/null
	# The netdev's bytes over the client's last attempt (its connection and end included).
	row "$1" wire iperf3_netdev 0 "$(awk -v b="$(($(cat $tx) - b0))" -v t="$(since "$RUN_T0")" 'BEGIN {
		printf "%.2f", b / t / 1048576 }')" MiB/s
	t=$(iperf3_mibs </tmp/iperf3.json)
	row "$1" wire iperf3_tcp 0 "$t" MiB/s
	local rtt
	rtt=$(ping -c 100 -i 0.02 -q "$PEER_IP" 2>/dev/null | awk -F'[/ ]' '/^rtt/ { print $7 * 1000, $8 * 1000 }')
	read -r rtt_min rtt_avg <<<"${rtt:-nan nan}"
	row "$1" wire ping_rtt_min 64 "$rtt_min" us
	row "$1" wire ping_rtt_avg 64 "$rtt_avg" us
	peer_sync "we-$1" 120
}
for r in $ROUND_LIST; do
	[ $LOST = 1 ] && { fail "rounds $r-$ROUNDS skipped: the peer VM stopped answering"; break; }
	[ $TWO = 1 ] && [ $FIRST = 1 ] && wire "$r"
	for drv in $DRIVERS; do
		[ $LOST = 1 ] && break
		step "load-$drv-$r" load_driver $drv || { unload_driver $drv; continue; }
		[ $TWO = 1 ] && peer_sync "up-$drv-$r" 120
		for op in write_bw read_bw send_bw; do
			for s in $BW_SIZES; do
				if [ "$s" = 65536 ]; then bulk $r $drv $op; else small $r $drv $op $s; fi
			done
		done
		# siw has no atomics (its device reports IB_ATOMIC_NONE).
		[ $drv != siw ] && small $r $drv atomic_bw 8
		for op in write_lat send_lat read_lat; do for s in $LAT_SIZES; do lat $r $drv $op $s; done; done
		for n in $QPS; do qps $r $drv $n; done
		[ $TWO = 1 ] && [ $drv = roxe ] && window $r $drv
		[ $drv != siw ] && idle $r $drv
		[ $TWO = 1 ] && peer_sync "down-$drv-$r" 300
		unload_driver $drv
	done
done
# The guest's memory copy bandwidth: the ceiling a soft HCA approaches (every byte is copied at
# least once per side). Cache-warm 64 KiB buffers, as a 64 KiB transfer's, and 64 MiB ones.
if [ $FIRST = 0 ] || [ "${ROUND:-1}" != 1 ]; then
	: # measured in another boot
elif gcc -O2 -o /tmp/memcpy-bench /roxe/tools/memcpy-bench.c; then
	for s in 65536 67108864; do row 0 guest memcpy $s "$(/tmp/memcpy-bench $s 2)" MiB/s; done
else
	fail "memcpy-bench build"
fi
pass bench-done
finish_tests
