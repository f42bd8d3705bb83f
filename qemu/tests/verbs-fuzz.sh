#!/bin/bash
# A hostile user on roxe (tools/verbs-fuzz/verbs_fuzz.c, built on the host by
# tools/verbs-fuzz/build.sh) for SECONDS (argument 1, default 60; argument 2: the seed, random by
# default, or "random"; argument 3: the user, root or nobody): random verbs with random and
# invalid attributes, garbage in the mmap'd rings, and
# random and mutated RoCEv2 packets (many with a valid ICRC) sent to the device, while an
# ibv_rc_pingpong pair runs on the same device the whole time and must keep succeeding. Then a
# fresh pingpong must pass, `rdma link` must still show the device, roxe must unload, kmemleak
# must be clean; the harness fails the run on any splat.
#
# The device sits on a veth (vfz0, 192.168.78.1) rather than eth0: frames the fuzzer writes into
# its peer vfz1 arrive on vfz0 as if from the wire, so they reach roxe's receive path (packets
# sent to a local address from this host would come in on `lo`, which carries no roxe device).
# They come from 192.168.78.2, an address no interface holds, mapped to vfz1's MAC so that
# roxe's answers leave at once and are dropped there.
. /roxe/qemu/guest/lib.sh
DURATION=${1:-60}
SEED=${2:-random}
[ "$SEED" = random ] && SEED=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
# Argument 3: "nobody" fuzzes as uid 65534 (the packet child stays root to write raw frames);
# the verbs device is opened to all, as udev leaves it.
AS=${3:-root}
BIN=/roxe/build/verbs-fuzz/verbs_fuzz
[ -x $BIN ] || { fail "no $BIN (tools/verbs-fuzz/build.sh builds it)"; finish_tests; }

modprobe veth
ip link add vfz0 type veth peer name vfz1
ip addr add 192.168.78.1/24 dev vfz0
ip link set vfz0 up
ip link set vfz1 up
ip neigh replace 192.168.78.2 lladdr "$(cat /sys/class/net/vfz1/address)" dev vfz0 nud permanent
NETDEV=vfz0
step roxe-load load_driver roxe || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
say "device $RDMA_DEV on $NETDEV, GID index $gid, seed $SEED, as $AS"

# pingpong PORT: one validating ibv_rc_pingpong pair on the fuzzed device.
pingpong() {
	local port=$1 log=/tmp/vfuzz-pp-$1
	timeout -k 5 120 ibv_rc_pingpong -d "$RDMA_DEV" -g "$gid" -p "$port" -n 100 -s 4096 -c >"$log.server" 2>&1 &
	local srv=$! ok=0
	timeout -k 5 120 bash -c "$(declare -f retry_client); retry_client 30 ibv_rc_pingpong -d $RDMA_DEV -g $gid -p $port -n 100 -s 4096 -c 127.0.0.1" \
		>"$log.client" 2>&1 || ok=1
	wait $srv || ok=1
	return $ok
}
pp_loop() {
	local runs=0 fails=0
	while [ ! -e /tmp/vfuzz.stop ]; do
		if pingpong 18801; then runs=$((runs + 1)); else
			fails=$((fails + 1))
			{ echo "== run $((runs + fails)) failed"; tail -5 /tmp/vfuzz-pp-18801.client /tmp/vfuzz-pp-18801.server; } \
				>>/out/pingpong-failures.log
		fi
	done
	echo "$runs $fails" >/tmp/vfuzz.pp
}
export -f pingpong
export RDMA_DEV gid
counter() { cat /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/$1; }
icrc0=$(counter rcvd_icrc_err) drops0=$(counter rcvd_drops)
rm -f /tmp/vfuzz.stop /tmp/vfuzz.pp
pp_loop &
pp=$!

user=()
if [ "$AS" = nobody ]; then
	chmod 0666 /dev/infiniband/uverbs*
	user=(--user 65534)
fi
check verbs-fuzz $((DURATION + 60)) $BIN -d "$RDMA_DEV" -g "$gid" -t "$DURATION" -s "$SEED" \
	--packets --inject-if vfz1 --pkt-src 192.168.78.2 "${user[@]}"
grep -E '^(verbs_fuzz|packets|FINDING)' /out/verbs-fuzz.log | sed 's/^/    /'
touch /tmp/vfuzz.stop
timeout 150 tail --pid=$pp -f /dev/null
read -r runs fails </tmp/vfuzz.pp 2>/dev/null || { runs=0; fails=unknown; }
if [ "$fails" = 0 ] && [ "$runs" -ge 1 ]; then
	pass "pingpong-during-fuzz ($runs runs)"
else
	fail "pingpong-during-fuzz ($runs passed, $fails failed)"; head -40 /out/pingpong-failures.log 2>/dev/null
fi
grep -H . /sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters/* 2>/dev/null | sed 's|.*/||' | tr '\n' ' ' |
	tee /out/hw_counters; echo
# Only injected packets have their ICRC checked or fail the header checks (loopback traffic
# carries none and is well formed): both counters moving shows the packets reached roxe.
icrc=$(($(counter rcvd_icrc_err) - icrc0)) drops=$(($(counter rcvd_drops) - drops0))
if [ $icrc -gt 0 ] && [ $drops -gt 0 ]; then
	pass "packets-reached-device ($icrc ICRC errors, $drops dropped)"
else
	fail "packets-reached-device ($icrc ICRC errors, $drops dropped: did the injected frames get there?)"
fi

check pingpong-after 150 pingpong 18802
check rdma-link-shows-device 10 sh -c "rdma link show | tee /dev/stderr | grep -q '^link $RDMA_DEV/1 .*netdev vfz0'"
check roxe-unload 60 unload_driver roxe
ip link del vfz0
kmemleak_check
finish_tests
