#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Documentation/architecture.md matches the tree.

  tools/archcheck.py

The file tables of architecture.md name one file per row, in the first column, in backquotes:
the driver's table paths under drivers/infiniband/sw/roxe/, rust/'s under rust/ (the rows whose
path starts with rdma/, soft/ or compat/). Every Rust file of the driver and of rust/rdma/,
rust/soft/ and rust/compat/ has exactly one row, and every row names a file that exists.
Prints each mismatch; the exit status is 1 if there is one.
"""
import os, re, subprocess, sys

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
DRIVER = 'drivers/infiniband/sw/roxe/'
RUST = ('rdma/', 'soft/', 'compat/')


def rows(text):
    """(section, path) of each table row whose first cell is one backquoted path."""
    section = None
    for line in text.split('\n'):
        if line.startswith('## ') or line.startswith('### '):
            section = line
        m = re.match(r'\|\s*`([^`\s]+)`\s*\|', line)
        if m and section:
            yield section, m.group(1)


def main():
    text = open(os.path.join(TOP, 'Documentation/architecture.md')).read()
    files = subprocess.check_output(['git', 'ls-files', DRIVER, 'rust/'], cwd=TOP, text=True).split()
    tree = {f for f in files if f.endswith('.rs') and (f.startswith(DRIVER) or
                                                        f[len('rust/'):].startswith(RUST))}
    named = {}
    for section, path in rows(text):
        if section.startswith('### drivers/'):
            full = DRIVER + path
        elif section.startswith('### rust/') and path.startswith(RUST):
            full = 'rust/' + path
        else:
            continue
        named[full] = named.get(full, 0) + 1
    bad = 0
    for f in sorted(tree - set(named)):
        print(f'archcheck: {f} has no row in Documentation/architecture.md')
        bad += 1
    for f in sorted(set(named) - tree):
        print(f'archcheck: Documentation/architecture.md names {f}, which is not in the tree')
        bad += 1
    for f, n in sorted(named.items()):
        if n > 1:
            print(f'archcheck: {f} has {n} rows')
            bad += 1
    print(f'archcheck: {len(tree)} files, {len(named)} rows, {bad} mismatches')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
