#!/bin/bash
# On-demand paging MRs under invalidation, in loopback through the device's own GID: RDMA
# WRITEs, READs and a SEND into ODP memory whose pages are dropped (madvise MADV_DONTNEED) or
# unmapped and mapped again between rounds; the process must see exactly the bytes sent
# (qemu/tests/py/odp_invalidate.py); then the same with implicit ODP MRs, plus accesses across
# the driver's 2 MiB children and to an unmapped address. On the debug kernel: no KASAN/lockdep
# report, kmemleak clean. Argument: the driver (roxe, or rxe for comparison).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
check "$DRV-odp-cases" 300 python3 -X faulthandler /roxe/qemu/tests/py/odp_invalidate.py "$RDMA_DEV" "$gid"
case_results "$DRV" odp "/out/$DRV-odp-cases.log"
tail -1 "/out/$DRV-odp-cases.log"
# The same with implicit ODP MRs, and what only they have (rdma_rxe offers no implicit ODP).
if [ "$DRV" = roxe ]; then
	check "$DRV-odp-implicit-cases" 300 python3 -X faulthandler /roxe/qemu/tests/py/odp_invalidate.py "$RDMA_DEV" "$gid" implicit
	case_results "$DRV" odp-implicit "/out/$DRV-odp-implicit-cases.log"
	tail -1 "/out/$DRV-odp-implicit-cases.log"
fi
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
