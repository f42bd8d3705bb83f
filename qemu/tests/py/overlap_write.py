#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A loopback RDMA WRITE, SEND or READ whose source and target bytes share pages moves each
packet's payload as one piece: the bytes land as memmove() would put them, never a piece that an earlier
piece of the same packet had already overwritten.

  overlap_write.py DEV GID_INDEX

Two RC QPs of DEV in loopback through its own GID, one MR of 64 KiB holding a pattern that
differs at every byte of a packet, and a second MR over the same buffer. Each case restores
the pattern, posts one WRITE from the MR to itself and compares the whole buffer with what the
WRITE must leave:
- one-mr-forward: 16 KiB (within one loopback segment, Pmtu::LOCAL) from offset 0 to offset 100 of
  the same MR. Copied piece by piece, page to page, the second piece (bytes 3996..4096 of the
  source, into the target's second page) would read bytes the first piece had just written.
- two-mrs-forward: the same through the second MR's R_Key (one buffer registered twice: two
  MRs, one set of pages).
- one-mr-backward: 48 KiB (two segments) from offset 5000 to offset 700: every packet reads
  bytes no earlier packet has written, whatever the delivery order.
- disjoint: 16 KiB from offset 0 to offset 32768, bytes in different pages (the page-to-page
  copy itself, control).
- send-forward: a 16 KiB SEND from offset 0 into a receive WQE at offset 100.
- send-two-sges: a 16 KiB SEND from offset 0 into a receive WQE of two SGEs, 4 KiB at offset
  12000 and 12 KiB at offset 32768: each SGE's bytes share no page with the source bytes that
  go into it, but the first SGE lies in the source bytes of the second.
- send-disjoint: a 16 KiB SEND from offset 0 into a receive WQE at offset 32768 (control).
- read-forward, read-two-sges, read-disjoint: the same three with a 16 KiB RDMA READ of offset
  0 (one response) into the READ's own buffers.
One PASS/FAIL line per check.
"""
import os, sys
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import REMOTE_ALL, Env, Report, connect, poll, wcname

SIZE = 65536
# A byte pattern whose period (251, a prime) divides no page or segment size, so that bytes
# read from a wrong offset differ from the right ones.
PATTERN = bytes(i % 251 for i in range(SIZE))


def expect(src, dst, n):
    """The buffer after a WRITE of n bytes from offset src to offset dst, moved whole."""
    want = bytearray(PATTERN)
    want[dst:dst + n] = PATTERN[src:src + n]
    return bytes(want)


def first_difference(got, want):
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f'first difference at byte {i}: {g} instead of {w}'
    return 'lengths differ'


def main():
    env = Env(sys.argv[1], int(sys.argv[2]))
    cq = CQ(env.ctx, 16)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=2, max_recv_sge=2)
    a, b = (QP(env.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)) for _ in range(2))
    connect(env, a, b)
    mr = MR(env.pd, SIZE, REMOTE_ALL)
    alias = MR(env.pd, SIZE, REMOTE_ALL, address=mr.buf)
    rep = Report('overlap')

    def write(name, src, dst, n, rkey):
        mr.write(PATTERN, SIZE)
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf + src, n, mr.lkey)])
        wr.set_wr_rdma(rkey, mr.buf + dst)
        a.post_send(wr)
        wcs = poll(cq, 1, 20)
        if len(wcs) != 1 or wcs[0].status != e.IBV_WC_SUCCESS:
            rep.check(name, False, f'completions {[wcname(w.status) for w in wcs]}')
            return
        got, want = mr.read(SIZE, 0), expect(src, dst, n)
        rep.check(name, got == want, '' if got == want else first_difference(got, want))

    def move(name, sges, op):
        """A SEND or READ of 16 KiB from offset 0 into buffers `sges` ((offset, length)...): a
        receive WQE's, or the READ's own."""
        mr.write(PATTERN, SIZE)
        sg = [SGE(mr.buf + o, n, mr.lkey) for o, n in sges]
        if op == 'send':
            b.post_recv(RecvWR(wr_id=2, num_sge=len(sg), sg=sg))
            a.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 16384, mr.lkey)]))
            want_wcs = 2
        else:
            wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_READ, num_sge=len(sg), sg=sg)
            wr.set_wr_rdma(mr.rkey, mr.buf)
            a.post_send(wr)
            want_wcs = 1
        wcs = poll(cq, want_wcs, 20)
        if len(wcs) != want_wcs or any(w.status != e.IBV_WC_SUCCESS for w in wcs):
            rep.check(name, False, f'completions {[wcname(w.status) for w in wcs]}')
            return
        want, at = bytearray(PATTERN), 0
        for o, n in sges:
            want[o:o + n] = PATTERN[at:at + n]
            at += n
        got = mr.read(SIZE, 0)
        rep.check(name, got == want, '' if got == want else first_difference(got, want))

    write('one-mr-forward', 0, 100, 16384, mr.rkey)
    write('two-mrs-forward', 0, 100, 16384, alias.rkey)
    write('one-mr-backward', 5000, 700, 3 * 16384, mr.rkey)
    write('disjoint', 0, 32768, 16384, mr.rkey)
    for op in ('send', 'read'):
        move(f'{op}-forward', [(100, 16384)], op)
        move(f'{op}-two-sges', [(12000, 4096), (32768, 12288)], op)
        move(f'{op}-disjoint', [(32768, 16384)], op)
    rep.finish()


if __name__ == '__main__':
    main()
