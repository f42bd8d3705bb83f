#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A process that writes garbage into its own mmap'd rxe rings, and one that behaves.

  hostile_ring.py good DEV GID_INDEX INFO_FILE STOP_FILE
      RC loopback traffic (SEND, RDMA WRITE, RDMA READ of random bytes, each verified) until
      STOP_FILE appears; publishes in INFO_FILE the keys of an MR holding a pattern, which it
      checks is untouched at the end. Exit 0 only if every byte was right.
  hostile_ring.py hostile DEV GID_INDEX INFO_FILE
      The cases below, each on fresh QPs and CQs; one PASS/FAIL line per case.

Every case asserts the outcome a real HCA gives: the error completion's status and wr_id, the
QP in error, what the kernel republished in the index it owns, and that no byte of registered
memory changed that should not have.
"""
import json, os, random, select, struct, sys, time
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import (REMOTE_ALL, QKEY, Env, Report, atomic_wr, connect, doorbell, drain, make_ah,
                     make_cq, make_qp, make_srq, poll, qp_state, rdma_wr, recv_wqe, send_wqe,
                     wcname)

SIZE = 8192
OP_RDMA_WRITE, OP_SEND, OP_RDMA_READ = 0, 2, 4


class Pair:
    """A loopback RC (or UC) pair: A is the hostile requester, B the responder."""

    def __init__(self, env, qp_type=e.IBV_QPT_RC, srq=False, access_b=REMOTE_ALL):
        self.env = env
        self.cq_a, self.cqr_a = make_cq(env, 63)
        self.cq_b, self.cqr_b = make_cq(env, 63)
        self.srq = self.srq_ring = None
        if srq:
            self.srq, self.srq_ring = make_srq(env, env.pd, 15)
        self.qa, self.sq_a, self.rq_a = make_qp(env, env.pd, self.cq_a, qp_type)
        self.qb, self.sq_b, self.rq_b = make_qp(env, env.pd, self.cq_b, qp_type, srq=self.srq)
        connect(env, self.qa, self.qb, access_b=access_b, qp_type=qp_type)
        self.mr_a = MR(env.pd, SIZE, REMOTE_ALL)
        self.mr_b = MR(env.pd, SIZE, REMOTE_ALL)
        self.pattern_b = bytes((i * 7 + 3) & 0xff for i in range(SIZE))
        self.mr_b.write(self.pattern_b, SIZE)

    def b_untouched(self):
        return self.mr_b.read(SIZE, 0) == self.pattern_b

    def post_recv_b(self, wr_id=0xb0, length=SIZE):
        wr = RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(self.mr_b.buf, length, self.mr_b.lkey)])
        (self.srq or self.qb).post_recv(wr)

    def max_send_sge(self):
        return min((self.sq_a.elem - 208) // 16, 32)

    def close(self):
        for o in (self.qa, self.qb, self.srq, self.mr_a, self.mr_b, self.cq_a, self.cq_b):
            if o is not None:
                o.close()


def expect_error(p, wr_id, status, cq=None, flushed_after=0):
    """The first completion of `cq` (A's by default) is (wr_id, status), any later ones are flush
    errors, and A is in the error state. Returns (ok, detail)."""
    cq = cq or p.cq_a
    wcs = poll(cq, 1) + drain(cq)
    if not wcs:
        return False, 'no completion within 20 s'
    first = wcs[0]
    rest = wcs[1:]
    st = qp_state(p.qa)
    detail = (f'wr_id {first.wr_id:#x} {wcname(first.status)}, then {len(rest)} flushed, '
              f'QP state {st}')
    ok = (first.wr_id == wr_id and first.status == status and st == e.IBV_QPS_ERR
          and all(w.status == e.IBV_WC_WR_FLUSH_ERR for w in rest) and len(rest) == flushed_after)
    return ok, detail + ('' if ok else f'; expected {wr_id:#x} {wcname(status)} + {flushed_after} flushed')


def raw_post(p, wqe):
    """Writes a raw send WQE at A's producer index and rings the doorbell."""
    p.sq_a.produce(wqe)
    doorbell(p.env, p.qa)


# ---- the cases ------------------------------------------------------------------------------

def case_sq_producer_beyond(env):
    """Producer index far outside the ring, over slots of 0xff garbage with one legitimate SEND
    in slot 6. The kernel masks the index: it meets slot 0 (unknown opcode: LOC_QP_OP_ERR), the
    QP goes to error, the other 6 slots (5 garbage, then the SEND) flush. (The rxe provider
    does not mask the producer index itself, so the doorbell must not post a WQE.)"""
    p = Pair(env)
    p.sq_a.fill(0xff)
    p.sq_a.write_slot(6, send_wqe(0x77, OP_SEND, sges=[(p.mr_a.buf, 64, p.mr_a.lkey)]))
    p.sq_a.prod = 0x7fffffe7  # masked: 7
    doorbell(env, p.qa)
    ok, detail = expect_error(p, 0xffffffffffffffff, e.IBV_WC_LOC_QP_OP_ERR, flushed_after=6)
    cons = p.sq_a.cons
    ok = ok and cons == 7 and p.b_untouched() and not drain(p.cq_b)
    p.sq_a.prod = 7
    p.close()
    return ok, f'{detail}, kernel consumer index {cons}'


def traffic_ok(p, n=64):
    """A SEND of n random bytes from A to B arrives intact."""
    data = os.urandom(n)
    p.mr_a.write(data, n)
    p.post_recv_b(0xb1)
    p.qa.post_send(SendWR(wr_id=0xa1, opcode=e.IBV_WR_SEND, num_sge=1,
                          sg=[SGE(p.mr_a.buf, n, p.mr_a.lkey)]))
    a = poll(p.cq_a, 1)
    b = poll(p.cq_b, 1)
    ok = (len(a) == 1 and a[0].status == e.IBV_WC_SUCCESS and len(b) == 1
          and b[0].status == e.IBV_WC_SUCCESS and b[0].byte_len == n and p.mr_b.read(n, 0) == data)
    return ok, f'A {[wcname(w.status) for w in a]} B {[wcname(w.status) for w in b]}'


def case_sq_consumer_corrupt(env):
    """The SQ's consumer index belongs to the kernel: garbage written there is ignored, the SEND
    goes through, and the kernel republishes its own index."""
    p = Pair(env)
    p.sq_a.cons = 0xabc00005
    ok, detail = traffic_ok(p)
    cons = p.sq_a.cons
    ok = ok and cons == 1
    p.close()
    return ok, f'{detail}, consumer index after {cons:#x}'


def case_rq_consumer_corrupt(env):
    p = Pair(env)
    p.rq_b.cons = 0x5a5a0009
    ok, detail = traffic_ok(p)
    cons = p.rq_b.cons
    ok = ok and cons == 1
    p.close()
    return ok, f'{detail}, RQ consumer index after {cons:#x}'


def case_bad_opcode(env):
    p = Pair(env)
    raw_post(p, send_wqe(0x1001, 0x1234, sges=[(p.mr_a.buf, 16, p.mr_a.lkey)]))
    ok, detail = expect_error(p, 0x1001, e.IBV_WC_LOC_QP_OP_ERR)
    ok = ok and p.b_untouched()
    p.close()
    return ok, detail


def case_read_on_uc(env):
    """RDMA READ is not a UC operation (IBA table 78)."""
    p = Pair(env, qp_type=e.IBV_QPT_UC)
    raw_post(p, send_wqe(0x1002, OP_RDMA_READ, sges=[(p.mr_a.buf, 16, p.mr_a.lkey)],
                         wr=rdma_wr(p.mr_b.buf, p.mr_b.rkey)))
    ok, detail = expect_error(p, 0x1002, e.IBV_WC_LOC_QP_OP_ERR)
    p.close()
    return ok, detail


def case_write_on_ud(env):
    """UD QPs only SEND: an RDMA WRITE in a UD SQ fails, the datagram QP goes to error."""
    cq, _ = make_cq(env, 63)
    qa, sq, _ = make_qp(env, env.pd, cq, e.IBV_QPT_UD)
    qb, _, _ = make_qp(env, env.pd, cq, e.IBV_QPT_UD)
    connect(env, qa, qb, qp_type=e.IBV_QPT_UD)
    mr = MR(env.pd, SIZE, REMOTE_ALL)
    sq.produce(send_wqe(0x1003, OP_RDMA_WRITE, sges=[(mr.buf, 16, mr.lkey)], wr=rdma_wr(mr.buf, mr.rkey)))
    doorbell(env, qa)
    wcs = poll(cq, 1) + drain(cq)
    st = qp_state(qa)
    ok = (len(wcs) == 1 and wcs[0].wr_id == 0x1003 and wcs[0].status == e.IBV_WC_LOC_QP_OP_ERR
          and st == e.IBV_QPS_ERR)
    detail = f'{[(hex(w.wr_id), wcname(w.status)) for w in wcs]}, QP state {st}'
    for o in (qa, qb, mr, cq):
        o.close()
    return ok, detail


def case_ud_bad_ah(env):
    """A UD SEND naming an AH number that does not exist."""
    cq, _ = make_cq(env, 63)
    qa, sq, _ = make_qp(env, env.pd, cq, e.IBV_QPT_UD)
    qb, _, _ = make_qp(env, env.pd, cq, e.IBV_QPT_UD)
    connect(env, qa, qb, qp_type=e.IBV_QPT_UD)
    mr = MR(env.pd, SIZE, REMOTE_ALL)
    ud = struct.pack('=IIHHI', qb.qp_num, QKEY, 0, 0, 0x7fffff01)
    sq.produce(send_wqe(0x1004, OP_SEND, sges=[(mr.buf, 16, mr.lkey)], wr=ud))
    doorbell(env, qa)
    wcs = poll(cq, 1) + drain(cq)
    ok = len(wcs) == 1 and wcs[0].wr_id == 0x1004 and wcs[0].status == e.IBV_WC_LOC_QP_OP_ERR
    detail = f'{[(hex(w.wr_id), wcname(w.status)) for w in wcs]}'
    for o in (qa, qb, mr, cq):
        o.close()
    return ok, detail


def case_ud_ah_other_pd(env):
    """A UD SEND through an AH of another PD (AH numbers are device-wide; rxe's rxe_get_av
    refuses an AH whose PD is not the QP's)."""
    cq, _ = make_cq(env, 63)
    qa, sq, _ = make_qp(env, env.pd, cq, e.IBV_QPT_UD)
    qb, _, _ = make_qp(env, env.pd, cq, e.IBV_QPT_UD)
    connect(env, qa, qb, qp_type=e.IBV_QPT_UD)
    pd2 = PD(env.ctx)
    ah2 = make_ah(env, pd2)
    mr = MR(env.pd, SIZE, REMOTE_ALL)
    qb.post_recv(RecvWR(wr_id=0xb5, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)]))
    wr = SendWR(wr_id=0x1005, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf + 4096, 16, mr.lkey)])
    wr.set_wr_ud(ah2, qb.qp_num, QKEY)
    qa.post_send(wr)
    wcs = poll(cq, 1) + drain(cq)
    ok = len(wcs) == 1 and wcs[0].wr_id == 0x1005 and wcs[0].status == e.IBV_WC_LOC_QP_OP_ERR
    detail = f'{[(hex(w.wr_id), wcname(w.status)) for w in wcs]}'
    for o in (qa, qb, mr, ah2, pd2, cq):
        o.close()
    return ok, detail


def case_huge_length(env):
    p = Pair(env)
    raw_post(p, send_wqe(0x1005, OP_SEND, sges=[(p.mr_a.buf, 0xfffffff0, p.mr_a.lkey)]))
    ok, detail = expect_error(p, 0x1005, e.IBV_WC_LOC_LEN_ERR)
    p.close()
    return ok, detail


def case_sge_length_overflow(env):
    """Two SGEs whose lengths overflow 32 bits (and a dma.length that lies)."""
    p = Pair(env)
    raw_post(p, send_wqe(0x1006, OP_RDMA_WRITE, sges=[(p.mr_a.buf, 0x80000000, p.mr_a.lkey)] * 2,
                         length=16, wr=rdma_wr(p.mr_b.buf, p.mr_b.rkey)))
    ok, detail = expect_error(p, 0x1006, e.IBV_WC_LOC_LEN_ERR)
    ok = ok and p.b_untouched()
    p.close()
    return ok, detail


def case_num_sge_past_limit(env):
    """num_sge one past the QP's max_send_sge (and past the slot), then 0xffffffff."""
    out = []
    for i, num in enumerate((None, 0xffffffff)):
        p = Pair(env)
        n = p.max_send_sge() + 1 if num is None else num
        raw_post(p, send_wqe(0x1010 + i, OP_SEND, sges=[(p.mr_a.buf, 8, p.mr_a.lkey)], num_sge=n))
        ok, detail = expect_error(p, 0x1010 + i, e.IBV_WC_LOC_QP_OP_ERR)
        out.append((ok, f'num_sge {n:#x}: {detail}'))
        p.close()
    return all(o for o, _ in out), '; '.join(d for _, d in out)


def case_inline_past_wqe(env):
    """Inline data longer than max_inline_data and the slot: 4 KiB, then 0xffffffff."""
    out = []
    for i, n in enumerate((4096, 0xffffffff)):
        p = Pair(env)
        raw_post(p, send_wqe(0x1020 + i, OP_SEND, flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE,
                             inline=b'\xaa' * 32, length=n))
        ok, detail = expect_error(p, 0x1020 + i, e.IBV_WC_LOC_LEN_ERR)
        ok = ok and p.b_untouched()
        out.append((ok, f'inline length {n:#x}: {detail}'))
        p.close()
    return all(o for o, _ in out), '; '.join(d for _, d in out)


def case_lkey_other_pd(env):
    p = Pair(env)
    pd2 = PD(env.ctx)
    mr2 = MR(pd2, SIZE, REMOTE_ALL)
    p.post_recv_b()
    p.qa.post_send(SendWR(wr_id=0x1030, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr2.buf, 64, mr2.lkey)]))
    ok, detail = expect_error(p, 0x1030, e.IBV_WC_LOC_PROT_ERR)
    ok = ok and p.b_untouched() and not drain(p.cq_b)
    mr2.close(); pd2.close(); p.close()
    return ok, detail


def case_lkey_other_process(env, info):
    """The well-behaved process's MR, by its lkey: gathered from (SEND) and scattered into (the
    data of an RDMA READ). Both fail locally; the other process checks its bytes at the end."""
    out = []
    p = Pair(env)
    p.post_recv_b()
    p.qa.post_send(SendWR(wr_id=0x1040, opcode=e.IBV_WR_SEND, num_sge=1,
                          sg=[SGE(info['addr'], 64, info['lkey'])]))
    out.append(expect_error(p, 0x1040, e.IBV_WC_LOC_PROT_ERR))
    p.close()
    p = Pair(env)
    wr = SendWR(wr_id=0x1041, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(info['addr'], 256, info['lkey'])])
    wr.set_wr_rdma(p.mr_b.rkey, p.mr_b.buf)
    p.qa.post_send(wr)
    out.append(expect_error(p, 0x1041, e.IBV_WC_LOC_PROT_ERR))
    p.close()
    return all(o for o, _ in out), '; '.join(d for _, d in out)


def case_lkey_garbage(env):
    """A random lkey, then a valid lkey with an address outside its MR."""
    out = []
    for i, (addr, key) in enumerate(((None, 0xdeadbe00), (-1, None))):
        p = Pair(env)
        a = p.mr_a.buf + SIZE if addr == -1 else p.mr_a.buf
        k = p.mr_a.lkey if key is None else key
        p.post_recv_b()
        p.qa.post_send(SendWR(wr_id=0x1050 + i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(a, 64, k)]))
        out.append(expect_error(p, 0x1050 + i, e.IBV_WC_LOC_PROT_ERR))
        p.close()
    return all(o for o, _ in out), '; '.join(d for _, d in out)


def case_rkey_garbage(env):
    p = Pair(env)
    raw_post(p, send_wqe(0x1060, OP_RDMA_WRITE, sges=[(p.mr_a.buf, 64, p.mr_a.lkey)],
                         wr=rdma_wr(p.mr_b.buf, 0x5a5a5a00)))
    ok, detail = expect_error(p, 0x1060, e.IBV_WC_REM_ACCESS_ERR)
    ok = ok and p.b_untouched()
    p.close()
    return ok, detail


def case_cq_producer_corrupt(env):
    """The CQ's producer index belongs to the kernel: after a completion it holds the kernel's
    own count again, and exactly the real completion is seen."""
    p = Pair(env)
    p.cqr_a.prod = 0xdead0003
    p.post_recv_b()
    p.mr_a.write(b'x' * 64, 64)
    p.qa.post_send(SendWR(wr_id=0x1070, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(p.mr_a.buf, 64, p.mr_a.lkey)]))
    end = time.time() + 20
    while p.cqr_a.prod == 0xdead0003 and time.time() < end:
        time.sleep(0.005)
    prod = p.cqr_a.prod
    wcs = drain(p.cq_a)
    ok = prod == 1 and len(wcs) == 1 and wcs[0].wr_id == 0x1070 and wcs[0].status == e.IBV_WC_SUCCESS
    p.close()
    return ok, f'producer index after {prod:#x}, completions {[(hex(w.wr_id), wcname(w.status)) for w in wcs]}'


def async_fd():
    for fd in os.listdir('/proc/self/fd'):
        try:
            if 'infinibandevent' in os.readlink(f'/proc/self/fd/{fd}'):
                return int(fd)
        except OSError:
            pass
    return None


def wait_async(env, want, timeout=20.0):
    """Reads (and acks) async events until one of type `want`; returns the types seen."""
    fd = async_fd()
    seen = []
    end = time.time() + timeout
    while fd is not None and time.time() < end:
        r, _, _ = select.select([fd], [], [], max(0.0, end - time.time()))
        if not r:
            break
        ev = env.ctx.get_async_event()
        seen.append(ev.event_type)
        ev.ack()
        if ev.event_type == want:
            break
    return seen


def case_cq_consumer_corrupt(env):
    """A CQ consumer index that makes the ring look full: the completion is an overrun
    (IBA 11.4.2.1): the CQ reports IBV_EVENT_CQ_ERR, once, nothing is written over unconsumed
    entries, and the QP whose completion found the CQ full goes to the error state (IBA
    10.10.2.3), so its next WR fails too (flushed, and reported against the same full CQ)."""
    p = Pair(env)
    mask = p.cqr_a.mask
    before = p.cqr_a.read_slot(0)
    p.cqr_a.cons = 0x40000000 | ((p.cqr_a.prod + 1) & mask)
    p.post_recv_b()
    p.qa.post_send(SendWR(wr_id=0x1080, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(p.mr_a.buf, 64, p.mr_a.lkey)]))
    seen = wait_async(env, e.IBV_EVENT_CQ_ERR)
    untouched = p.cqr_a.read_slot(0) == before and p.cqr_a.prod == 0
    drain(p.cq_b)  # the receive side of the lost completion's SEND
    state = qp_state(p.qa)
    # A second completion into the still full CQ: no second CQ error event.
    try:
        p.qa.post_send(SendWR(wr_id=0x1081, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(p.mr_a.buf, 64, p.mr_a.lkey)]))
    except PyverbsRDMAError:
        pass
    again = wait_async(env, e.IBV_EVENT_CQ_ERR, timeout=2.0)
    untouched2 = p.cqr_a.read_slot(0) == before and p.cqr_a.prod == 0
    ok = (seen.count(e.IBV_EVENT_CQ_ERR) == 1 and e.IBV_EVENT_CQ_ERR not in again and untouched
          and untouched2 and state == e.IBV_QPS_ERR)
    p.cqr_a.cons = 0
    p.close()
    return ok, f'async events {seen} then {again}, ring untouched {untouched}/{untouched2}, QP state {state}'


def recv_garbage(env, srq, wqe_fn, recv_status, send_status):
    """A receive WQE written straight into the RQ (or SRQ): a SEND to it fails on both sides."""
    p = Pair(env, srq=srq)
    ring = p.srq_ring if srq else p.rq_b
    ring.produce(wqe_fn(p))
    p.mr_a.write(b'y' * 64, 64)
    p.qa.post_send(SendWR(wr_id=0x10a0, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(p.mr_a.buf, 64, p.mr_a.lkey)]))
    ok_a, d_a = expect_error(p, 0x10a0, send_status)
    wb = poll(p.cq_b, 1) + drain(p.cq_b)
    st_b = qp_state(p.qb)
    ok_b = len(wb) >= 1 and wb[0].wr_id == 0x10b0 and wb[0].status == recv_status and st_b == e.IBV_QPS_ERR
    ok = ok_a and ok_b and p.b_untouched()
    p.close()
    return ok, f'requester: {d_a}; receiver: {[(hex(w.wr_id), wcname(w.status)) for w in wb]}, QP state {st_b}'


def case_rq_num_sge_garbage(env, srq):
    # A malformed receive WQE: LOC_QP_OP_ERR on the receive, Remote Operational Error NAK
    # (IBA class D1 / rxe's RESPST_ERR_MALFORMED_WQE).
    return recv_garbage(env, srq, lambda p: recv_wqe(0x10b0, [(p.mr_b.buf, 64, p.mr_b.lkey)], num_sge=0xffff),
                        e.IBV_WC_LOC_QP_OP_ERR, e.IBV_WC_REM_OP_ERR)


def case_rq_bad_lkey(env, srq):
    # A receive buffer the QP may not write: LOC_PROT_ERR on the receive, Remote Operational
    # Error NAK (an error local to the responder, not an invalid request).
    return recv_garbage(env, srq, lambda p: recv_wqe(0x10b0, [(p.mr_b.buf, 64, 0xdeadbe00)]),
                        e.IBV_WC_LOC_PROT_ERR, e.IBV_WC_REM_OP_ERR)


def case_rq_addr_outside(env, srq):
    return recv_garbage(env, srq, lambda p: recv_wqe(0x10b0, [(p.mr_b.buf + SIZE - 8, 64, p.mr_b.lkey)]),
                        e.IBV_WC_LOC_PROT_ERR, e.IBV_WC_REM_OP_ERR)


def case_after(env):
    """After all of it, this process's fresh QPs still work."""
    p = Pair(env)
    ok, detail = traffic_ok(p, 4000)
    p.close()
    return ok, detail


def hostile(dev, gid_index, info_file):
    env = Env(dev, gid_index)
    info = json.load(open(info_file))
    r = Report('hostile')
    r.run('sq-producer-beyond-ring', lambda: case_sq_producer_beyond(env))
    r.run('sq-consumer-corrupt', lambda: case_sq_consumer_corrupt(env))
    r.run('rq-consumer-corrupt', lambda: case_rq_consumer_corrupt(env))
    r.run('unknown-opcode', lambda: case_bad_opcode(env))
    r.run('read-on-uc', lambda: case_read_on_uc(env))
    r.run('write-on-ud', lambda: case_write_on_ud(env))
    r.run('ud-unknown-ah', lambda: case_ud_bad_ah(env))
    r.run('ud-ah-of-other-pd', lambda: case_ud_ah_other_pd(env))
    r.run('huge-length', lambda: case_huge_length(env))
    r.run('sge-length-overflow', lambda: case_sge_length_overflow(env))
    r.run('num-sge-past-limit', lambda: case_num_sge_past_limit(env))
    r.run('inline-past-wqe', lambda: case_inline_past_wqe(env))
    r.run('lkey-other-pd', lambda: case_lkey_other_pd(env))
    r.run('lkey-other-process', lambda: case_lkey_other_process(env, info))
    r.run('lkey-garbage', lambda: case_lkey_garbage(env))
    r.run('rkey-garbage', lambda: case_rkey_garbage(env))
    r.run('cq-producer-corrupt', lambda: case_cq_producer_corrupt(env))
    r.run('cq-consumer-corrupt-overrun', lambda: case_cq_consumer_corrupt(env))
    for srq in (False, True):
        q = 'srq' if srq else 'rq'
        r.run(f'{q}-wqe-num-sge-garbage', lambda: case_rq_num_sge_garbage(env, srq))
        r.run(f'{q}-wqe-bad-lkey', lambda: case_rq_bad_lkey(env, srq))
        r.run(f'{q}-wqe-addr-outside-mr', lambda: case_rq_addr_outside(env, srq))
    r.run('fresh-qps-still-work', lambda: case_after(env))
    r.finish()


# ---- the well-behaved process ---------------------------------------------------------------

def good(dev, gid_index, info_file, stop_file):
    env = Env(dev, gid_index)
    cq, _ = make_cq(env, 63)
    qa, _, _ = make_qp(env, env.pd, cq)
    qb, _, _ = make_qp(env, env.pd, cq)
    connect(env, qa, qb)
    n = 16384
    src, dst, back = (MR(env.pd, n, REMOTE_ALL) for _ in range(3))
    guarded = MR(env.pd, SIZE, REMOTE_ALL)
    pattern = bytes((i * 13 + 5) & 0xff for i in range(SIZE))
    guarded.write(pattern, SIZE)
    with open(info_file + '.tmp', 'w') as f:
        json.dump({'addr': guarded.buf, 'lkey': guarded.lkey, 'rkey': guarded.rkey}, f)
    os.rename(info_file + '.tmp', info_file)

    def run(wr, want=1):
        qa.post_send(wr)
        wcs = poll(cq, want, timeout=60)
        bad = [w for w in wcs if w.status != e.IBV_WC_SUCCESS]
        if len(wcs) != want or bad:
            late = poll(cq, 4, timeout=5)
            raise SystemExit(f'good: iteration {it}: completions {[(w.wr_id, wcname(w.status)) for w in wcs]}, '
                             f'5 s later {[(w.wr_id, wcname(w.status)) for w in late]}, '
                             f'QP states {qp_state(qa)}/{qp_state(qb)}')

    it = 0
    while not os.path.exists(stop_file) or it < 20:
        size = random.choice((1, 100, 1024, 4000, n))
        data = os.urandom(size)
        src.write(data, size)
        qb.post_recv(RecvWR(wr_id=2, num_sge=1, sg=[SGE(dst.buf, n, dst.lkey)]))
        run(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(src.buf, size, src.lkey)]), 2)
        if dst.read(size, 0) != data:
            raise SystemExit(f'good: SEND of {size} bytes delivered different bytes')
        wr = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, size, src.lkey)])
        wr.set_wr_rdma(dst.rkey, dst.buf + (n - size))
        run(wr)
        wr = SendWR(wr_id=4, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(back.buf, size, back.lkey)])
        wr.set_wr_rdma(dst.rkey, dst.buf + (n - size))
        run(wr)
        if back.read(size, 0) != data:
            raise SystemExit(f'good: WRITE+READ of {size} bytes gave different bytes')
        it += 1
        if it % 50 == 0:
            print(f'good: {it} iterations', flush=True)
    if guarded.read(SIZE, 0) != pattern:
        raise SystemExit('good: the MR the other process probed was changed')
    print(f'good: {it} iterations of SEND, WRITE and READ verified; probed MR intact', flush=True)


if __name__ == '__main__':
    if sys.argv[1] == 'good':
        good(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    else:
        hostile(sys.argv[2], int(sys.argv[3]), sys.argv[4])
