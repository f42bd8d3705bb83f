#!/bin/bash
# NVMe over Fabrics on roxe, target and host in one VM through the device's own address: a
# kernel ULP pair that exercises what no user-space tool can. The host (nvme-rdma) maps every
# I/O's pages with fast-registration MRs (ib_alloc_mr, ib_map_mr_sg, IB_WR_REG_MR) and the
# target (nvmet-rdma) moves data with RDMA READ/WRITE through the PD's local DMA lkey and
# invalidates the host's MR remotely with SEND with Invalidate. Data is checked end to end.
# Needs the stock kernel (its nvme modules). Argument: the driver (roxe or rxe).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
NQN=roxe-nvmeof-test
CFG=/sys/kernel/config/nvmet
export NQN CFG
step "$DRV-load" load_driver "$DRV" || finish_tests
mount_configfs || fail "mount configfs"
# The target receives its commands on a shared receive queue (kernel SRQ posting).
step nvme-modules sh -c "modprobe nvmet && modprobe nvmet-rdma use_srq=1 && modprobe nvme-rdma && grep -qx Y /sys/module/nvmet_rdma/parameters/use_srq" || finish_tests

# Target: a 64 MiB file on tmpfs as namespace 1, any host, RDMA port on our IPv4 address.
setup_target() {
	mkdir -p /tmp/nvmet && mount -t tmpfs -o size=80m none /tmp/nvmet || return 1
	truncate -s 64M /tmp/nvmet/ns1.img || return 1
	mkdir "$CFG/subsystems/$NQN" || return 1
	echo 1 >"$CFG/subsystems/$NQN/attr_allow_any_host" || return 1
	mkdir "$CFG/subsystems/$NQN/namespaces/1" || return 1
	echo /tmp/nvmet/ns1.img >"$CFG/subsystems/$NQN/namespaces/1/device_path" || return 1
	echo 1 >"$CFG/subsystems/$NQN/namespaces/1/enable" || return 1
	mkdir "$CFG/ports/1" || return 1
	echo "$SELF_IP" >"$CFG/ports/1/addr_traddr" && echo rdma >"$CFG/ports/1/addr_trtype" &&
		echo 4420 >"$CFG/ports/1/addr_trsvcid" && echo ipv4 >"$CFG/ports/1/addr_adrfam" || return 1
	ln -s "$CFG/subsystems/$NQN" "$CFG/ports/1/subsystems/$NQN"
}
step nvmet-target setup_target || finish_tests

# Host: connect through /dev/nvme-fabrics (no nvme-cli needed), wait for the namespace.
connect_host() {
	echo "transport=rdma,traddr=$SELF_IP,trsvcid=4420,nqn=$NQN,nr_io_queues=2" >/dev/nvme-fabrics || return 1
	local i
	for i in $(seq 1 60); do
		# The VM has no other NVMe device: the fabric's namespace is the only one (with native
		# multipath its node is the subsystem's nvmeXn1, not the controller's path device).
		for d in /sys/class/nvme/nvme*; do
			[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$NQN" ] || continue
			for b in /dev/nvme[0-9]*n1; do [ -b "$b" ] && { echo "$b" >/tmp/nvme-dev; echo "${d##*/}" >/tmp/nvme-ctrl; return 0; }; done
		done
		sleep 0.5
	done
	return 1
}
export -f connect_host
check nvme-connect 90 connect_host || { dmesg | tail -20; finish_tests; }
DEV=$(cat /tmp/nvme-dev) CTRL=$(cat /tmp/nvme-ctrl)
export DEV CTRL
say "namespace $DEV on controller $CTRL"
check fast-reg-mrs 10 sh -c "rdma resource show mr | tee /out/mrs.txt; rdma resource show mr | grep -q ."
check target-srq 10 sh -c "rdma resource show srq | tee /out/srqs.txt; rdma resource show srq | grep -q nvmet"

# Write 32 MiB of random data with O_DIRECT in 1 MiB requests (each one a fast registration of
# 256 pages on the host, RDMA READs by the target), read it back with O_DIRECT (RDMA WRITEs
# into freshly registered MRs) and compare; then small unaligned-size requests.
io_check() {
	head -c 32M /dev/urandom >/tmp/pattern || return 1
	dd if=/tmp/pattern of="$DEV" bs=1M oflag=direct status=none || return 1
	dd if="$DEV" of=/tmp/readback bs=1M count=32 iflag=direct status=none || return 1
	cmp /tmp/pattern /tmp/readback || return 1
	# 12 KiB requests (the namespace's blocks are 4 KiB): few-page registrations.
	dd if=/dev/urandom of=/tmp/small bs=12K count=100 status=none || return 1
	dd if=/tmp/small of="$DEV" bs=12K seek=3000 oflag=direct status=none || return 1
	dd if="$DEV" of=/tmp/small.back bs=12K skip=3000 count=100 iflag=direct status=none || return 1
	cmp /tmp/small /tmp/small.back || return 1
	# The target's file holds the same bytes: the data crossed the fabric, not a cache.
	sync
	cmp -n 33554432 /tmp/pattern /tmp/nvmet/ns1.img
}
export -f io_check
check nvme-io-integrity 300 io_check

# Parallel I/O on both queues: several registrations in flight at once.
parallel_io() {
	local p pids=()
	for p in 0 1 2 3; do
		dd if=/dev/urandom of=/tmp/par$p bs=256K count=16 status=none || return 1
		dd if=/tmp/par$p of="$DEV" bs=256K seek=$((160 + p * 16)) oflag=direct status=none &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || return 1; done
	for p in 0 1 2 3; do
		dd if="$DEV" of=/tmp/par$p.back bs=256K skip=$((160 + p * 16)) count=16 iflag=direct status=none || return 1
		cmp /tmp/par$p /tmp/par$p.back || return 1
	done
}
export -f parallel_io
check nvme-parallel-io 300 parallel_io

disconnect() {
	echo 1 >"/sys/class/nvme/$CTRL/delete_controller" || return 1
	rm -f "$CFG/ports/1/subsystems/$NQN" && rmdir "$CFG/ports/1" &&
		echo 0 >"$CFG/subsystems/$NQN/namespaces/1/enable" &&
		rmdir "$CFG/subsystems/$NQN/namespaces/1" && rmdir "$CFG/subsystems/$NQN"
}
export -f disconnect
check nvme-disconnect 60 disconnect
check nvme-no-mrs-left 10 sh -c "! rdma resource show mr | grep -q ."
check nvme-unload 60 modprobe -r nvme-rdma nvmet-rdma
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
