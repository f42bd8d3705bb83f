#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Remote probing of a responder, in loopback through the device's own GID.

  remote_probe.py DEV GID_INDEX

A requester QP (its own PD) aims RDMA WRITE, READ and atomics at a responder QP whose memory
is filled with patterns: wrong and stale R_Keys, addresses before, past and straddling the
end of an MR (and wrapping the address space), MRs without the right, an MR of another PD, a
responder QP without the access enabled, misaligned atomics, memory windows. Per IBA, the
responder NAKs, the requester completes with the status below and both QPs go to error; every
byte of the responder's memory (and the requester's READ buffer) stays as it was. Control
cases in bounds must succeed, so that the probes do not pass by failing everything. One
PASS/FAIL line per case.
"""
import os, struct, sys
import pyverbs.enums as e
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import (REMOTE_ALL, Env, Report, atomic_wr, connect, doorbell, drain, make_cq,
                     make_qp, poll, qp_state, send_wqe, wcname)

SIZE = 8192
LW, RW, RR, RA = (e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ,
                  e.IBV_ACCESS_REMOTE_ATOMIC)
OP_CMP_SWP, OP_FETCH_ADD = 5, 6
OK = e.IBV_WC_SUCCESS
ACC = e.IBV_WC_REM_ACCESS_ERR
INV = e.IBV_WC_REM_INV_REQ_ERR


class Responder:
    """The probed side: PD, MRs with each combination of rights, all holding patterns."""

    def __init__(self, env):
        self.env = env
        self.pd = env.pd
        self.pd_other = PD(env.ctx)
        self.mrs = {
            'full': MR(self.pd, SIZE, LW | RW | RR | RA),
            'nowrite': MR(self.pd, SIZE, LW | RR | RA),
            'noread': MR(self.pd, SIZE, LW | RW | RA),
            'noatomic': MR(self.pd, SIZE, LW | RW | RR),
            'otherpd': MR(self.pd_other, SIZE, LW | RW | RR | RA),
            'bindable': MR(self.pd, SIZE, LW | RW | RR | RA | e.IBV_ACCESS_MW_BIND),
        }
        self.want = {}
        for i, (name, mr) in enumerate(self.mrs.items()):
            pat = bytes(((j * (2 * i + 3)) + i) & 0xff for j in range(SIZE))
            mr.write(pat, SIZE)
            self.want[name] = bytearray(pat)

    def changed(self):
        """Names of MRs whose bytes differ from what they should hold."""
        return [n for n, mr in self.mrs.items() if mr.read(SIZE, 0) != bytes(self.want[n])]


class Probe:
    def __init__(self, env, resp):
        self.env, self.resp = env, resp
        self.pd_a = PD(env.ctx)
        self.local = MR(self.pd_a, SIZE, LW | RW | RR | RA)
        self.local_pattern = bytes((0xa5 ^ j) & 0xff for j in range(SIZE))
        self.cq_a, _ = make_cq(env, 63)
        self.cq_b, _ = make_cq(env, 63)

    def pair(self, access_b):
        qa, sq, _ = make_qp(self.env, self.pd_a, self.cq_a)
        qb, _, _ = make_qp(self.env, self.resp.pd, self.cq_b)
        connect(self.env, qa, qb, access_b=access_b)
        return qa, sq, qb

    def run(self, post, want, access_b=REMOTE_ALL, expect_write=None, expect_read=None, recv=False):
        """Posts one WR with `post(qa, sq)` and checks: the requester's status is `want`; on an
        error both QPs are in error; the responder's memory holds exactly what it should (after
        `expect_write` = (mr, offset, bytes) for control cases); the local buffer is untouched
        unless `expect_read` = bytes it must start with."""
        self.local.write(self.local_pattern, SIZE)
        qa, sq, qb = self.pair(access_b)
        if recv:  # a receive WQE for WRITE with immediate to consume
            qb.post_recv(RecvWR(wr_id=0x77, num_sge=1, sg=[SGE(self.resp.mrs['full'].buf, 64, self.resp.mrs['full'].lkey)]))
        post(qa, sq)
        wcs = poll(self.cq_a, 1) + drain(self.cq_a, 0.2)
        wb = drain(self.cq_b, 0.3 if recv else 0.05)
        st_a, st_b = qp_state(qa), qp_state(qb)
        if expect_write:
            name, off, data = expect_write
            self.resp.want[name][off:off + len(data)] = data
        changed = self.resp.changed()
        local = self.local.read(SIZE, 0)
        if expect_read is not None:
            local_ok = local.startswith(expect_read)
        else:
            local_ok = local == self.local_pattern
        got = wcs[0].status if wcs else None
        detail = (f'status {wcname(got) if wcs else "none within 20 s"}, QP states {st_a}/{st_b}, '
                  f'memory {"changed: " + ",".join(changed) if changed else "untouched"}'
                  + ('' if local_ok else ', local buffer wrong'))
        ok = (len(wcs) == 1 and got == want and not changed and local_ok
              and (want == OK or (st_a == e.IBV_QPS_ERR and st_b == e.IBV_QPS_ERR)))
        if recv:
            # The consumed receive WQE completes too, in error (it left the ring: no flush).
            ok = ok and len(wb) == 1 and wb[0].wr_id == 0x77 and wb[0].status != OK
            detail += f', receive {[wcname(w.status) for w in wb]}'
        if got != want:
            detail += f'; expected {wcname(want)}'
        for o in (qa, qb):
            o.close()
        if changed:  # resynchronise so one failure does not fail every later case
            for n in changed:
                self.resp.mrs[n].write(bytes(self.resp.want[n]), SIZE)
        return ok, detail

    # WR builders ------------------------------------------------------------------------
    def write(self, rkey, va, n, imm=False):
        def post(qa, sq):
            data = self.local_pattern[:n]
            op = e.IBV_WR_RDMA_WRITE_WITH_IMM if imm else e.IBV_WR_RDMA_WRITE
            wr = SendWR(wr_id=1, opcode=op, num_sge=1, sg=[SGE(self.local.buf, n, self.local.lkey)])
            wr.set_wr_rdma(rkey, va)
            qa.post_send(wr)
        return post

    def read(self, rkey, va, n):
        def post(qa, sq):
            wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(self.local.buf, n, self.local.lkey)])
            wr.set_wr_rdma(rkey, va)
            qa.post_send(wr)
        return post

    def atomic(self, rkey, va, op=OP_FETCH_ADD, compare_add=1, swap=0):
        """Written straight into the SQ: the rxe provider refuses misaligned atomics itself."""
        def post(qa, sq):
            sq.produce(send_wqe(3, op, sges=[(self.local.buf, 8, self.local.lkey)],
                                wr=atomic_wr(va, rkey, compare_add, swap)))
            doorbell(self.env, qa)
        return post


def main(dev, gid_index):
    env = Env(dev, gid_index)
    resp = Responder(env)
    p = Probe(env, resp)
    m = resp.mrs
    full = m['full']
    r = Report('probe')
    b = full.buf
    other_index = full.rkey ^ 0x1000  # another key index (no such MR)
    stale = (full.rkey & ~0xff) | ((full.rkey + 1) & 0xff)  # right index, wrong key byte
    pat = lambda name, off, n: bytes(resp.want[name][off:off + n])

    # Controls: in bounds, with the rights, everything works and exactly those bytes change.
    r.run('control-write-in-bounds', lambda: p.run(p.write(full.rkey, b + 100, 3000), OK,
                                                   expect_write=('full', 100, p.local_pattern[:3000])))
    r.run('control-read-in-bounds', lambda: p.run(p.read(full.rkey, b + SIZE - 2500, 2500), OK,
                                                  expect_read=pat('full', SIZE - 2500, 2500)))
    orig = struct.unpack('=Q', pat('full', 64, 8))[0]
    r.run('control-fetch-add', lambda: p.run(p.atomic(full.rkey, b + 64, compare_add=5), OK,
                                             expect_write=('full', 64, struct.pack('=Q', (orig + 5) & (2**64 - 1))),
                                             expect_read=struct.pack('=Q', orig)))

    for op, what in (('write', RW), ('read', RR)):
        f = p.write if op == 'write' else p.read
        r.run(f'{op}-unknown-rkey', lambda: p.run(f(other_index, b, 64), ACC))
        r.run(f'{op}-stale-key-byte', lambda: p.run(f(stale, b, 64), ACC))
        r.run(f'{op}-before-start', lambda: p.run(f(full.rkey, b - 8, 16), ACC))
        r.run(f'{op}-past-end', lambda: p.run(f(full.rkey, b + SIZE, 8), ACC))
        r.run(f'{op}-straddling-end', lambda: p.run(f(full.rkey, b + SIZE - 4, 8), ACC))
        r.run(f'{op}-multi-packet-straddling-end', lambda: p.run(f(full.rkey, b + SIZE - 2048, 4096), ACC))
        r.run(f'{op}-va-wraps', lambda: p.run(f(full.rkey, 2**64 - 8, 16), ACC))
        no = 'nowrite' if op == 'write' else 'noread'
        r.run(f'{op}-mr-without-remote-{op}', lambda: p.run(f(m[no].rkey, m[no].buf, 64), ACC))
        r.run(f'{op}-mr-of-other-pd', lambda: p.run(f(m['otherpd'].rkey, m['otherpd'].buf, 64), ACC))
        # The responder QP does not enable the operation: an invalid request (IBA 9.7.5.2.3,
        # rxe's RESPST_ERR_UNSUPPORTED_OPCODE).
        r.run(f'{op}-qp-without-remote-{op}', lambda: p.run(f(full.rkey, b, 64), INV, access_b=REMOTE_ALL & ~what))
        # C9-88: a zero-length RDMA WRITE or READ checks neither R_Key nor address.
        r.run(f'{op}-zero-length-garbage-rkey', lambda: p.run(f(0x5a5a5a00, 0xdead0000, 0), OK))
    r.run('write-with-imm-unknown-rkey', lambda: p.run(p.write(other_index, b, 64, imm=True), ACC, recv=True))

    r.run('atomic-unknown-rkey', lambda: p.run(p.atomic(other_index, b), ACC))
    r.run('atomic-stale-key-byte', lambda: p.run(p.atomic(stale, b), ACC))
    r.run('atomic-before-start', lambda: p.run(p.atomic(full.rkey, b - 8), ACC))
    r.run('atomic-past-end', lambda: p.run(p.atomic(full.rkey, b + SIZE), ACC))
    r.run('atomic-mr-without-remote-atomic', lambda: p.run(p.atomic(m['noatomic'].rkey, m['noatomic'].buf), ACC))
    r.run('atomic-mr-of-other-pd', lambda: p.run(p.atomic(m['otherpd'].rkey, m['otherpd'].buf), ACC))
    r.run('atomic-qp-without-remote-atomic', lambda: p.run(p.atomic(full.rkey, b), INV, access_b=REMOTE_ALL & ~RA))
    # IBA 9.4.5: atomic operands are naturally aligned; rxe answers an invalid request.
    r.run('fetch-add-misaligned', lambda: p.run(p.atomic(full.rkey, b + 4), INV))
    r.run('cmp-swap-misaligned', lambda: p.run(p.atomic(full.rkey, b + 12, OP_CMP_SWP, 0, 1), INV))

    # Memory windows (type 1, bound by the responder's QP): only the window's range and rights.
    bm = m['bindable']

    def with_window(access, fn):
        mw = MW(resp.pd, e.IBV_MW_TYPE_1)
        qb_bind, _, _ = make_qp(env, resp.pd, p.cq_b)
        qa_dummy, _, _ = make_qp(env, p.pd_a, p.cq_a)
        connect(env, qb_bind, qa_dummy)
        qb_bind.bind_mw(mw, MWBind(MWBindInfo(bm, bm.buf + 1024, 1024, access), e.IBV_SEND_SIGNALED, wr_id=9))
        wcs = poll(p.cq_b, 1)
        for o in (qb_bind, qa_dummy):
            o.close()
        if len(wcs) != 1 or wcs[0].status != OK:
            return False, f'bind: {[wcname(w.status) for w in wcs]}'
        try:
            return fn(mw.rkey)
        finally:
            mw.close()

    r.run('mw-control-write-in-window', lambda: with_window(RW | RR, lambda k: p.run(
        p.write(k, bm.buf + 1024, 1024), OK, expect_write=('bindable', 1024, p.local_pattern[:1024]))))
    r.run('mw-write-straddling-window-end', lambda: with_window(RW | RR, lambda k: p.run(
        p.write(k, bm.buf + 2048 - 4, 8), ACC)))
    r.run('mw-write-before-window', lambda: with_window(RW | RR, lambda k: p.run(
        p.write(k, bm.buf + 1016, 16), ACC)))
    r.run('mw-read-without-remote-read', lambda: with_window(RW, lambda k: p.run(
        p.read(k, bm.buf + 1024, 64), ACC)))
    r.run('mw-write-without-remote-write', lambda: with_window(RR, lambda k: p.run(
        p.write(k, bm.buf + 1024, 64), ACC)))
    r.finish()


if __name__ == '__main__':
    main(sys.argv[1], int(sys.argv[2]))
