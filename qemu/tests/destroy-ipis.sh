#!/bin/bash
# A process looping over cheap create/destroy pairs (memory windows, CQs) makes the kernel
# interrupt a busy CPU at most about 100 times a second (qemu/tests/py/destroy_ipis.py).
# Argument: driver.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
check destroy-ipis-cases 300 python3 -X faulthandler /roxe/qemu/tests/py/destroy_ipis.py "$RDMA_DEV"
case_results "" destroy-ipis /out/destroy-ipis-cases.log
tail -1 /out/destroy-ipis-cases.log
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
