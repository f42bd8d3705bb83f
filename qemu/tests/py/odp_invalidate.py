#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""ODP MRs under invalidation, in loopback through the device's own GID.

  odp_invalidate.py DEV GID_INDEX [implicit]

A responder ODP MR over an mmap'd buffer of 16 pages takes RDMA WRITEs of random bytes (several
packets, crossing pages); between rounds parts of it are dropped with madvise(MADV_DONTNEED),
or unmapped and mapped again at the same address (MAP_FIXED), so the driver's pages are
invalidated and must be faulted in again: every WRITE must land in the memory the process sees
(the dropped pages read back as zeroes before it), RDMA READs into an ODP buffer of the requester
(also dropped between rounds) must return the responder's bytes, and a SEND must land in an ODP
receive buffer. One PASS/FAIL line per case.

With `implicit`, both ODP MRs are implicit (`ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND)`, addressed
by virtual address) and four cases follow: a WRITE and a READ across the 2 MiB boundary between
two of the driver's children, a source MR that spreads over more 2 MiB chunks than the driver
makes children for (8192 succeed, the next fails), and a WRITE to an address the process has
not mapped, which must complete with a remote access error rather than stall.
"""
import ctypes, mmap as pymmap, os, sys
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import REMOTE_ALL, Env, Report, connect, make_cq, make_qp, poll, wcname

PAGE = os.sysconf('SC_PAGE_SIZE')
NPAGES = 16
SIZE = NPAGES * PAGE
ODP = e.IBV_ACCESS_ON_DEMAND
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_DONTNEED = 4
MADV_NOHUGEPAGE = 15
PROT = pymmap.PROT_READ | pymmap.PROT_WRITE
FLAGS = pymmap.MAP_PRIVATE | pymmap.MAP_ANONYMOUS
MAP_FIXED = 0x10
MAP_NORESERVE = 0x4000


def anon(addr=None):
    flags = FLAGS | (MAP_FIXED if addr else 0)
    p = libc.mmap(addr, SIZE, PROT, flags, -1, 0)
    if p in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), 'mmap')
    return p


def peek(addr, off, n):
    return ctypes.string_at(addr + off, n)


def poke(addr, off, data):
    ctypes.memmove(addr + off, data, len(data))


def main(dev, gid_index, implicit=False):
    env = Env(dev, gid_index)
    r = Report('odp-implicit' if implicit else 'odp')
    caps = env.ctx.query_device_ex().odp_caps
    if not caps.general_caps:
        print('FAIL odp: no ODP capabilities')
        return 1
    if implicit and not caps.general_caps & e.IBV_ODP_SUPPORT_IMPLICIT:
        print('FAIL odp-implicit: IBV_ODP_SUPPORT_IMPLICIT not offered')
        return 1
    cq_a, _ = make_cq(env, 63)
    cq_b, _ = make_cq(env, 63)
    qa, _, _ = make_qp(env, env.pd, cq_a)
    qb, _, _ = make_qp(env, env.pd, cq_b)
    connect(env, qa, qb)
    resp_buf = anon()
    req_buf = anon()
    # An implicit MR spans the whole address space: its address is the buffer's only for the
    # SGEs below, which name the buffer by its virtual address.
    resp_mr = MR(env.pd, SIZE, REMOTE_ALL | ODP, address=resp_buf, implicit=implicit)
    req_mr = MR(env.pd, SIZE, REMOTE_ALL | ODP, address=req_buf, implicit=implicit)
    src = MR(env.pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE)  # pinned source of the WRITEs
    shadow = bytearray(SIZE)  # what the responder's memory must hold

    def one(wr, qp=qa, cq=cq_a):
        qp.post_send(wr)
        wcs = poll(cq, 1)
        if len(wcs) != 1 or wcs[0].status != e.IBV_WC_SUCCESS:
            return False, f'completion {[wcname(w.status) for w in wcs] or "none within 20 s"}'
        return True, ''

    def write(off, n, seed):
        data = os.urandom(n)
        src.write(data, n)
        wr = SendWR(wr_id=seed, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, n, src.lkey)])
        wr.set_wr_rdma(resp_mr.rkey, resp_buf + off)
        ok, why = one(wr)
        if ok:
            shadow[off:off + n] = data
        return ok, why

    def check_all():
        got = peek(resp_buf, 0, SIZE)
        if got != bytes(shadow):
            bad = next(i for i in range(SIZE) if got[i] != shadow[i])
            return False, f'responder memory differs at byte {bad} (page {bad // PAGE})'
        return True, 'memory matches'

    def case(name, steps):
        def run():
            for s in steps:
                ok, why = s()
                if not ok:
                    return False, why
            return check_all()
        r.run(name, run)

    def dontneed(first, n):
        def s():
            libc.madvise(resp_buf + first * PAGE, n * PAGE, MADV_DONTNEED)
            shadow[first * PAGE:(first + n) * PAGE] = bytes(n * PAGE)
            z = peek(resp_buf, first * PAGE, n * PAGE)
            return z == bytes(n * PAGE), 'dropped pages not zero'
        return s

    def remap():
        # Unmap the whole buffer and map fresh zero pages at the same address.
        libc.munmap(resp_buf, SIZE)
        if anon(resp_buf) != resp_buf:
            return False, 'MAP_FIXED moved'
        shadow[:] = bytes(SIZE)
        return True, ''

    case('write-fresh-mr', [lambda: write(100, 5 * PAGE, 1)])
    case('write-after-dontneed-middle', [dontneed(2, 3), lambda: write(PAGE + 7, 6 * PAGE, 2)])
    for i in range(5):
        case(f'write-dontneed-round-{i}', [dontneed(0, NPAGES), lambda i=i: write(i * 333, 3 * PAGE + 5, 10 + i),
                                           dontneed(i, 2), lambda i=i: write(i * PAGE, 2 * PAGE, 20 + i)])
    case('write-after-munmap-remap', [remap, lambda: write(0, SIZE, 3)])
    case('write-whole-after-dontneed-all', [dontneed(0, NPAGES), lambda: write(0, SIZE, 4)])

    def read_back():
        libc.madvise(req_buf, SIZE, MADV_DONTNEED)
        poke(resp_buf, 0, bytes(shadow))  # the responder's pages are present and current
        wr = SendWR(wr_id=5, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(req_buf, SIZE, req_mr.lkey)])
        wr.set_wr_rdma(resp_mr.rkey, resp_buf)
        ok, why = one(wr)
        if not ok:
            return ok, why
        return peek(req_buf, 0, SIZE) == bytes(shadow), 'READ data differs'

    case('read-into-dropped-odp-buffer', [read_back])
    case('read-from-dropped-responder', [dontneed(0, NPAGES), read_back])

    def send_recv():
        data = os.urandom(3 * PAGE)
        src.write(data, len(data))
        libc.madvise(resp_buf, SIZE, MADV_DONTNEED)
        qb.post_recv(RecvWR(wr_id=6, num_sge=1, sg=[SGE(resp_buf + 10, SIZE - 10, resp_mr.lkey)]))
        ok, why = one(SendWR(wr_id=7, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(src.buf, len(data), src.lkey)]))
        if not ok:
            return ok, why
        wb = poll(cq_b, 1)
        if len(wb) != 1 or wb[0].status != e.IBV_WC_SUCCESS:
            return False, f'receive {[wcname(w.status) for w in wb]}'
        shadow[:] = bytes(SIZE)
        shadow[10:10 + len(data)] = data
        return True, ''

    case('send-into-dropped-odp-receive-buffer', [send_recv])
    if implicit:
        implicit_cases(env, r, qa, cq_a, resp_mr, req_mr, src, resp_buf)
    for o in (qa, qb):
        o.close()
    for m in (resp_mr, req_mr, src):
        m.close()
    libc.munmap(resp_buf, SIZE)
    libc.munmap(req_buf, SIZE)
    return r.finish()


def implicit_cases(env, r, qa, cq_a, resp_mr, req_mr, src, resp_buf):
    """Implicit MRs only: children boundaries, their bound, and unmapped addresses (the QP ends
    in error)."""
    big = 6 << 20
    region = libc.mmap(None, big, PROT, FLAGS, -1, 0)
    # The 2 MiB boundary inside the region, with 32 KiB on either side of it.
    boundary = (region + (2 << 20)) & ~((2 << 20) - 1)
    at, n = boundary - 32 * 1024, 64 * 1024

    def post(opcode, lkey_buf, lkey, rkey, raddr, length, wr_id):
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(lkey_buf, length, lkey)])
        wr.set_wr_rdma(rkey, raddr)
        qa.post_send(wr)
        return poll(cq_a, 1)

    def write_across():
        data = os.urandom(n)
        src.write(data, n)
        wcs = post(e.IBV_WR_RDMA_WRITE, src.buf, src.lkey, resp_mr.rkey, at, n, 40)
        if len(wcs) != 1 or wcs[0].status != e.IBV_WC_SUCCESS:
            return False, f'completion {[wcname(w.status) for w in wcs] or "none within 20 s"}'
        ok = peek(at, 0, n) == data
        return ok, 'bytes match' if ok else 'WRITE across two children differs'

    def read_across():
        # READ the bytes below the boundary into the bytes above it, both in implicit MRs.
        want = peek(at, 0, n // 2)
        libc.madvise(boundary & ~(PAGE - 1), 2 << 20, MADV_DONTNEED)
        wcs = post(e.IBV_WR_RDMA_READ, boundary, req_mr.lkey, resp_mr.rkey, at, n // 2, 41)
        if len(wcs) != 1 or wcs[0].status != e.IBV_WC_SUCCESS:
            return False, f'completion {[wcname(w.status) for w in wcs] or "none within 20 s"}'
        ok = peek(boundary, 0, n // 2) == want
        return ok, 'bytes match' if ok else 'READ across two children differs'

    def write_unmapped():
        # A hole: mapped, then unmapped, so nothing else lives there.
        hole = libc.mmap(None, SIZE, PROT, FLAGS, -1, 0)
        libc.munmap(hole, SIZE)
        src.write(b'x' * 64, 64)
        wcs = post(e.IBV_WR_RDMA_WRITE, src.buf, src.lkey, resp_mr.rkey, hole + 100, 64, 42)
        if len(wcs) != 1:
            return False, 'no completion within 20 s (the miss stalled)'
        return wcs[0].status == e.IBV_WC_REM_ACCESS_ERR, f'status {wcname(wcs[0].status)}'

    def children_bounded():
        # A fresh implicit MR as the source of WRITEs whose 32 one-byte SGEs each lie in a 2 MiB
        # chunk of their own (a mapping of 16 GiB that reserves nothing): the driver makes one
        # child per chunk, up to its bound of 8192 children or until the process's ODP budget
        # (twice RAM in pages of range, Documentation/security.md) is spent, whichever comes
        # first; a WRITE from a chunk past it fails locally (LOC_PROT_ERR).
        bound, per_wr, chunk = 8192, 32, 2 << 20
        with open('/proc/meminfo') as f:
            ram = next(int(l.split()[1]) * 1024 for l in f if l.startswith('MemTotal:'))
        # The earlier cases' children (a few chunks) count against the same budget.
        cap, slack = min(bound, 2 * ram // chunk), 16
        span = (bound + 2) * chunk
        base = libc.mmap(None, span, PROT, FLAGS | MAP_NORESERVE, -1, 0)
        # One base page per chunk: with transparent huge pages each written chunk would take
        # 2 MiB, 16 GiB in all (Debian's kernel ran the guest out of memory).
        libc.madvise(base, span, MADV_NOHUGEPAGE)
        first = (base + chunk - 1) & ~(chunk - 1)
        mr = MR(env.pd, 0, e.IBV_ACCESS_LOCAL_WRITE | ODP, implicit=True)
        cq, _ = make_cq(env, 63)
        qc, _, _ = make_qp(env, env.pd, cq, send_sge=per_wr)
        qd, _, _ = make_qp(env, env.pd, cq)
        connect(env, qc, qd)
        try:
            for w in range(bound // per_wr + 1):
                n = per_wr if w < bound // per_wr else 1
                sges = [SGE(first + (w * per_wr + i) * chunk, 1, mr.lkey) for i in range(n)]
                wr = SendWR(wr_id=w, opcode=e.IBV_WR_RDMA_WRITE, num_sge=n, sg=sges)
                wr.set_wr_rdma(resp_mr.rkey, resp_buf)
                qc.post_send(wr)
                wcs = poll(cq, 1)
                if len(wcs) != 1:
                    return False, f'WRITE {w}: no completion within 20 s'
                st = wcs[0].status
                if st != e.IBV_WC_SUCCESS:
                    # Chunks w * per_wr .. w * per_wr + n - 1: one of them was refused.
                    taken = w * per_wr
                    ok = st == e.IBV_WC_LOC_PROT_ERR and cap - slack <= taken + n and taken <= cap
                    return ok, (f'{taken} to {taken + n - 1} chunks taken, then {wcname(st)} '
                                f'(bound: {cap} chunks, {bound} children or twice RAM)')
            return False, f'all {bound // per_wr * per_wr + 1} chunks taken: no bound'
        finally:
            for o in (qc, qd, mr, cq):
                o.close()
            libc.munmap(base, span)

    r.run('implicit-write-across-children', write_across)
    r.run('implicit-read-across-children', read_across)
    r.run('implicit-children-bounded', children_bounded)
    r.run('implicit-write-to-unmapped-address', write_unmapped)
    libc.munmap(region, big)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], int(sys.argv[2]), len(sys.argv) > 3 and sys.argv[3] == 'implicit'))
