#!/bin/bash
# SRQ and CQ resize over rings whose user-written index makes the whole ring look queued: the
# copy must not run with interrupts off (the latency of IPIs to the resizing CPU stays under the
# limit) and must move the queued span in order (qemu/tests/py/resize_irqoff.py).
#   resize-irqoff.sh [DRV [LIMIT_MS]]
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
LIMIT=${2:-150}
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
check resize-cases 400 python3 -X faulthandler /roxe/qemu/tests/py/resize_irqoff.py "$RDMA_DEV" "$gid" "$LIMIT"
case_results "" resize-irqoff /out/resize-cases.log
tail -1 /out/resize-cases.log
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
