#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Past RLIMIT_MEMLOCK an unprivileged process gets ENOMEM (ib_umem_get), as on rxe; below
it the registration works. Run as an unprivileged user with `ulimit -l 4096`.

  mr_memlock.py DEV
"""
import sys, errno
import pyverbs.device as d
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e
ctx = d.Context(name=sys.argv[1])
pd = PD(ctx)
small = MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE)   # 1 MiB: under the 4 MiB limit
small.close()
try:
    MR(pd, 64 << 20, e.IBV_ACCESS_LOCAL_WRITE)        # 64 MiB: over it
except PyverbsRDMAError as ex:
    print('over-limit registration failed with', ex.error_code, errno.errorcode.get(ex.error_code))
    assert ex.error_code == errno.ENOMEM, ex.error_code
else:
    raise SystemExit('registration past RLIMIT_MEMLOCK succeeded')
