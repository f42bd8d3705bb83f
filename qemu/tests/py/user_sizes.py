#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Sizes an unprivileged process chooses get an errno past the device's limits, never a kernel
warning (the harness fails the run on any splat in the guest's kernel log).

  user_sizes.py DEV

Cases: an on-demand-paging MR over 1 TiB of unmapped address space (its page table would be
larger than kvmalloc allows); CQ, QP, SRQ depths, SGE counts and inline sizes past the device
attributes. Controls at the limits succeed, so that the cases do not pass by failing everything.
One PASS/FAIL line per case.
"""
import errno, os, sys
import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import Report

TIB = 1 << 40
# Page aligned, inside the 47-bit user address space, and far from anything mapped.
UNMAPPED = 0x2000_0000_0000


def refused(fn):
    """(True, errno) if fn raises an RDMA error, else (False, what it returned)."""
    try:
        obj = fn()
    except PyverbsRDMAError as ex:
        return True, errno.errorcode.get(ex.error_code, ex.error_code)
    except PyverbsError as ex:
        return True, str(ex)
    try:
        obj.close()
    except Exception:
        pass
    return False, 'accepted'


def main():
    dev = sys.argv[1]
    r = Report('sizes')
    ctx = d.Context(name=dev)
    attr = ctx.query_device()
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    lw = e.IBV_ACCESS_LOCAL_WRITE

    def odp(length):
        return lambda: MR(pd, length, lw | e.IBV_ACCESS_ON_DEMAND, address=UNMAPPED)

    r.run('odp-mr-1tib-unmapped', lambda: refused(odp(TIB)))
    r.run('odp-mr-64kib-unmapped-control', lambda: (lambda ok, why: (not ok, why))(*refused(odp(1 << 16))))
    r.run('cq-depth-past-max', lambda: refused(lambda: CQ(ctx, attr.max_cqe + 1)))
    r.run('cq-depth-huge', lambda: refused(lambda: CQ(ctx, 1 << 30)))

    def qp(**cap):
        base = dict(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1, max_inline_data=0)
        base.update(cap)
        return lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(**base)))

    r.run('qp-control', lambda: (lambda ok, why: (not ok, why))(*refused(qp())))
    r.run('qp-send-wr-past-max', lambda: refused(qp(max_send_wr=attr.max_qp_wr + 1)))
    r.run('qp-recv-wr-huge', lambda: refused(qp(max_recv_wr=1 << 30)))
    r.run('qp-send-sge-past-max', lambda: refused(qp(max_send_sge=attr.max_sge + 1)))
    r.run('qp-recv-sge-huge', lambda: refused(qp(max_recv_sge=1 << 20)))
    r.run('qp-inline-huge', lambda: refused(qp(max_inline_data=1 << 20)))

    def srq(wr, sge=1):
        return lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=wr, max_sge=sge)))

    r.run('srq-wr-past-max', lambda: refused(srq(attr.max_srq_wr + 1)))
    r.run('srq-sge-past-max', lambda: refused(srq(4, attr.max_srq_sge + 1)))
    cq.close()
    pd.close()
    r.finish()


if __name__ == '__main__':
    main()
