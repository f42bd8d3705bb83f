#!/bin/bash
# ODP registrations of an unprivileged user (nobody) are bounded per process and per device:
# refused with ENOMEM past the budget, counted in odp_refused, no OOM killer
# (qemu/tests/py/odp_budget.py).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
# As a distribution's udev rules leave it: the verbs device open to every user.
chmod 0666 /dev/infiniband/uverbs*
check odp-budget-cases 300 setpriv --reuid 65534 --regid 65534 --clear-groups \
	python3 -X faulthandler /roxe/qemu/tests/py/odp_budget.py "$RDMA_DEV" "$gid"
case_results "" odp-budget /out/odp-budget-cases.log
tail -1 /out/odp-budget-cases.log
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
