#!/bin/bash
# Remote probing of a responder, in loopback through the device's own GID: wrong and stale
# R_Keys, addresses outside an MR or a memory window, MRs and QPs without the right, an MR of
# another PD, misaligned atomics, windows bound or used across PDs. Each case must end with the
# requester's IBA status (remote access error, or invalid request where the spec and rdma_rxe
# say so), both QPs in error, and the responder's memory byte for byte untouched; in-bounds
# controls must succeed. Also: an MR with a bound window cannot be deregistered, and key bytes
# do not follow a fixed step. Argument: the driver (roxe, or rxe to check the expected statuses
# against rdma_rxe). Cases: qemu/tests/py/remote_probe.py.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
check "$DRV-probe-cases" 240 python3 -X faulthandler /roxe/qemu/tests/py/remote_probe.py "$RDMA_DEV" "$gid" "$DRV"
case_results "$DRV" probe "/out/$DRV-probe-cases.log"
grep -E '^SKIP probe:' "/out/$DRV-probe-cases.log" # on the console only: results hold PASS/FAIL
tail -1 "/out/$DRV-probe-cases.log"
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
