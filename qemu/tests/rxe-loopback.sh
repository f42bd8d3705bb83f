#!/bin/bash
# Baseline on the in-tree C driver, one VM (loopback through the device's own GID):
# device creation, ibv_devinfo, ibv_rc_pingpong, perftest write/read/send bandwidth and latency.
# Proves the harness on a known-good driver and records rdma_rxe's numbers.
. /roxe/qemu/guest/lib.sh
DRV=${1:-rxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
check "$DRV-link-show" 10 sh -c "rdma link show | grep -q '$RDMA_DEV/1 state ACTIVE'"
check "$DRV-devinfo" 30 sh -c "ibv_devinfo -v -d $RDMA_DEV | tee /out/devinfo.txt | grep -q 'link_layer:.*Ethernet'"
gid=$(gid_index_v4) || { fail "$DRV: no RoCE v2 IPv4 GID"; finish_tests; }
say "RoCE v2 IPv4 GID index $gid"

pingpong() { # pingpong TOOL EXTRA...: server in the background, client against 127.0.0.1
	local tool=$1; shift
	$tool -d "$RDMA_DEV" -g "$gid" "$@" >/out/$tool-server.log 2>&1 &
	local srv=$!
	retry_client 30 $tool -d "$RDMA_DEV" -g "$gid" "$@" 127.0.0.1
	local rc=$?
	wait $srv || rc=1
	return $rc
}
export -f pingpong; export gid
check "$DRV-rc-pingpong" 120 pingpong ibv_rc_pingpong -n 200

perf() { # perf TOOL ARGS...: run a perftest pair and keep the client's report
	local tool=$1; shift
	$tool -d "$RDMA_DEV" -x "$gid" "$@" >/out/$tool-server.log 2>&1 &
	local srv=$!
	retry_client 30 $tool -d "$RDMA_DEV" -x "$gid" "$@" 127.0.0.1 >/out/$tool.txt 2>&1
	local rc=$?
	wait $srv || rc=1
	cat /out/$tool.txt
	return $rc
}
export -f perf
check "$DRV-write-bw" 180 perf ib_write_bw -s 65536 -D 3 -F
check "$DRV-read-bw" 180 perf ib_read_bw -s 65536 -D 3 -F
check "$DRV-send-bw" 180 perf ib_send_bw -s 65536 -D 3 -F
check "$DRV-send-lat" 180 perf ib_send_lat -s 2 -n 200 -F
check "$DRV-write-lat" 180 perf ib_write_lat -s 2 -n 200 -F
check "$DRV-unload" 60 unload_driver "$DRV"
finish_tests
