#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""An ODP address that can never be faulted in ends in an error completion, not a loop.

  odp_unfaultable.py DEV GID_INDEX

On an implicit ODP MR (`ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND)`), the last 2 MiB of the
address space can never get the child umem its pages live in: the RDMA core refuses the range
(its end overflows). A requester that waits for a fault there waits forever unless the failure
counts as a failed fault. Cases:
  - valid-send (control): a SEND from a fresh page of the same MR succeeds, its bytes arrive;
  - last-chunk-send: a SEND whose SGE lies at 0xffff_ffff_ffe0_0000 completes within 30 s with
    LOC_PROT_ERR (IBA 10.8.3.1: the local memory cannot be accessed) and its QP is in error;
  - other-qp-flush: meanwhile, another QP of the device with 600 posted receives is moved to
    the error state: all 600 complete, flushed (WR_FLUSH_ERR), each once, within 30 s (the
    deferred flush must run whatever the requester of the first QP does);
  - after: a fresh connected pair still carries a SEND.
"""
import ctypes, mmap as pymmap, os, sys, time
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.qp import QPAttr
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import REMOTE_ALL, Env, Report, connect, make_cq, make_qp, poll, qp_state, wcname

LAST_CHUNK = 0xffff_ffff_ffe0_0000
PAGE = os.sysconf('SC_PAGE_SIZE')
SIZE = 16 * PAGE
ODP = e.IBV_ACCESS_ON_DEMAND
RECVS = 600
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]


def anon():
    p = libc.mmap(None, SIZE, pymmap.PROT_READ | pymmap.PROT_WRITE,
                  pymmap.MAP_PRIVATE | pymmap.MAP_ANONYMOUS, -1, 0)
    if p in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), 'mmap')
    return p


def send(qp, wr_id, addr, n, lkey):
    qp.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(addr, n, lkey)]))


def pair(env, recv_wr=16):
    cq_a, _ = make_cq(env, 1023)
    cq_b, _ = make_cq(env, 1023)
    qa, _, _ = make_qp(env, env.pd, cq_a, recv_wr=recv_wr)
    qb, _, _ = make_qp(env, env.pd, cq_b, recv_wr=recv_wr)
    connect(env, qa, qb)
    return qa, cq_a, qb, cq_b


def main(dev, gid_index):
    env = Env(dev, gid_index)
    r = Report('odp-unfaultable')
    caps = env.ctx.query_device_ex().odp_caps
    if not caps.general_caps & e.IBV_ODP_SUPPORT_IMPLICIT:
        r.check('implicit-odp-offered', False)
        r.finish()
    buf = anon()
    mr = MR(env.pd, SIZE, REMOTE_ALL | ODP, address=buf, implicit=True)
    dst = MR(env.pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE)
    qa, cq_a, qb, cq_b = pair(env)
    qc, cq_c, qd, cq_d = pair(env, recv_wr=1023)

    def valid_send():
        ctypes.memmove(buf + PAGE, b'odp-unfaultable!' * 4, 64)
        qb.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(dst.buf, 64, dst.lkey)]))
        send(qa, 1, buf + PAGE, 64, mr.lkey)
        a, b = poll(cq_a, 1), poll(cq_b, 1)
        ok = (len(a) == 1 and a[0].status == e.IBV_WC_SUCCESS and len(b) == 1
              and b[0].status == e.IBV_WC_SUCCESS and dst.read(64, 0) == b'odp-unfaultable!' * 4)
        return ok, f'send {[wcname(w.status) for w in a]}, recv {[wcname(w.status) for w in b]}'
    r.run('valid-send', valid_send)

    for i in range(RECVS):
        qc.post_recv(RecvWR(wr_id=1000 + i, num_sge=1, sg=[SGE(dst.buf, 64, dst.lkey)]))
    qb.post_recv(RecvWR(wr_id=2, num_sge=1, sg=[SGE(dst.buf, 64, dst.lkey)]))
    t0 = time.monotonic()
    send(qa, 2, LAST_CHUNK, 64, mr.lkey)
    time.sleep(0.5)        # the requester is paused on the fault by now
    attr = QPAttr()
    attr.qp_state = e.IBV_QPS_ERR
    qc.modify(attr, e.IBV_QP_STATE)

    def other_qp_flush():
        seen, deadline = {}, time.monotonic() + 30
        while len(seen) < RECVS and time.monotonic() < deadline:
            for w in poll(cq_c, min(64, RECVS - len(seen)), timeout=1.0):
                seen[w.wr_id] = seen.get(w.wr_id, 0) + 1 if w.status == e.IBV_WC_WR_FLUSH_ERR else 99
        want = set(range(1000, 1000 + RECVS))
        ok = set(seen) == want and all(v == 1 for v in seen.values())
        return ok, f'{len(seen)} of {RECVS} receives flushed within 30 s'
    r.run('other-qp-flush', other_qp_flush)

    def last_chunk_send():
        wcs = poll(cq_a, 1, timeout=max(1.0, 30 - (time.monotonic() - t0)))
        st = qp_state(qa)
        ok = len(wcs) == 1 and wcs[0].wr_id == 2 and wcs[0].status == e.IBV_WC_LOC_PROT_ERR \
            and st == e.IBV_QPS_ERR
        return ok, (f'completion {[(w.wr_id, wcname(w.status)) for w in wcs] or "none within 30 s"},'
                    f' QP state {st}, after {time.monotonic() - t0:.1f} s')
    r.run('last-chunk-send', last_chunk_send)

    def after():
        qe, cq_e, qf, cq_f = pair(env)
        qf.post_recv(RecvWR(wr_id=3, num_sge=1, sg=[SGE(dst.buf, 64, dst.lkey)]))
        send(qe, 3, dst.buf, 64, dst.lkey)
        a, b = poll(cq_e, 1), poll(cq_f, 1)
        ok = all(len(x) == 1 and x[0].status == e.IBV_WC_SUCCESS for x in (a, b))
        return ok, f'send {[wcname(w.status) for w in a]}, recv {[wcname(w.status) for w in b]}'
    r.run('after', after)
    r.finish()


if __name__ == '__main__':
    main(sys.argv[1], int(sys.argv[2]))
