#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# iSCSI over RDMA (iSER) between two VMs: VM 0 is LIO's target (ib_isert; a 64 MiB RAM disk as
# LUN 0 on a portal with iSER on, configured with rtslib: qemu/tests/py/iser_target.py), VM 1
# open-iscsi's initiator (ib_iser). VM 1 discovers the target, logs in through the `iser`
# interface and checks that the session's transport is iser (not TCP), loads the SCSI disk driver
# by hand (the guest has no udev), writes the disk with fio and reads it back verified (random
# 4 KiB and sequential 128 KiB writes, crc32c), and logs out; VM 0 then removes the target and
# its storage. Each VM's `sent_pkts` must show the traffic. Arguments: DRV0 [DRV1 [DISK_MIB
# [JOBS]]]: the driver of each VM (roxe or rxe), the RAM disk's size (64 MiB; fio covers three
# quarters of it) and how many fio jobs share it, each on its own part (1); the long form
# (qemu/tests/ulp-long.list) writes a larger disk with several jobs at once.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; [ "$ROXE_VM" = 1 ] && DRV=${2:-${1:-roxe}}
TAG="iser-${1:-roxe}-${2:-${1:-roxe}}"
IQN=iqn.2026-12.org.roxe:iser0
TGT_IP=192.168.77.1
DISK_MIB=${3:-64} JOBS=${4:-1}
PART_MIB=$((DISK_MIB * 3 / 4 / JOBS))
export PART_MIB JOBS
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
sent_before=$(cat /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/sent_pkts 2>/dev/null || echo 0)

target() {
	step iser-configfs mount_configfs || return 1
	step iser-target-modules modprobe -a target_core_mod iscsi_target_mod ib_isert || return 1
	# rtslib keeps persistent-reservation state under its dbroot, which targetcli's package
	# creates; the library alone does not.
	mkdir -p /etc/rtslib-fb-target
	check iser-target-setup 120 python3 /roxe/qemu/tests/py/iser_target.py setup $IQN $TGT_IP $DISK_MIB || return 1
	check iser-portal-on 30 python3 /roxe/qemu/tests/py/iser_target.py check $IQN $TGT_IP
	check iser-isert-listening 30 sh -c 'rdma res show cm_id | grep LISTEN | grep -q ":3260"'
}

# The initiator's setup as Debian's units would do it: a name of its own, and iscsid running.
start_iscsid() {
	echo "InitiatorName=$(iscsi-iname)" >/etc/iscsi/initiatorname.iscsi || return 1
	mkdir -p /run/lock/iscsi || return 1
	iscsid || return 1
	sleep 1
	pgrep -x iscsid
}
# The disk the session attached: "Attached scsi disk sdX" in the session's report.
session_disk() {
	iscsiadm -m session -P 3 2>/dev/null | sed -n 's/.*Attached scsi disk \([a-z]*\).*/\1/p' | head -1
}
wait_disk() {
	local i d
	for ((i = 0; i < 60; i++)); do
		d=$(session_disk)
		[ -n "$d" ] && [ -b "/dev/$d" ] && { echo "$d" >/tmp/iser-disk; echo "/dev/$d"; return 0; }
		sleep 1
	done
	iscsiadm -m session -P 3
	return 1
}
export -f session_disk wait_disk
fio_verify() { # fio_verify NAME RW BS
	fio --name="$1" --filename="/dev/$(cat /tmp/iser-disk)" --rw="$2" --bs="$3" \
		--size="${PART_MIB}M" --numjobs="$JOBS" --offset_increment="${PART_MIB}M" \
		--direct=1 --ioengine=libaio --iodepth=16 --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --group_reporting --output="/out/fio-$1.txt"
	local rc=$?
	grep -E 'WRITE:|READ:|err=|verify' "/out/fio-$1.txt" | head -6
	return $rc
}
export -f fio_verify

initiator() {
	step iser-initiator-modules modprobe -a ib_iser sd_mod || return 1
	step iser-iscsid start_iscsid || return 1
	# SendTargets discovery goes over TCP, as iscsiadm does by default; the session is then made
	# over iSER. Discovery through the iser interface runs in iscsiadm itself, which loses a
	# Text Response that reaches it while it still waits for the kernel's reply to its own send
	# (an answer within a few hundred microseconds, with the guest's vCPU preempted): it waits
	# its 30 s, gives up, and on the retry reads the freed event and segfaults (open-iscsi
	# 2.1.11, Debian's). iscsid, which makes the session, takes such events in order.
	check iser-discovery 120 sh -c "iscsiadm -m discovery -t sendtargets -p $TGT_IP:3260 | grep -F ' $IQN'" || return 1
	check iser-node-iser 30 iscsiadm -m node -T $IQN -p $TGT_IP:3260 -I iser -o new || return 1
	check iser-login 120 iscsiadm -m node -T $IQN -p $TGT_IP:3260 -I iser --login || return 1
	check iser-transport-is-iser 30 sh -c 'iscsiadm -m session -P 1 | tee /dev/stderr | grep -q "Iface Transport: iser"'
	check iser-disk 90 wait_disk || return 1
	check "$TAG-fio-randwrite-4k" $((600 + 10 * DISK_MIB)) fio_verify randwrite-4k randwrite 4k
	check "$TAG-fio-write-128k" $((600 + 5 * DISK_MIB)) fio_verify write-128k write 128k
	check iser-logout 120 iscsiadm -m node -T $IQN -p $TGT_IP:3260 --logout
	check iser-no-session 30 sh -c '! iscsiadm -m session 2>/dev/null | grep -q iser0'
}

if [ "$ROXE_VM" = 0 ]; then
	target; rc=$?
	barrier target-ready 300
	barrier initiator-done $((1800 + 15 * DISK_MIB))
	[ $rc = 0 ] && check iser-target-teardown 120 python3 /roxe/qemu/tests/py/iser_target.py teardown
else
	barrier target-ready 300
	initiator
	barrier initiator-done $((1800 + 15 * DISK_MIB))
fi
sent_after=$(cat /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/sent_pkts 2>/dev/null || echo 0)
# The device's counters (retransmissions, drops) for a look afterwards.
rdma statistic show link "$RDMA_DEV/1" 2>/dev/null | tee /out/hca-stats.txt
check "$TAG-device-sent-vm$ROXE_VM" 5 test $((sent_after - sent_before)) -ge 1000
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
