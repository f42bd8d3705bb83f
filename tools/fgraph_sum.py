#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Adds up a function_graph trace (qemu/tests/fgraph.sh) per function: calls, total inclusive
time, time per call, largest total first. Rust symbols are shown from the crate's path on."""
import collections, re, sys

LINE = re.compile(r'^\s*\d+\)\s+[-+!#*@$]?\s*([0-9.]+) us\s+\|\s+'
                  r'(?:\}\s*/\*\s*(\S+)(?: \[\w+\])?\s*\*/|(\S+?)(?: \[\w+\])?\(\);)')
calls, total = collections.Counter(), collections.Counter()
for line in open(sys.argv[1], errors='replace'):
    m = LINE.search(line)
    if m:
        name = re.sub(r'^_R.*?(roxe_main)', r'\1::', m.group(2) or m.group(3))
        calls[name] += 1
        total[name] += float(m.group(1))
print(f"{'total ms':>10} {'calls':>8} {'us/call':>9}  function")
for name, t in total.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 40):
    print(f"{t / 1000:10.1f} {calls[name]:8d} {t / calls[name]:9.2f}  {name[:100]}")
