#!/bin/bash
# Diagnostic, not in make test: N short ibv_rc_pingpong runs (5 x 8 KiB, -c) between two VMs
# under netem.sh's impairments, with each side's outcome in /out/summary. Shows how often and how
# a run ends badly (netem.sh accepts one ending). Usage:
#   qemu/run-vm.sh --flavour stock --two-vm --script qemu/tests/netem-pingpong.sh --args 60 --timeout 800
. /roxe/qemu/guest/lib.sh
DRV=roxe
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no gid"; finish_tests; }
check "ping-peer-vm$ROXE_VM" 60 retry_client 50 ping -c1 -W1 "$PEER_IP"
modprobe sch_netem
tc qdisc add dev eth0 root netem delay 1ms loss 2% duplicate 1% reorder 5%
barrier ready 180 || finish_tests
for i in $(seq 1 ${1:-60}); do
	if [ "$ROXE_VM" = 0 ]; then
		timeout 60 ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -n 5 -s 8192 -c > /out/pp-$i.log 2>&1
		echo "srv $i rc=$? $(grep -h 'Failed\|invalid\|Couldn' /out/pp-$i.log | tr '\n' ' ')" | tee -a /out/summary
	else
		sleep 0.3
		timeout 60 bash -c "for t in \$(seq 1 50); do ibv_rc_pingpong -d $RDMA_DEV -g $gid -n 5 -s 8192 -c $PEER_IP && exit 0; sleep 0.2; done; exit 1" > /out/pp-$i.log 2>&1
		echo "cli $i rc=$? $(grep -h 'Failed\|invalid' /out/pp-$i.log | tr '\n' ' ')" | tee -a /out/summary
	fi
	barrier pp$i 120
done
rdma statistic show link "$RDMA_DEV/1"
pass done
finish_tests
