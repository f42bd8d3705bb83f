#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Bad verbs get the errno a real HCA gives, and the device stays usable.

  verbs_errors.py DEV
"""
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
