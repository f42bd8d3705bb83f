#!/bin/bash
# Requests that miss on-demand-paging memory, resent at full speed: what one costs the responder
# must not grow with the range it names. An RC responder answers a request whose pages are not
# present with an RNR NAK and a queued fault, consuming nothing, so the peer may send it again at
# once (qemu/tests/py/odp_flood.py says what is measured). Arguments: the driver (roxe, or rxe by
# hand for comparison), the seconds of flood.
#
# The device sits on a veth (vpc0, 10.99.2.1) whose other end (vpc1) is in namespace odpfl with
# the peer's address 10.99.2.2 (veth_peer in qemu/guest/lib.sh). The kernel must report no soft
# lockup, RCU stall or hung task (the harness's dmesg check covers the boot too).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
FLOOD=${2:-10}
NS=odpfl ADDR=10.99.2.1 PEER=10.99.2.2
step "$DRV-odpflood-setup" veth_peer "$DRV" $NS $ADDR $PEER || finish_tests
gid=$(gid_index_with "$RDMA_DEV" 0000:0000:0000:0000:0000:ffff:0a63:0201) || { fail "no RoCE v2 GID for $ADDR"; finish_tests; }
# The sender on the last CPU: a veth delivers a packet on the CPU that sent it.
check "$DRV-odpflood-cases" $((FLOOD * 4 + 600)) taskset -c $(($(nproc) - 1)) \
	python3 -X faulthandler /roxe/qemu/tests/py/odp_flood.py "$RDMA_DEV" "$gid" $NS $ADDR $PEER "$FLOOD"
case_results "$DRV" odpflood "/out/$DRV-odpflood-cases.log"
grep -E '^(PASS|FAIL|SKIP) odpflood:' "/out/$DRV-odpflood-cases.log"
stalls=$(dmesg | grep -E 'soft lockup|rcu: INFO|detected stall|hung task|blocked for more than' | head -5)
if [ -z "$stalls" ]; then
	pass "$DRV-odpflood-no-stall-reports"
else
	fail "$DRV-odpflood-no-stall-reports: $(echo "$stalls" | head -1)"
fi
grep -H . /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/* 2>/dev/null | sed 's|.*/||' | tr '\n' ' '; echo
check "$DRV-odpflood-unload" 60 veth_peer_unload "$DRV" $NS
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
