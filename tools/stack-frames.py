#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The stack frames of a built module, checked against a limit: every function's
`sub $N,%rsp` at most LIMIT bytes, but for the functions named with their own (larger) limit.

A kernel stack is 16 KiB (without KASAN), and the RDMA core creates its MAD QPs from deep in
`rdma link add` (netlink, device registration, the MAD client): there a QP creation frame of
6 KiB and a 4 KiB temporary of a callee below it once overran the stack guard when the slab
allocator refilled underneath (`Documentation/security.md`, "Stack").

  tools/stack-frames.py MODULE.ko
"""
import re, subprocess, sys

LIMIT = 2048
# Rust symbol fragments with their own limit, and why they may be larger.
ALLOWED = {
    # Builds the QP (about 3 KiB) before it moves into the pool's slot: QP creation, process
    # context, the deepest roxe frame under device registration.
    'Driver9create_qp': 6144,
}


def frames(ko):
    out = subprocess.run(['objdump', '-d', '--no-show-raw-insn', ko], check=True,
                         capture_output=True, text=True).stdout
    fn = None
    for line in out.splitlines():
        m = re.match(r'^[0-9a-f]+ <(.*)>:$', line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r'sub\s+\$0x([0-9a-f]+),%rsp', line)
        if m and fn:
            yield fn, int(m.group(1), 16)


def main():
    ko = sys.argv[1]
    worst, bad = {}, []
    for fn, size in frames(ko):
        worst[fn] = max(size, worst.get(fn, 0))
    for fn, size in sorted(worst.items(), key=lambda kv: -kv[1]):
        limit = next((v for k, v in ALLOWED.items() if k in fn), LIMIT)
        if size > limit:
            bad.append(f'{size} bytes (limit {limit}): {fn}')
    top = max(worst.items(), key=lambda kv: kv[1], default=('none', 0))
    if bad:
        print(f'stack-frames: {len(bad)} frame(s) over the limit in {ko}:', *bad, sep='\n  ')
        sys.exit(1)
    print(f'stack-frames: {len(worst)} functions within limits, largest {top[1]} bytes ({top[0][:60]})')


if __name__ == '__main__':
    main()
