#!/bin/bash
# Link down in the middle of an RC transfer, two VMs: VM 1 streams RDMA WRITEs to VM 0
# (qemu/tests/py/linkdown.py, retry_cnt 7, timeout 14); once 200 have completed VM 0 takes its
# eth0 down. The requester must report IBV_WC_RETRY_EXC_ERR for the oldest outstanding WRITE
# within the retry budget, flush every other outstanding WR with IBV_WC_WR_FLUSH_ERR, and leave
# its QP in the error state; its hw counters must show the retries (completer_retry_err >= 7)
# and the failure (retry_exceeded_err). The responder's port goes down (link_downed counts it)
# and comes back. Arguments: DRV0 DRV1 (the driver of each VM; the requester is VM 1's).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; [ "$ROXE_VM" = 1 ] && DRV=${2:-${1:-roxe}}
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
check "ping-peer-vm$ROXE_VM" 60 retry_client 50 ping -c1 -W1 "$PEER_IP"
HWC=/sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters
counter() { cat "$HWC/$1" 2>/dev/null || echo 0; }
barrier ready 180 || finish_tests
PY=/roxe/qemu/tests/py/linkdown.py
TAG="$1-$2-linkdown"
if [ "$ROXE_VM" = 0 ]; then
	timeout -k 5 240 python3 $PY server "$RDMA_DEV" "$gid" 18520 >/out/$TAG-server.log 2>&1 &
	srv=$!
	barrier streaming 180 || finish_tests
	ip link set eth0 down
	say "eth0 down"
	check "$TAG-port-down" 20 sh -c "until ibv_devinfo -d $RDMA_DEV | grep -q PORT_DOWN; do sleep 0.5; done"
	[ "$DRV" = roxe ] && check "$TAG-link-downed-counted" 5 test "$(counter link_downed)" -ge 1
	barrier client-done 240
	ip link set eth0 up
	ip addr add "$SELF_IP/24" dev eth0 2>/dev/null
	check "$TAG-port-up" 30 sh -c "until ibv_devinfo -d $RDMA_DEV | grep -q PORT_ACTIVE; do sleep 0.5; done"
	wait $srv; rc=$?
	cat /out/$TAG-server.log
	if [ $rc = 0 ]; then pass "$TAG-server"; else fail "$TAG-server (exit $rc)"; fi
else
	retries0=$(counter completer_retry_err)
	check "$TAG-retry-exc-then-flush" 240 python3 $PY client "$RDMA_DEV" "$gid" 18520 "$PEER_IP" /sync/streaming.1
	cat /out/$TAG-retry-exc-then-flush.log
	if [ "$DRV" = roxe ]; then
		grep -H . $HWC/* | sed 's|.*/||' | tr '\n' ' '; echo
		check "$TAG-retries-counted" 5 test "$(($(counter completer_retry_err) - retries0))" -ge 7
		check "$TAG-retry-exceeded-counted" 5 test "$(counter retry_exceeded_err)" -ge 1
	fi
	barrier client-done 240
fi
barrier done 120
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
finish_tests
