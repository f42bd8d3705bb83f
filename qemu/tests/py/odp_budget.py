#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What a process can make the kernel allocate through on-demand paging is bounded.

  odp_budget.py DEV GID_INDEX        (run as an unprivileged user: odp-budget.sh uses nobody)

An ODP registration pins nothing, so neither RLIMIT_MEMLOCK nor the memory cgroup sees it, but
the RDMA core allocates its tables (24 bytes per page) over the whole range at registration.
roxe bounds the range one process (user context) may register to twice RAM and all processes
of a device together to four times RAM (Documentation/security.md), implicit MRs' children
included, and refuses the rest with ENOMEM before the core allocates. Cases:
  - fill-context-1: 256 MiB ODP MRs over unmapped addresses until refused: the refusal is ENOMEM,
    comes when the next MR would pass twice RAM and not before, and moves `odp_refused`;
  - one-tib: a 1 TiB ODP MR is refused at once (ENOMEM);
  - implicit-child-refused: with the budget full, a SEND from a fresh page of an implicit ODP MR
    completes with LOC_PROT_ERR (its 2 MiB child cannot be charged);
  - fill-device: more user contexts fill theirs until the device's budget refuses: the last
    refusal comes when the device's total would pass four times RAM;
  - tables-small: MemAvailable fell by less than 3 % of RAM over all of it;
  - released: after deregistering the explicit MRs, the implicit MR's SEND works and a 256 MiB
    ODP MR registers again.
"""
import ctypes, errno, mmap as pymmap, os, sys
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.wr import RecvWR, SGE, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ringlib import REMOTE_ALL, Counters, Env, Report, connect, make_cq, make_qp, poll, wcname

CHUNK = 256 << 20
UNMAPPED = 0x2000_0000_0000        # page aligned, far from anything mapped
ODP = e.IBV_ACCESS_ON_DEMAND | e.IBV_ACCESS_LOCAL_WRITE


def meminfo(key):
    with open('/proc/meminfo') as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def try_mr(pd, addr, length, access=ODP):
    """(MR, None) or (None, errno name)."""
    try:
        return MR(pd, length, access, address=addr), None
    except PyverbsRDMAError as ex:
        return None, errno.errorcode.get(abs(ex.error_code), str(ex.error_code))
    except PyverbsError as ex:
        return None, str(ex)


def fill(pd, base, most):
    """256 MiB ODP MRs from `base` on until one is refused: (MRs, errno of the refusal)."""
    mrs = []
    for i in range(most):
        mr, err = try_mr(pd, base + i * CHUNK, CHUNK)
        if mr is None:
            return mrs, err
        mrs.append(mr)
    return mrs, None


def fill_sized(pd, base, size, most):
    """ODP MRs of `size` bytes from `base` on until one is refused (at most `most`)."""
    mrs = []
    for i in range(most):
        mr, _ = try_mr(pd, base + i * size, size)
        if mr is None:
            break
        mrs.append(mr)
    return mrs, None


def main(dev, gid_index):
    r = Report('odp-budget')
    ram = meminfo('MemTotal')
    mine, device = 2 * ram, 4 * ram
    most = 4 * ram // CHUNK + 2
    print(f'uid {os.getuid()}, MemTotal {ram >> 20} MiB: a context may register {mine >> 20} MiB, '
          f'the device {device >> 20} MiB')
    r.check('unprivileged', os.getuid() != 0, f'uid {os.getuid()}')
    counters = Counters(dev)
    refused0 = counters.get('odp_refused')
    avail0 = meminfo('MemAvailable')
    env = Env(dev, gid_index)
    held = []

    mrs1, err = fill(env.pd, UNMAPPED, most)
    held += mrs1
    n = len(mrs1)
    r.check('fill-context-1', err == 'ENOMEM' and n * CHUNK <= mine < (n + 1) * CHUNK
            and (counters.get('odp_refused') or 0) > (refused0 or 0),
            f'{n} MRs of 256 MiB, then {err}; odp_refused {refused0} -> {counters.get("odp_refused")}')
    # The rest of the budget, to under one 2 MiB child: 8 MiB MRs, then 1 MiB ones.
    at, held_bytes = UNMAPPED + (n + 1) * CHUNK, n * CHUNK
    for size in (8 << 20, 1 << 20):
        more, err = fill_sized(env.pd, at, size, CHUNK // size + 1)
        held += more
        held_bytes += len(more) * size
        at += (len(more) + 1) * size

    mr, err = try_mr(env.pd, UNMAPPED + (1 << 44), 1 << 40)
    r.check('one-tib', mr is None and err == 'ENOMEM', f'{err or "accepted"}')

    # An implicit MR costs nothing until touched; its first child cannot be charged now.
    buf = mmap_anon(1 << 20)
    imp = MR(env.pd, 1 << 20, REMOTE_ALL | e.IBV_ACCESS_ON_DEMAND, address=buf, implicit=True)
    dst = MR(env.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)

    def send_once(tag):
        cq_a, _ = make_cq(env, 63)
        cq_b, _ = make_cq(env, 63)
        qa, _, _ = make_qp(env, env.pd, cq_a)
        qb, _, _ = make_qp(env, env.pd, cq_b)
        connect(env, qa, qb)
        ctypes.memmove(buf, tag, len(tag))
        qb.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(dst.buf, 64, dst.lkey)]))
        qa.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(buf, 64, imp.lkey)]))
        return [w.status for w in poll(cq_a, 1, timeout=30)], (qa, qb, cq_a, cq_b)

    st, keep = send_once(b'budget-full'.ljust(64, b'.'))
    r.check('implicit-child-refused', st == [e.IBV_WC_LOC_PROT_ERR], f'{[wcname(s) for s in st]}')

    # More contexts, each with room of its own, until the device's budget refuses one early.
    total, contexts, err, last = held_bytes, [], None, None
    for k in range(2, 8):
        ctx = Env(dev, gid_index)
        more, err = fill(ctx.pd, UNMAPPED + (k << 42), most)
        contexts.append(ctx)
        held += more
        total += len(more) * CHUNK
        last = len(more)
        if (len(more) + 1) * CHUNK <= mine:
            break
    r.check('fill-device', err == 'ENOMEM' and total <= device < total + CHUNK,
            f'{len(contexts) + 1} contexts, the last {last} MRs then {err}; '
            f'{total >> 20} MiB on the device, its budget {device >> 20} MiB')
    drop = avail0 - meminfo('MemAvailable')
    r.check('tables-small', drop < 3 * ram // 100,
            f'MemAvailable fell by {drop >> 20} MiB for {total >> 20} MiB registered')

    for m in held:
        m.close()
    st, _ = send_once(b'budget-free'.ljust(64, b'.'))
    again, err = try_mr(env.pd, UNMAPPED, CHUNK)
    r.check('released', st == [e.IBV_WC_SUCCESS] and again is not None,
            f'SEND {[wcname(s) for s in st]}, 256 MiB ODP MR {err or "registered"}')
    r.finish()


def mmap_anon(size):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    p = libc.mmap(None, size, pymmap.PROT_READ | pymmap.PROT_WRITE,
                  pymmap.MAP_PRIVATE | pymmap.MAP_ANONYMOUS, -1, 0)
    if p in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), 'mmap')
    return p


if __name__ == '__main__':
    main(sys.argv[1], int(sys.argv[2]))
