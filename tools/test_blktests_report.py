#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host tests of tools/blktests_report.py's reading of ./check's output (tools/hosttest.sh)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blktests_report as report  # noqa: E402


def padded(name, status=None):
    """A ./check status line: the name padded to 60 columns, then " [status]" when it ended."""
    line = f'{name:<60}'
    return line if status is None else f'{line} [{status}]'


class ParseCheckLog(unittest.TestCase):
    def test_variants_and_descriptions(self):
        log = '\n'.join([
            padded('nvme/006 (tr=rdma bd=file) (create an NVMeOF target)'),
            '    runtime  12.1s  ...',
            padded('nvme/006 (tr=rdma bd=file) (create an NVMeOF target)', 'passed'),
            '    runtime  12.1s  ...  11.8s',
            padded('srp/005 (Direct I/O with large transfer sizes, cmd_sg_entries=255 and bs=4M)'),
            padded('srp/005 (Direct I/O with large transfer sizes, cmd_sg_entries=255 and bs=4M)',
                   'failed'),
            padded('nvme/002 (tr=rdma) (create many subsystems)', 'not run'),
            '    nvme_trtype=rdma is not supported in this test',
            padded('rnbd/001 (Start Stop RNBD)', 'passed'),
        ])
        self.assertEqual(report.parse_check_log(log), {
            'nvme/006 (tr=rdma bd=file)': 'passed',
            'srp/005': 'failed',
            'nvme/002 (tr=rdma)': 'not run',
            'rnbd/001': 'passed',
        })

    def test_stopped_boot_leaves_the_running_test_without_verdict(self):
        log = '\n'.join([
            padded('srp/006 (Direct I/O, bs=8M)'),
            padded('srp/006 (Direct I/O, bs=8M)', 'passed'),
            padded('srp/007 (Direct I/O, cmd_sg_entries=1 and bs=4M)'),
            '    runtime  ...',
        ])
        self.assertEqual(report.parse_check_log(log),
                         {'srp/006': 'passed', 'srp/007': report.NO_VERDICT})

    def test_colours_and_carriage_returns_are_ignored(self):
        log = padded('nvme/003 (tr=rdma) (keep-alives)') + ' [\x1b[32mpassed\x1b[0m]\r\n'
        self.assertEqual(report.parse_check_log(log), {'nvme/003 (tr=rdma)': 'passed'})

    def test_other_lines_are_not_tests(self):
        log = '\n'.join(['    runtime  ...  3.2s', 'roxe-init: running blktests.sh',
                         '[  12.5] nvme nvme0: new ctrl: NQN "blktests-subsystem-1"'])
        self.assertEqual(report.parse_check_log(log), {})


if __name__ == '__main__':
    unittest.main()
