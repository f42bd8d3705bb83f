#!/bin/bash
# Corruption on the wire, two VMs: netem flips a bit in 5 % of the frames each eth0 sends.
# A corrupted RoCEv2 packet must be dropped by the receiver's ICRC check (roxe counts it in the
# rcvd_icrc_err hw counter) and RC must recover it by retransmission: rc_integrity.py moves
# 4 MiB by WRITE, reads it back by READ and sends 1 MiB + 3 bytes, comparing SHA-256 digests on
# both sides. netem flips a bit anywhere in the frame, so some corrupted frames are dropped
# before roxe sees them (IP header checksum; roxe sends UDP checksum 0, as rxe does, so the
# UDP payload is left to the ICRC); the test asserts what roxe sees: rcvd_icrc_err > 0 on a
# roxe side. Arguments: DRV0 DRV1 (VM 0 serves).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; [ "$ROXE_VM" = 1 ] && DRV=${2:-${1:-roxe}}
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
check "ping-peer-vm$ROXE_VM" 60 retry_client 50 ping -c1 -W1 "$PEER_IP"
HWC=/sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters
modprobe sch_netem
check "netem-corrupt-vm$ROXE_VM" 10 tc qdisc add dev eth0 root netem corrupt 5%
barrier ready 180 || finish_tests
TAG="$1-$2-corrupt"
PY=/roxe/qemu/tests/py/rc_integrity.py
if [ "$ROXE_VM" = 0 ]; then
	check "$TAG-integrity-server" 600 python3 $PY server "$RDMA_DEV" "$gid" 18530
	cat /out/$TAG-integrity-server.log
else
	check "$TAG-integrity" 600 python3 $PY client "$RDMA_DEV" "$gid" 18530 "$PEER_IP"
	cat /out/$TAG-integrity.log
fi
tc -s qdisc show dev eth0 | tee /out/netem-stats.txt
if [ "$DRV" = roxe ]; then
	rdma statistic show link "$RDMA_DEV/1" | tee /out/statistic.txt
	icrc=$(cat $HWC/rcvd_icrc_err)
	echo "$icrc" >/sync/icrc.$ROXE_VM
	say "rcvd_icrc_err $icrc"
	check "$TAG-statistic-shows-icrc-vm$ROXE_VM" 5 grep -q rcvd_icrc_err /out/statistic.txt
fi
barrier done 120
# Each roxe side reports its count; with corruption in both directions and thousands of frames,
# the receivers together must have caught some.
total=0; for f in /sync/icrc.*; do [ -f "$f" ] && total=$((total + $(cat "$f"))); done
[ "$ROXE_VM" = 1 ] && check "$TAG-icrc-errors-counted" 5 test "$total" -gt 0
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
finish_tests
