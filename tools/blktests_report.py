#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compares blktests' verdicts per driver and writes them side by side into
Documentation/testing.md, between its blktests markers. Exits 1 when a test that passed on rdma_rxe
or siw did not pass on roxe, or when a driver's verdicts are missing.

A verdict comes from the output of blktests' ./check (qemu/tests/blktests.sh keeps it as
blktests-DRIVER.log, written while the tests run, so a boot stopped by its timeout still has one):
"passed", "failed" or "not run" per test and variant, and "no verdict" for the test that had
started when the output ends (the boot was stopped while it ran). A .tsv file (test, TAB, verdict)
is read as it is.

Usage: blktests_report.py [--marker NAME] [--merge] TESTING_MD DRIVER=FILE[,FILE...]...
       blktests_report.py --parse LOG     (the log's verdicts as TSV on stdout)
(drivers: roxe, rxe, siw; a driver's several files, one per boot, are read as one; the table goes
between <!-- NAME:begin --> and <!-- NAME:end -->, NAME blktests unless given; --merge keeps the
verdicts already in that table and lets the files' verdicts replace them test by test, so that
groups run in separate sessions add up to one table)"""
import os
import re
import sys

NAMES = {'roxe': 'roxe', 'rxe': 'rdma_rxe', 'siw': 'siw'}


NO_VERDICT = 'no verdict'
ANSI = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')
# ./check prints a test's line ("group/NNN", its variant, its description, padded) when the test
# starts, and again with "[verdict]" appended when it ends. A variant is a parenthesised list of
# KEY=VALUE words ("(tr=rdma bd=file)"); a description may hold "=" as well ("(Direct I/O ...,
# cmd_sg_entries=255 and bs=4M)"), so only a group of nothing but such words counts.
TEST_LINE = re.compile(r'([a-z]+/[0-9]+(?: \([a-z_]+=[^ )]*(?: [a-z_]+=[^ )]*)*\))?)(?: .*)?$')
VERDICT = re.compile(r'\s\[(passed|failed|not run)\]\s*$')


def parse_check_log(text):
    """{test: verdict} from ./check's output, in the order the tests ran."""
    verdicts, running = {}, None
    for raw in text.splitlines():
        line = ANSI.sub('', raw).replace('\r', '').rstrip()
        m = TEST_LINE.match(line)
        if not m:
            continue
        v = VERDICT.search(line)
        if v:
            verdicts[m.group(1)] = v.group(1)
            running = None
        else:
            running = m.group(1)
    if running is not None:
        verdicts[running] = NO_VERDICT
    return verdicts


def load(paths):
    verdicts = {}
    for path in paths.split(','):
        if not os.path.exists(path):
            continue
        with open(path, errors='replace') as f:
            text = f.read()
        if not path.endswith('.tsv'):
            verdicts.update(parse_check_log(text))
            continue
        for line in text.splitlines():
            parts = line.split('\t')
            if len(parts) == 2:
                verdicts[parts[0]] = parts[1]
    return verdicts


def split_section(text, begin, end):
    """(before, between, after) the markers, or None when the text lacks them."""
    if begin not in text or end not in text:
        return None
    head, rest = text.split(begin, 1)
    body, tail = rest.split(end, 1)
    return head, body, tail


def table_verdicts(body):
    """The verdicts of the table in `body`: {driver: {test: verdict}}."""
    rows = [[c.strip() for c in line.strip().strip('|').split('|')]
            for line in body.splitlines() if line.startswith('|')]
    if not rows:
        return {}
    by_name = {v: k for k, v in NAMES.items()}
    cols = [by_name.get(name) for name in rows[0][1:]]
    seen = {d: {} for d in cols if d}
    for row in rows[2:]:
        for d, v in zip(cols, row[1:]):
            if d and v != '-':
                seen[d][row[0]] = v
    return seen


def key(test):
    """Sort key of "nvme/008 (tr=rdma bd=file)": group, number, variant."""
    name, _, variant = test.partition(' ')
    group, _, num = name.partition('/')
    return (group, int(num) if num.isdigit() else 0, variant)


def main():
    args, marker, merge = sys.argv[1:], 'blktests', False
    if args[:1] == ['--parse'] and len(args) == 2:
        with open(args[1], errors='replace') as f:
            for test, verdict in parse_check_log(f.read()).items():
                print(f'{test}\t{verdict}')
        return 0
    if args[:1] == ['--marker']:
        marker, args = args[1], args[2:]
    if args[:1] == ['--merge']:
        merge, args = True, args[1:]
    begin, end = f'<!-- {marker}:begin -->', f'<!-- {marker}:end -->'
    md, runs = args[0], dict(a.split('=', 1) for a in args[1:])
    text = open(md).read()
    section = split_section(text, begin, end)
    old = table_verdicts(section[1]) if merge and section else {}
    drivers = [d for d in ('roxe', 'rxe', 'siw') if d in runs or d in old]
    res = {d: {**old.get(d, {}), **load(runs.get(d, ''))} for d in drivers}
    bad = [d for d in drivers if not res[d]]
    tests = sorted(set().union(*res.values()), key=key)
    regress = [t for t in tests if res['roxe'].get(t) != 'passed' and
               any(res[d].get(t) == 'passed' for d in drivers if d != 'roxe')]
    # Only where another driver has run the test too (a merged table may hold groups that one
    # driver has not run yet).
    only = [t for t in tests if res['roxe'].get(t) == 'passed' and
            any(t in res[d] for d in drivers if d != 'roxe') and
            not any(res[d].get(t) == 'passed' for d in drivers if d != 'roxe')]
    pending = [t for t in tests if any(t not in res[d] for d in drivers)]

    out = ['| test | ' + ' | '.join(NAMES[d] for d in drivers) + ' |',
           '|---|' + '---|' * len(drivers)]
    for t in tests:
        out.append(f'| {t} | ' + ' | '.join(res[d].get(t, '-') for d in drivers) + ' |')
    out.append('')
    for d in drivers:
        v = list(res[d].values())
        stopped = f', {v.count(NO_VERDICT)} {NO_VERDICT}' if NO_VERDICT in v else ''
        out.append(f'- {NAMES[d]}: {v.count("passed")} passed, {v.count("failed")} failed, '
                   f'{v.count("not run")} not run{stopped}.')
    out.append('- Passed on rdma_rxe or siw but not on roxe: ' + (', '.join(regress) or 'none') + '.')
    out.append('- Passed on roxe only: ' + (', '.join(only) or 'none') + '.')
    if pending:
        out.append(f'- Not run on every driver yet ("-"): {len(pending)} tests.')
    table = '\n'.join(out)
    print(table)

    if section:
        head, _, tail = section
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
