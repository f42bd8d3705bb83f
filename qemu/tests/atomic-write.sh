#!/bin/bash
# ATOMIC WRITE's 8-byte rule (IBA Annex A19): an ATOMIC WRITE request whose RETH length or
# payload is not 8 bytes gets a NAK with the invalid-request syndrome and changes no memory,
# and a WQE of another length completes with IBV_WC_LOC_LEN_ERR without sending; 8-byte
# controls succeed. Argument: the driver (roxe, or rxe by hand).
#
# The device sits on a veth (vpc0, 10.99.1.1) whose peer (vpc1) is in namespace atomwr with the
# address 10.99.1.2 (veth_peer in qemu/guest/lib.sh), from where qemu/tests/py/atomic_write.py
# plays the peer of an RC QP of the device; its requester cases run in loopback.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
NS=atomwr ADDR=10.99.1.1 PEER=10.99.1.2

step "$DRV-atomic-write-setup" veth_peer "$DRV" $NS $ADDR $PEER || finish_tests
RDMA_DEV=${DRV}0
gid=$(gid_index_with "$RDMA_DEV" 0000:0000:0000:0000:0000:ffff:0a63:0101) || { fail "no RoCE v2 GID for $ADDR"; finish_tests; }
check "$DRV-atomic-write-cases" 180 python3 -X faulthandler /roxe/qemu/tests/py/atomic_write.py "$RDMA_DEV" "$gid" $NS $ADDR $PEER
case_results "$DRV" atomic-write "/out/$DRV-atomic-write-cases.log"
grep -E '^(PASS|FAIL) atomic-write:|^atomic-write:' "/out/$DRV-atomic-write-cases.log"
check "$DRV-atomic-write-unload" 60 veth_peer_unload "$DRV" $NS
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
