#!/bin/bash
# perftest bandwidth tests over every message size (`-a`: 2 bytes to 8 MiB, the port's
# max_msg_sz) in one VM through the device's own GID, few iterations per size: every size must
# complete and report a non-zero rate. Argument: the driver (roxe or rxe).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
# sweep NAME TOOL ARGS...: server in the background, client checked; then every size of 2 B to
# 8 MiB must appear in the client's report with iterations and a non-zero message rate.
sweep() {
	local name=$1 tool=$2; shift 2
	$tool -d "$RDMA_DEV" -x "$gid" -a -F "$@" >/out/$name-server.log 2>&1 &
	local srv=$!
	check "$DRV-$name" 600 bash -c "$(declare -f retry_client); retry_client 30 $tool -d $RDMA_DEV -x $gid -a -F $* 127.0.0.1 >/out/$name.txt 2>&1"
	wait $srv || fail "$DRV-$name-server"
	# Iterations, and a non-zero average bandwidth (column 4) or message rate (column 5): on the
	# debug kernel the rate rounds to 0.000000 Mpps for megabyte messages, the bandwidth to
	# 0.00 MiB/s for messages of a few bytes.
	check "$DRV-$name-all-sizes" 5 awk '$1 ~ /^[0-9]+$/ && NF >= 5 && $2 > 0 && ($4 > 0 || $5 > 0) { seen[$1] = 1 }
		END { for (s = 2; s <= 8388608; s *= 2) if (!(s in seen)) { print "missing size " s; exit 1 } }' "/out/$name.txt"
	grep -E '^ *(2|65536|8388608) +[0-9]+ ' "/out/$name.txt"
}
sweep write-bw-all ib_write_bw -n 5
sweep read-bw-all ib_read_bw -n 5
sweep send-bw-all ib_send_bw -n 5
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
