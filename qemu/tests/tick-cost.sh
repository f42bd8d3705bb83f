#!/bin/bash
# What the device tick costs with many idle QPs: the duration of roxe's tick timer callback
# (timer_expire_entry/exit trace events), with none and with N idle connected RC QPs; the tick
# visits only the QPs with a timer armed, so N idle QPs must not make it dearer
# (qemu/tests/py/tick_cost.py). Arguments: driver, N (default 4096; the long form in
# `make soak` uses 65536).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe} N=${2:-4096}
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T || { fail "no tracefs"; finish_tests; }
# Each QP maps its two rings into the process: 65536 QPs need more than the default 65530 maps.
echo 262144 >/proc/sys/vm/max_map_count
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
# Connecting QPs takes about 20 ms each on Debian's kernel under TCG, and more as the process
# grows: the limit scales with N.
check tick-cost-cases $((600 + N / 15)) python3 -X faulthandler /roxe/qemu/tests/py/tick_cost.py "$RDMA_DEV" "$gid" "$N"
case_results "" tick-cost /out/tick-cost-cases.log
tail -1 /out/tick-cost-cases.log
check "$DRV-unload" 300 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
