#!/bin/bash
# RC reliability on a bad network: two VMs whose links lose 2 %, duplicate 1 % and reorder 5 %
# of frames (netem on both eth0s). RC transfers must still complete with exactly the bytes sent
# (qemu/tests/py/rc_integrity.py compares SHA-256 digests of WRITE, READ and SEND data), and
# ibv_rc_pingpong must validate its buffers. Arguments: DRV0 DRV1 (VM 0 serves).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; [ "$ROXE_VM" = 1 ] && DRV=${2:-${1:-roxe}}
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
check "ping-peer-vm$ROXE_VM" 60 retry_client 50 ping -c1 -W1 "$PEER_IP"
modprobe sch_netem
check "netem-vm$ROXE_VM" 10 tc qdisc add dev eth0 root netem delay 1ms loss 2% duplicate 1% reorder 5%
tc qdisc show dev eth0
barrier ready 180 || finish_tests
TAG="$1-$2-netem"
PY=/roxe/qemu/tests/py/rc_integrity.py
if [ "$ROXE_VM" = 0 ]; then
	check "$TAG-integrity-server" 600 python3 $PY server "$RDMA_DEV" "$gid" 18515
	cat /out/$TAG-integrity-server.log
	barrier integrity 660
	check "$TAG-rc-pingpong-server" 600 ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -n 300 -s 8192 -c
	barrier pingpong 660
else
	check "$TAG-integrity" 600 python3 $PY client "$RDMA_DEV" "$gid" 18515 "$PEER_IP"
	cat /out/$TAG-integrity.log
	barrier integrity 660
	check "$TAG-rc-pingpong" 600 retry_client 60 ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -n 300 -s 8192 -c "$PEER_IP"
	barrier pingpong 660
fi
tc -s qdisc show dev eth0 | tee /out/netem-stats.txt
# The HCA's own view (retransmissions, sequence NAKs, timeouts), for diagnosing a failure.
rdma statistic show link "$RDMA_DEV/1" | tee /out/hca-stats.txt
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
finish_tests
