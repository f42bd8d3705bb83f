#!/bin/bash
# An implicit ODP address that can never be faulted in (the last 2 MiB of the address space)
# ends a SEND with an error completion, and another QP's deferred flush still runs
# (qemu/tests/py/odp_unfaultable.py).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
check odp-unfaultable-cases 200 python3 -X faulthandler /roxe/qemu/tests/py/odp_unfaultable.py "$RDMA_DEV" "$gid"
case_results "" odp-unfaultable /out/odp-unfaultable-cases.log
tail -1 /out/odp-unfaultable-cases.log
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
