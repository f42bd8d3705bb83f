#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds the guest root image: Debian trixie minbase with stock rdma-core (libibverbs, the rxe
# provider, ibverbs-utils, rdmacm-utils, pyverbs and its test suite), perftest, iproute2 and kmod,
# and the consumers tests drive over RDMA: the NFS server and client, fio, node_exporter, what
# blktests' nvme, srp and rnbd groups call (nvme-cli, multipath-tools, sg3-utils, mkfs, GNU awk,
# column), iperf3 (make bench's TCP baseline between two VMs), Open MPI with UCX and NetPIPE
# (qemu/tests/mpi.sh), and open-iscsi with LIO's rtslib (qemu/tests/iser.sh).
# The image holds no kernel, no modules and no tests: those come in over 9p at boot, so the
# image is built once. Cached as $ROXE_CACHE/guest-<key>.img (link: guest.img); a run never
# modifies it (QEMU opens it with snapshot=on).
. "$(dirname "$0")/lib.sh"

# automake: libopenmpi-dev's libltdl-dev depends on the virtual automake-1.17, which debootstrap
# does not resolve.
PKGS=(
	rdma-core ibverbs-utils rdmacm-utils ibverbs-providers libibverbs-dev python3-pyverbs perftest
	iproute2 kmod procps iputils-ping python3 psmisc util-linux coreutils
	netcat-openbsd gcc libc6-dev linux-perf iperf3
	nfs-kernel-server nfs-common fio prometheus-node-exporter
	nvme-cli multipath-tools sg3-utils xfsprogs e2fsprogs gawk udev bsdextrautils
	openmpi-bin libopenmpi-dev netpipe-openmpi ucx-utils automake
	open-iscsi python3-rtslib-fb
)
key=$(cat "$0" "$ROXE_TOP/qemu/guest/roxe-boot" | key_of)
img="$ROXE_CACHE/guest-$key.img"
if [ -e "$img" ]; then
	ln -sfn "$img" "$ROXE_CACHE/guest.img"
	echo "$img"
	exit 0
fi

build() {
	[ -e "$img" ] && return 0
	local tree="$ROXE_CACHE/guest-tree.tmp" mirror
	mirror=$(debian_mirror)
	rm -rf "$tree"
	log "debootstrap the guest (about a minute)"
	debootstrap --variant=minbase --include="$(IFS=,; echo "${PKGS[*]}")" trixie "$tree" "$mirror" \
		>"$ROXE_CACHE/guest.log" 2>&1 || { tail -20 "$ROXE_CACHE/guest.log"; die "guest debootstrap failed"; }
	# The rdma-core test suite ships compressed among pyverbs' docs in Debian: unpack a runnable
	# copy at /opt/rdma-core-tests (run it as `python3 -m tests` from /opt/rdma-core-tests/..).
	mkdir -p "$tree/opt/rdma-core"
	cp -a "$tree/usr/share/doc/rdma-core/tests" "$tree/opt/rdma-core/tests"
	find "$tree/opt/rdma-core/tests" -name '*.gz' -exec gunzip -f {} +
	install -m 0755 "$ROXE_TOP/qemu/guest/roxe-boot" "$tree/sbin/roxe-boot"
	mkdir -p "$tree/roxe" "$tree/out" "$tree/lib/modules"
	echo roxe-guest >"$tree/etc/hostname"
	rm -rf "$tree/var/cache/apt/archives"/*.deb "$tree/var/lib/apt/lists"/*
	mkfs.ext4 -q -L roxe-root -d "$tree" "$img.tmp" 2048M
	mv "$img.tmp" "$img"
	rm -rf "$tree"
}
with_lock guest build
ln -sfn "$img" "$ROXE_CACHE/guest.img"
log "guest image ready: $img"
echo "$img"
