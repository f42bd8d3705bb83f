#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Per-function counts from tools/tbcount's output, per operation of the workload.

  attr.py [--per N] [--top K] DIR [DIR2]

DIR is a guest's result directory of qemu/tests/count.sh (counts.txt from the plugin,
kallsyms.txt from the guest, with the module's symbols). With one DIR: the totals (roxe's
instructions and translation blocks, its blocks entered from another page and its misses of
the plugin's model of QEMU's jump cache, the kernel's, user space's instructions) and roxe's
functions by instructions. With two: the functions whose jump-cache misses, page entries and
block executions differ most between them, kernel and module alike (the same workload on two
builds).
"""
import bisect, collections, os, sys


def load(d):
    syms = []
    with open(os.path.join(d, 'kallsyms.txt')) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[1] in 'tT':
                syms.append((int(p[0], 16), p[2], len(p) > 3 and p[3] == '[roxe]'))
    syms.sort()
    starts = [s[0] for s in syms]
    ins, tbs, ent, jcm = (collections.Counter() for _ in range(4))
    mod = set()
    user = 0
    with open(os.path.join(d, 'counts.txt')) as f:
        for line in f:
            p = line.split()
            if p[0] == 'user':
                user = int(p[1])
                continue
            va, n, ex = int(p[0], 16), int(p[1]), int(p[2])
            i = bisect.bisect_right(starts, va) - 1
            name = syms[i][1] if i >= 0 else '?'
            if i >= 0 and syms[i][2]:
                mod.add(name)
            ins[name] += n * ex
            tbs[name] += ex
            ent[name] += int(p[3]) if len(p) > 3 else 0
            jcm[name] += int(p[5]) if len(p) > 5 else 0
    return ins, tbs, ent, jcm, mod, user


def main():
    args, per, top = sys.argv[1:], 1, 25
    while args and args[0].startswith('--'):
        if args[0] == '--per':
            per = int(args[1])
        elif args[0] == '--top':
            top = int(args[1])
        args = args[2:]
    runs = [load(d) for d in args]
    for d, (ins, tbs, ent, jcm, mod, user) in zip(args, runs):
        r_i = sum(v for k, v in ins.items() if k in mod)
        r_t = sum(v for k, v in tbs.items() if k in mod)
        r_e = sum(v for k, v in ent.items() if k in mod)
        r_j = sum(v for k, v in jcm.items() if k in mod)
        print(f'{d}: per operation, roxe {r_i / per:.0f} instructions in {r_t / per:.0f} blocks '
              f'({r_e / per:.0f} entered from another page, {r_j / per:.1f} jump-cache misses; '
              f'the kernel\'s {sum(jcm.values()) / per:.1f}); '
              f'kernel {sum(ins.values()) / per:.0f} in {sum(tbs.values()) / per:.0f}; '
              f'user {user / per:.0f} instructions')
    if len(runs) == 1:
        ins, tbs, ent, _, mod, _ = runs[0]
        for name, v in sorted(((k, v) for k, v in ins.items() if k in mod), key=lambda kv: -kv[1])[:top]:
            print(f'{v / per:9.0f} instructions {tbs[name] / per:7.0f} blocks '
                  f'{ent[name] / per:6.0f} entered  {name}')
        return
    (_, a, ea, ja, _, _), (_, b, eb, jb, _, _) = runs
    if any(ja.values()):
        print('jump-cache misses (the model in tbcount.c):')
        for k in sorted(set(ja) | set(jb), key=lambda k: -abs(jb[k] - ja[k]))[:top]:
            print(f'{ja[k] / per:9.1f} {jb[k] / per:9.1f} misses  {k}')
    if any(ea.values()):
        print('blocks entered from another page:')
        for k in sorted(set(ea) | set(eb), key=lambda k: -abs(eb[k] - ea[k]))[:top]:
            print(f'{ea[k] / per:9.1f} {eb[k] / per:9.1f} entered  {k}')
        print('blocks executed:')
    for k in sorted(set(a) | set(b), key=lambda k: -abs(b[k] - a[k]))[:top]:
        print(f'{a[k] / per:9.1f} {b[k] / per:9.1f} blocks  {k}')


if __name__ == '__main__':
    main()
