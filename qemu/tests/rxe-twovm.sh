#!/bin/bash
# Baseline across two VMs joined by a QEMU dgram link: rdma_rxe on both sides,
# ibv_rc_pingpong and ib_write_bw. VM 0 serves, VM 1 is the client.
. /roxe/qemu/guest/lib.sh
DRV=${1:-rxe}
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 GID"; finish_tests; }
export gid
check "ping-peer-vm$ROXE_VM" 60 retry_client 50 ping -c1 -W1 "$PEER_IP"
barrier ready 120 || finish_tests
if [ "$ROXE_VM" = 0 ]; then
	check "$DRV-rc-pingpong-server" 180 ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -n 200
	barrier pp-done 200
	check "$DRV-write-bw-server" 180 ib_write_bw -d "$RDMA_DEV" -x "$gid" -s 65536 -D 3 -F
else
	check "$DRV-rc-pingpong-client" 180 retry_client 60 ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -n 200 "$PEER_IP"
	barrier pp-done 200
	check "$DRV-write-bw-client" 180 sh -c "retry() { for i in \$(seq 60); do ib_write_bw -d $RDMA_DEV -x $gid -s 65536 -D 3 -F $PEER_IP && return 0; sleep 1; done; return 1; }; retry | tee /out/ib_write_bw.txt"
fi
barrier done 300
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
finish_tests
