#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""LIO's iSCSI target with an iSER portal, configured through rtslib (targetcli's library;
targetcli itself wants its daemon).

  iser_target.py setup IQN IP SIZE_MIB   a RAM disk of SIZE_MIB as LUN 0 of IQN's TPG 1, on a
                                         portal IP:3260 with iSER on; no authentication, any
                                         initiator admitted read-write
  iser_target.py check IQN IP            the portal exists and has iSER on (exit 1 if not)
  iser_target.py teardown                every target and storage object removed

Enabling iSER on the portal makes the kernel load ib_isert, which listens through rdma_cm on
IP:3260 beside the TCP listener that sendtargets discovery uses.
"""
import sys

from rtslib_fb import FabricModule, LUN, NetworkPortal, RDMCPStorageObject, RTSRoot, TPG, Target

PORT = 3260


def setup(iqn, ip, size_mib):
    so = RDMCPStorageObject('iser0', size=size_mib << 20)
    tgt = Target(FabricModule('iscsi'), iqn)
    tpg = TPG(tgt, 1)
    for name, value in (('authentication', '0'), ('generate_node_acls', '1'),
                        ('demo_mode_write_protect', '0'), ('cache_dynamic_acls', '1')):
        tpg.set_attribute(name, value)
    LUN(tpg, 0, so)
    portal = NetworkPortal(tpg, ip, PORT)
    portal.iser = True
    tpg.enable = True
    print(f'target {iqn}: LUN 0 = {size_mib} MiB RAM disk, portal {ip}:{PORT} iser={portal.iser}')


def check(iqn, ip):
    for tgt in RTSRoot().targets:
        if tgt.wwn != iqn:
            continue
        for tpg in tgt.tpgs:
            for portal in tpg.network_portals:
                if portal.ip_address == ip and portal.port == PORT and portal.iser:
                    return 0
    print(f'no iSER portal {ip}:{PORT} on {iqn}')
    return 1


def teardown():
    root = RTSRoot()
    root.clear_existing(confirm=True)
    left = list(root.targets) + list(root.storage_objects)
    if left:
        print(f'left after teardown: {left}')
        return 1
    return 0


def main(argv):
    if argv[1:2] == ['setup'] and len(argv) == 5:
        setup(argv[2], argv[3], int(argv[4]))
        return 0
    if argv[1:2] == ['check'] and len(argv) == 4:
        return check(argv[2], argv[3])
    if argv[1:2] == ['teardown'] and len(argv) == 2:
        return teardown()
    print(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
