#!/bin/bash
# Reliable Datagram Sockets over rds_rdma between two VMs (VM 0 echoes, VM 1 sends): messages
# of 1 B to 64 KiB through AF_RDS sockets forced onto the InfiniBand transport, each echoed and
# compared byte for byte (qemu/tests/py/rds_check.py); the device's counters must show the
# traffic, so that it did not go another way. Arguments: DRV0 [DRV1 [ROUNDS [WINDOW]]], the
# driver of each VM (roxe or rxe), how many messages of each size (4) and how many in flight at
# once (1); the long form (qemu/tests/ulp-long.list) sends many, many in flight.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; [ "$ROXE_VM" = 1 ] && DRV=${2:-${1:-roxe}}
TAG="rds-${1:-roxe}-${2:-${1:-roxe}}"
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
step rds-rdma-load modprobe rds_rdma || finish_tests
port=18634
ROUNDS=${3:-4} WINDOW=${4:-1}
# Messages each side handles: ROUNDS of each of the 13 sizes.
count=$((13 * ROUNDS))
sent_before=$(cat /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/sent_pkts 2>/dev/null || echo 0)
if [ "$ROXE_VM" = 0 ]; then
	python3 /roxe/qemu/tests/py/rds_check.py serve "$SELF_IP" $port $count >/out/rds-server.log 2>&1 &
	srv=$!
	sleep 1
	barrier listening 180
	barrier done $((600 + 10 * ROUNDS))
	rc=0
	wait $srv || rc=$?
	cat /out/rds-server.log
	check "$TAG-server" 5 test $rc = 0
else
	barrier listening 180
	check "$TAG-echo" $((300 + 10 * ROUNDS)) python3 /roxe/qemu/tests/py/rds_check.py send "$SELF_IP" "$PEER_IP" $port $ROUNDS $WINDOW
	cat "/out/$TAG-echo.log"
	barrier done $((600 + 10 * ROUNDS))
fi
sent_after=$(cat /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/sent_pkts 2>/dev/null || echo 0)
# The device's counters and QPs (retransmissions, RNR, states) for a look afterwards.
{ rdma statistic show link "$RDMA_DEV/1"; rdma resource show qp link "$RDMA_DEV/1"; } 2>&1 | tee /out/hca-stats.txt
check "$TAG-device-sent-vm$ROXE_VM" 5 test $((sent_after - sent_before)) -ge $count
# The device goes first: its removal makes rds_rdma tear its connections down (their receive
# rings flushed by the driver). rds_rdma stays loaded: unloading it while a connection it made is
# still cached warns in rds_ib_recv_exit and leaks its receive frags on rdma_rxe as on roxe
# (Debian's 7.3 kernel).
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
