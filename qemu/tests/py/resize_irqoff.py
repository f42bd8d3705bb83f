#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A resize copies no user-sized span of a ring with interrupts off, and copies it right.

  resize_irqoff.py DEV GID_INDEX [LIMIT_MS]

The producer index of an SRQ and the consumer index of a CQ are user memory: a process that
writes them can make the kernel see its whole ring queued. Resizing the SRQ (ibv_modify_srq,
IBV_SRQ_MAX_WR) or the CQ (ibv_resize_cq) then moves the whole ring: for an SRQ of 2^20 slots
of 256 bytes, 256 MiB. A kernel that copies that under an IRQ-safe lock keeps interrupts off on
that CPU for as long as the copy takes.

The detector: a second process, pinned to the other CPU, calls membarrier(GLOBAL_EXPEDITED) in a
loop, which interrupts every CPU running a thread of a process registered for it (the worker,
pinned to its own CPU) and waits until each has taken the interrupt. A CPU with interrupts off
takes it only when it turns them on again, so the slowest call while a resize runs bounds the
longest interrupts-off stretch. It must stay under LIMIT_MS (default 150 ms) in one of up to
three resizes of the same ring (a host that does not run the vCPU for a while delays one round's
IPIs as well; a copy with interrupts off delays every round).

Cases, each also checked for what the new ring holds (the queued span, in order, with its
indices) and for every verb's return:
  - srq: SRQ of 2^20 - 1 WQEs of 13 SGEs (256-byte slots), sampled slots stamped, producer index
    set to the index mask (the whole ring queued), resized to the same depth;
  - cq: CQ of 2^15 - 1 entries, sampled slots stamped, consumer index set just past the
    producer (the ring looks full), resized to the same depth.
"""
import ctypes, os, struct, sys, time
import pyverbs.enums as e
from pyverbs.srq import SrqAttr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import Env, Report, Ring, Shm, make_cq, make_srq, uverbs_maps

SRQ_WR, SRQ_SGE = (1 << 20) - 1, 13
CQ_WR = (1 << 15) - 1
ROUNDS = 3
STAMP_EVERY = 4093
MEMBARRIER = 324                       # x86_64 system call number
CMD_QUERY, CMD_GLOBAL_EXPEDITED, CMD_REGISTER_GLOBAL_EXPEDITED = 0, 1 << 1, 1 << 2
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

# The shared page: u64 cells. PHASE: which resize runs (0: none); per phase, the worst and the
# number of membarrier calls whose start lay in it.
STOP, PHASE, READY = 0, 1, 2
WORST, CALLS = 8, 16


def membarrier(cmd):
    return libc.syscall(MEMBARRIER, cmd, 0, 0)


def measurer(shm, cpu):
    """Child: membarrier calls back to back until STOP; never returns."""
    try:
        os.sched_setaffinity(0, {cpu})
        shm[READY] = 1
        while not shm[STOP]:
            ph = shm[PHASE]
            t0 = time.monotonic_ns()
            if membarrier(CMD_GLOBAL_EXPEDITED) != 0:
                shm[READY] = 2
                break
            dt = (time.monotonic_ns() - t0) // 1000
            if ph == shm[PHASE]:   # a call spanning two phases counts in neither
                shm[WORST + ph] = max(shm[WORST + ph], dt)
                shm[CALLS + ph] += 1
    finally:
        os._exit(0)


def stamp(ring, slot, value):
    ctypes.memmove(ring.slot(slot), struct.pack('=Q', value), 8)


def stamp_of(ring, slot):
    return struct.unpack('=Q', ctypes.string_at(ring.slot(slot), 8))[0]


def find_ring(slots, elem):
    """The mapped ring of that shape (the provider maps a resized ring after unmapping the old
    one, often at the same address, so it is found by its header; each case has one)."""
    for addr, size in uverbs_maps().items():
        if size >= 384 + slots * elem:
            r = Ring(addr, size)
            if r.slots == slots and r.elem == elem:
                return r
    return None


def timed(shm, phase, fn):
    """Runs fn with PHASE set; returns (result, seconds, worst membarrier in ms, calls)."""
    shm[WORST + phase] = 0
    shm[CALLS + phase] = 0
    shm[PHASE] = phase
    t0 = time.monotonic()
    try:
        res = fn()
    finally:
        secs = time.monotonic() - t0
        shm[PHASE] = 0
    return res, secs, shm[WORST + phase] / 1000.0, shm[CALLS + phase]


def rounds(shm, phase, fn, limit_ms):
    """Resizes up to ROUNDS times, stopping at the first round whose worst IPI wait is under the
    limit. A vCPU the host does not run for a while (TCG guests share the host's CPUs with other
    boots) delays a round's IPIs as interrupts-off time would, but not in every round; a copy
    with interrupts off delays every round by its whole length. Returns (passed, detail)."""
    seen = []
    for _ in range(ROUNDS):
        _, secs, worst, calls = timed(shm, phase, fn)
        seen.append(f'{secs:.2f} s, worst IPI wait {worst:.1f} ms over {calls} calls')
        if calls > 0 and worst < limit_ms:
            return True, '; '.join(seen) + f', limit {limit_ms} ms'
    return False, '; '.join(seen) + f', limit {limit_ms} ms in every round'


def case_srq(env, shm, rep, limit_ms):
    srq, ring = make_srq(env, env.pd, SRQ_WR, SRQ_SGE)
    if not rep.check('srq-ring', ring.elem == 256 and ring.slots == 1 << 20, repr(ring)):
        return
    ring.fill(0xA5)
    stamped = list(range(0, ring.slots, STAMP_EVERY))
    for s in stamped:
        stamp(ring, s, 0x5352510000000000 | s)
    ring.prod = ring.mask          # every slot but one queued, consumer at 0
    attr = SrqAttr(max_wr=SRQ_WR, max_sge=SRQ_SGE)
    # A resize moves the queued span to the front of the new ring: consumer 0 stays 0, so each
    # round copies the whole ring again and leaves every stamp where it was.
    ok, detail = rounds(shm, 1, lambda: srq.modify(attr, e.IBV_SRQ_MAX_WR), limit_ms)
    rep.check('srq-resize-interrupts-on', ok, detail)
    new = find_ring(1 << 20, 256)
    if not rep.check('srq-resize-maps-new-ring', new is not None):
        return
    bad = [s for s in stamped if stamp_of(new, s) != (0x5352510000000000 | s)]
    rep.check('srq-resize-copies-in-order', not bad and new.prod == ring.mask and new.cons == 0,
              f'producer {new.prod}, consumer {new.cons}, {len(stamped)} stamps, wrong: {bad[:4]}')


def case_cq(env, shm, rep, limit_ms):
    cq, ring = make_cq(env, CQ_WR)
    if not rep.check('cq-ring', ring.slots == 1 << 15, repr(ring)):
        return
    stamped = list(range(1, ring.slots, STAMP_EVERY))
    for s in stamped:
        stamp(ring, s, 0x4351000000000000 | s)
    ring.cons = (ring.prod + 1) & ring.mask   # the ring looks full: slots 1 .. 2^15 - 1 queued
    ok, detail = rounds(shm, 2, lambda: cq.resize(CQ_WR), limit_ms)
    rep.check('cq-resize-interrupts-on', ok, detail)
    new = find_ring(1 << 15, 64)
    if not rep.check('cq-resize-maps-new-ring', new is not None):
        return
    bad = [s for s in stamped if stamp_of(new, s - 1) != (0x4351000000000000 | s)]
    rep.check('cq-resize-copies-in-order', not bad and new.prod == CQ_WR and new.cons == 0,
              f'producer {new.prod}, consumer {new.cons}, {len(stamped)} stamps, wrong: {bad[:4]}')


def main():
    dev, gid = sys.argv[1], int(sys.argv[2])
    limit_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 150.0
    rep = Report('resize-irqoff')
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        rep.check('two-cpus', False, f'cpus {cpus}')
        rep.finish()
    supported = membarrier(CMD_QUERY)
    if not rep.check('membarrier-global-expedited', supported > 0 and supported & CMD_GLOBAL_EXPEDITED,
                     f'query {supported:#x}'):
        rep.finish()
    shm = Shm(32)
    pid = os.fork()
    if pid == 0:
        measurer(shm, cpus[0])
    os.sched_setaffinity(0, {cpus[1]})
    if membarrier(CMD_REGISTER_GLOBAL_EXPEDITED) != 0:
        rep.check('membarrier-register', False, f'errno {ctypes.get_errno()}')
    for _ in range(100):
        if shm[READY]:
            break
        time.sleep(0.1)
    try:
        env = Env(dev, gid)
        rep.run('srq', lambda: (case_srq(env, shm, rep, limit_ms), (True, ''))[1])
        rep.run('cq', lambda: (case_cq(env, shm, rep, limit_ms), (True, ''))[1])
    finally:
        shm[STOP] = 1
        os.waitpid(pid, 0)
    rep.check('measurer-ran', shm[READY] == 1, f'state {shm[READY]}')
    rep.finish()


if __name__ == '__main__':
    main()
