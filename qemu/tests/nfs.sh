#!/bin/bash
# NFS over RDMA between two VMs: VM 0 runs the kernel NFS server with its RDMA listener
# (svcrdma, port 20049), VM 1 mounts its export with the kernel client over RDMA (xprtrdma,
# `proto=rdma`). The client writes files, checksums them, unmounts, mounts again and checks
# them, then fio writes and verifies through the mount. xprtrdma registers its buffers with
# fast-registration MRs, the server moves data with RDMA READ and WRITE and invalidates the
# client's MRs with SEND with Invalidate, and both sides agree on inline sizes through CM
# private data. The client also sets each MR's IOVA anew between mapping and registering it
# (the RPC's XID in its upper 32 bits), which the REG_MR must honour. On a failed mount the
# client's rpcrdma trace events are kept in /out/trace.txt. Arguments: DRV0,DRV1[,FIO_SIZE]
# (server, client: roxe or rxe; fio's size, default 16m). Needs the stock kernel.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; [ "$ROXE_VM" = 1 ] && DRV=${2:-${1:-roxe}}
TAG="${1:-roxe}-${2:-${1:-roxe}}"
FIO_SIZE=${3:-16m}
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
SRV=192.168.77.1
export SRV
# The server: an export on tmpfs, nfsd with an RDMA listener, mountd for the export table (no
# systemd in the guest, so the daemons are started here).
serve() {
	modprobe nfsd && modprobe rpcrdma || return 1
	mkdir -p /export && mount -t tmpfs -o size=400m none /export || return 1
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || return 1
	# A fresh server has no clients to wait for: a short grace period (NFSv4 OPENs wait for
	# its end, 90 s by default) and lease.
	echo 10 >/proc/fs/nfsd/nfsv4leasetime && echo 10 >/proc/fs/nfsd/nfsv4gracetime || return 1
	echo "/export *(rw,sync,no_subtree_check,no_root_squash,insecure,fsid=0)" >/etc/exports
	mkdir -p /run/rpcbind /var/lib/nfs/rpc_pipefs /var/lib/nfs/v4recovery
	mountpoint -q /var/lib/nfs/rpc_pipefs || mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs
	rpcbind -w || return 1
	exportfs -ra || return 1
	rpc.mountd --no-nfs-version 3 || return 1
	rpc.nfsd -N 3 4 || return 1
	echo "rdma 20049" >/proc/fs/nfsd/portlist || return 1
	cat /proc/fs/nfsd/portlist
}
# The client's checks, each a function for `check`.
do_mount() {
	modprobe rpcrdma || return 1
	mkdir -p /mnt/nfs
	mount -t nfs4 -o vers=4.2,proto=rdma,port=20049 "$SRV:/" /mnt/nfs || return 1
	grep ' /mnt/nfs ' /proc/mounts | tee /dev/stderr | grep -q 'proto=rdma'
}
write_files() {
	local i
	for i in 1 2 3 4; do head -c $((i * 1048576 + 12345)) /dev/urandom >/tmp/f$i; done
	cp /tmp/f1 /tmp/f2 /tmp/f3 /tmp/f4 /mnt/nfs/ || return 1
	sync
	(cd /tmp && sha256sum f1 f2 f3 f4) >/tmp/sums
	(cd /mnt/nfs && sha256sum -c /tmp/sums)
}
remount_verify() {
	umount /mnt/nfs || return 1
	do_mount || return 1
	(cd /mnt/nfs && sha256sum -c /tmp/sums)
}
fio_verify() {
	fio --name=nfsrdma --directory=/mnt/nfs --rw=randwrite --bs=64k --size="$FIO_SIZE" \
		--ioengine=psync --direct=1 --verify=crc32c --do_verify=1 --numjobs=1 \
		--output=/out/fio.txt || { cat /out/fio.txt; return 1; }
	grep -E 'WRITE:|READ:|err=' /out/fio.txt
	! grep -q 'verify: bad' /out/fio.txt
}
export FIO_SIZE
export -f do_mount write_files remount_verify fio_verify
barrier ready 180 || finish_tests
if [ "$ROXE_VM" = 0 ]; then
	step "$TAG-nfs-server" serve || true
	barrier served 120
	barrier done 900
	rdma resource show qp; rdma resource show cm_id
	grep . /sys/class/infiniband/*/ports/1/hw_counters/* | sed 's/.*hw_counters.//' | tr '\n' ' '; echo
	# nfsd's RDMA listener holds the device: stop it before the device goes.
	rpc.nfsd 0; exportfs -ua
else
	barrier served 120
	mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
	modprobe rpcrdma && echo 1 >/sys/kernel/tracing/events/rpcrdma/enable
	if ! check "$TAG-nfs-mount" 120 do_mount; then
		rdma resource show qp; rdma resource show cm_id; rdma resource show mr | head
		grep . /sys/class/infiniband/*/ports/1/hw_counters/* | sed 's/.*hw_counters.//' | tr '\n' ' '; echo
		cp /sys/kernel/tracing/trace /out/trace.txt
	else
		check "$TAG-nfs-write-files" 300 write_files
		check "$TAG-nfs-remount-verify" 300 remount_verify
		check "$TAG-nfs-fio-verify" 600 fio_verify
		check "$TAG-nfs-umount" 60 umount /mnt/nfs
	fi
	barrier done 900
fi
dmesg | grep -iE 'rpcrdma|svcrdma|nfs' | tail -20
check "$DRV-unload-vm$ROXE_VM" 60 bash -c "rmmod rpcrdma 2>/dev/null; unload_driver $DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
