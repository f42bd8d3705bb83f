#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A loop of cheap create/destroy pairs must not make the kernel interrupt every CPU.

  destroy_ipis.py DEV

A destroy verb waits for an RCU grace period before the object's memory may go; an expedited
one interrupts every CPU that is not idle. With a process spinning in user space on CPU 1,
this process loops on CPU 0 for LOOP_SECONDS over each pair: alloc_mw/dealloc_mw (the cheapest;
its grace period is deferred) and create_cq/destroy_cq (the CQ's notifier is revoked with a
grace period, expedited at most 100 times a second). The function-call interrupts CPU 1 takes
(`CAL` in /proc/interrupts) per second must stay under LIMIT_PER_SECOND above what it takes in
IDLE_SECONDS without the loop. One PASS/FAIL line per pair.

The kernel's own housekeeping stays on CPU 0, as on a machine that isolates CPUs: RCU's
grace-period kthreads and the unbound workqueues. Any pair that frees an RDMA object (even a PD,
which roxe frees without RCU) makes the core queue its uobject for RCU, and the grace-period
kthread woken for it interrupts whichever CPU the scheduler put it on: on the debug kernel that
alone cost the spinning CPU 0 to 190 interrupts a second, from one 5 s round to the next. The
alloc/dealloc PD pair is the control: it shows what the core costs without roxe's grace periods.
"""
import os, signal, sys, time
import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.mr import MW
from pyverbs.pd import PD

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import Report

LOOP_SECONDS, IDLE_SECONDS = 5.0, 3.0
LIMIT_PER_SECOND = 150


def cal(cpu):
    """Function-call interrupts taken by `cpu` so far."""
    with open('/proc/interrupts') as f:
        header = f.readline().split()
        col = header.index(f'CPU{cpu}')
        for line in f:
            parts = line.split()
            if parts and parts[0] == 'CAL:':
                return int(parts[1 + col])
    raise RuntimeError('no CAL line in /proc/interrupts')


def housekeeping_on_cpu0():
    """Pins RCU's kthreads and the unbound workqueues to CPU 0; returns what undoes it."""
    pinned = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/comm') as f:
                comm = f.read().strip()
            if comm.startswith('rcu_'):
                before = os.sched_getaffinity(int(pid))
                os.sched_setaffinity(int(pid), {0})
                pinned.append((int(pid), before))
        except OSError:
            pass  # gone, or a per-CPU kthread whose affinity is fixed
    wq = '/sys/devices/virtual/workqueue/cpumask'
    with open(wq) as f:
        wq_before = f.read().strip()
    with open(wq, 'w') as f:
        f.write('1')

    def undo():
        with open(wq, 'w') as f:
            f.write(wq_before)
        for pid, before in pinned:
            try:
                os.sched_setaffinity(pid, before)
            except OSError:
                pass
    return undo


def rate(fn, secs):
    """(CPU 1's function-call interrupts per second, iterations per second) while fn loops."""
    c0, t0, n = cal(1), time.monotonic(), 0
    while time.monotonic() - t0 < secs:
        fn()
        n += 1
    el = time.monotonic() - t0
    return (cal(1) - c0) / el, n / el


def main(dev):
    r = Report('destroy-ipis')
    if os.cpu_count() < 2:
        r.skip('all', 'one CPU')
        r.finish()
    spinner = os.fork()
    if spinner == 0:
        os.sched_setaffinity(0, {1})
        while True:
            pass
    undo = housekeeping_on_cpu0()
    try:
        os.sched_setaffinity(0, {0})
        ctx = d.Context(name=dev)
        pd = PD(ctx)
        idle, _ = rate(lambda: time.sleep(0.01), IDLE_SECONDS)

        def pd_pair():
            PD(ctx).close()

        def mw_pair():
            MW(pd, e.IBV_MW_TYPE_1).close()

        def cq_pair():
            CQ(ctx, 1).close()

        for name, fn in (('alloc-dealloc-pd', pd_pair), ('alloc-dealloc-mw', mw_pair), ('create-destroy-cq', cq_pair)):
            ipis, its = rate(fn, LOOP_SECONDS)
            r.check(name, ipis - idle <= LIMIT_PER_SECOND,
                    f'{ipis:.0f} function-call interrupts/s on the spinning CPU ({idle:.0f}/s without the '
                    f'loop; limit +{LIMIT_PER_SECOND}), {its:.0f} pairs/s')
        pd.close()
        ctx.close()
    finally:
        undo()
        os.kill(spinner, signal.SIGKILL)
        os.waitpid(spinner, 0)
    r.finish()


if __name__ == '__main__':
    main(sys.argv[1])
