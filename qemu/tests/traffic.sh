#!/bin/bash
# RDMA traffic with stock tools, on one VM (loopback through the device's own GID) or two VMs
# (VM 0 serves, VM 1 is the client). Arguments: DRV0[,DRV1]: the driver of each VM (roxe or
# rxe), so that roxe can be checked against itself and against rdma_rxe in both directions.
# Every check asserts on the tools' output: pingpongs validate the received buffers (-c), and
# perftest reports must show completed iterations, and the device must have sent the packets.
# The hw counters (Documentation/counters.md): the device has rdma_rxe 7.3's, by its names (on
# rxe this checks the list against rxe itself), and roxe's own besides, in sysfs and in `rdma
# statistic`; a SEND run of known size moves rdma_sends and sent_bytes on the sending device,
# rdma_recvs and rcvd_bytes on the receiving one, by at least what it sent. The port counters
# (ports/1/counters/, from the PerfMgt agent): all there, the data and packet ones equal to the hw
# counters they show, and the same SEND run moves the sender's port_xmit_data and the receiver's
# port_rcv_data (units of 4 octets) by at least the bytes sent.
. /roxe/qemu/guest/lib.sh
DRV0=${1:-roxe} DRV1=${2:-${1:-roxe}}
TWO=0; grep -qw 'roxe.two=1' /proc/cmdline && TWO=1
DRV=$DRV0; [ "$ROXE_VM" = 1 ] && DRV=$DRV1
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
export gid
TAG="$DRV0-$DRV1"

# rdma_rxe's hw counters in Linux 7.3 (drivers/infiniband/sw/rxe/rxe_hw_counters.c), then roxe's.
RXE_COUNTERS="sent_pkts rcvd_pkts duplicate_request out_of_seq_request rcvd_rnr_err send_rnr_err rcvd_seq_err
	ack_deferred retry_exceeded_err retry_rnr_exceeded_err completer_retry_err send_err link_downed rdma_sends
	rdma_recvs sent_bytes rcvd_bytes"
ROXE_COUNTERS="rcvd_icrc_err rcvd_drops rcvd_peer_mismatch cq_overflow odp_refused peer_window_waits peer_window_cuts peer_window_turns loopback_queued"
HWC=/sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters
export HWC
counter() { cat "$HWC/$1" 2>/dev/null || echo 0; }
# counters_are NAME...: the device's hw counters in sysfs are exactly NAME... (`lifespan` is the
# core's own file), and `rdma statistic` shows each with its value.
counters_are() {
	local want have stat c missing=""
	want=$(printf '%s\n' "$@" | sort)
	have=$(ls "$HWC" | grep -vx lifespan | sort)
	[ "$have" = "$want" ] || { echo "sysfs has:"; echo $have; echo "expected:"; echo $want; return 1; }
	stat=$(rdma statistic show link "$RDMA_DEV/1") || return 1
	echo "$stat"
	# The shell's own match, not a grep per counter: on the debug kernel under a slow TCG host
	# thirty forks took more than a minute.
	local re
	for c in "$@"; do
		re="(^|[[:space:]])$c [0-9]+([[:space:]]|$)"
		[[ $stat =~ $re ]] || missing="$missing $c"
	done
	[ -z "$missing" ] || { echo "not in rdma statistic:$missing"; return 1; }
}
export -f counters_are
if [ "$DRV" = roxe ]; then
	# shellcheck disable=SC2086
	check "$DRV-counters-named-vm$ROXE_VM" 180 counters_are $RXE_COUNTERS $ROXE_COUNTERS
else
	# shellcheck disable=SC2086
	check "$DRV-counters-named-vm$ROXE_VM" 180 counters_are $RXE_COUNTERS
fi
# The port counters (ports/1/counters/, the PerfMgt agent's): the data, packet and error counters
# are there, and each data or packet counter agrees with the hw counter it shows (a read between
# two reads of the hw counter, the data in IBA's units of 4 octets).
PMA=/sys/class/infiniband/$RDMA_DEV/ports/1/counters
PORT_COUNTERS="port_xmit_data port_rcv_data port_xmit_packets port_rcv_packets symbol_error
	link_error_recovery link_downed port_rcv_errors port_rcv_remote_physical_errors
	port_rcv_switch_relay_errors port_xmit_discards port_xmit_constraint_errors
	port_rcv_constraint_errors local_link_integrity_errors excessive_buffer_overrun_errors
	VL15_dropped port_xmit_wait"
export PMA
pcounter() { cat "$PMA/$1" 2>/dev/null || echo 0; }
# port_counters_there NAME...: each is a file of the port's counters with a number in it.
port_counters_there() {
	local c v bad=""
	for c in "$@"; do
		v=$(cat "$PMA/$c" 2>/dev/null) && [[ $v =~ ^[0-9]+$ ]] || bad="$bad $c"
		echo "$c ${v:-}"
	done
	[ -z "$bad" ] || { echo "missing or not a number:$bad"; return 1; }
}
# agrees PORT_COUNTER HW_COUNTER DIV: HW_COUNTER / DIV read before and after PORT_COUNTER
# frames it.
agrees() {
	local lo p hi
	lo=$(($(cat "$HWC/$2") / $3)); p=$(cat "$PMA/$1"); hi=$(($(cat "$HWC/$2") / $3))
	echo "$2/$3 $lo <= $1 $p <= $hi"
	[ "$lo" -le "$p" ] && [ "$p" -le "$hi" ]
}
export -f port_counters_there agrees
# shellcheck disable=SC2086
check "$DRV-port-counters-there-vm$ROXE_VM" 60 port_counters_there $PORT_COUNTERS
[ $TWO = 1 ] && { check "ping-peer-vm$ROXE_VM" 60 retry_client 50 ping -c1 -W1 "$PEER_IP"; barrier ready 180 || finish_tests; }
n=0
# pair NAME TIMEOUT TOOL ARGS...: the server and the client of one tool, checked on the client.
pair() {
	local name=$1 t=$2; shift 2
	local tool=$1; shift
	n=$((n + 1))
	local gflag=-g; case $tool in ib_*) gflag=-x ;; esac
	local before; before=$(sent_pkts)
	if [ $TWO = 0 ]; then
		$tool -d "$RDMA_DEV" $gflag "$gid" "$@" >/out/$name-server.log 2>&1 &
		local srv=$!
		check "$TAG-$name" "$t" bash -c "$(declare -f retry_client); retry_client 30 $tool -d $RDMA_DEV $gflag $gid $* 127.0.0.1 >/out/$name.txt 2>&1"
		wait $srv || fail "$TAG-$name-server"
		validate "$name" "$tool" $(($(sent_pkts) - before))
	elif [ "$ROXE_VM" = 0 ]; then
		barrier "s$n" 120
		check "$TAG-$name-server" "$t" bash -c "$tool -d $RDMA_DEV $gflag $gid $* >/out/$name-server.log 2>&1"
		barrier "e$n" $((t + 60))
	else
		barrier "s$n" 120
		check "$TAG-$name" "$t" bash -c "$(declare -f retry_client); retry_client 60 $tool -d $RDMA_DEV $gflag $gid $* $PEER_IP >/out/$name.txt 2>&1"
		validate "$name" "$tool" $(($(sent_pkts) - before))
		barrier "e$n" $((t + 60))
	fi
}
# sent_pkts: this host's device's count of packets sent.
sent_pkts() { cat "/sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/sent_pkts" 2>/dev/null || echo 0; }
# validate NAME TOOL SENT: perftest reports must show iterations, and bandwidth tools must have
# moved them: the device sent at least one packet per iteration (SENT: sent_pkts during the
# run). The rates perftest prints come from the TSC, which TCG does not keep in step across
# vCPUs: a run that migrates between them can print 0 or inf, so they are shown, not judged.
validate() {
	case $2 in
	ib_*_bw) check "$TAG-$1-moved-data" 5 awk -v sent="$3" '$1 ~ /^[0-9]+$/ && NF >= 5 { if ($2 > 0 && sent >= $2) ok = 1 } END { if (!ok) print "sent_pkts +" sent; exit !ok }' "/out/$1.txt" ;;
	# Latency tools must report their iterations; the times themselves come from the TSC,
	# which QEMU's TCG sometimes leaves uncalibrated (perftest then prints "inf").
	ib_*_lat) check "$TAG-$1-completed" 5 awk '$1 ~ /^[0-9]+$/ && NF >= 5 { if ($2 > 0) ok = 1 } END { exit !ok }' "/out/$1.txt" ;;
	esac
	grep -E '^ *[0-9]+ +[0-9]+ ' "/out/$1.txt" 2>/dev/null | head -3
}
pair rc-pingpong 120 ibv_rc_pingpong -n 100 -c
# The same over IPv6 (RoCE v2 GID of fd77::N): the pair helper's GID is swapped for one pair.
if gid6=$(gid_index_v6); then
	gid4=$gid; gid=$gid6; pair rc-pingpong-ipv6 120 ibv_rc_pingpong -n 100 -c; gid=$gid4
else
	fail "$TAG: no RoCE v2 IPv6 GID"
fi
pair rc-pingpong-events 120 ibv_rc_pingpong -n 100 -c -e
pair rc-pingpong-large 120 ibv_rc_pingpong -n 20 -s 100000 -c
pair uc-pingpong 120 ibv_uc_pingpong -n 100 -c
pair ud-pingpong 120 ibv_ud_pingpong -n 100 -c -s 512
pair srq-pingpong 120 ibv_srq_pingpong -n 100 -q 4 -c
# The same, sleeping on completion events (-e: req_notify_cq and the completion channel).
pair uc-pingpong-events 120 ibv_uc_pingpong -n 100 -c -e
pair ud-pingpong-events 120 ibv_ud_pingpong -n 100 -c -s 512 -e
pair srq-pingpong-events 120 ibv_srq_pingpong -n 100 -q 4 -c -e
pair write-bw 180 ib_write_bw -s 65536 -n 200 -F
pair read-bw 180 ib_read_bw -s 65536 -n 200 -F
pair send-bw 180 ib_send_bw -s 65536 -n 200 -F
# Eight QPs to one peer share its send window and take turns at it (`peer.rs`; between two VMs,
# roxe on both sides): every QP's run completes, and the client's QPs waited for turns.
if [ $TWO = 1 ] && [ "$DRV0" = roxe ] && [ "$DRV1" = roxe ]; then
	turns=$(counter peer_window_turns)
	pair write-bw-8qp 240 ib_write_bw -s 65536 -n 200 -q 8 -F
	[ "$ROXE_VM" = 1 ] && check "$TAG-peer-turns" 5 test "$(counter peer_window_turns)" -gt "$turns"
fi
pair atomic-bw 180 ib_atomic_bw -n 200 -F
pair send-lat 180 ib_send_lat -s 2 -n 200 -F
pair write-lat 180 ib_write_lat -s 2 -n 200 -F
pair read-lat 180 ib_read_lat -s 2 -n 200 -F
pair atomic-lat 180 ib_atomic_lat -n 200 -F
# The data itself, in one VM: 4 MiB of random bytes by WRITE, READ back and SEND, and a WRITE
# between different offsets in a page, compared by SHA-256 (rc_integrity.py; two VMs run it
# under netem). A loopback WRITE between pinned MRs copies from page to page
# (`recv::loopback`), which no other check here reads back.
if [ $TWO = 0 ]; then
	PY=/roxe/qemu/tests/py/rc_integrity.py
	# As long as the client's check may take (three times as long on the debug kernel).
	st=300; case ${ROXE_FLAVOUR:-} in debug*) st=900 ;; esac
	timeout $st python3 $PY server "$RDMA_DEV" "$gid" 18516 >/out/integrity-server.log 2>&1 &
	srv=$!
	check "$TAG-integrity" 300 python3 $PY client "$RDMA_DEV" "$gid" 18516 127.0.0.1
	wait $srv || { fail "$TAG-integrity-server"; tail -5 /out/integrity-server.log; }
	# A WRITE between bytes that share pages (one MR, or one buffer registered twice) lands as
	# memmove() puts it: a packet's payload is read whole before it is written. roxe only: its
	# 32 KiB loopback segment makes the first case one packet, where rdma_rxe's 1 KiB packets
	# may be read before or after the previous one is written.
	[ "$DRV" = roxe ] && check "$TAG-overlap-write" 120 python3 /roxe/qemu/tests/py/overlap_write.py "$RDMA_DEV" "$gid"
fi
# The counters over a SEND run of N messages of S bytes: the sender (the client, or the only
# device) completed at least N SENDs and sent their bytes, the receiver (the server, or the only
# device) completed at least N receives and received the bytes (the counters count whole IP
# packets, headers included, so the payload alone is a lower bound).
N=200 S=65536
declare -A before
for c in rdma_sends rdma_recvs sent_bytes rcvd_bytes; do before[$c]=$(counter $c); done
for c in port_xmit_data port_rcv_data port_xmit_packets port_rcv_packets; do before[$c]=$(pcounter $c); done
pair counters-send-bw 180 ib_send_bw -s $S -n $N -F
# moved KIND COUNTER MIN [UNIT]: COUNTER, a hw counter (KIND counters) or a port counter (KIND
# port-counters, read with pcounter), grew by at least MIN since the run started, counted in
# UNITs (4: a port data counter's octets; default 1).
moved() {
	local read=counter now unit=${4:-1}
	[ "$1" = port-counters ] && read=pcounter
	now=$($read "$2")
	say "$2: ${before[$2]} -> $now (+$((now - before[$2])) x $unit, at least $3)"
	check "$TAG-$1-$2-vm$ROXE_VM" 5 test "$(((now - before[$2]) * unit))" -ge "$3"
}
if [ $TWO = 0 ] || [ "$ROXE_VM" = 1 ]; then
	moved counters rdma_sends $N
	moved counters sent_bytes $((N * S))
	moved port-counters port_xmit_data $((N * S)) 4
	moved port-counters port_xmit_packets $N
fi
if [ $TWO = 0 ] || [ "$ROXE_VM" = 0 ]; then
	moved counters rdma_recvs $N
	moved counters rcvd_bytes $((N * S))
	moved port-counters port_rcv_data $((N * S)) 4
	moved port-counters port_rcv_packets $N
fi
check "$DRV-port-counters-agree-vm$ROXE_VM" 10 bash -c 'agrees port_xmit_data sent_bytes 4 &&
	agrees port_rcv_data rcvd_bytes 4 && agrees port_xmit_packets sent_pkts 1 &&
	agrees port_rcv_packets rcvd_pkts 1'
[ $TWO = 1 ] && barrier done 300
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
