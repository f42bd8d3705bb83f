#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The device through pyverbs: its attributes and port, and PDs.

  device_basics.py context DEV   vendor id 0xffffff (rxe's), port 1 ACTIVE
  device_basics.py pds DEV       200 PDs allocated and freed
"""
import sys
import pyverbs.device as d
import pyverbs.pd as p


def context(dev):
    ctx = d.Context(name=dev)
    a = ctx.query_device()
    port = ctx.query_port(1)
    assert a.vendor_id == 0xffffff, a.vendor_id
    assert port.state == 4, port.state
    print('pyverbs ok: max_qp', a.max_qp, 'active_mtu', port.active_mtu)


def pds(dev):
    ctx = d.Context(name=dev)
    made = [p.PD(ctx) for _ in range(200)]
    for pd in made:
        pd.close()
    print('200 PDs allocated and freed')


if __name__ == '__main__':
    {'context': context, 'pds': pds}[sys.argv[1]](sys.argv[2])
