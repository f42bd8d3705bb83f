#!/bin/bash
# roxe in network namespaces (containers), in one guest: two namespaces joined by a veth pair,
# a roxe link on each end, created from inside its namespace.
#   - each namespace gets its own RoCEv2 sockets with its first link: UDP port 4791 listens in
#     both, and not in the initial namespace, which has no link;
#   - ibv_rc_pingpong (buffers checked) and ib_write_bw / ib_read_bw between the namespaces over
#     IPv4 and IPv6 GIDs; rping and ucmatose through rdma_cm in each namespace, IPv4 and IPv6;
#   - the port closes in a namespace with its last link (rdma link delete), and with the
#     netdev's removal, which also removes the device, before `ip link del` returns;
#   - a netdev moved to another namespace takes its device with it out of existence (as
#     rdma_rxe: the device is unregistered), and a new link on it there works;
#   - deleting a namespace whose netdev carries a live link removes the device cleanly;
#   - `rdma system set netns exclusive`: a device moved into a namespace (`rdma dev set NAME
#     netns NS`) is seen there only and carries a pingpong there; the namespace's deletion returns
#     it to the initial one.
# Arguments: FAMILIES (default "4 6").
. /roxe/qemu/guest/lib.sh
FAMILIES=${1:-4 6}
load_rdma_core
insmod "/roxe/build/$ROXE_FLAVOUR/roxe.ko" || { fail "insmod roxe"; finish_tests; }
A=nsa B=nsb
A4=10.77.0.1 B4=10.77.0.2 A6=fd79::1 B6=fd79::2

# listening NS: UDP port 4791 is bound in NS ("" for the initial namespace).
listening() { if [ -n "$1" ]; then ip netns exec "$1" ss -Huln 'sport = :4791'; else ss -Huln 'sport = :4791'; fi | grep -q ':4791'; }
# gid NS DEV FAMILY: the device's RoCE v2 GID index for our address of FAMILY, as NS sees it.
gid() {
	local prefix=0000:0000:0000:0000:0000:ffff:
	[ "$3" = 6 ] && prefix=fd79:
	ip netns exec "$1" bash -c "for i in \$(seq 1 40); do gid_index_with $2 $prefix && exit 0; sleep 0.5; done; exit 1"
}
# pair NAME TIMEOUT SERVER-CMD... -- CLIENT-CMD...: SERVER in namespace A, CLIENT in B (retried
# until the server listens); both must succeed.
pair() {
	local name=$1 t=$2; shift 2
	local srv=() cli=()
	while [ "$1" != -- ]; do srv+=("$1"); shift; done; shift; cli=("$@")
	ip netns exec "$A" timeout "$t" "${srv[@]}" >"/out/$name-server.log" 2>&1 &
	local p=$! rc=0 i
	# The client starts once the server listens (on rdma_cm, or on TCP for the tools that
	# exchange QP numbers over it): an rdma_cm request that comes earlier is rejected, and the
	# CM's retries of it can reach the listener later as a stale connection, on which
	# ucmatose's server gives up.
	for i in $(seq 1 100); do
		ip netns exec "$A" rdma resource show cm_id 2>/dev/null | grep -q LISTEN && break
		ip netns exec "$A" ss -Hltn 'sport = :18515' 2>/dev/null | grep -q 18515 && break
		sleep 0.2
	done
	retry_client 30 ip netns exec "$B" timeout "$t" "${cli[@]}" || rc=1
	wait $p || { echo "server exit $?"; tail -5 "/out/$name-server.log"; rc=1; }
	return $rc
}
# devgone NAME: the RDMA device NAME disappears within 10 s.
devgone() { local i; for i in $(seq 1 20); do [ -e "/sys/class/infiniband/$1" ] || return 0; sleep 0.5; done; return 1; }
export A B A4 B4 A6 B6
export -f listening gid pair devgone

setup() {
	ip netns add "$A" && ip netns add "$B" &&
		ip link add va type veth peer name vb && ip link set va netns "$A" && ip link set vb netns "$B" &&
		ip -n "$A" addr add "$A4/24" dev va && ip -n "$B" addr add "$B4/24" dev vb &&
		ip -n "$A" addr add "$A6/64" dev va nodad && ip -n "$B" addr add "$B6/64" dev vb nodad &&
		ip -n "$A" link set lo up && ip -n "$B" link set lo up &&
		ip -n "$A" link set va up && ip -n "$B" link set vb up &&
		ip netns exec "$A" rdma link add ra type roxe netdev va &&
		ip netns exec "$B" rdma link add rb type roxe netdev vb &&
		wait_port_active ra && wait_port_active rb && rdma link show
}
export -f setup
check setup 60 setup
check port-per-namespace 10 bash -c 'listening "$A" && listening "$B" && ! listening ""'

for f in $FAMILIES; do
	ga=$(gid "$A" ra "$f") && gb=$(gid "$B" rb "$f") || { fail "v$f-gids"; continue; }
	say "IPv$f GIDs: ra $ga, rb $gb"
	srv_addr=$A4; [ "$f" = 6 ] && srv_addr=$A6
	check "v$f-rc_pingpong" 120 pair rc_pingpong-$f 100 ibv_rc_pingpong -d ra -g "$ga" -n 200 -s 4096 -c \
		-- ibv_rc_pingpong -d rb -g "$gb" -n 200 -s 4096 -c "$A4"
	for t in write read; do
		check "v$f-ib_${t}_bw" 150 bash -c "pair ib_${t}_bw-$f 120 ib_${t}_bw -d ra -x $ga -s 65536 -n 200 -F -- ib_${t}_bw -d rb -x $gb -s 65536 -n 200 -F $A4 >/out/ib_${t}_bw-$f.out && grep -E '^ *65536 +200 ' /out/ib_${t}_bw-$f.out"
	done
	check "v$f-rping" 120 pair rping-$f 100 rping -s -a "$srv_addr" -C 3 -v -- rping -c -a "$srv_addr" -C 3 -v -V
	check "v$f-ucmatose" 120 pair ucmatose-$f 100 ucmatose -b "$srv_addr" -c 2 -C 20 -- ucmatose -s "$srv_addr" -c 2 -C 20
done

# The port closes with a namespace's last link, and only there.
check close-with-last-link 30 bash -c 'ip netns exec "$B" rdma link delete rb && ! listening "$B" && listening "$A"'
# Removing the netdev removes its device and the port before `ip link del` returns.
check netdev-unregister 30 bash -c 'ip -n "$A" link del va && [ ! -e /sys/class/infiniband/ra ] && ! listening "$A"'

# A netdev moved to another namespace leaves its device behind unregistered; a link made
# there on it works.
move() {
	ip link add vc type veth peer name vd && ip link set vc netns "$A" && ip link set vd netns "$A" &&
		ip -n "$A" link set vc up && ip -n "$A" link set vd up &&
		ip netns exec "$A" rdma link add rc type roxe netdev vc && wait_port_active rc && listening "$A" &&
		ip -n "$A" link set vc netns "$B" && devgone rc && ! listening "$A" &&
		ip -n "$B" link set vc up && ip netns exec "$B" rdma link add rc type roxe netdev vc &&
		wait_port_active rc && listening "$B" && ! listening "$A"
}
export -f move
check netdev-moved 60 move
# Deleting a namespace with a live link in it: the veth goes, and its device with it.
check namespace-delete 60 bash -c 'ip netns del "$B" && devgone rc && ip netns del "$A"'

# Exclusive mode: devices live in one namespace; one moved into a namespace works there.
exclusive() {
	# The mode changes only while no namespace but the initial one exists; those deleted above
	# are dismantled in the background.
	retry_client 30 rdma system set netns exclusive || return 1
	rdma system show
	ip netns add "$A" && ip link add vx type veth peer name vy && ip link set vx netns "$A" &&
		ip link set vy netns "$A" && ip -n "$A" addr add "$A4/24" dev vx &&
		ip -n "$A" link set lo up && ip -n "$A" link set vx up && ip -n "$A" link set vy up || return 1
	ip netns exec "$A" rdma link add re type roxe netdev vx || return 1
	# Made from inside A, the device is created in the initial namespace, as rdma_rxe's; moved
	# into A, it is seen only there.
	rdma dev show re && rdma dev set re netns "$A" || return 1
	ip netns exec "$A" rdma dev show re && ! rdma dev show re 2>/dev/null || return 1
	local g; g=$(gid "$A" re 4) || return 1
	ip netns exec "$A" ibv_rc_pingpong -d re -g "$g" -n 100 -s 4096 -c >/out/excl-server.log 2>&1 &
	local p=$!
	retry_client 30 ip netns exec "$A" timeout 60 ibv_rc_pingpong -d re -g "$g" -n 100 -s 4096 -c 127.0.0.1 || return 1
	wait $p || return 1
	# The namespace's deletion takes the veth, and the device goes with it.
	ip netns del "$A" && devgone re || return 1
	retry_client 30 rdma system set netns shared && rdma system show
}
export -f exclusive
check exclusive-mode 150 exclusive
retry_client 30 rdma system set netns shared 2>/dev/null

check unload 30 rmmod roxe
kmemleak_check
finish_tests
