#!/bin/bash
# roxe's verbs control path, driven through pyverbs (stock rdma-core): MR pinning and its
# accounting (1 GiB MR, RLIMIT_MEMLOCK, unpin on deregistration), and the errno each bad verb
# gets. Run with --mem 3G: the 1 GiB MR is really pinned.
. /roxe/qemu/guest/lib.sh
step roxe-load load_driver roxe || finish_tests

# The pinned-page count of a process is its VmPin in /proc/PID/status (mm->pinned_vm, which
# ib_umem_get charges and ib_umem_release uncharges).
check mr-1gib-pinned-and-unpinned 300 python3 /roxe/qemu/tests/py/mr_pin.py "$RDMA_DEV"
cat /out/mr-1gib-pinned-and-unpinned.log 2>/dev/null

# Past RLIMIT_MEMLOCK an unprivileged process gets ENOMEM (ib_umem_get), as on rxe; below it the
# registration works.
chmod 666 /dev/infiniband/uverbs* 2>/dev/null
check mr-memlock-enomem 120 setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
	--bounding-set=-all sh -c "ulimit -l 4096 && python3 /roxe/qemu/tests/py/mr_memlock.py $RDMA_DEV"

# Bad verbs get the errno a real HCA gives, and the device stays usable.
check verbs-errnos 120 python3 /roxe/qemu/tests/py/verbs_errors.py "$RDMA_DEV"
cat /out/verbs-errnos.log 2>/dev/null
check roxe-unload 60 unload_driver roxe
kmemleak_check
finish_tests
