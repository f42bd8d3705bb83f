#!/bin/bash
# RC/UC packets from a third address: a connected QP must take packets only from its peer's
# IP address (rdma_rxe's check_addr), so that another host cannot inject SENDs and RDMA
# WRITEs or forge ACKs/NAKs by guessing a QPN and a PSN. Argument: the driver (roxe, or rxe
# by hand to see rdma_rxe's behaviour; rxe has no rcvd_peer_mismatch counter, so its forged
# cases fail on that check alone).
#
# The device sits on a veth (vpc0, 10.99.1.1) whose peer (vpc1) is in namespace peerfg with the
# forger's address 10.99.1.2: packets sent from there arrive on the device's netdev (a packet
# between two local addresses would go over lo, which carries no RDMA device). The QPs are
# connected in loopback through the device's own GID (10.99.1.1). Control packets claim
# 10.99.1.1 as their source (a transparent socket in the namespace; vpc0 has accept_local so
# that the kernel takes a packet from one of its own addresses). Cases:
# qemu/tests/py/peer_check.py.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
NS=peerfg TARGET=10.99.1.1 FORGER=10.99.1.2

setup_peer() {
	load_rdma_core || return 1
	case "$DRV" in
	roxe) insmod "/roxe/build/$ROXE_FLAVOUR/roxe.ko" || return 1 ;;
	rxe) modprobe rdma_rxe || return 1 ;;
	*) return 1 ;;
	esac
	ip netns add $NS || return 1
	ip link add vpc0 type veth peer name vpc1 || return 1
	ip link set vpc1 netns $NS || return 1
	ip addr add $TARGET/24 dev vpc0 || return 1
	sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.vpc0.rp_filter=0 \
		net.ipv4.conf.vpc0.accept_local=1 || return 1
	ip link set vpc0 up || return 1
	ip -n $NS link set lo up || return 1
	ip -n $NS addr add $FORGER/24 dev vpc1 || return 1
	ip -n $NS link set vpc1 up || return 1
	# No ARP on the way (the control's source is not the namespace's own address).
	ip -n $NS neigh replace $TARGET lladdr "$(cat /sys/class/net/vpc0/address)" dev vpc1 nud permanent || return 1
	RDMA_DEV=${DRV}0
	rdma link add "$RDMA_DEV" type "$DRV" netdev vpc0 || return 1
	wait_port_active "$RDMA_DEV" || return 1
	ip addr show dev vpc0; ip -n $NS addr show dev vpc1; rdma link show
}

step "$DRV-peer-setup" setup_peer || finish_tests
RDMA_DEV=${DRV}0
gid=$(gid_index_with "$RDMA_DEV" 0000:0000:0000:0000:0000:ffff:0a63:0101) || { fail "no RoCE v2 GID for $TARGET"; finish_tests; }
check "$DRV-peer-cases" 180 python3 -X faulthandler /roxe/qemu/tests/py/peer_check.py "$RDMA_DEV" "$gid" $NS $TARGET $FORGER
grep -E '^(PASS|FAIL) peer:' "/out/$DRV-peer-cases.log" | while read -r st name rest; do
	echo "$st $DRV-$name $rest" >>/out/results
done
grep -E '^(PASS|FAIL) peer:|^peer:' "/out/$DRV-peer-cases.log"
grep -H . /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/* 2>/dev/null | sed 's|.*/||' | tr '\n' ' '; echo
unload_peer() {
	rdma link delete "$RDMA_DEV" && ip link del vpc0 && ip netns del $NS || return 1
	case "$DRV" in roxe) rmmod roxe ;; rxe) rmmod rdma_rxe ;; esac
}
export -f unload_peer; export RDMA_DEV NS DRV
check "$DRV-peer-unload" 60 unload_peer
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
