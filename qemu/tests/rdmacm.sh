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
pair() { # pair NAME TIMEOUT SERVER-CMD -- CLIENT-CMD
	local name=$1 t=$2; shift 2
	local srv=() cli=()
	while [ "$1" != -- ]; do srv+=("$1"); shift; done; shift; cli=("$@")
	if [ $TWO = 0 ] || [ "$ROXE_VM" = 0 ]; then
		if [ $TWO = 0 ]; then
			timeout "$t" "${srv[@]}" >/out/$name-server.log 2>&1 &
			local p=$!
			check "$TAG-$name" "$t" retry_client 20 "${cli[@]}"
			wait $p || fail "$TAG-$name-server (exit $?)"
		else
			# The client connects once the server listens: a request that comes earlier is
			# rejected, and the CM's retries of it can reach the listener later as a stale
			# connection, on which ucmatose's server gives up (it exits at the first error).
			barrier "s-$name" 120
			timeout "$t" "${srv[@]}" >/out/$name-server.log 2>&1 &
			local p=$! i
			for i in $(seq 1 50); do
				rdma resource show cm_id 2>/dev/null | grep -q LISTEN && break
				sleep 0.2
			done
			barrier "l-$name" 120
			local rc=0
			wait $p || rc=$?
			if [ $rc = 0 ]; then pass "$TAG-$name-server"; else
				fail "$TAG-$name-server (exit $rc)"; tail -15 /out/$name-server.log | sed 's/^/    /'
			fi
			barrier "e-$name" $((t + 60))
		fi
	else
		barrier "s-$name" 120
		barrier "l-$name" 120
		check "$TAG-$name" "$t" retry_client 20 "${cli[@]}"
		barrier "e-$name" $((t + 60))
	fi
}
[ $TWO = 1 ] && barrier ready 180
pair rping 120 rping -s -a "$SRV" -v -V -C 100 -S 1000 -- rping -c -a "$SRV" -v -V -C 100 -S 1000
pair ucmatose 120 ucmatose -b "$SRV" -c 2 -C 20 -- ucmatose -s "$SRV" -c 2 -C 20
pair rdma-client 120 rdma_server -s "$SRV" -- rdma_client -s "$SRV"
[ $TWO = 1 ] && barrier done 300
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
