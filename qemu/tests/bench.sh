#!/bin/bash
# Guest side of tools/bench.sh: the same perftest sweep on rdma_rxe and on roxe, alternating the
# drivers in one boot (rxe, roxe, rxe, roxe, ...; never both loaded), so that the comparison sees
# the same emulated CPU. Loopback through the device's own GID (one VM) or, with --two-vm, VM 0
# serving and VM 1 measuring. Writes /out/bench.csv: round,driver,test,size,value,unit.
# Arguments: ROUNDS QUICK(0|1)
. /roxe/qemu/guest/lib.sh
ROUNDS=${1:-3} QUICK=${2:-0}
TWO=0; grep -qw 'roxe.two=1' /proc/cmdline && TWO=1
if [ "$QUICK" = 1 ]; then
	BW_SIZES="64 4096 65536"; LAT_SIZES="2 4096"; ITERS_BW=300; ITERS_LAT=200
else
	BW_SIZES="64 1024 4096 16384 65536 262144 1048576"; LAT_SIZES="2 64 1024 4096"; ITERS_BW=20000; ITERS_LAT=2000
fi
# Iterations of a bandwidth run: ITERS_BW, but at most about 64 MiB per run for large messages
# (and at least 100), so that a sweep round stays within minutes on the emulated wire. Small
# messages need the many: a run of 1000 64-byte messages lasts some 50 ms in one VM, about as
# long as perftest's own start and stop, and its rate varies by a third from run to run.
bw_iters() { local n=$((67108864 / $1)); [ $n -gt $ITERS_BW ] && n=$ITERS_BW; [ $n -lt 100 ] && n=100; echo $n; }
csv=/out/bench.csv; [ "$ROXE_VM" = 0 ] && echo "round,driver,test,size,value,unit" >$csv
[ "$ROXE_VM" = 1 ] && echo "round,driver,test,size,value,unit" >$csv
k=0
one() { # one ROUND DRV TOOL SIZE ITERS KIND
	local r=$1 drv=$2 tool=$3 size=$4 iters=$5 kind=$6
	local args="-d $RDMA_DEV -x $gid -s $size -n $iters -F"
	[ "$tool" = ib_atomic_bw ] && args="-d $RDMA_DEV -x $gid -n $iters -F"
	k=$((k + 1))
	if [ $TWO = 0 ]; then
		timeout 120 $tool $args >/dev/null 2>&1 &
		local srv=$!
		local out; out=$(retry_client 20 timeout 120 $tool $args 127.0.0.1 2>/dev/null)
		wait $srv
	elif [ "$ROXE_VM" = 0 ]; then
		barrier "b$k" 120; timeout 150 $tool $args >/dev/null 2>&1; barrier "e$k" 200; return
	else
		barrier "b$k" 120
		local out; out=$(retry_client 30 timeout 120 $tool $args "$PEER_IP" 2>/dev/null)
		barrier "e$k" 200
	fi
	local v
	if [ "$kind" = bw ]; then
		v=$(echo "$out" | awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { print $4 }' | tail -1); unit=MiB/s
		[ "$tool" = ib_atomic_bw ] && { v=$(echo "$out" | awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { print $5 * 1000 }' | tail -1); unit=kops/s; }
	else
		v=$(echo "$out" | awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+/ { print $6 }' | tail -1); unit=us
	fi
	# A run without a result keeps perftest's output for a look afterwards.
	[ -n "$v" ] || echo "$out" >"/out/failed-$k-$drv-${tool#ib_}-$size.txt"
	echo "$r,$drv,${tool#ib_},$size,${v:-nan},$unit" >>$csv
	say "round $r $drv ${tool#ib_} $size: ${v:-failed} $unit"
}
for r in $(seq 1 "$ROUNDS"); do
	for drv in rxe roxe; do
		step "load-$drv-$r" load_driver $drv || { unload_driver $drv; continue; }
		gid=$(gid_index_v4)
		[ $TWO = 1 ] && barrier "up-$drv-$r" 120
		for t in write_bw read_bw send_bw; do for s in $BW_SIZES; do one $r $drv ib_$t $s "$(bw_iters $s)" bw; done; done
		one $r $drv ib_atomic_bw 8 $ITERS_BW bw
		for t in write_lat send_lat read_lat; do for s in $LAT_SIZES; do one $r $drv ib_$t $s $ITERS_LAT lat; done; done
		[ $TWO = 1 ] && barrier "down-$drv-$r" 300
		unload_driver $drv
	done
done
# The guest's memory copy bandwidth: the ceiling a soft HCA approaches (every byte is copied at
# least once per side).
if [ $TWO = 1 ]; then
	# The emulated wire's own round trip, drivers unloaded: half of it is the one-way time no
	# 2-VM latency figure can go below, whichever driver runs.
	barrier ping-start 120
	if [ "$ROXE_VM" = 1 ]; then
		rtt=$(ping -c 200 -i 0.02 -q "$PEER_IP" 2>/dev/null | awk -F'[/ ]' '/^rtt/ { print $7 * 1000, $8 * 1000 }')
		read -r rtt_min rtt_avg <<<"${rtt:-nan nan}"
		echo "0,wire,ping_rtt_min,64,$rtt_min,us" >>$csv
		echo "0,wire,ping_rtt_avg,64,$rtt_avg,us" >>$csv
		say "ping RTT between the VMs: min $rtt_min us, avg $rtt_avg us"
	fi
	barrier ping-done 120
fi
if [ "$ROXE_VM" = 0 ] || [ $TWO = 1 ]; then
	m=$(python3 -c "
import time
b = bytearray(64 << 20); c = bytearray(64 << 20)
t = time.perf_counter(); n = 0
while time.perf_counter() - t < 2:
    c[:] = b; n += 1
print(round(n * 64 / (time.perf_counter() - t), 1))")
	echo "0,guest,memcpy,67108864,$m,MiB/s" >>$csv
	say "guest memcpy: $m MiB/s"
fi
pass bench-done
finish_tests
