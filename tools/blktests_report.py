#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compares blktests' verdicts per driver (qemu/tests/blktests.sh writes blktests-DRIVER.tsv:
test with its variant, passed|failed|not run) and writes them side by side into
Documentation/testing.md, between its blktests markers. Exits 1 when a test that passed on rdma_rxe or siw did not pass on roxe, or
when a driver's verdicts are missing.

Usage: blktests_report.py [--marker NAME] TESTING_MD DRIVER=TSV[,TSV...]...
(drivers: roxe, rxe, siw; a driver's several files, one per boot, are read as one; the table goes
between <!-- NAME:begin --> and <!-- NAME:end -->, NAME blktests unless given)"""
import os
import sys

NAMES = {'roxe': 'roxe', 'rxe': 'rdma_rxe', 'siw': 'siw'}


def load(paths):
    verdicts = {}
    for path in paths.split(','):
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                parts = line.rstrip('\n').split('\t')
                if len(parts) == 2:
                    verdicts[parts[0]] = parts[1]
    return verdicts


def key(test):
    """Sort key of "nvme/008 (tr=rdma bd=file)": group, number, variant."""
    name, _, variant = test.partition(' ')
    group, _, num = name.partition('/')
    return (group, int(num) if num.isdigit() else 0, variant)


def main():
    args, marker = sys.argv[1:], 'blktests'
    if args[:1] == ['--marker']:
        marker, args = args[1], args[2:]
    begin, end = f'<!-- {marker}:begin -->', f'<!-- {marker}:end -->'
    md, runs = args[0], dict(a.split('=', 1) for a in args[1:])
    drivers = [d for d in ('roxe', 'rxe', 'siw') if d in runs]
    res = {d: load(runs[d]) for d in drivers}
    bad = [d for d in drivers if not res[d]]
    tests = sorted(set().union(*res.values()), key=key)
    regress = [t for t in tests if res['roxe'].get(t) != 'passed' and
               any(res[d].get(t) == 'passed' for d in drivers if d != 'roxe')]
    only = [t for t in tests if res['roxe'].get(t) == 'passed' and
            not any(res[d].get(t) == 'passed' for d in drivers if d != 'roxe')]

    out = ['| test | ' + ' | '.join(NAMES[d] for d in drivers) + ' |',
           '|---|' + '---|' * len(drivers)]
    for t in tests:
        out.append(f'| {t} | ' + ' | '.join(res[d].get(t, '-') for d in drivers) + ' |')
    out.append('')
    for d in drivers:
        v = list(res[d].values())
        out.append(f'- {NAMES[d]}: {v.count("passed")} passed, {v.count("failed")} failed, '
                   f'{v.count("not run")} not run.')
    out.append('- Passed on rdma_rxe or siw but not on roxe: ' + (', '.join(regress) or 'none') + '.')
    out.append('- Passed on roxe only: ' + (', '.join(only) or 'none') + '.')
    table = '\n'.join(out)
    print(table)

    text = open(md).read()
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        with open(md, 'w') as f:
            f.write(head + begin + '\n' + table + '\n' + end + tail)
    else:
        print(f'{md}: no {begin} ... {end} markers; table not written', file=sys.stderr)
        return 1
    if bad:
        print('no verdicts from: ' + ', '.join(bad), file=sys.stderr)
        return 1
    return 1 if regress else 0


if __name__ == '__main__':
    sys.exit(main())
