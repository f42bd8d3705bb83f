#!/bin/bash
# rdma_cm over roxe (one VM through the device's own address, or two VMs): connection setup
# uses CM MADs on the GSI QP (QP1), i.e. roxe's kernel verbs. rping with data checking,
# ucmatose, rdma_server/rdma_client. Arguments: DRV0 [DRV1].
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; [ "$ROXE_VM" = 1 ] && DRV=${2:-${1:-roxe}}
TWO=0; grep -qw 'roxe.two=1' /proc/cmdline && TWO=1
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
check "$DRV-gsi-qp" 10 sh -c "rdma resource show qp | tee /out/qps.txt | grep -q 'lqpn 1 .*type GSI'"
SRV=$SELF_IP; [ $TWO = 1 ] && SRV=192.168.77.1
TAG="${1:-roxe}-${2:-${1:-roxe}}"
[ $TWO = 1 ] && barrier ready 180
cm_pair rping 120 rping -s -a "$SRV" -v -V -C 100 -S 1000 -- rping -c -a "$SRV" -v -V -C 100 -S 1000
cm_pair ucmatose 120 ucmatose -b "$SRV" -c 2 -C 20 -- ucmatose -s "$SRV" -c 2 -C 20
cm_pair rdma-client 120 rdma_server -s "$SRV" -- rdma_client -s "$SRV"
[ $TWO = 1 ] && barrier done 300
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
