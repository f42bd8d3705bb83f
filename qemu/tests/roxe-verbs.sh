#!/bin/bash
# roxe's verbs control path, driven through pyverbs (stock rdma-core): MR pinning and its
# accounting (1 GiB MR, RLIMIT_MEMLOCK, unpin on deregistration), and the errno each bad verb
# gets. Run with --mem 3G: the 1 GiB MR is really pinned.
. /roxe/qemu/guest/lib.sh
step roxe-load load_driver roxe || finish_tests

# The pinned-page count of a process is its VmPin in /proc/PID/status (mm->pinned_vm, which
# ib_umem_get charges and ib_umem_release uncharges).
cat >/tmp/mr_pin.py <<'PY'
import mmap, sys
import pyverbs.device as d
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e

def vmpin_kb():
    for line in open('/proc/self/status'):
        if line.startswith('VmPin:'):
            return int(line.split()[1])
    raise SystemExit('no VmPin')

ctx = d.Context(name=sys.argv[1])
pd = PD(ctx)
size = 1 << 30
before = vmpin_kb()
mr = MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)
during = vmpin_kb()
print(f'VmPin before={before} kB with-1GiB-MR={during} kB lkey={mr.lkey:#x} rkey={mr.rkey:#x}')
assert during - before == size // 1024, 'a 1 GiB MR must pin exactly 1 GiB'
assert mr.lkey == mr.rkey and mr.lkey >> 8 != 0
mr.close()
after = vmpin_kb()
print(f'VmPin after-dereg={after} kB')
assert after == before, 'deregistration must unpin every page'
PY
check mr-1gib-pinned-and-unpinned 300 python3 /tmp/mr_pin.py "$RDMA_DEV"
cat /out/mr-1gib-pinned-and-unpinned.log 2>/dev/null

# Past RLIMIT_MEMLOCK an unprivileged process gets ENOMEM (ib_umem_get), as on rxe; below it the
# registration works.
cat >/tmp/mr_memlock.py <<'PY'
import sys, errno
import pyverbs.device as d
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e
ctx = d.Context(name=sys.argv[1])
pd = PD(ctx)
small = MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE)   # 1 MiB: under the 4 MiB limit
small.close()
try:
    MR(pd, 64 << 20, e.IBV_ACCESS_LOCAL_WRITE)        # 64 MiB: over it
except PyverbsRDMAError as ex:
    print('over-limit registration failed with', ex.error_code, errno.errorcode.get(ex.error_code))
    assert ex.error_code == errno.ENOMEM, ex.error_code
else:
    raise SystemExit('registration past RLIMIT_MEMLOCK succeeded')
PY
chmod 666 /dev/infiniband/uverbs* 2>/dev/null
check mr-memlock-enomem 120 setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
	--bounding-set=-all sh -c "ulimit -l 4096 && python3 /tmp/mr_memlock.py $RDMA_DEV"

# Bad verbs get the errno a real HCA gives, and the device stays usable.
cat >/tmp/verbs_errors.py <<'PY'
import sys, errno
import pyverbs.device as d
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPInitAttr, QPCap, QPAttr
from pyverbs.srq import SRQ, SrqInitAttr, SrqAttr
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e

def expect(code, f, what):
    try:
        f()
    except PyverbsRDMAError as ex:
        assert ex.error_code == code, f'{what}: {ex.error_code} instead of {code}'
        print(f'{what}: {errno.errorcode[code]} as expected')
        return
    raise SystemExit(f'{what}: succeeded')

ctx = d.Context(name=sys.argv[1])
attr = ctx.query_device()
pd = PD(ctx)
cq = CQ(ctx, 16)
expect(errno.EINVAL, lambda: CQ(ctx, attr.max_cqe + 1), 'CQ above max_cqe')
expect(errno.EINVAL, lambda: MR(pd, 4096, e.IBV_ACCESS_REMOTE_WRITE), 'remote write without local write')
cap = QPCap(max_send_wr=attr.max_qp_wr + 1, max_recv_wr=4)
expect(errno.EINVAL, lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)), 'QP above max_qp_wr')
cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=attr.max_sge + 1)
expect(errno.EINVAL, lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)), 'QP above max_sge')
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4)))
a = QPAttr()
a.qp_state = e.IBV_QPS_RTS
expect(errno.EINVAL, lambda: qp.modify(a, e.IBV_QP_STATE), 'RESET to RTS')
a = QPAttr(port_num=1)
a.qp_state = e.IBV_QPS_INIT
a.pkey_index = 5
expect(errno.EINVAL, lambda: qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS), 'pkey index past the table')
a.pkey_index = 0
qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
qa, _ = qp.query(e.IBV_QP_STATE)
assert qa.qp_state == e.IBV_QPS_INIT, qa.qp_state
print('RESET to INIT accepted; query says INIT')
expect(errno.EINVAL, lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=attr.max_srq_wr + 1, max_sge=1))), 'SRQ above max_srq_wr')
srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=2)))
expect(errno.EINVAL, lambda: srq.modify(SrqAttr(srq_limit=1000), e.IBV_SRQ_LIMIT), 'SRQ limit above its size')
srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
assert srq.query().srq_limit == 4
print('SRQ limit armed at 4')
PY
check verbs-errnos 120 python3 /tmp/verbs_errors.py "$RDMA_DEV"
cat /out/verbs-errnos.log 2>/dev/null
check roxe-unload 60 unload_driver roxe
kmemleak_check
finish_tests
