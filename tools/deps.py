#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The import graph of roxe's Rust modules, and its cycles.

  tools/deps.py [--enforce DIR]... [--show]

For each module directory (proto/, the driver, rust/rdma/) the graph has one node per file and
an edge A -> B when A names B (`use super::B`, `super::B::`, `crate::B::`, `use crate::{B, ..}`,
with `crate::rdma::B` inside rust/rdma/; a subdirectory module such as rust/rdma/ops/ is one
node); comments and `#[cfg(test)]` modules are ignored. Every
cycle (strongly connected component of two or more files) is printed; the exit status is 1 if a
directory given with --enforce has one. --show prints the edges too.
"""
import os, re, sys

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
DIRS = {
    'drivers/infiniband/sw/roxe/proto': ('super', None),
    'drivers/infiniband/sw/roxe': ('crate', None),
    'rust/rdma': ('super', 'crate::rdma'),
    'rust/soft': ('super', 'crate::soft'),
}


def source(path):
    s = open(path).read()
    cut = s.find('#[cfg(test)]')
    if cut >= 0:
        s = s[:cut]
    return re.sub(r'//[^\n]*', '', s)


def names_in_group(group):
    """Top-level names of a `{a, b::c, d::{e, f}}` use group."""
    out, depth, cur = [], 0, ''
    for c in group:
        if c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
        if c == ',' and depth == 0:
            out.append(cur)
            cur = ''
        elif depth == 0 or c not in '{}':
            cur += c if depth == 0 else ''
    out.append(cur)
    return [re.match(r'\s*(\w*)', x).group(1) for x in out if x.strip()]


def graph(d, kind, alias):
    full = os.path.join(TOP, d)
    mods = sorted(f[:-3] for f in os.listdir(full)
                  if f.endswith('.rs') and f not in ('mod.rs', 'roxe_main.rs'))
    # A subdirectory module (other than one checked on its own) is one node: all its files.
    subs = {f: sorted(os.path.join(full, f, x) for x in os.listdir(os.path.join(full, f)) if x.endswith('.rs'))
            for f in os.listdir(full)
            if os.path.isfile(os.path.join(full, f, 'mod.rs')) and os.path.join(d, f) not in DIRS}
    mods = sorted(mods + list(subs))
    prefixes = ['super'] if kind == 'super' else ['crate']
    if alias:
        prefixes.append(alias)
    g = {}
    for m in mods:
        paths = subs.get(m) or [os.path.join(full, m + '.rs')]
        s = '\n'.join(source(p) for p in paths)
        deps = set()
        for p in prefixes:
            pe = re.escape(p)
            deps.update(re.findall(pe + r'::(\w+)\b', s))
            for grp in re.findall(r'\buse\s+' + pe + r'::\{(.*?)\};', s, re.S):
                deps.update(names_in_group(grp))
        g[m] = sorted(x for x in deps if x in mods and x != m)
    return g


def cycles(g):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in g:
        if v not in index:
            visit(v)
    return out


def main():
    args = sys.argv[1:]
    enforce = {args[i + 1].rstrip('/') for i, a in enumerate(args) if a == '--enforce'}
    show = '--show' in args
    bad = False
    for d, (kind, alias) in DIRS.items():
        g = graph(d, kind, alias)
        if show:
            for m in g:
                print(f'{d}: {m} -> {" ".join(g[m])}')
        cyc = cycles(g)
        state = 'enforced' if d in enforce else 'reported'
        if not cyc:
            print(f'deps: {d}: {len(g)} files, no import cycle ({state})')
        for c in cyc:
            print(f'deps: {d}: import cycle of {len(c)} files ({state}): {" ".join(c)}')
            bad |= d in enforce
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
