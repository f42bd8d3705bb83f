#!/bin/bash
# RC/UC packets from a third address: a connected QP must take packets only from its peer's
# IP address (rdma_rxe's check_addr), so that another host cannot inject SENDs and RDMA
# WRITEs or forge ACKs/NAKs by guessing a QPN and a PSN. Argument: the driver (roxe, or rxe
# by hand to see rdma_rxe's behaviour; rxe has no rcvd_peer_mismatch counter, so its forged
# cases fail on that check alone).
#
# The device sits on a veth (vpc0, 10.99.1.1) whose peer (vpc1) is in namespace peerfg with the
# forger's address 10.99.1.2 (veth_peer in qemu/guest/lib.sh): packets sent from there arrive on
# the device's netdev. The QPs are connected in loopback through the device's own GID
# (10.99.1.1). Control packets claim 10.99.1.1 as their source (a transparent socket in the
# namespace). An IPv6 pair (vpc0 fd99::1, vpc1 fd99::2) carries the own-source case: a SEND
# from the namespace claiming fd99::1, the device's own GID, as its source (IPv6 has no
# martian-source check). Cases: qemu/tests/py/peer_check.py.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
NS=peerfg TARGET=10.99.1.1 FORGER=10.99.1.2 TARGET6=fd99::1 FORGER6=fd99::2
GID6=fd99:0000:0000:0000:0000:0000:0000:0001

step "$DRV-peer-setup" veth_peer "$DRV" $NS $TARGET $FORGER || finish_tests
RDMA_DEV=${DRV}0
gid=$(gid_index_with "$RDMA_DEV" 0000:0000:0000:0000:0000:ffff:0a63:0101) || { fail "no RoCE v2 GID for $TARGET"; finish_tests; }
peer_v6() {
	ip addr add $TARGET6/64 dev vpc0 nodad || return 1
	ip -n $NS addr add $FORGER6/64 dev vpc1 nodad || return 1
	ip -n $NS neigh replace $TARGET6 lladdr "$(cat /sys/class/net/vpc0/address)" dev vpc1 nud permanent || return 1
	for _ in $(seq 50); do
		gid6=$(gid_index_with "$RDMA_DEV" $GID6) && return 0
		sleep 0.2
	done
	return 1
}
step "$DRV-peer-setup-v6" peer_v6 || finish_tests
check "$DRV-peer-cases" 420 python3 -X faulthandler /roxe/qemu/tests/py/peer_check.py "$RDMA_DEV" "$gid" $NS $TARGET $FORGER "$gid6" $TARGET6
case_results "$DRV" peer "/out/$DRV-peer-cases.log"
grep -E '^(PASS|FAIL) peer:|^peer:' "/out/$DRV-peer-cases.log"
grep -H . /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/* 2>/dev/null | sed 's|.*/||' | tr '\n' ' '; echo
check "$DRV-peer-unload" 60 veth_peer_unload "$DRV" $NS
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
