#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Where the host's time goes while two VMs talk (by hand, beside qemu/tests/diag2vm.sh; not in
# make test). Between two VMs the host runs four busy threads on its cores: each QEMU's vCPU
# (guest code under TCG) and its main loop (the `dgram` socket and virtio-net's device model).
#   tools/host-sample.sh record FILE     samples once a second until killed
#   tools/host-sample.sh report FILE T0 T1
# record writes "SECONDS KEY VALUE" lines: the host's UDP datagrams received and dropped for
# want of receive buffer (/proc/net/snmp), and each QEMU thread's CPU ticks (utime + stime of
# /proc/PID/task/TID/stat), keyed vmN.COMM (N: the guest's roxe.vm= number) with spaces in
# COMM replaced by underscores. report prints, over [T0, T1] (the epoch seconds that
# diag2vm.sh's RESULT lines give as t=T0..T1), the datagrams per second, the drops, and each
# thread's share of one host CPU.
set -euo pipefail
cmd=${1:-}
case $cmd in
record)
	out=$2
	: >"$out"
	while :; do
		t=$(date +%s)
		awk -v t="$t" '/^Udp:/ { if (h) { print t, "udp_in", $in_; print t, "udp_rcvbuf_err", $rb; exit }
			for (i = 1; i <= NF; i++) { if ($i == "InDatagrams") in_ = i; if ($i == "RcvbufErrors") rb = i }
			h = 1 }' /proc/net/snmp >>"$out" 2>/dev/null || true
		for p in $(pgrep -x qemu-system-x86 || true); do
			vm=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | sed -n 's/.*roxe\.vm=\([0-9]*\).*/\1/p')
			for task in /proc/"$p"/task/*; do
				comm=$(tr ' ' _ <"$task/comm" 2>/dev/null) || continue
				# Fields after the ")" that ends comm: utime and stime are the 12th and 13th.
				ticks=$(sed 's/.*) //' "$task/stat" 2>/dev/null | awk '{ print $12 + $13 }') || continue
				echo "$t vm${vm:-?}.$comm.${task##*/} ${ticks:-0}"
			done
		done >>"$out"
		sleep 1
	done
	;;
report)
	file=$2 t0=$3 t1=$4
	hz=$(getconf CLK_TCK)
	awk -v t0="$t0" -v t1="$t1" -v hz="$hz" '
		# First sample at or after T0 and last at or before T1, per key.
		$1 >= t0 && $1 <= t1 {
			if (!($2 in a)) { a[$2] = $3; ta[$2] = $1 }
			b[$2] = $3; tb[$2] = $1
		}
		END {
			for (k in a) {
				d = tb[k] - ta[k]; if (d <= 0) continue
				if (k == "udp_in") printf "udp datagrams/s %.0f\n", (b[k] - a[k]) / d
				else if (k == "udp_rcvbuf_err") printf "udp drops %d\n", b[k] - a[k]
				else {
					# Sum threads of one name (vmN.COMM.TID -> vmN.COMM).
					n = k; sub(/\.[0-9]+$/, "", n); cpu[n] += (b[k] - a[k]) / hz / d
				}
			}
			for (n in cpu) if (cpu[n] >= 0.01) printf "cpu %s %.2f\n", n, cpu[n]
		}' "$file" | sort
	;;
*)
	echo "usage: $0 record FILE | report FILE T0 T1" >&2
	exit 2
	;;
esac
