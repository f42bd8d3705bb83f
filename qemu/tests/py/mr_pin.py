#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A 1 GiB MR pins exactly 1 GiB (the process's VmPin) and its deregistration unpins every
page.

  mr_pin.py DEV
"""
import mmap, sys
import pyverbs.device as d
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e

def vmpin_kb():
    for line in open('/proc/self/status'):
        if line.startswith('VmPin:'):
            return int(line.split()[1])
    raise SystemExit('no VmPin')

ctx = d.Context(name=sys.argv[1])
pd = PD(ctx)
size = 1 << 30
before = vmpin_kb()
mr = MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)
during = vmpin_kb()
print(f'VmPin before={before} kB with-1GiB-MR={during} kB lkey={mr.lkey:#x} rkey={mr.rkey:#x}')
assert during - before == size // 1024, 'a 1 GiB MR must pin exactly 1 GiB'
assert mr.lkey == mr.rkey and mr.lkey >> 8 != 0
mr.close()
after = vmpin_kb()
print(f'VmPin after-dereg={after} kB')
assert after == before, 'deregistration must unpin every page'
