#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarises tools/bench.sh's CSV (setup,round,driver,test,size,value,unit): medians per
(setup, test, size, driver) of rdma_rxe, siw and roxe, roxe's ratios to both, the share of the
copy ceiling (one VM: the guest's memcpy of 64 KiB buffers) or of TCP (two VMs: iperf3) for
the 64 KiB bandwidth runs, CPU time per GiB, QP scaling, the goals of `make bench` with their
verdicts; writes bench.md and a PNG plot (gnuplot) into OUTDIR.
    bench_report.py CSV OUTDIR"""
import csv, statistics, subprocess, sys, os
from collections import defaultdict

DRIVERS = ('rxe', 'siw', 'roxe')
NAMES = {'rxe': 'rdma_rxe', 'siw': 'siw', 'roxe': 'roxe'}
BULK = 65536

src, outdir = sys.argv[1], sys.argv[2]
vals = defaultdict(list)      # (setup, test, size, driver) -> values over rounds
units = {}
cpu = defaultdict(float)      # (setup, round, driver, op) -> CPU seconds, both VMs
moved = {}                    # (setup, round, driver, op) -> GiB
memcpy = {}                   # (setup, size) -> MiB/s
wire = defaultdict(list)      # (setup, test) -> values over rounds
rounds = 0
done = defaultdict(set)       # (setup, driver) -> rounds with a perftest result
for row in csv.DictReader(open(src)):
    if row['round'].isdigit():
        rounds = max(rounds, int(row['round']))
    try:
        v = float(row['value'])
    except ValueError:
        continue
    if v != v:  # NaN: the run failed to report; leave it out of the median
        continue
    setup, drv, test, size = row['setup'], row['driver'], row['test'], int(row['size'])
    if drv == 'guest':
        memcpy[(setup, size)] = v
    elif drv == 'wire':
        wire[(setup, test)].append(v)
    elif test.startswith('cpu_s_'):
        cpu[(setup, row['round'], drv, test[len('cpu_s_'):])] += v
    elif test.startswith('moved_'):
        moved[(setup, row['round'], drv, test[len('moved_'):])] = v
    else:
        vals[(setup, test, size, drv)].append(v)
        done[(setup, drv)].add(row['round'])
        units[(setup, test, size)] = row['unit']


def med(setup, test, size, drv):
    v = vals.get((setup, test, size, drv))
    return statistics.median(v) if v else None


def fmt(v, unit=''):
    return '-' if v is None else f'{v:.2f}{" " + unit if unit else ""}'


def ratio(a, b):
    return a / b if a is not None and b else None


def x(r):
    return None if r is None else f'{r:.2f}x'


def pct(r):
    return None if r is None else f'{100 * r:.0f}%'


setups = sorted({k[0] for k in vals})
main = sorted({k[:3] for k in vals if not k[1].startswith(('qps_', 'idle_', 'check_', 'window_'))},
              key=lambda k: (k[0], k[1], k[2]))
tcp = {s: statistics.median(wire[(s, 'iperf3_tcp')]) for s in setups if wire.get((s, 'iperf3_tcp'))}
lines = ['| setup | test | size (B) | rdma_rxe | siw | roxe | roxe/rxe | roxe/siw | of the ceiling |',
         '|---|---|---|---|---|---|---|---|---|']
plot = defaultdict(list)
for k in main:
    unit = units[k]
    m = {d: med(*k, d) for d in DRIVERS}
    ceiling = ''
    if k[2] == BULK and k[1].endswith('_bw') and m['roxe'] is not None:
        if k[0] == '1vm' and memcpy.get(('1vm', BULK)):
            ceiling = f'{100 * m["roxe"] / memcpy[("1vm", BULK)]:.0f}% of memcpy'
        elif k[0] == '2vm' and tcp.get('2vm'):
            ceiling = f'{100 * m["roxe"] / tcp["2vm"]:.0f}% of TCP'
    lines.append(f'| {k[0]} | {k[1]} | {k[2]} | {fmt(m["rxe"], unit)} | {fmt(m["siw"], unit)} | '
                 f'{fmt(m["roxe"], unit)} | {x(ratio(m["roxe"], m["rxe"])) or "-"} | '
                 f'{x(ratio(m["roxe"], m["siw"])) or "-"} | {ceiling} |')
    plot[(k[0], k[1])].append((k[2], m['rxe'], m['siw'], m['roxe']))
for s in setups:
    for size, label in ((BULK, '64 KiB'), (64 << 20, '64 MiB')):
        if (s, size) in memcpy:
            lines.append(f'\nGuest memcpy ({s}, {label} buffers): {memcpy[(s, size)]:.0f} MiB/s.')
    if s in tcp:
        lines.append(f'\nTCP between the VMs (iperf3, drivers unloaded, median of the rounds): {tcp[s]:.2f} MiB/s.')
    lo, avg = wire.get((s, 'ping_rtt_min')), wire.get((s, 'ping_rtt_avg'))
    if lo and avg:
        lo, avg = statistics.median(lo), statistics.median(avg)
        lines.append(f'\nThe emulated wire ({s}, drivers unloaded): ping RTT min {lo:.0f} us, avg {avg:.0f} us; '
                     f'perftest reports half a round trip, so {lo / 2:.0f} to {avg / 2:.0f} us of every '
                     f'2-byte latency between the VMs is the wire, whichever driver runs.')

# CPU seconds per GiB moved: per round, the VMs' CPU time over the 64 KiB runs by the bytes.
cpu_per_gib = defaultdict(list)
for key, gib in moved.items():
    if gib > 0 and key in cpu:
        cpu_per_gib[(key[0], key[3], key[2])].append(cpu[key] / gib)
cpu_lines = ['', 'CPU seconds per GiB moved (64 KiB messages for ' + 'perftest -D; all CPUs of both VMs, '
             'the tools\' start and stop included; lower is better):', '',
             '| setup | test | rdma_rxe | siw | roxe | least |', '|---|---|---|---|---|---|']
cpu_least = {}
for s, op in sorted({(k[0], k[1]) for k in cpu_per_gib}):
    m = {d: statistics.median(cpu_per_gib[(s, op, d)]) if cpu_per_gib.get((s, op, d)) else None for d in DRIVERS}
    have = {d: v for d, v in m.items() if v is not None}
    least = min(have, key=have.get) if have else None
    cpu_least[(s, op)] = least
    cpu_lines.append(f'| {s} | {op} | {fmt(m["rxe"])} | {fmt(m["siw"])} | {fmt(m["roxe"])} | {NAMES.get(least, "-")} |')

# The second method (qemu/tests/bench.sh, check_OP): the 64 KiB bandwidth of a run of N messages
# timed by the script, less a 200-message run; iperf3 against the bytes its netdev sent.
AGREE = (0.8, 1.25)


def spread(v, d=1):
    return '-' if not v else f'{statistics.median(v):.{d}f} ({min(v):.{d}f}-{max(v):.{d}f})'


def second_row(s, what, who, a, b):
    """A row of the second-method table: first method `a`, second `b` (values over rounds)."""
    r = ratio(statistics.median(b), statistics.median(a)) if a and b else None
    ok = '-' if r is None else ('yes' if AGREE[0] <= r <= AGREE[1] else 'no')
    return f'| {s} | {what} | {who} | {spread(a)} | {spread(b)} | {x(r) or "-"} | {ok} |'


second = ['', 'Every bandwidth figure of 64 KiB messages checked by a second method: a run of N messages '
          '(N sized to last the `-D` run\'s time at its rate) timed by the guest script on the client, '
          'less the time of a 200-message run (start, connection, stop), so that neither perftest\'s '
          'clock nor its arithmetic enters; iperf3 against the bytes the client\'s netdev sent over '
          'the run (headers included: about 4% above the payload). MiB/s, median (range) of the rounds; '
          f'"agree": the ratio of the medians within {AGREE[0]}-{AGREE[1]}.', '',
          '| setup | test | driver | perftest / iperf3 | second method | ratio | agree |', '|---|---|---|---|---|---|---|']
for s in setups:
    for test in ('write_bw', 'read_bw', 'send_bw'):
        for d in DRIVERS:
            a, b = vals.get((s, test, BULK, d)), vals.get((s, 'check_' + test, BULK, d))
            if a or b:
                second.append(second_row(s, f'{test} 64 KiB', NAMES[d], a, b))
    a, b = wire.get((s, 'iperf3_tcp')), wire.get((s, 'iperf3_netdev'))
    if a or b:
        second.append(second_row(s, 'TCP', 'iperf3', a, b))

# Scaling: 64 KiB WRITE bandwidth summed over N QPs, and one QP beside idle connected ones.
scale = ['', '64 KiB WRITE bandwidth (MiB/s) over N QPs (`-q N`), and one active QP with N more '
         'connected and idle:', '', '| setup | QPs | rdma_rxe | siw | roxe |', '|---|---|---|---|---|']
for s in setups:
    for n in sorted({k[2] for k in vals if k[0] == s and k[1] == 'qps_write_bw'}):
        scale.append(f'| {s} | {n} | ' + ' | '.join(fmt(med(s, 'qps_write_bw', n, d)) for d in DRIVERS) + ' |')
    for n in sorted({k[2] for k in vals if k[0] == s and k[1] == 'idle_write_bw'}):
        scale.append(f'| {s} | 1 active, {n} idle | ' + ' | '.join(fmt(med(s, 'idle_write_bw', n, d)) for d in DRIVERS) + ' |')

# The window shared per peer (two VMs, roxe): 8 QPs' 64 KiB WRITEs by count, with the packets
# the client sent per packet the messages needed and the datagrams the host's sockets dropped.
for s in setups:
    for n in sorted({k[2] for k in vals if k[0] == s and k[1] == 'window_write_bw'}):
        w = [vals.get((s, t, n, 'roxe')) for t in ('window_write_bw', 'window_sent_per_needed', 'window_host_drops')]
        scale.append(f'\nroxe\'s {n} QPs by count ({s}, 64 KiB WRITE, the window per peer), median (range) of the '
                     f'rounds: {spread(w[0])} MiB/s, {spread(w[1], 3)} packets sent per packet needed, '
                     f'{spread(w[2], 0)} datagrams dropped by the host\'s sockets over the run.')

# The goals of `make bench`, per setup.
goals = ['', '| setup | goal | measured | met |', '|---|---|---|---|']


def goal(s, text, value, ok):
    if value is None:
        goals.append(f'| {s} | {text} | - | not measured |')
    else:
        goals.append(f'| {s} | {text} | {value} | {"yes" if ok else "no"} |')


for s in setups:
    for test in ('write_bw', 'read_bw', 'send_bw'):
        for size in (64, 1024, BULK):
            r = ratio(med(s, test, size, 'roxe'), med(s, test, size, 'rxe'))
            goal(s, f'{test} {size} B >= 2x rdma_rxe', x(r), r is not None and r >= 2)
            # Between two VMs, SEND and WRITE of 64 B and 1 KiB at 1.2x siw (issue 56, item 4).
            siw_bw = 1.2 if s == '1vm' or (test != 'read_bw' and size != BULK) else 1.0
            r = ratio(med(s, test, size, 'roxe'), med(s, test, size, 'siw'))
            goal(s, f'{test} {size} B >= {siw_bw}x siw', x(r), r is not None and r >= siw_bw)
    r = ratio(med(s, 'atomic_bw', 8, 'roxe'), med(s, 'atomic_bw', 8, 'rxe'))
    goal(s, 'atomic_bw >= 2x rdma_rxe', x(r), r is not None and r >= 2)
    for test in ('send_lat', 'write_lat', 'read_lat', 'send_lat_p99', 'write_lat_p99', 'read_lat_p99'):
        r = ratio(med(s, test, 2, 'roxe'), med(s, test, 2, 'rxe'))
        goal(s, f'{test} 2 B <= 0.3x rdma_rxe', x(r), r is not None and r <= 0.3)
        r = ratio(med(s, test, 2, 'roxe'), med(s, test, 2, 'siw'))
        goal(s, f'{test} 2 B <= 0.5x siw', x(r), r is not None and r <= 0.5)
        if s == '2vm' and test in ('send_lat', 'write_lat'):
            # Issue 56, item 4: between two VMs, at most siw's.
            goal(s, f'{test} 2 B <= siw', x(r), r is not None and r <= 1.0)
    for test in ('write_bw', 'read_bw', 'send_bw'):
        m = med(s, test, BULK, 'roxe')
        if s == '1vm':
            c = memcpy.get((s, BULK))
            f = ratio(m, c)
            goal(s, f'{test} 64 KiB >= 40% of memcpy', pct(f), f is not None and f >= 0.4)
        else:
            f = ratio(m, tcp.get(s))
            goal(s, f'{test} 64 KiB >= iperf3 TCP', pct(f), f is not None and f >= 1.0)
    q = [(n, med(s, 'qps_write_bw', n, 'roxe')) for n in sorted({k[2] for k in vals if k[0] == s and k[1] == 'qps_write_bw'})]
    q = [(n, v) for n, v in q if v is not None]
    if q:
        # "Grows or holds": no step loses more than the rounds' noise (10%).
        worst = min((b / a for (_, a), (_, b) in zip(q, q[1:])), default=1.0)
        goal(s, 'aggregate over ' + '/'.join(str(n) for n, _ in q) + ' QPs grows or holds (each step >= 0.9x)',
             ' / '.join(f'{v:.0f}' for _, v in q), worst >= 0.9)
    one = med(s, 'qps_write_bw', 1, 'roxe')
    # Issue 56: in one VM two QPs use both vCPUs (item 2); between two VMs eight QPs share one
    # window per peer and move at least what one moves, resending under 2% of their packets,
    # with no datagram lost in the host's sockets (item 6).
    for n, want in ((2, 1.6),) if s == '1vm' else ((8, 1.0),):
        r = ratio(med(s, 'qps_write_bw', n, 'roxe'), one)
        goal(s, f'{n} QPs >= {want}x one QP', x(r), r is not None and r >= want)
    if s == '2vm':
        sent = med(s, 'window_sent_per_needed', 8, 'roxe')
        goal(s, '8 QPs by count: under 2% of packets resent', None if sent is None else f'{100 * (sent - 1):.1f}%',
             sent is not None and sent < 1.02)
        drops = med(s, 'window_host_drops', 8, 'roxe')
        goal(s, '8 QPs by count: no datagram dropped by the host', None if drops is None else f'{drops:.0f}',
             drops == 0)
    for n in sorted({k[2] for k in vals if k[0] == s and k[1] == 'idle_write_bw'}):
        r = ratio(med(s, 'idle_write_bw', n, 'roxe'), one)
        goal(s, f'one QP beside {n} idle ones within 10% of one QP', x(r), r is not None and r >= 0.9)
    for op in ('write_bw', 'read_bw', 'send_bw'):
        if (s, op) in cpu_least:
            goal(s, f'CPU per GiB ({op}) least of the three', NAMES.get(cpu_least[(s, op)], '-'), cpu_least[(s, op)] == 'roxe')

try:
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True, check=False).stdout.strip()
except OSError:
    commit = '?'
# tools/bench.sh names the commit each setup was measured at (one setup may be kept from an
# earlier run).
at = f'at commit {commit or "?"}'
try:
    with open(os.path.join(outdir, 'commits.txt')) as f:
        pairs = [l.split() for l in f if len(l.split()) == 2]
    if pairs and len({c for _, c in pairs}) > 1:
        at = 'at commits ' + ', '.join(f'{c} ({s})' for s, c in pairs)
    elif pairs:
        at = f'at commit {pairs[0][1]}'
except OSError:
    pass
kernel = os.environ.get('BENCH_KERNEL', '')
load = os.environ.get('BENCH_LOAD')
# The netdev's MTU (tools/bench.sh --mtu) and the IB MTU it gives (IBA MTUs are powers of two;
# RoCE's headers take up to 84 bytes of the netdev's MTU).
netdev_mtu = int(os.environ.get('BENCH_MTU') or 1500)
ib_mtu = max([m for m in (256, 512, 1024, 2048, 4096) if m + 84 <= netdev_mtu] or [256])
head = [f'Made by `{os.environ.get("BENCH_COMMAND", "tools/bench.sh")}` {at}: Debian\'s kernel',
        f'{kernel + " " if kernel else ""}under QEMU TCG, rdma_rxe, siw and roxe in turn (1vm: one boot; 2vm: a boot per round and',
        f'driver), {rounds} round(s),',
        f'medians. perftest through rdma_cm (`-R`, as siw requires), RC, MTU {ib_mtu} from the {netdev_mtu}-byte netdev,',
        '`-F`; bandwidth runs of 20000 messages or 64 MiB, whichever is less (at least 100), 64 KiB runs',
        'for a fixed time (`-D`), latency runs of 2000 (typical; `_p99`: the 99th percentile).',
        '1vm: loopback through the device\'s own address, two vCPUs; 2vm: two VMs (one vCPU each) on',
        'QEMU\'s `dgram` netdev. siw has no atomics. Ratios: bandwidth higher is better, latency lower.',
        'Rounds with results: ' + '; '.join(
            f'{s}: ' + ', '.join(f'{NAMES[d]} {len(done[(s, d)])}' for d in DRIVERS) for s in setups) + '.']
if load:
    head.append(f'The host\'s load average (1, 5, 15 min) before and after: {load}.')
head.append('')
md = '\n'.join(head + lines + second + cpu_lines + scale + goals) + '\n'
open(os.path.join(outdir, 'bench.md'), 'w').write(md)

# One panel per (setup, test), the three drivers against message size (log scale).
panels = sorted(plot)
data = os.path.join(outdir, 'bench.dat')
with open(data, 'w') as f:
    for p in panels:
        f.write(f'# {p[0]} {p[1]}\n')
        for size, *m in sorted(plot[p]):
            f.write(f'{size} ' + ' '.join('NaN' if v is None else str(v) for v in m) + '\n')
        f.write('\n\n')
cols = 3
rows = (len(panels) + cols - 1) // cols
gp = [f'set terminal pngcairo noenhanced size {cols * 420},{rows * 300} font ",9"',
      f'set output "{os.path.join(outdir, "bench.png")}"',
      f'set multiplot layout {rows},{cols} title "roxe, rdma_rxe and siw (medians, Debian {kernel or "stock"} kernel, QEMU TCG)"',
      'set logscale x 2', 'set key top left', 'set grid']


def size_label(n):
    for shift, suffix in ((20, 'M'), (10, 'K')):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f'{n >> shift}{suffix}'
    return str(n)


for i, p in enumerate(panels):
    unit = 'us' if 'lat' in p[1] else ('kops/s' if 'atomic' in p[1] else 'MiB/s')
    sizes = sorted({size for size, *_ in plot[p]})
    tics = ', '.join(f'"{size_label(n)}" {n}' for n in sizes)
    # Bandwidth spans three decades from 64 B to 1 MiB: a log y axis keeps the small sizes readable.
    ylog = 'set logscale y' if unit == 'MiB/s' and len(sizes) > 2 else 'unset logscale y'
    yrange = 'set yrange [*:*]' if unit == 'MiB/s' and len(sizes) > 2 else 'set yrange [0:*]'
    gp += [f'set title "{p[0]} {p[1]}"', f'set ylabel "{unit}"', 'set xlabel "message size (B)"', ylog, yrange,
           f'set xtics ({tics})', f'set xrange [{sizes[0] / 2}:{sizes[-1] * 2}]',
           f'plot "{data}" index {i} using 1:2 with linespoints title "rdma_rxe", '
           f'"" index {i} using 1:3 with linespoints title "siw", '
           f'"" index {i} using 1:4 with linespoints title "roxe"']
gp.append('unset multiplot')
subprocess.run(['gnuplot'], input='\n'.join(gp).encode(), check=False)
os.remove(data)
print(md)
