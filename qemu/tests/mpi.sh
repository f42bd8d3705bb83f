#!/bin/bash
# Open MPI 5 over UCX on an RDMA device: UCX limited to the device's transports (no shared
# memory: UCX_TLS names only the device's and `self`), a ping-pong and collectives checked byte
# for byte (qemu/tests/c/mpi_check.c), then NetPIPE's ping-pong (NPopenmpi) from 1 B to 1 MiB; the
# device's counters must show the traffic.
# Arguments: DRV0 [DRV1] [tls=A+B...]. With DRV1 (run with --two-vm), one rank in each VM: VM 0
# (DRV0) runs mpirun, which starts VM 1's (DRV1) daemon through qemu/tests/py/rsh.py, as it would
# through ssh; without, two ranks in one VM. tls= gives UCX_TLS without `self`: by default
# rc_verbs+ud_verbs, so that UCX wires its endpoints up over UD datagrams.
. /roxe/qemu/guest/lib.sh
TLS=rc_verbs,ud_verbs
args=()
for a in "$@"; do
	case $a in tls=*) TLS=${a#tls=}; TLS=${TLS//+/,} ;; *) args+=("$a") ;; esac
done
DRV0=${args[0]:-roxe} DRV1=${args[1]:-}
DRV=$DRV0; [ "$ROXE_VM" = 1 ] && DRV=$DRV1
if [ -n "$DRV1" ]; then
	# By name: PRRTE knows a remote node by the name its daemon reports, and maps no rank to an
	# address given in --host.
	TAG="mpi-$DRV0-$DRV1-${TLS//,/+}" PLACE="--host roxe-vm0:1,roxe-vm1:1 --map-by ppr:1:node"
	printf '%s roxe-vm%s\n%s roxe-vm%s\n' "$SELF_IP" "$ROXE_VM" "$PEER_IP" $((1 - ROXE_VM)) >>/etc/hosts
else
	TAG="mpi-$DRV0-${TLS//,/+}" PLACE="--host localhost:2"
fi
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TLS PLACE
check "$TAG-build-vm$ROXE_VM" 120 mpicc -O2 -o /tmp/mpi_check /roxe/qemu/tests/c/mpi_check.c ||
	finish_tests
counter() { cat "/sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/$1" 2>/dev/null || echo 0; }
sent_before=$(counter sent_pkts)
if [ "$ROXE_VM" = 1 ]; then
	python3 /roxe/qemu/tests/py/rsh.py serve 2222 >/out/rsh.log 2>&1 &
	rsh=$!
	barrier listening 300
	barrier done 1200
	kill $rsh
else
	run_mpi() { # run_mpi PROGRAM...: two ranks, UCX on the RDMA device only
		# shellcheck disable=SC2086 # PLACE is several options
		mpirun -np 2 $PLACE \
			--prtemca plm_ssh_agent "python3 /roxe/qemu/tests/py/rsh.py" \
			--mca pml ucx --mca osc ucx --mca btl self -x UCX_TLS="self,$TLS" \
			-x UCX_WARN_UNUSED_ENV_VARS=n "$@"
	}
	export -f run_mpi
	[ -n "$DRV1" ] && barrier listening 300
	check "$TAG-check" 300 run_mpi /tmp/mpi_check
	grep -h "mpi-check" "/out/$TAG-check.log"
	# One rank in each VM, or both here.
	vm1_ranks=$(grep -c "^mpi-check rank . on roxe-vm1" "/out/$TAG-check.log")
	check "$TAG-placement" 5 test "$vm1_ranks" = "$([ -n "$DRV1" ] && echo 1 || echo 0)"
	check "$TAG-netpipe" 600 run_mpi NPopenmpi -u 1048576 -o "/out/$TAG-np.out"
	tail -3 "/out/$TAG-np.out"
	check "$TAG-netpipe-1MiB" 5 grep -q '^ *1048576 ' "/out/$TAG-np.out"
	[ -n "$DRV1" ] && barrier done 60
fi
sent=$(( $(counter sent_pkts) - sent_before ))
say "$RDMA_DEV sent $sent packets"
# 1 MiB echoed four times alone is more than 2048 packets at any MTU roxe and rxe support.
check "$TAG-device-sent-vm$ROXE_VM" 5 test "$sent" -ge 2048
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
