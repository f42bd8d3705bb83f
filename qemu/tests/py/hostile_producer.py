#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A producer index that never lets the kernel find a ring empty.

  hostile_producer.py DEV GID_INDEX rq|srq [DEADLINE_S]

The rings of the rxe ABI are mapped into the process, and the producer index of the SQ, RQ and
SRQ is user memory. A process that keeps moving it to (consumer - 1) & index_mask, just behind
the consumer index the kernel publishes, makes every ring look full at every read. A loop of
the driver that consumes a ring until it finds it empty (the flush of the SQ and RQ when the QP
enters the error state) must still end: a real HCA's work is bounded, and so must a soft one's
be, or the CPU stalls with the process inside a system call.

Three processes per case:
  - the supervisor (this one, no verbs): times every step of the worker from the outside, so a
    system call that never returns is reported with its name instead of hanging the test;
  - the worker: a loopback RC pair (A, B) through the device's own GID; A has its own RQ (`rq`)
    or is attached to an SRQ (`srq`), with large rings whose slots hold plausible WQEs and
    garbage. It forks the hostile child, then, while the child runs, moves A to the error state,
    rings its send doorbell, polls its CQs, destroys A (and the SRQ) and A's CQs;
  - the hostile child (forked by the worker after the rings are mapped: MAP_SHARED, so it writes
    the very rings the kernel reads), pinned to another CPU than the worker's, at nice -20: in
    a tight loop sets A's SQ and RQ (or SRQ) producer index to (consumer - 1) & index_mask,
    until told to stop or HAMMER_MAX_S have passed.

Every step must return within DEADLINE_S (30 s by default); each duration is printed. A step
that does not return in time is a FAIL; the supervisor then stops the child (which lets an
unbounded loop end) and reports how long the step took after that. One PASS/FAIL line per step
and per case. All output should go to tmpfs while the case runs (hostile-producer.sh does so).
"""
import ctypes, os, select, signal, sys, time, traceback
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.qp import QPAttr
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import (REMOTE_ALL, Env, Report, Shm, connect, doorbell, make_cq, make_qp, make_srq, poll,
                     qp_state, recv_wqe, send_wqe, wcname)

# max_send_wr / max_recv_wr / SRQ max_wr at the device's limit (2^20 - 1): rings of 2^20 slots
# (SQ 256 MiB, RQ/SRQ 64 MiB). The hostile child only wins while the kernel cannot empty the ring
# during one of its pauses (its vCPU descheduled by a busy host, under TCG): the larger the ring,
# the longer such a pause must be.
SLOTS = (1 << 20) - 1
CQE = 4095
SETUP_S = 240           # the worker's set-up (ring fill, sanity SEND, child start)
RECOVER_S = 120         # how long a hung step may take once the child is stopped
HAMMER_MAX_S = 150      # the child's own bound: longer than any deadline, so a hang shows
POLL_S = 1.0
OP_SEND = 2

# The shared page (MAP_SHARED | MAP_ANONYMOUS, inherited by every fork): u64 cells.
STOP, ITERS, MOVES, CHILD_PID, STARTED, PINNED = range(6)


def cpus():
    return sorted(os.sched_getaffinity(0))


# ---- the hostile child ------------------------------------------------------------------------

def hammer(rings, shm, cpu):
    """Never returns: os._exit, so no pyverbs finalizer of the worker's objects runs here (they
    share the worker's uverbs file: destroying them from here would destroy the worker's)."""
    code = 0
    try:
        pinned = 0
        if cpu is not None:
            try:
                os.sched_setaffinity(0, {cpu})
                pinned = 1
            except OSError:
                pass
        try:
            os.nice(-20)
        except OSError:
            pass
        shm[PINNED] = pinned
        cells = [(ctypes.c_uint32.from_address(r.addr + 128), ctypes.c_uint32.from_address(r.addr + 256),
                  r.mask) for r in rings]
        last = [c.value for _, c, _ in cells]
        stop = shm.cells[STOP]
        end = time.monotonic() + HAMMER_MAX_S
        n = moves = 0
        shm[STARTED] = 1
        while True:
            for p, c, m in cells:
                p.value = (c.value - 1) & m
            n += 1
            if not n & 255:
                for k, (_, c, _) in enumerate(cells):
                    v = c.value
                    if v != last[k]:
                        moves += 1
                        last[k] = v
                shm[ITERS] = n
                shm[MOVES] = moves
                if stop.value or time.monotonic() > end:
                    break
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# ---- the worker -------------------------------------------------------------------------------

class Worker:
    def __init__(self, wfd, shm, dev, gid_index, use_srq):
        self.wfd, self.shm = wfd, shm
        self.dev, self.gid_index, self.use_srq = dev, gid_index, use_srq

    def emit(self, *words):
        line = ' '.join(str(w) for w in words).replace('\n', ' ') + '\n'
        os.write(self.wfd, line.encode())

    def step(self, name, fn):
        """Runs fn() as a timed step; fn returns (ok, detail)."""
        t = time.monotonic()
        # CLOCK_MONOTONIC is system-wide: the supervisor times the step from this instant.
        self.emit('begin', name, f'{t:.6f}')
        try:
            ok, detail = fn()
        except Exception as ex:
            ok, detail = False, f'{type(ex).__name__}: {ex}'
        self.emit('end', name, f'{time.monotonic() - t:.3f}', 1 if ok else 0, detail)
        return ok

    def setup(self):
        env = self.env = Env(self.dev, self.gid_index)
        self.cq_as, self.cqr_as = make_cq(env, CQE)   # A's send CQ
        self.cq_ar, self.cqr_ar = make_cq(env, CQE)   # A's receive CQ
        self.cq_b, _ = make_cq(env, CQE)
        self.srq = self.srq_ring = None
        if self.use_srq:
            self.srq, self.srq_ring = make_srq(env, env.pd, SLOTS, sge=1)
        self.qa, self.sq_a, self.rq_a = make_qp(env, env.pd, self.cq_as, send_wr=SLOTS, recv_wr=SLOTS,
                                                send_sge=1, recv_sge=1, srq=self.srq, rcq=self.cq_ar)
        self.qb, _, _ = make_qp(env, env.pd, self.cq_b, send_wr=16, recv_wr=16)
        connect(env, self.qa, self.qb)
        self.mr_a = MR(env.pd, 8192, REMOTE_ALL)
        self.mr_b = MR(env.pd, 8192, REMOTE_ALL)
        self.recv_ring = self.srq_ring if self.use_srq else self.rq_a
        self.rings = [self.sq_a, self.recv_ring]
        self.emit('info', f'rings: SQ {self.sq_a}, {"SRQ" if self.use_srq else "RQ"} {self.recv_ring}')

        # The pair works: B sends to A, whose receive comes from its RQ or the SRQ.
        data = os.urandom(64)
        self.mr_b.write(data, 64)
        (self.srq or self.qa).post_recv(RecvWR(wr_id=0xa0, num_sge=1,
                                               sg=[SGE(self.mr_a.buf, 8192, self.mr_a.lkey)]))
        self.qb.post_send(SendWR(wr_id=0xb0, opcode=e.IBV_WR_SEND, num_sge=1,
                                 sg=[SGE(self.mr_b.buf, 64, self.mr_b.lkey)]))
        b = poll(self.cq_b, 1)
        a = poll(self.cq_ar, 1)
        ok = (len(a) == 1 and a[0].status == e.IBV_WC_SUCCESS and len(b) == 1
              and b[0].status == e.IBV_WC_SUCCESS and self.mr_a.read(64, 0) == data)
        if not ok:
            raise RuntimeError(f'sanity SEND B->A: A {[wcname(w.status) for w in a]} '
                               f'B {[wcname(w.status) for w in b]}')

        # Every slot holds something: 7 of 8 plausible WQEs (signaled SENDs of 64 bytes, receives
        # of 64 bytes into A's MR), the 8th garbage. The kernel must survive either.
        def tile(ring, good):
            period = b''.join(good(i).ljust(ring.elem, b'\0')[:ring.elem] for i in range(7))
            period += b'\xa5' * ring.elem
            ctypes.memmove(ring.slot(0), period, len(period))
            done, total = len(period), ring.slots * ring.elem
            while done < total:  # doubling copies, no ring-sized Python object
                n = min(done, total - done)
                ctypes.memmove(ring.slot(0) + done, ring.slot(0), n)
                done += n
        tile(self.sq_a, lambda i: send_wqe(0x5000 + i, OP_SEND, sges=[(self.mr_a.buf, 64, self.mr_a.lkey)]))
        tile(self.recv_ring, lambda i: recv_wqe(0x6000 + i, sges=[(self.mr_a.buf + 64, 64, self.mr_a.lkey)]))

    def start_child(self):
        all_cpus = cpus()
        child_cpu = all_cpus[-1] if len(all_cpus) > 1 else None
        if len(all_cpus) > 1:
            os.sched_setaffinity(0, {all_cpus[0]})
        pid = os.fork()
        if pid == 0:
            hammer(self.rings, self.shm, child_cpu)
        self.child = pid
        self.shm[CHILD_PID] = pid
        self.emit('child', pid)
        end = time.monotonic() + 30
        while self.shm[ITERS] < 1024 and time.monotonic() < end:
            time.sleep(0.01)
        full = all(((r.prod - r.cons) & r.mask) == r.mask for r in self.rings)
        self.emit('info', f'hostile child {pid} running on CPU {child_cpu} (pinned {self.shm[PINNED]}), '
                          f'worker on CPU {all_cpus[0]}: {self.shm[ITERS]} iterations, rings look full: {full}')
        if self.shm[ITERS] < 1024:
            raise RuntimeError('the hostile child did not start')

    def hostile_phase(self):
        ok = True

        def to_err():
            self.qa.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
            return True, ''
        ok &= self.step('modify-qp-err', to_err)

        def query():
            st = qp_state(self.qa)
            return st == e.IBV_QPS_ERR, f'state {st}'
        ok &= self.step('query-qp', query)

        def ring_doorbell():
            return True, f'provider returned {doorbell(self.env, self.qa)}'
        ok &= self.step('send-doorbell', ring_doorbell)

        def poll_cqs():
            out = []
            for name, cq in (('send', self.cq_as), ('recv', self.cq_ar)):
                n, sts = 0, {}
                end = time.monotonic() + POLL_S
                while time.monotonic() < end:
                    k, wcs = cq.poll(num_entries=64)
                    for w in wcs[:k]:
                        sts[wcname(w.status)] = sts.get(wcname(w.status), 0) + 1
                    n += k
                    if not k:
                        time.sleep(0.002)
                out.append(f'{name} CQ {n} completions {sts}')
            return True, '; '.join(out)
        ok &= self.step('poll-cqs', poll_cqs)

        def close(obj):
            def fn():
                obj.close()
                return True, ''
            return fn
        ok &= self.step('destroy-qp', close(self.qa))
        if self.srq is not None:
            ok &= self.step('destroy-srq', close(self.srq))
        ok &= self.step('destroy-send-cq', close(self.cq_as))
        ok &= self.step('destroy-recv-cq', close(self.cq_ar))
        return ok

    def stop_child(self):
        self.shm[STOP] = 1
        end = time.monotonic() + 30
        while time.monotonic() < end:
            pid, status = os.waitpid(self.child, os.WNOHANG)
            if pid:
                self.emit('info', f'hostile child stopped (status {status:#x}): {self.shm[ITERS]} '
                                  f'iterations, consumer index seen moving {self.shm[MOVES]} times')
                return status == 0
            time.sleep(0.05)
        self.emit('info', 'the hostile child did not stop within 30 s')
        os.kill(self.child, signal.SIGKILL)
        os.waitpid(self.child, 0)
        return False

    def run(self):
        self.setup()
        self.start_child()
        ok = self.hostile_phase()
        ok &= self.stop_child()
        for o in (self.qb, self.mr_a, self.mr_b, self.cq_b, self.env.scratch, self.env.pd, self.env.ctx):
            o.close()
        return ok


def worker_main(wfd, shm, dev, gid_index, use_srq):
    w = Worker(wfd, shm, dev, gid_index, use_srq)
    code = 0
    try:
        if not w.run():
            code = 1
        w.emit('done', code)
    except BaseException as ex:
        w.emit('error', f'{type(ex).__name__}: {ex}')
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# ---- the supervisor ---------------------------------------------------------------------------

def main():
    dev, gid_index, case = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    deadline = float(sys.argv[4]) if len(sys.argv) > 4 else 30.0
    if case not in ('rq', 'srq'):
        raise SystemExit(f'unknown case {case}')
    r = Report(f'producer-{case}')
    shm = Shm()
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    worker = os.fork()
    if worker == 0:
        os.close(rfd)
        worker_main(wfd, shm, dev, gid_index, case == 'srq')
    os.close(wfd)
    # The supervisor must run while the worker is stuck in the kernel on its CPU and the hostile
    # child spins at nice -20 on the other: real-time, on the child's CPU (it mostly sleeps).
    try:
        os.sched_setaffinity(0, {cpus()[-1]})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except OSError as ex:
        print(f'supervisor: no real-time priority ({ex})', flush=True)

    def log(msg):
        print(f'[{time.monotonic() - t0:7.2f}] {msg}', flush=True)

    def stop_child(why):
        shm[STOP] = 1
        pid = shm[CHILD_PID]
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log(f'stopped the hostile child ({why})')

    t0 = time.monotonic()
    buf = b''
    current, begun, overran = None, 0.0, None
    durations = []
    finished = False
    worker_ok = None
    while not finished:
        now = time.monotonic()
        if current is None:
            # Set-up, or between steps (after the last: stopping the child, closing B).
            limit = t0 + SETUP_S if not durations else now + deadline + 40
        else:
            limit = overran + RECOVER_S if overran else begun + deadline
        rl, _, _ = select.select([rfd], [], [], max(0.0, limit - now))
        if not rl:
            if current is not None and not overran:
                overran = time.monotonic()
                log(f'{current}: no return within {deadline:.0f} s: the system call is still running')
                r.check(f'{current}-within-{deadline:.0f}s', False,
                        f'still in the kernel after {time.monotonic() - begun:.1f} s')
                stop_child(f'{current} overran its deadline')
                continue
            log(f'the worker is stuck ({current or "between steps"}); giving up on it')
            r.check('worker-progress', False, f'no progress in {current or "set-up"}')
            stop_child('worker stuck')
            break
        chunk = os.read(rfd, 65536)
        if not chunk:
            log('the worker closed its pipe')
            break
        buf += chunk
        while b'\n' in buf:
            line, buf = buf.split(b'\n', 1)
            words = line.decode(errors='replace').split(' ', 4)
            kind = words[0]
            if kind == 'begin':
                current, begun, overran = words[1], float(words[2]), None
                log(f'{current}: begin' + (f' (sent {time.monotonic() - begun:.1f} s ago)'
                                           if time.monotonic() - begun > 1 else ''))
            elif kind == 'end':
                name, secs, ok = words[1], float(words[2]), words[3] == '1'
                detail = words[4] if len(words) > 4 else ''
                durations.append((name, secs))
                log(f'{name}: returned after {secs:.3f} s{" (" + detail + ")" if detail else ""}')
                if overran:
                    log(f'{name}: it returned {time.monotonic() - overran:.1f} s after the hostile child was stopped')
                else:
                    r.check(f'{name}', ok and secs < deadline, f'{secs:.3f} s' + (f', {detail}' if detail else ''))
                current = None
            elif kind == 'done':
                worker_ok = words[1] == '0'
                finished = True
            elif kind == 'error':
                log('worker error: ' + ' '.join(words[1:]))
                r.check('worker', False, ' '.join(words[1:]))
                finished = True
            else:
                log(' '.join(words))
    if not shm[STOP]:
        stop_child('end of the case')
    # The worker exits by itself; if it is still in the kernel, wait a bounded time for it.
    end = time.monotonic() + 60
    status = None
    while time.monotonic() < end:
        pid, st = os.waitpid(worker, os.WNOHANG)
        if pid:
            status = st
            break
        time.sleep(0.1)
    if status is None:
        log('the worker did not exit within 60 s (stuck in the kernel?)')
        r.check('worker-exit', False, 'still running 60 s after the end')
    else:
        r.check('worker-exit', status == 0 and worker_ok is not False, f'status {status:#x}')
    log('durations: ' + ', '.join(f'{n} {s:.3f} s' for n, s in durations))
    r.finish()


if __name__ == '__main__':
    main()
