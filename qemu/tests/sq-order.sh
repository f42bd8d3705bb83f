#!/bin/bash
# Send queue completions in posting order (IBA 10.8.3.1), two VMs over a delayed link: VM 1
# posts an RDMA WRITE, a BIND_MW of a type 2 window and a SEND on an RC QP to VM 0, and must see
# their completions in that order; then the same with a bind that fails (a window of another
# PD): WRITE IBV_WC_SUCCESS, BIND_MW IBV_WC_MW_BIND_ERR, SEND IBV_WC_WR_FLUSH_ERR, QP in error
# (qemu/tests/py/sq_order.py). netem delays each VM's frames by DELAY, so the WRITE waits a
# round trip of twice that for its ACK while the bind, which needs no answer, runs at once.
# Arguments: DRV0 DRV1 [DELAY] (the driver of each VM; the requester is VM 1's; default 50ms).
# rdma_rxe as the requester (roxe,rxe) keeps the order of the successful case but not the
# failed bind's: rxe_requester moves the QP to error at the bind and its completer flushes all
# three, the WRITE and the bind with IBV_WC_WR_FLUSH_ERR (measured on Debian's 7.3.4).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; [ "$ROXE_VM" = 1 ] && DRV=${2:-${1:-roxe}}
DELAY=${3:-50ms}
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
check "ping-peer-vm$ROXE_VM" 60 retry_client 50 ping -c1 -W1 "$PEER_IP"
modprobe sch_netem
check "netem-vm$ROXE_VM" 10 tc qdisc add dev eth0 root netem delay "$DELAY"
tc qdisc show dev eth0
barrier ready 180 || finish_tests
PY=/roxe/qemu/tests/py/sq_order.py
TAG="$1-$2-sq-order"
if [ "$ROXE_VM" = 0 ]; then
	check "$TAG-server" 240 python3 $PY server "$RDMA_DEV" "$gid" 18530
	cat /out/$TAG-server.log
else
	check "$TAG" 240 python3 $PY client "$RDMA_DEV" "$gid" 18530 "$PEER_IP"
	cat /out/$TAG.log
fi
barrier done 300
rdma statistic show link "$RDMA_DEV/1" 2>/dev/null | tee /out/hca-stats.txt
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
finish_tests
