#!/bin/bash
# What the tools that watch and place an RDMA device see of it, on each driver named in the
# arguments (roxe, rxe; default both), one after the other in one boot of the stock kernel:
#   - Prometheus' node_exporter (Debian's prometheus-node-exporter, its infiniband collector
#     alone): after an ib_send_bw run of known size in loopback, the device's
#     node_infiniband_port_data_{transmitted,received}_bytes_total moved by at least the bytes
#     sent, and every metric the collector makes of a port's counters/ is there for the
#     device. Debian's node_exporter (1.9) reads no hw_counters/: the metric names found
#     are printed, for the side-by-side table in Documentation/testing.md;
#   - topology: /sys/class/infiniband/DEV/device is the netdev's parent device (the virtio
#     device of the virtio-net PCI function here), and a numa_node is found on it or the PCI
#     function above it, as placement tools look for it; the port's rate follows the netdev's
#     link speed: on a veth, which reports 10000 Mb/s, it is 10 Gb/sec (virtio-net reports
#     none, and the RDMA core's default of 1000 Mb/s gives 2.5 Gb/sec, as on rdma_rxe).
# rdma_rxe has no parent device: its topology lines are printed for the side-by-side table in
# Documentation/testing.md, not judged. Everything else is judged on both drivers.
. /roxe/qemu/guest/lib.sh
[ $# -gt 0 ] || set -- roxe rxe
NE_ADDR=127.0.0.1:9100
# scrape FILE: node_exporter's metrics page into FILE.
scrape() {
	python3 - "$1" "$NE_ADDR" <<-'EOF'
		import sys, urllib.request
		with urllib.request.urlopen("http://%s/metrics" % sys.argv[2], timeout=30) as r:
		    open(sys.argv[1], "w").write(r.read().decode())
	EOF
}
# metric FILE NAME DEV: the value of metric NAME for DEV's port 1 (empty when absent); the
# exporter prints large values in exponent form, so python reads them.
metric() {
	python3 - "$@" <<-'EOF'
		import re, sys
		f, name, dev = sys.argv[1:]
		for line in open(f):
		    m = re.match(r'(\w+)\{([^}]*)\} (\S+)$', line.strip())
		    if m and m.group(1) == name and 'device="%s"' % dev in m.group(2) and 'port="1"' in m.group(2):
		        print(int(float(m.group(3))))
		        break
	EOF
}
# started: the exporter answers.
started() {
	local i
	for i in $(seq 1 60); do scrape /tmp/ne-probe 2>/dev/null && return 0; sleep 0.5; done
	return 1
}
# veth_rate: a second roxe device on a veth, which reports a link speed (10000 Mb/s): the
# port's rate is that speed, and a virtual netdev gives the device no parent.
veth_rate() {
	local speed rate
	ip link add vrate0 type veth peer name vrate1 && ip link set vrate0 up && ip link set vrate1 up || return 1
	rdma link add roxe1 type roxe netdev vrate0 || return 1
	speed=$(cat /sys/class/net/vrate0/speed)
	rate=$(cat /sys/class/infiniband/roxe1/ports/1/rate)
	echo "veth speed $speed Mb/s, roxe1 rate '$rate', device: $(readlink /sys/class/infiniband/roxe1/device || echo none)"
	rdma link delete roxe1; ip link del vrate0
	[ -n "$speed" ] && [ "$speed" -gt 0 ] && [ "${rate%% Gb/sec*}" = "$((speed / 1000))" ]
}
export -f veth_rate
export NE_ADDR
export -f scrape metric started
# The collector's metric names for the port's data counters.
# has_metrics FILE NAME...: FILE has a sample of each node_infiniband_NAME.
has_metrics() {
	local f=$1 m missing=""
	shift
	for m in "$@"; do grep -q "^node_infiniband_$m{" "$f" || missing="$missing $m"; done
	[ -z "$missing" ] || { echo "missing:$missing"; return 1; }
}
export -f has_metrics
# What the collector makes of a port's counters/ (the PortCounters attribute, which both drivers
# answer) and of its state and rate.
PORT_METRICS="port_data_transmitted_bytes_total port_data_received_bytes_total
	port_packets_transmitted_total port_packets_received_total port_errors_received_total
	port_discards_transmitted_total link_downed_total link_error_recovery_total symbol_error_total
	port_receive_remote_physical_errors_total port_receive_switch_relay_errors_total
	port_constraint_errors_transmitted_total port_constraint_errors_received_total
	local_link_integrity_errors_total excessive_buffer_overrun_errors_total vl15_dropped_total
	port_transmit_wait_total state_id physical_state_id rate_bytes_per_second"
TX=node_infiniband_port_data_transmitted_bytes_total
RX=node_infiniband_port_data_received_bytes_total
N=200 S=65536
load_rdma_core
for drv in "$@"; do
	step "$drv-load" load_driver "$drv" || continue
	gid=$(gid_index_v4) || { fail "$drv: no RoCE v2 IPv4 GID"; continue; }
	prometheus-node-exporter --collector.disable-defaults --collector.infiniband \
		--web.listen-address="$NE_ADDR" >"/out/node-exporter-$drv.log" 2>&1 &
	ne=$!
	check "$drv-node-exporter-up" 60 started
	check "$drv-node-exporter-scrape-before" 60 scrape "/out/metrics-$drv-before.txt"
	ib_send_bw -d "$RDMA_DEV" -x "$gid" -s $S -n $N -F >"/out/send-bw-$drv-server.log" 2>&1 &
	srv=$!
	check "$drv-send-bw" 180 retry_client 30 ib_send_bw -d "$RDMA_DEV" -x "$gid" -s $S -n $N -F 127.0.0.1
	wait $srv || fail "$drv-send-bw-server"
	check "$drv-node-exporter-scrape-after" 60 scrape "/out/metrics-$drv-after.txt"
	grep "device=\"$RDMA_DEV\"" "/out/metrics-$drv-after.txt" >"/out/metrics-$drv-device.txt"
	say "$drv: $(wc -l <"/out/metrics-$drv-device.txt") metric lines name $RDMA_DEV"
	for m in $TX $RX; do
		b=$(metric "/out/metrics-$drv-before.txt" $m "$RDMA_DEV")
		a=$(metric "/out/metrics-$drv-after.txt" $m "$RDMA_DEV")
		say "$drv: $m ${b:-absent} -> ${a:-absent} (at least +$((N * S)))"
		check "$drv-node-exporter-$m-moved" 5 test "$(( ${a:-0} - ${b:-0} ))" -ge $((N * S))
	done
	# Every metric the collector makes of the port's state and counters/, for this device.
	check "$drv-node-exporter-port-metrics" 5 has_metrics "/out/metrics-$drv-device.txt" $PORT_METRICS
	say "$drv: metrics: $(cut -d'{' -f1 "/out/metrics-$drv-device.txt" | sed 's/^node_infiniband_//' | sort -u | tr '\n' ' ')"
	kill $ne; wait $ne 2>/dev/null
	# Topology.
	dev=/sys/class/infiniband/$RDMA_DEV
	rate=$(cat "$dev/ports/1/rate" 2>/dev/null)
	say "$drv: port rate '$rate', netdev speed '$(cat /sys/class/net/$NETDEV/speed 2>/dev/null)'"
	check "$drv-port-rate" 5 test -n "$rate"
	parent=$(readlink -f "$dev/device" 2>/dev/null)
	want=$(readlink -f "/sys/class/net/$NETDEV/device")
	numa=""
	d=$parent
	while [ -n "$d" ] && [ "$d" != / ] && [ ! -e "$d/numa_node" ]; do d=${d%/*}; done
	[ -n "$d" ] && [ -e "$d/numa_node" ] && numa=$(cat "$d/numa_node")
	say "$drv: device -> ${parent:-none} (netdev's: $want), numa_node ${numa:-none} at ${d:-none}"
	if [ "$drv" = roxe ]; then
		check "$drv-parent-is-netdev-parent" 5 test "$parent" = "$want"
		check "$drv-numa-node-found" 5 test -n "$numa"
		check "$drv-rate-follows-veth-speed" 60 veth_rate
	fi
	check "$drv-unload" 60 unload_driver "$drv"
done
kmemleak_check
finish_tests
