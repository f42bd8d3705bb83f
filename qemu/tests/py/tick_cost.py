#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The device tick's cost does not grow with idle QPs.

  tick_cost.py DEV GID_INDEX N

roxe's tick (every 10 ms, softirq) runs the retransmission, RNR and READ-reply timers of the
QPs that have one armed. Its callback's durations are read from the timer_expire_entry and
timer_expire_exit trace events (the callback is the Rust function `rdma::deferred::tick`),
for TRACE_SECONDS with no QP, then with N idle RC QPs connected in loopback pairs through
the device's own GID (nothing posted), then again once a few of them moved data (their timers
armed and then off). Case tick-idle-qps: the median with N idle QPs is at most RATIO times the
median with none, or the median with none plus SLACK_US. One PASS/FAIL line.
"""
import os, re, statistics, sys, time
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import Env, Report, connect, poll

T = '/sys/kernel/tracing'
TRACE_SECONDS = 3
RATIO, SLACK_US = 2.0, 50.0
EVENTS = ('timer/timer_expire_entry', 'timer/timer_expire_exit')
LINE = re.compile(r'\[(\d+)\].*?\s(\d+\.\d+): timer_expire_(entry|exit): timer=(\S+)(?: function=(\S+))?')


def write(path, value):
    with open(f'{T}/{path}', 'w') as f:
        f.write(value)


def tick_durations(secs):
    """Durations in microseconds of roxe's tick callback over `secs` seconds of tracing."""
    write('trace', '')
    # Enabled once and left enabled (writing 1 again patches nothing), tracing switched with
    # tracing_on alone: every enable or disable patches call_timer_fn's tracepoint with int3
    # (text_poke_bp) while timers fire, and once in CI under TCG the timer softirq died on that
    # int3 ("Oops: int3" at call_timer_fn, debug kernel): the fewer patches, the fewer chances.
    for ev in EVENTS:
        write(f'events/{ev}/enable', '1')
    write('tracing_on', '1')
    time.sleep(secs)
    write('tracing_on', '0')
    with open(f'{T}/trace') as f:
        text = f.read()
    started, durations = {}, []
    for line in text.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        cpu, ts, kind, timer, function = m.groups()
        if kind == 'entry':
            if function and re.search(r'deferred.*tick', function):
                started[(cpu, timer)] = float(ts)
        elif (cpu, timer) in started:
            durations.append((float(ts) - started.pop((cpu, timer))) * 1e6)
    return durations


def main(dev, gid_index, n):
    r = Report('tick-cost')
    env = Env(dev, gid_index)
    alone = tick_durations(TRACE_SECONDS)
    if len(alone) < 10:
        r.check('tick-idle-qps', False, f'{len(alone)} roxe tick callbacks traced in {TRACE_SECONDS} s')
        r.finish()
    cq = CQ(env.ctx, 64)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    qps = []
    t0 = time.monotonic()
    refused = ''
    for _ in range(n // 2):
        try:
            a = QP(env.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
            b = QP(env.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        except PyverbsRDMAError as ex:
            # The device's max_qp (QP0 and QP1 count too) or the guest's memory ends the run.
            refused = f'; creation refused after {len(qps)} QPs ({ex.error_code})'
            break
        connect(env, a, b)
        qps += [a, b]
    setup_s = time.monotonic() - t0
    if len(qps) < n * 0.9:
        r.check('tick-idle-qps', False, f'only {len(qps)} of {n} QPs created{refused}')
        r.finish()
    # A few pairs move data, so that their timers are armed and then go off again.
    mr = MR(env.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    for i in range(0, min(len(qps), 16), 2):
        qps[i + 1].post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
        qps[i].post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)],
                                send_flags=e.IBV_SEND_SIGNALED))
        poll(cq, 2)
    time.sleep(0.5)
    idle = tick_durations(TRACE_SECONDS)
    if len(idle) < 10:
        r.check('tick-idle-qps', False, f'{len(idle)} roxe tick callbacks traced with {len(qps)} QPs')
        r.finish()
    m0, m1 = statistics.median(alone), statistics.median(idle)
    limit = max(RATIO * m0, m0 + SLACK_US)
    r.check('tick-idle-qps', m1 <= limit,
            f'median tick {m0:.1f} us with no QP ({len(alone)} ticks), {m1:.1f} us with {len(qps)} idle QPs '
            f'({len(idle)} ticks, max {max(idle):.1f} us; connected in {setup_s:.0f} s{refused}); limit {limit:.1f} us')
    r.finish()


if __name__ == '__main__':
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
