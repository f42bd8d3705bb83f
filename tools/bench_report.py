#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarises tools/bench.sh's CSV: medians per (setup, test, size, driver), the roxe/rxe ratio,
a Markdown table and a PNG plot (gnuplot)."""
import csv, statistics, subprocess, sys, os
from collections import defaultdict

src, outdir = sys.argv[1], sys.argv[2]
vals = defaultdict(list)
units = {}
memcpy = {}
wire = {}
rounds = 0
for row in csv.DictReader(open(src)):
    if row['round'].isdigit():
        rounds = max(rounds, int(row['round']))
    try:
        v = float(row['value'])
    except ValueError:
        continue
    if v != v:  # NaN: the run failed to report; leave it out of the median
        continue
    if row['driver'] == 'guest':
        memcpy[row['setup']] = v
        continue
    if row['driver'] == 'wire':
        wire[(row['setup'], row['test'])] = v
        continue
    key = (row['setup'], row['test'], int(row['size']))
    vals[key + (row['driver'],)].append(v)
    units[key] = row['unit']
keys = sorted({k[:3] for k in vals}, key=lambda k: (k[0], k[1], k[2]))
lines = ['| setup | test | size (B) | rdma_rxe | roxe | roxe/rxe | better |', '|---|---|---|---|---|---|---|']
plot = defaultdict(list)
for k in keys:
    a, b = vals.get(k + ('rxe',)), vals.get(k + ('roxe',))
    if not a or not b:
        continue
    ma, mb = statistics.median(a), statistics.median(b)
    unit = units[k]
    ratio = mb / ma if ma else float('nan')
    lat = unit == 'us'
    better = 'roxe' if (ratio < 1 if lat else ratio > 1) else 'rxe'
    lines.append(f'| {k[0]} | {k[1]} | {k[2]} | {ma:.2f} {unit} | {mb:.2f} {unit} | {ratio:.2f}x | {better} |')
    plot[(k[0], k[1])].append((k[2], ma, mb))
for s, m in sorted(memcpy.items()):
    lines.append(f'\nGuest memcpy bandwidth ({s}): {m:.0f} MiB/s (the ceiling: every byte is copied at least once per side).')
for s in sorted({k[0] for k in wire}):
    lo, avg = wire.get((s, 'ping_rtt_min')), wire.get((s, 'ping_rtt_avg'))
    if lo is not None and avg is not None:
        lines.append(f'\nThe emulated wire ({s}, drivers unloaded): ping RTT min {lo:.0f} us, avg {avg:.0f} us. '
                     f'perftest reports half a round trip, so {lo / 2:.0f} to {avg / 2:.0f} us of every 2-byte '
                     f'latency above is the wire, whichever driver runs.')
# Issue 6's goals, per setup: at least 2x rdma_rxe's bandwidth for write, read and send at
# 64 KiB, and at most 0.5x its latency for 2-byte send and write.
med = {}
for k in keys:
    a, b = vals.get(k + ('rxe',)), vals.get(k + ('roxe',))
    if a and b:
        med[k] = statistics.median(b) / statistics.median(a)
goals = ['', '| setup | goal | roxe/rxe | met |', '|---|---|---|---|']
for setup in sorted({k[0] for k in keys}):
    for test, size, want in [('write_bw', 65536, 2.0), ('read_bw', 65536, 2.0), ('send_bw', 65536, 2.0),
                             ('send_lat', 2, 0.5), ('write_lat', 2, 0.5)]:
        r = med.get((setup, test, size))
        if r is None:
            continue
        ok = r >= want if want > 1 else r <= want
        goals.append(f'| {setup} | {test} {size} B {"≥" if want > 1 else "≤"} {want}x | {r:.2f}x | {"yes" if ok else "no"} |')
try:
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True, check=False).stdout.strip()
except OSError:
    commit = '?'
head = [f'Made by `{os.environ.get("BENCH_COMMAND", "tools/bench.sh")}` at commit {commit or "?"}: Debian\'s stock',
        f'kernel under QEMU TCG, rdma_rxe and roxe alternating in one boot per setup, {rounds} round(s),',
        'medians. Bandwidth runs of 20000 messages or 64 MiB, whichever is less (at least 100),',
        'latency runs of 2000; perftest defaults otherwise (RC, MTU 1024 from the 1500-byte netdev, `-F`); 1vm:',
        'loopback through the device\'s own GID; 2vm: two VMs (one vCPU each) on QEMU\'s `dgram` netdev.',
        '']
md = '\n'.join(head + lines + goals) + '\n'
open(os.path.join(outdir, 'bench.md'), 'w').write(md)
# One panel per (setup, test), bandwidth/latency against size, both drivers.
panels = sorted(plot)
data = os.path.join(outdir, 'bench.dat')
with open(data, 'w') as f:
    for p in panels:
        f.write(f'# {p[0]} {p[1]}\n')
        for size, a, b in sorted(plot[p]):
            f.write(f'{size} {a} {b}\n')
        f.write('\n\n')
cols = 3
rows = (len(panels) + cols - 1) // cols
gp = [f'set terminal pngcairo noenhanced size {cols * 420},{rows * 300} font ",9"',
      f'set output "{os.path.join(outdir, "bench.png")}"',
      f'set multiplot layout {rows},{cols} title "roxe vs rdma_rxe (medians, Debian stock kernel, QEMU TCG)"',
      'set logscale x 2', 'set key top left', 'set grid']
def size_label(n):
    for shift, suffix in ((20, 'M'), (10, 'K')):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f'{n >> shift}{suffix}'
    return str(n)
for i, p in enumerate(panels):
    unit = 'us' if 'lat' in p[1] else ('kops/s' if 'atomic' in p[1] else 'MiB/s')
    sizes = sorted({size for size, _, _ in plot[p]})
    # Each measured size is a labelled tic (1K, 64K, 1M: gnuplot's own labels of 2^18 and 2^20
    # run together), a panel of one size gets room on both sides of it, and every y axis starts
    # at 0 so that the gap between the curves reads as their ratio.
    tics = ', '.join(f'"{size_label(n)}" {n}' for n in sizes)
    gp += [f'set title "{p[0]} {p[1]}"', f'set ylabel "{unit}"', 'set xlabel "message size (B)"',
           f'set xtics ({tics})', f'set xrange [{sizes[0] / 2}:{sizes[-1] * 2}]', 'set yrange [0:*]',
           f'plot "{data}" index {i} using 1:2 with linespoints title "rdma_rxe", "" index {i} using 1:3 with linespoints title "roxe"']
gp.append('unset multiplot')
subprocess.run(['gnuplot'], input='\n'.join(gp).encode(), check=False)
os.remove(data)
print(md)
