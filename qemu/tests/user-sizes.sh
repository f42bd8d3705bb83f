#!/bin/bash
# Sizes a process chooses (ODP ranges, queue depths, SGE counts, inline sizes) past the device's
# limits: an errno, never a kernel warning. Cases: qemu/tests/py/user_sizes.py. Argument: driver.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
check "$DRV-size-cases" 120 python3 -X faulthandler /roxe/qemu/tests/py/user_sizes.py "$RDMA_DEV"
case_results "$DRV" sizes "/out/$DRV-size-cases.log"
check "$DRV-unload" 60 unload_driver "$DRV"
finish_tests
