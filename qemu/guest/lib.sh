# SPDX-License-Identifier: GPL-2.0
# Helpers for guest test scripts (sourced). Results go to /out/results as PASS/FAIL lines that the
# host runner counts; a script's exit code is 0 only when nothing failed.
set -u
ROXE_TESTS_FAILED=0
PEER_IP="192.168.77.$((2 - ROXE_VM))"
SELF_IP="192.168.77.$((ROXE_VM + 1))"
NETDEV=eth0

say() { printf '[vm%s %5ss] %s\n' "$ROXE_VM" "$SECONDS" "$*"; }
pass() { echo "PASS $*" >>/out/results; say "PASS $*"; }
fail() { echo "FAIL $*" >>/out/results; say "FAIL $*"; ROXE_TESTS_FAILED=1; }

# check NAME TIMEOUT CMD...: run CMD (a program, or a function exported with `export -f`) in a
# child shell with a timeout, record PASS/FAIL, keep its output in /out/NAME.log. The timeout
# catches hangs, not slowness: it is at least CHECK_MIN_TIMEOUT seconds, since starting even a
# grep over 9p took more than 5 s on the debug kernel with a second guest on the same two cores.
# On the debug kernel every limit is tripled: KASAN under TCG runs user space and the kernel
# several times slower, and on some hosts 2.5 times slower again than on others (a check of
# thirty forks took over a minute there); the script's own limit still bounds a hang.
CHECK_MIN_TIMEOUT=30
check() {
	local name=$1 t=$2; shift 2
	[ "$t" -ge "$CHECK_MIN_TIMEOUT" ] || t=$CHECK_MIN_TIMEOUT
	case ${ROXE_FLAVOUR:-} in debug*) t=$((t * 3)) ;; esac
	local log="/out/$name.log"
	say "run  $name: $*"
	local rc=0
	timeout -k 5 "$t" bash -c '"$@"' "$name" "$@" >"$log" 2>&1 || rc=$?
	if [ $rc = 0 ]; then pass "$name"; return 0; fi
	# 124: the timeout ended it.
	fail "$name (exit $rc)"; tail -15 "$log" | sed 's/^/    /'
	return 1
}

# step NAME CMD...: run CMD in this shell (for steps that set variables, like load_driver),
# record PASS/FAIL. The guest script's own timeout bounds it.
step() {
	local name=$1; shift
	say "step $name: $*"
	local rc=0
	"$@" >"/out/$name.log" 2>&1 || rc=$?
	if [ $rc = 0 ]; then pass "$name"; return 0; fi
	fail "$name (exit $rc)"; tail -15 "/out/$name.log" | sed 's/^/    /'
	return 1
}

# expect_fail NAME TIMEOUT CMD...: the command must fail (a negative test).
expect_fail() {
	local name=$1 t=$2; shift 2
	if timeout -k 5 "$t" bash -c '"$@"' "$name" "$@" >"/out/$name.log" 2>&1; then
		fail "$name (unexpectedly succeeded)"; return 1
	fi
	pass "$name"
}

# Two-VM barrier on the shared /sync directory: both VMs wait until both arrived.
barrier() {
	local name=$1 t=${2:-300} i=0
	touch "/sync/$name.$ROXE_VM"
	while [ ! -e "/sync/$name.$((1 - ROXE_VM))" ]; do
		sleep 0.5; i=$((i + 1))
		if [ $i -gt $((t * 2)) ]; then fail "barrier $name timed out"; return 1; fi
	done
	return 0
}

# host_udp_drops NAME: the host's count of UDP datagrams its sockets dropped for want of receive
# buffer (two VMs: what the receiving QEMU's socket could not take), as the host's
# qemu/run-vm.sh answers it through /sync; empty if no answer came within 10 s. NAME is unique
# per question.
host_udp_drops() {
	local f=/sync/host-udp.$1.$ROXE_VM i=0
	touch "$f"
	while [ ! -e "$f.val" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
	cat "$f.val" 2>/dev/null
}

# iperf3_mibs: the MiB/s the receiver counted in iperf3's JSON report (-J) on stdin; empty if the
# report has none (a failed run).
iperf3_mibs() {
	python3 -c "import json, sys; print(round(json.load(sys.stdin)['end']['sum_received']['bits_per_second'] / 8 / 2**20, 2))" 2>/dev/null
}

# The kernel's RDMA core and the UDP tunnel, which both drivers sit on.
load_rdma_core() {
	modprobe ib_uverbs && modprobe rdma_ucm && modprobe udp_tunnel && modprobe ip6_udp_tunnel
}

# load_driver rxe|roxe|siw: load the driver and create device $1 on eth0 (name in $RDMA_DEV).
load_driver() {
	local drv=$1
	load_rdma_core || return 1
	case "$drv" in
	rxe) modprobe rdma_rxe || return 1; RDMA_DEV=rxe0 ;;
	roxe) insmod "/roxe/build/$ROXE_FLAVOUR/roxe.ko" || return 1; RDMA_DEV=roxe0 ;;
	siw) { install_siw && modprobe siw; } || return 1; RDMA_DEV=siw0 ;;
	selftest) insmod "/roxe/build/$ROXE_FLAVOUR/roxe_selftest.ko" || return 1; return 0 ;;
	*) return 1 ;;
	esac
	export RDMA_DEV
	rdma link add "$RDMA_DEV" type "$drv" netdev "$NETDEV" || return 1
	wait_port_active "$RDMA_DEV"
}

unload_driver() {
	local drv=$1
	rdma link delete "$RDMA_DEV" 2>/dev/null
	case "$drv" in
	rxe) rmmod rdma_rxe ;;
	roxe) rmmod roxe ;;
	siw) rmmod siw ;;
	esac
}

wait_port_active() {
	local i
	for i in $(seq 1 40); do
		ibv_devinfo -d "$1" 2>/dev/null | grep -q PORT_ACTIVE && return 0
		sleep 0.5
	done
	return 1
}

# gid_index_with DEV PREFIX: the lowest RoCE v2 GID index whose GID starts with PREFIX. In
# numeric order and with the shell's own reads: a glob visits gids/1, 10..19, 100..199,
# 1000..1023 before gids/2, and a `cat` per file costs a fork, which on the debug kernel under
# TCG made finding the IPv6 GID take 85 s.
gid_index_with() {
	local dev=$1 prefix=$2 dir=/sys/class/infiniband/$1/ports/1 i g t n
	n=$(ls "$dir/gids" | wc -l)
	for ((i = 0; i < n; i++)); do
		read -r g <"$dir/gids/$i" 2>/dev/null || continue
		case "$g" in "$prefix"*) ;; *) continue ;; esac
		read -r t <"$dir/gid_attrs/types/$i" 2>/dev/null || continue
		[ "$t" = "RoCE v2" ] && { echo "$i"; return 0; }
	done
	return 1
}

# The RoCE v2 GID index of our fd77:: IPv6 address.
gid_index_v6() { gid_index_with "${1:-$RDMA_DEV}" fd77:; }

# The RoCE v2 GID index of our IPv4 address (GID 1 on rxe, but never assume).
gid_index_v4() { gid_index_with "${1:-$RDMA_DEV}" 0000:0000:0000:0000:0000:ffff:; }

# veth_peer DRV NS ADDR NS_ADDR: loads DRV (roxe or rxe) and creates device ${DRV}0 on a veth
# vpc0 holding ADDR, whose other end vpc1 is in network namespace NS holding NS_ADDR, so that
# packets sent from NS arrive on the device's netdev from outside (a packet between two local
# addresses would go over lo, which carries no RDMA device). vpc0 takes packets whose source is
# one of its own addresses (accept_local: a transparent socket in NS may send as ADDR), and NS
# reaches ADDR without ARP (such a packet's source is not NS's own address). Sets RDMA_DEV.
veth_peer() {
	local drv=$1 ns=$2 addr=$3 ns_addr=$4
	load_rdma_core || return 1
	case "$drv" in
	roxe) insmod "/roxe/build/$ROXE_FLAVOUR/roxe.ko" || return 1 ;;
	rxe) modprobe rdma_rxe || return 1 ;;
	*) return 1 ;;
	esac
	ip netns add "$ns" || return 1
	ip link add vpc0 type veth peer name vpc1 || return 1
	ip link set vpc1 netns "$ns" || return 1
	ip addr add "$addr/24" dev vpc0 || return 1
	sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.vpc0.rp_filter=0 \
		net.ipv4.conf.vpc0.accept_local=1 || return 1
	ip link set vpc0 up || return 1
	ip -n "$ns" link set lo up || return 1
	ip -n "$ns" addr add "$ns_addr/24" dev vpc1 || return 1
	ip -n "$ns" link set vpc1 up || return 1
	ip -n "$ns" neigh replace "$addr" lladdr "$(cat /sys/class/net/vpc0/address)" dev vpc1 nud permanent || return 1
	RDMA_DEV=${drv}0
	rdma link add "$RDMA_DEV" type "$drv" netdev vpc0 || return 1
	wait_port_active "$RDMA_DEV" || return 1
	ip addr show dev vpc0; ip -n "$ns" addr show dev vpc1; rdma link show
}

# veth_peer_unload DRV NS: undoes veth_peer.
veth_peer_unload() {
	rdma link delete "${1}0" && ip link del vpc0 && ip netns del "$2" || return 1
	case "$1" in roxe) rmmod roxe ;; rxe) rmmod rdma_rxe ;; esac
}

# install_module KO: installs a module as modules are installed (/lib/modules/$(uname -r)/extra,
# and a module index that lists it), so that modprobe finds it. /lib/modules is the host's
# read-only share: an overlay with a tmpfs upper layer makes it writable for this boot. The index
# comes from the host (qemu/module-index.sh: the kernel's modules plus roxe.ko and siw.ko); a
# depmod here reads every module over 9p, which took minutes on a busy host, and is the fallback.
install_module() {
	local rel idx; rel=$(uname -r)
	idx=/roxe/build/$ROXE_FLAVOUR-modules
	if ! grep -q ' /lib/modules overlay ' /proc/mounts; then
		modprobe overlay || return 1
		mkdir -p /tmp/mods/up /tmp/mods/work || return 1
		mount -t overlay overlay -o lowerdir=/lib/modules,upperdir=/tmp/mods/up,workdir=/tmp/mods/work /lib/modules || return 1
	fi
	install -D -m 0644 "$1" "/lib/modules/$rel/extra/$(basename "$1")" || return 1
	if [ "$(cat "$idx/release" 2>/dev/null)" = "$rel" ] && cmp -s "$1" "$idx/extra/$(basename "$1")"; then
		cp "$idx"/modules.* "/lib/modules/$rel/"
	else
		# The share lacks modules.order and modules.builtin*, which depmod only warns about.
		depmod -a "$rel" 2>/tmp/depmod.log
	fi
}

# install_roxe: roxe.ko of this flavour, installed.
install_roxe() { install_module "/roxe/build/$ROXE_FLAVOUR/roxe.ko"; }

# install_siw: siw where the kernel lacks it (Debian's; qemu/soft-rdma-build.sh builds it from the
# same source), installed; on a kernel that has siw, nothing to do. rdma_rxe, where the kernel
# lacks it, is installed at boot (qemu/guest/init).
install_siw() {
	modinfo siw >/dev/null 2>&1 && return 0
	[ -f "/roxe/build/$ROXE_FLAVOUR-soft-rdma/siw.ko" ] || { echo "no siw for $ROXE_FLAVOUR"; return 1; }
	install_module "/roxe/build/$ROXE_FLAVOUR-soft-rdma/siw.ko"
}

# rxe_compat_conf on|off: tools/modprobe.d/roxe-rxe-compat.conf in /etc/modprobe.d (modprobe
# rdma_rxe loads roxe with rxe_compat=1, Documentation/install.md), or not.
RXE_COMPAT_CONF=/etc/modprobe.d/roxe-rxe-compat.conf
rxe_compat_conf() {
	case $1 in
	on) install -D -m 0644 /roxe/tools/modprobe.d/roxe-rxe-compat.conf $RXE_COMPAT_CONF ;;
	off) rm -f $RXE_COMPAT_CONF ;;
	esac
}

# configfs mounted where a distribution's init mounts it: the NVMe and SCSI targets are
# configured through it.
mount_configfs() {
	mountpoint -q /sys/kernel/config && return 0
	modprobe configfs && mount -t configfs configfs /sys/kernel/config
}

# wait_listening [SECONDS]: until an rdma_cm listener exists on this VM (a perftest server
# started in the background is ready), at most SECONDS (10). A client that connects earlier is
# rejected (IB_CM_REJ_INVALID_SERVICE_ID). This covers perftest -R's first connection (its
# parameter exchange) only: its second, the test's own, is made as soon as the exchange is
# over, and one that reaches the server before the server listens for it is rejected too; the
# perftest of the guest image then crashes in librdmacm instead of retrying, and its server
# waits out its timeout (the run counts as failed).
wait_listening() {
	local i
	for ((i = 0; i < ${1:-10} * 10; i++)); do
		rdma res show cm_id 2>/dev/null | grep -q ' LISTEN ' && return 0
		sleep 0.1
	done
	return 1
}

# Retry a client command until the server side is listening (server start is not instant).
retry_client() {
	local t=$1; shift
	local end=$((SECONDS + t))
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 1
	done
	return 1
}

# cm_pair NAME TIMEOUT SERVER-CMD -- CLIENT-CMD: a server and a client that connect through
# rdma_cm, on one VM ($TWO = 0) or with VM 0 serving and VM 1 connecting; judged on the client,
# and on the server too between two VMs. Checks are named $TAG-NAME.
cm_pair() {
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

# case_results TAG PREFIX LOG: the PASS/FAIL lines a Python test printed for its cases
# (qemu/tests/py/ringlib.py Report: "PASS PREFIX:case (detail)") in LOG, recorded as results
# named TAG-PREFIX:case (as they are when TAG is empty).
case_results() {
	local tag=$1 prefix=$2 log=$3 st name rest
	grep -E "^(PASS|FAIL) $prefix:" "$log" | while read -r st name rest; do
		echo "$st ${tag:+$tag-}$name $rest" >>/out/results
	done
}

kmemleak_check() {
	local f=/sys/kernel/debug/kmemleak
	[ -w $f ] || return 0
	# Inside a series (qemu/tests/series.sh) the scan runs once, after the last script: two
	# scans cost about 17 s on the debug kernel, and a leak stays reported until cleared.
	[ -n "${ROXE_KMEMLEAK_AT_END:-}" ] && { say "kmemleak: scanned at the end of the series"; return 0; }
	echo scan >$f; sleep 1; echo scan >$f
	# A debugfs file has no size (`test -s` is always false): read it.
	if grep -q unreferenced $f; then
		cp $f /out/kmemleak
		fail "kmemleak: $(grep -c unreferenced $f) leaks"; head -30 $f
		return 1
	fi
	pass "kmemleak clean"
}

# The kernel's pinned-page balance (nr_foll_pin_acquired - nr_foll_pin_released). /proc/vmstat
# sums per-CPU counters lazily (a balance of -10 with nothing pinned was seen): fold them first.
pin_balance() {
	echo 1 >/proc/sys/vm/stat_refresh 2>/dev/null
	awk '/^nr_foll_pin_acquired/ { a = $2 } /^nr_foll_pin_released/ { r = $2 } END { print a - r }' /proc/vmstat
}

finish_tests() { exit $ROXE_TESTS_FAILED; }

# writable_system: for a guest that installs packages and builds kernel modules as a user does
# (the DKMS test, the CI recipe): new files under /usr, /lib/modules (a read-only share) and
# /var/lib/dkms, and the trees tools/rust-kernel-prep makes in /var/cache/rust-kernel-prep, go to
# memory (tmpfs), since the image has about 1.2 GB free and the kernel source unpacked with its
# prepared tree is about 2 GB. Such a run gives the guest 8 GiB.
writable_system() {
	modprobe overlay || return 1
	mkdir -p /run/mods9p /run/ov || return 1
	mount -t tmpfs -o size=6G tmpfs /run/ov || return 1
	mkdir -p /run/ov/usr/up /run/ov/usr/work /run/ov/mods/up /run/ov/mods/work || return 1
	# The share is mounted on /usr/lib/modules (/lib is a link): move it out of the way of the
	# overlay on /usr, which would hide it, then lay the modules' overlay on top.
	mount --move /usr/lib/modules /run/mods9p || return 1
	mount -t overlay overlay -o lowerdir=/usr,upperdir=/run/ov/usr/up,workdir=/run/ov/usr/work /usr || return 1
	mount -t overlay overlay -o lowerdir=/run/mods9p,upperdir=/run/ov/mods/up,workdir=/run/ov/mods/work \
		/usr/lib/modules || return 1
	mkdir -p /var/lib/dkms /var/cache/rust-kernel-prep || return 1
	mount -t tmpfs -o size=4G tmpfs /var/lib/dkms &&
		mount -t tmpfs -o size=4G tmpfs /var/cache/rust-kernel-prep
}

# Helpers that `check` runs in a child shell need to be exported, with the variables they use.
export -f say pass fail retry_client wait_port_active gid_index_with gid_index_v4 gid_index_v6 load_rdma_core unload_driver \
	kmemleak_check veth_peer_unload
export ROXE_VM ROXE_FLAVOUR PEER_IP SELF_IP NETDEV
