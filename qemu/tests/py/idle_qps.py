# SPDX-License-Identifier: GPL-2.0
"""Idle connected QPs for `make bench`'s scaling check: N RC QPs in loopback pairs through the
device's own GID, brought to RTS and left idle (nothing posted) until stdin closes, so that a
perftest run beside them measures one active QP among many connected ones.
Usage: python3 idle_qps.py DEV GID_INDEX N   (prints "ready N" once the QPs are connected)"""
import sys
sys.path.insert(0, '/roxe/qemu/tests/py')
from ringlib import Env, connect, make_cq, make_qp


def main(dev, gid_index, n):
    env = Env(dev, gid_index)
    cq, _ = make_cq(env, 16)
    qps = []
    for _ in range(n // 2):
        a, _, _ = make_qp(env, env.pd, cq)
        b, _, _ = make_qp(env, env.pd, cq)
        connect(env, a, b)
        qps += [a, b]
    print(f'ready {len(qps)}', flush=True)
    sys.stdin.read()


if __name__ == '__main__':
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
