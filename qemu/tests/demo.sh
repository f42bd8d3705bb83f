#!/bin/bash
# `make run`: load roxe into the booted kernel, create a device on eth0 and show it working
# with stock rdma-core tools, then move data through it in loopback (ibv_rc_pingpong, perftest,
# rping) and print what each measured. Writes a transcript to /out/demo.txt.
. /roxe/qemu/guest/lib.sh
exec > >(tee /out/demo.txt) 2>&1
echo "== kernel: $(uname -r)"
echo "== rdma-core: $(dpkg-query -W -f='${Version}' ibverbs-providers)"
load_rdma_core
if [ -f "/roxe/build/$ROXE_FLAVOUR/roxe.ko" ]; then DRV=roxe; else DRV=selftest; fi
step demo-load load_driver "$DRV" || finish_tests
# loopback TOOL ARGS...: TOOL's server (rping: -s) in the background and its client (rping: -c;
# others: to 127.0.0.1), retried until the server listens; the client's output on stdout, the
# server's in /out/TOOL-server.log. Fails when either side does.
loopback() {
	local tool=$1 rc=0; shift
	local srv=(-s) cli=(-c); [ "$tool" = rping ] || { srv=(); cli=(127.0.0.1); }
	timeout 50 "$tool" "${srv[@]}" "$@" >"/out/$tool-server.log" 2>&1 &
	local p=$!
	retry_client 20 "$tool" "$@" "${cli[@]}" || rc=$?
	wait $p || rc=$?
	return $rc
}
export -f loopback
# summary NAME TITLE AWK: prints "TITLE: RESULT", RESULT being what AWK makes of /out/NAME.log
# (a check's log); no result is a failure.
summary() {
	local r; r=$(awk "$3" "/out/$1.log")
	if [ -n "$r" ]; then echo "$2: $r"; else fail "$1: no result in its output"; tail -15 "/out/$1.log"; fi
}
if [ "$DRV" = roxe ]; then
	echo "== rdma link show"; rdma link show
	echo "== ibv_devices"; ibv_devices
	echo "== ibv_devinfo -v -d roxe0 (abridged)"
	ibv_devinfo -v -d roxe0 | grep -E 'hca_id|transport|node_guid|vendor_id|vendor_part|phys_port|state|active_mtu|max_mtu|link_layer|GID'
	check demo-port-active 10 sh -c "ibv_devinfo -d roxe0 | grep -q PORT_ACTIVE"
	check demo-pyverbs 30 python3 -c "import pyverbs.device as d; c = d.Context(name='roxe0'); a = c.query_device(); print('pyverbs: roxe0 vendor_id 0x%x max_qp %d port state %d' % (a.vendor_id, a.max_qp, c.query_port(1).state))"
	cat /out/demo-pyverbs.log
	gid=$(gid_index_v4) || fail "demo: roxe0 has no RoCE v2 IPv4 GID"
	echo "== RDMA in loopback through roxe0: RoCE v2 GID $gid ($SELF_IP on $NETDEV)"
	# Each tool's server runs in the background, its client connects through 127.0.0.1 (perftest
	# and the pingpong exchange their queue pair numbers over TCP) and the data goes through
	# roxe0; rping sets up its connection with rdma_cm on roxe0's address.
	check demo-pingpong 60 loopback ibv_rc_pingpong -d roxe0 -g "$gid" -n 1000 -c &&
		summary demo-pingpong "ibv_rc_pingpong (RC SEND/RECV, 4 KiB, buffers checked)" \
			'/usec\/iter/ { printf "%d iters, %s Mbit/s, %s usec/iter", $1, bw, $(NF - 1) } /Mbit\/sec/ { bw = $(NF - 1) }'
	check demo-write-bw 60 loopback ib_write_bw -d roxe0 -x "$gid" -s 65536 -n 1000 -F &&
		summary demo-write-bw "ib_write_bw (RDMA WRITE, 64 KiB)" \
			'/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { r = sprintf("%s MiB/s average over %d writes", $4, $2) } END { printf "%s", r }'
	check demo-read-lat 60 loopback ib_read_lat -d roxe0 -x "$gid" -s 64 -n 500 -F &&
		summary demo-read-lat "ib_read_lat (RDMA READ, 64 B)" \
			'/^ *[0-9]+ +[0-9]+ +[0-9.]+/ { r = sprintf("typical %s us, min %s us over %d reads", $5, $3, $2) } END { printf "%s", r }'
	check demo-rping 60 loopback rping -a "$SELF_IP" -v -V -C 100 -S 1000 &&
		summary demo-rping "rping (rdma_cm, RDMA READ and WRITE, data verified)" \
			'/ping data: / { n++ } END { if (n) printf "%d pings of 1000 bytes verified", n }'
	check demo-unload 60 unload_driver roxe
else
	echo "== lsmod"; grep roxe_selftest /proc/modules
	check demo-unload 30 rmmod roxe_selftest
fi
echo "== dmesg (roxe)"; dmesg | grep -E 'roxe[0-9]*: ' | tail -20
finish_tests
