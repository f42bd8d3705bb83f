#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Every posted work request gets exactly one completion, also when allocations fail.

  completions.py DEV GID_INDEX SECONDS

Rounds of RC traffic in loopback through the device's own GID (SEND, RDMA WRITE, RDMA READ,
each signalled, with a unique wr_id; the receiver keeps receive WQEs posted), run while the
caller has failslab fail this process's non-sleeping slab allocations (qemu/tests/failslab.sh).
The requester and, for loopback, the responder and completer run in the poster's context on
the doorbell, so their allocations are the ones that fail. A failure may cost a retransmission
or put the QP in the error state, after which its remaining WRs flush; it may never cost a
completion. At the end of each round both QPs are moved to the error state and every WR still
outstanding must flush. Checked: no wr_id completes twice, none is unknown, none is missing.
One PASS/FAIL line per check; the exit status says whether anything failed.
"""
import os, sys, time
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QPAttr
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import REMOTE_ALL, Env, Report, connect, make_cq, make_qp, wcname

SIZE = 4096
DEPTH = 64
SETUP_ATTEMPTS = 20


class Ledger:
    """Outstanding wr_ids of one queue and what completed them."""

    def __init__(self, name):
        self.name, self.out, self.dups, self.unknown, self.statuses = name, set(), [], [], {}

    def post(self, wr_id):
        self.out.add(wr_id)

    def done(self, wc):
        if wc.wr_id in self.out:
            self.out.remove(wc.wr_id)
            self.statuses[wc.status] = self.statuses.get(wc.status, 0) + 1
        elif wc.wr_id in self.seen:
            self.dups.append(wc.wr_id)
        else:
            self.unknown.append(wc.wr_id)
        self.seen.add(wc.wr_id)

    seen = None


def round_objects(env):
    """The CQs, connected QPs and MRs of one round, set up again while an injected
    allocation failure makes a step fail with an errno (each verb that creates an object has
    several non-sleeping allocations, so at failslab's 10% one setup in two or three fails)."""
    for attempt in range(SETUP_ATTEMPTS):
        made = []
        try:
            scq, _ = make_cq(env, 4 * DEPTH)
            made.append(scq)
            rcq, _ = make_cq(env, 4 * DEPTH)
            made.append(rcq)
            a, _, _ = make_qp(env, env.pd, scq, send_wr=DEPTH, recv_wr=DEPTH, send_sge=1, recv_sge=1, rcq=rcq)
            made.insert(0, a)
            b, _, _ = make_qp(env, env.pd, scq, send_wr=DEPTH, recv_wr=DEPTH, send_sge=1, recv_sge=1, rcq=rcq)
            made.insert(0, b)
            connect(env, a, b)
            mr_a = MR(env.pd, SIZE, REMOTE_ALL)
            made.insert(0, mr_a)
            mr_b = MR(env.pd, SIZE, REMOTE_ALL)
            return scq, rcq, a, b, mr_a, mr_b
        except (PyverbsError, PyverbsRDMAError, OSError) as ex:
            print(f'round setup attempt {attempt}: {ex}', flush=True)
            for o in made:
                try:
                    o.close()
                except (PyverbsError, PyverbsRDMAError, OSError) as cex:
                    print(f'round setup attempt {attempt}: close: {cex}', flush=True)
    raise OSError(f'no round set up in {SETUP_ATTEMPTS} attempts')


def one_round(env, rnd, seconds, report, totals):
    scq, rcq, a, b, mr_a, mr_b = round_objects(env)
    send, recv = Ledger('send'), Ledger('recv')
    send.seen, recv.seen = set(), set()
    next_id = (rnd << 32) + 1
    end = time.time() + seconds
    posted = 0

    def reap():
        for cq, ledger in ((scq, send), (rcq, recv)):
            while True:
                n, wcs = cq.poll(num_entries=32)
                if not n:
                    break
                for wc in wcs[:n]:
                    ledger.done(wc)

    while time.time() < end:
        # Keep receive WQEs posted at b for a's SENDs.
        while len(recv.out) < DEPTH // 2:
            try:
                b.post_recv(RecvWR(wr_id=next_id, num_sge=1, sg=[SGE(mr_b.buf, SIZE, mr_b.lkey)]))
            except PyverbsError:
                break
            recv.post(next_id)
            next_id += 1
        # And a's send queue busy with a mix of operations.
        while len(send.out) < DEPTH // 2:
            kind = next_id % 3
            length = 1 + (next_id * 97) % SIZE
            if kind == 0:
                wr = SendWR(wr_id=next_id, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr_a.buf, length, mr_a.lkey)])
            else:
                op = e.IBV_WR_RDMA_WRITE if kind == 1 else e.IBV_WR_RDMA_READ
                wr = SendWR(wr_id=next_id, opcode=op, num_sge=1, sg=[SGE(mr_a.buf, length, mr_a.lkey)])
                wr.set_wr_rdma(mr_b.rkey, mr_b.buf)
            try:
                a.post_send(wr)
            except PyverbsError:
                break  # the QP went to error: it takes no more
            send.post(next_id)
            next_id += 1
            posted += 1
        reap()
        time.sleep(0.001)
    # Both QPs to error: every WR still outstanding flushes (IBA 10.3.1).
    for qp in (a, b):
        qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
    deadline = time.time() + 30
    while (send.out or recv.out) and time.time() < deadline:
        reap()
        time.sleep(0.01)
    reap()
    for ledger in (send, recv):
        for k, v in ledger.statuses.items():
            totals[(ledger.name, wcname(k))] = totals.get((ledger.name, wcname(k)), 0) + v
        ok = not ledger.out and not ledger.dups and not ledger.unknown
        report.check(f'round{rnd}-{ledger.name}-exactly-once', ok,
                     f'missing {sorted(ledger.out)[:8]} ({len(ledger.out)}), twice {ledger.dups[:8]}, '
                     f'unknown {ledger.unknown[:8]}, completed {sum(ledger.statuses.values())}')
    for o in (a, b, mr_a, mr_b, scq, rcq):
        o.close()
    return posted


def main():
    dev, gid_index, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    report = Report('completions')
    env = None
    for attempt in range(SETUP_ATTEMPTS):
        try:
            env = Env(dev, gid_index)
            break
        except (PyverbsError, PyverbsRDMAError, OSError) as ex:
            # Creating the PD and MRs may meet an injected allocation failure too (reg_mr
            # allocates without sleeping under the key pool's lock): an errno, tried again.
            print(f'setup attempt {attempt}: {ex}', flush=True)
    if env is None:
        report.check('setup', False, f'no PD and MRs in {SETUP_ATTEMPTS} attempts')
        report.finish()
        return
    totals = {}
    rounds = max(1, int(seconds // 10))
    posted = 0
    for rnd in range(rounds):
        try:
            posted += one_round(env, rnd, seconds / rounds, report, totals)
        except (PyverbsError, PyverbsRDMAError, OSError) as ex:
            # Every setup attempt of a round met an injected allocation failure (an errno):
            # that is no lost completion; the round is skipped.
            print(f'round {rnd}: setup failed: {ex}', flush=True)
    print(f'posted {posted} send WRs; completions by status: {totals}', flush=True)
    report.check('some-traffic', posted > 0, f'{posted} send WRs')
    report.finish()


if __name__ == '__main__':
    main()
