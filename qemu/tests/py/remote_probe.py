#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Remote probing of a responder, in loopback through the device's own GID.

  remote_probe.py DEV GID_INDEX [DRIVER]

DRIVER (roxe by default, or rxe) only selects the cases skipped on rdma_rxe, each with its reason.

A requester QP (its own PD) aims RDMA WRITE, READ and atomics at a responder QP whose memory
is filled with patterns: wrong and stale R_Keys, addresses before, past and straddling the
end of an MR (and wrapping the address space), MRs without the right, an MR of another PD, a
responder QP without the access enabled, misaligned atomics, memory windows. Per IBA, the
responder NAKs, the requester completes with the status below and both QPs go to error; every
byte of the responder's memory (and the requester's READ buffer) stays as it was. Control
cases in bounds must succeed, so that the probes do not pass by failing everything. One
PASS/FAIL line per case.

Memory windows and protection domains (IBA 10.6.7, as rdma_rxe's rxe_check_bind_mw and
rxe_lookup_mw enforce them): a window of either type is bound only by a QP of its own PD to an
MR of that PD, and is reached only through a responder QP of its PD; an MR with a window bound
to it cannot be deregistered. Key bytes of new MRs and MWs must not follow a fixed step.
"""
import ctypes, errno, os, struct, sys
import pyverbs.enums as e
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
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
            'otherpd-bindable': MR(self.pd_other, SIZE, LW | RW | RR | RA | e.IBV_ACCESS_MW_BIND),
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

    def pair(self, access_b, pd_b=None):
        qa, sq, _ = make_qp(self.env, self.pd_a, self.cq_a)
        qb, _, _ = make_qp(self.env, pd_b or self.resp.pd, self.cq_b)
        connect(self.env, qa, qb, access_b=access_b)
        return qa, sq, qb

    def run(self, post, want, access_b=REMOTE_ALL, expect_write=None, expect_read=None, recv=False,
            pd_b=None):
        """Posts one WR with `post(qa, sq)` and checks: the requester's status is `want`; on an
        error both QPs are in error; the responder's memory holds exactly what it should (after
        `expect_write` = (mr, offset, bytes) for control cases); the local buffer is untouched
        unless `expect_read` = bytes it must start with. The responder QP is in the
        responder's PD, or in `pd_b`."""
        self.local.write(self.local_pattern, SIZE)
        qa, sq, qb = self.pair(access_b, pd_b)
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


REREG_MR = 11  # IB_USER_VERBS_CMD_REREG_MR (legacy write() command)
REREG_PD, REREG_ACCESS = 2, 4  # IB_MR_REREG_PD, IB_MR_REREG_ACCESS


def uverbs_fds():
    """This process's open file descriptors on /dev/infiniband/uverbs*."""
    fds = set()
    for fd in os.listdir('/proc/self/fd'):
        try:
            if os.readlink(f'/proc/self/fd/{fd}').startswith('/dev/infiniband/uverbs'):
                fds.add(int(fd))
        except OSError:
            pass
    return fds


def raw_rereg(fd, handle, flags, access, pd_handle=0):
    """The uverbs REREG_MR command written by hand (rdma-core's rxe provider has no rereg_mr):
    (errno or 0, lkey, rkey)."""
    resp = ctypes.create_string_buffer(8)
    cmd = struct.pack('=IHH QIIQQQII', REREG_MR, 56 // 4, 8 // 4, ctypes.addressof(resp),
                      handle, flags, 0, 0, 0, pd_handle, access)
    try:
        os.write(fd, cmd)
    except OSError as ex:
        return ex.errno, 0, 0
    lkey, rkey = struct.unpack('=II', resp.raw)
    return 0, lkey, rkey


def rereg_bound(dev, gid_index):
    """An MR with a type 1 window bound: rereg of access and of PD refused with EBUSY while it
    is bound, and the window still reads the MR; after a zero-length bind unbinds it, rereg
    works. Runs in a context of its own, so that the MR's uverbs handle can be found by asking
    each handle for a rereg that changes nothing (the other objects are no MRs but the scratch
    MR, whose rights do not matter)."""
    before = uverbs_fds()
    env2 = Env(dev, gid_index)
    fds = uverbs_fds() - before
    if len(fds) != 1:
        return False, f'cannot tell the new context\'s file descriptor: {sorted(fds)}'
    fd = fds.pop()
    acc = LW | RW | RR | e.IBV_ACCESS_MW_BIND
    objs = []
    try:
        x = MR(env2.pd, SIZE, acc)
        objs.append(x)
        handle, answers = None, []
        for h in range(16):
            err, lkey, _ = raw_rereg(fd, h, REREG_ACCESS, acc)
            answers.append(errno.errorcode.get(err, str(err)) if err else f'{lkey:#x}')
            if err == 0 and lkey == x.lkey:
                handle = h
                break
        if handle is None:
            return False, (f'no handle answers a rereg that changes nothing with the MR\'s key '
                           f'{x.lkey:#x}: {answers}')
        cq, _ = make_cq(env2, 16)
        qa, _, _ = make_qp(env2, env2.pd, cq)
        qb, _, _ = make_qp(env2, env2.pd, cq)
        mw = MW(env2.pd, e.IBV_MW_TYPE_1)
        objs = [mw, qa, qb, cq] + objs
        connect(env2, qa, qb)
        qa.bind_mw(mw, MWBind(MWBindInfo(x, x.buf, SIZE, RR), e.IBV_SEND_SIGNALED, wr_id=9))
        wcs = poll(cq, 1) + drain(cq, 0.05)
        if not wcs or wcs[0].status != OK:
            return False, f'bind: {wcname(wcs[0].status) if wcs else "no completion"}'
        e_acc, _, _ = raw_rereg(fd, handle, REREG_ACCESS, LW | e.IBV_ACCESS_MW_BIND)
        e_pd, _, _ = raw_rereg(fd, handle, REREG_PD, 0, pd_handle=0)
        if e_acc != errno.EBUSY or e_pd != errno.EBUSY:
            return False, (f'with a window bound: rereg of access {errno.errorcode.get(e_acc, e_acc)}, '
                           f'of PD {errno.errorcode.get(e_pd, e_pd)}, expected EBUSY for both')
        qa.bind_mw(mw, MWBind(MWBindInfo(x, 0, 0, 0), e.IBV_SEND_SIGNALED, wr_id=10))
        wcs = poll(cq, 1) + drain(cq, 0.05)
        if not wcs or wcs[0].status != OK:
            return False, f'zero-length bind: {wcname(wcs[0].status) if wcs else "no completion"}'
        e_after, _, _ = raw_rereg(fd, handle, REREG_ACCESS, acc)
        if e_after != 0:
            return False, f'window unbound, rereg still fails: {errno.errorcode.get(e_after, e_after)}'
        return True, 'rereg of access and of PD refused (EBUSY) with a window bound; works once unbound'
    finally:
        for o in objs:
            o.close()
        env2.scratch.close()
        env2.pd.close()
        env2.ctx.close()


def main(dev, gid_index, driver):
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

    def bind(mw, pd, mr, addr, length, access, verb=True, hold=None):
        """Binds `mw` from a fresh RC QP of `pd` (in RTS, aimed at a throwaway peer), with
        ibv_bind_mw (`verb`) or with a BIND_MW work request posted by ibv_post_send. Returns the
        bind's completion status (None: no completion) and the window's new R_Key. The QPs are
        closed, or added to the list `hold` for the caller to close after the window (rdma_rxe
        waits, then warns, when a QP that a type 2 window is bound to is destroyed first)."""
        qb_bind, _, _ = make_qp(env, pd, p.cq_b)
        qa_dummy, _, _ = make_qp(env, p.pd_a, p.cq_a)
        try:
            connect(env, qb_bind, qa_dummy)
            info = MWBindInfo(mr, addr, length, access)
            if verb:
                qb_bind.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED, wr_id=9))
                rkey = mw.rkey
            else:
                wr = SendWR(wr_id=9, opcode=e.IBV_WR_BIND_MW)
                wr.set_bind_wr(mw, info)
                qb_bind.post_send(wr)
                rkey = wr.rkey
            wcs = poll(p.cq_b, 1) + drain(p.cq_b, 0.05)
            return (wcs[0].status if wcs else None), rkey
        finally:
            for o in (qb_bind, qa_dummy):
                if hold is None:
                    o.close()
                else:
                    hold.append(o)

    def with_window(access, fn, pd=None, mr_name='bindable'):
        """A type 1 window of `pd` (the responder's by default) over bytes [1024, 2048) of MR
        `mr_name` (of the same PD), bound by a QP of that PD; runs fn(rkey)."""
        pd = pd or resp.pd
        mr = m[mr_name]
        mw = MW(pd, e.IBV_MW_TYPE_1)
        try:
            st, rkey = bind(mw, pd, mr, mr.buf + 1024, 1024, access)
            if st != OK:
                return False, f'bind: {wcname(st)}'
            return fn(rkey)
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

    # Windows and PDs. C10-72: a window is bound only by a QP of its own PD, type 1 as well as
    # type 2; the MR must be of that PD too (rdma_rxe: rxe_check_bind_mw).
    BIND_ERR = e.IBV_WC_MW_BIND_ERR

    def bind_other_pd(mw_type):
        # ibv_bind_mw refuses a window and an MR of different PDs itself (EPERM, before the
        # driver sees it): the window of PD B goes to the driver as a BIND_MW work request,
        # as any process may post one.
        steps = []
        for what, pd, want, verb, mr in (
                ('window of the QP\'s PD (control)', resp.pd, OK, False, bm),
                ('window of another PD, MR of the QP\'s PD', resp.pd_other, BIND_ERR, False, bm),
                ('window and MR of another PD (ibv_bind_mw)', resp.pd_other, BIND_ERR, True,
                 m['otherpd-bindable'])):
            if verb and mw_type == e.IBV_MW_TYPE_2:
                continue  # ibv_bind_mw binds type 1 windows only
            mw, hold = MW(pd, mw_type), []
            try:
                st, _ = bind(mw, resp.pd, mr, mr.buf + 1024, 1024, RW | RR, verb=verb, hold=hold)
            finally:
                mw.close()
                for o in hold:
                    o.close()
            steps.append((what, st == want, f'{what}: {wcname(st)}'
                          + ('' if st == want else f', expected {wcname(want)}')))
        return all(ok for _, ok, _ in steps), '; '.join(d for _, _, d in steps)

    for name, mw_type in (('mw1-bind-other-pd', e.IBV_MW_TYPE_1), ('mw2-bind-other-pd', e.IBV_MW_TYPE_2)):
        if driver == 'rxe':
            # rxe_do_local_ops sets MW_BIND_ERR and moves the QP to error; rxe_completer then
            # finds the QP in error and flushes the whole SQ, that WQE included.
            r.skip(name, 'rdma_rxe refuses the bind but completes it with WR_FLUSH_ERR, not MW_BIND_ERR')
            continue
        r.run(name, lambda: bind_other_pd(mw_type))

    # A window is reached only through a responder QP of its PD (rdma_rxe: rxe_lookup_mw), for
    # type 1 too: a type 1 window of PD B, bound legitimately by a QP of PD B to an MR of PD B,
    # gives nothing to a responder QP of PD A.
    ob, obn = m['otherpd-bindable'], 'otherpd-bindable'
    r.run('mw1-control-read-same-pd', lambda: with_window(RW | RR | RA, lambda k: p.run(
        p.read(k, ob.buf + 1024, 1024), OK, expect_read=pat(obn, 1024, 1024), pd_b=resp.pd_other),
        pd=resp.pd_other, mr_name=obn))
    r.run('mw1-access-other-pd-read', lambda: with_window(RW | RR | RA, lambda k: p.run(
        p.read(k, ob.buf + 1024, 1024), ACC), pd=resp.pd_other, mr_name=obn))
    r.run('mw1-access-other-pd-write', lambda: with_window(RW | RR | RA, lambda k: p.run(
        p.write(k, ob.buf + 1024, 1024), ACC), pd=resp.pd_other, mr_name=obn))
    r.run('mw1-access-other-pd-atomic', lambda: with_window(RW | RR | RA, lambda k: p.run(
        p.atomic(k, ob.buf + 1024), ACC), pd=resp.pd_other, mr_name=obn))

    # IBA 10.6.7.2.6: an MR with a window bound to it cannot be deregistered (rdma_rxe: EINVAL);
    # the window keeps working on the MR's memory; once the window is unbound or deallocated the
    # MR deregisters.
    def try_dereg(mr):
        """None when ibv_dereg_mr succeeded, else its errno."""
        try:
            mr.close()
            return None
        except PyverbsRDMAError as ex:
            return abs(ex.error_code)

    def read_back(qa, rkey, addr, want_bytes):
        """A READ of len(want_bytes) from (rkey, addr) by `qa`: (ok, what happened)."""
        p.local.write(p.local_pattern, SIZE)
        p.read(rkey, addr, len(want_bytes))(qa, None)
        wcs = poll(p.cq_a, 1) + drain(p.cq_a, 0.05)
        st = wcs[0].status if wcs else None
        same = p.local.read(len(want_bytes), 0) == want_bytes
        return st == OK and same, wcname(st) + ('' if st != OK or same else ' with other bytes')

    def dereg_bound(mw_type):
        x = MR(resp.pd, SIZE, LW | RW | RR | RA | e.IBV_ACCESS_MW_BIND)
        x_pattern = bytes((j * 7 + 0x3c) & 0xff for j in range(SIZE))
        x.write(x_pattern, SIZE)
        mw = MW(resp.pd, mw_type)
        qa = qb = None
        try:
            if mw_type == e.IBV_MW_TYPE_1:
                st, rkey = bind(mw, resp.pd, x, x.buf, SIZE, RR)
            else:
                # Type 2 is bound by a work request of the QP that will serve it (type 2B).
                qa, _, qb = p.pair(REMOTE_ALL)
                wr = SendWR(wr_id=9, opcode=e.IBV_WR_BIND_MW)
                wr.set_bind_wr(mw, MWBindInfo(x, x.buf, SIZE, RR))
                qb.post_send(wr)
                rkey = wr.rkey
                wcs = poll(p.cq_b, 1) + drain(p.cq_b, 0.05)
                st = wcs[0].status if wcs else None
            if st != OK:
                return False, f'bind: {wcname(st)}'
            if qa is None:
                qa, _, qb = p.pair(REMOTE_ALL)
            err = try_dereg(x)
            if err is None:
                _, rst = read_back(qa, rkey, x.buf, x_pattern[:64])
                return False, f'ibv_dereg_mr succeeded with a window bound (a READ through the window then: {rst})'
            if err not in (errno.EBUSY, errno.EINVAL):
                return False, f'ibv_dereg_mr: errno {err}, expected EBUSY or EINVAL'
            ok, rst = read_back(qa, rkey, x.buf, x_pattern)
            if not ok:
                return False, f'dereg refused ({errno.errorcode[err]}), then a READ through the window: {rst}'
            if x.read(SIZE, 0) != x_pattern:
                return False, 'the MR\'s bytes changed'
            if mw_type == e.IBV_MW_TYPE_1:
                how = 'unbound by a zero-length bind'
                st, _ = bind(mw, resp.pd, x, 0, 0, 0)
                if st != OK:
                    return False, f'zero-length bind: {wcname(st)}'
            else:
                how = 'deallocated'
                mw.close()
            err2 = try_dereg(x)
            if err2 is not None:
                return False, f'window {how}, ibv_dereg_mr still fails: errno {err2}'
            return True, (f'dereg refused ({errno.errorcode[err]}), READ through the window intact, '
                          f'window {how}, then dereg works')
        finally:
            mw.close()
            for o in (qa, qb):
                if o is not None:
                    o.close()
            try:
                x.close()
            except PyverbsRDMAError:
                pass

    r.run('dereg-mr-with-bound-mw', lambda: dereg_bound(e.IBV_MW_TYPE_1))
    r.run('dereg-mr-with-bound-mw2', lambda: dereg_bound(e.IBV_MW_TYPE_2))

    # A window was bound under the MR's PD and rights: a rereg of either while it is bound
    # would leave the window reaching memory of another PD, or with rights the MR no longer
    # grants. rereg is refused like dereg (EBUSY) until the window is unbound.
    if driver == 'rxe':
        r.skip('rereg-mr-with-bound-mw', 'rdma_rxe rereg_mr does not look at bound windows')
    else:
        r.run('rereg-mr-with-bound-mw', lambda: rereg_bound(dev, gid_index))

    # IBA 10.6.2 leaves the key byte of a new key to the HCA; a byte that follows a fixed step
    # lets a process predict the keys of MRs and windows registered next by others. With
    # independent random key bytes, all consecutive differences are equal with probability
    # 256^-62 for 64 MRs (256^-30 for 32 windows): the chance of a false failure is negligible.
    def key_bytes(kind):
        pd = PD(env.ctx)
        objs = []
        try:
            if kind == 'mr':
                objs = [MR(pd, 4096, LW) for _ in range(64)]
                keys = [o.lkey & 0xff for o in objs]
            else:
                objs = [MW(pd, e.IBV_MW_TYPE_1) for _ in range(32)]
                keys = [o.rkey & 0xff for o in objs]
        finally:
            for o in objs:
                o.close()
            pd.close()
        steps = {(b - a) % 256 for a, b in zip(keys, keys[1:])}
        detail = f'{len(keys)} key bytes, {len(steps)} distinct steps'
        if len(steps) == 1:
            detail += f': every key byte is the previous one + {next(iter(steps)):#x}'
        return len(steps) > 1, detail

    r.run('key-bytes-unpredictable', lambda: key_bytes('mr'))
    r.run('key-bytes-unpredictable-mw', lambda: key_bytes('mw'))
    r.finish()


if __name__ == '__main__':
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else 'roxe')
