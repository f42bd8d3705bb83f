#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# roxe against rdma_rxe and siw, side by side, on Debian's stock kernel (the one users run; siw
# built for it by qemu/soft-rdma-build.sh), one VM (loopback) and two VMs. One VM boots once and
# rotates the three drivers round by round (qemu/tests/bench.sh); two VMs boot once per round
# and driver, in the same rotation; tools/bench_report.py reports
# the medians of the rounds, roxe's ratios to both, the share of the guest's memcpy (one VM) or
# of iperf3's TCP (two VMs), CPU time per GiB, QP scaling and the goals with their verdicts.
# Writes Documentation/bench/{bench.csv,bench.md,bench.png,commits.txt}; with --one-vm-only or
# --two-vm-only the other setup's rows are kept from the previous table.
#   tools/bench.sh [--rounds N] [--quick] [--one-vm-only | --two-vm-only]
set -euo pipefail
args="$*"
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
rounds=3 quick=0 one=1 two=1
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift ;;
	--quick) quick=1 ;;
	--one-vm-only) two=0 ;;
	--two-vm-only) one=0 ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
out=Documentation/bench; mkdir -p "$out"
qemu/kernel-stock.sh >/dev/null
qemu/guest-image.sh >/dev/null
qemu/build-module.sh stock >/dev/null
qemu/soft-rdma-build.sh stock >/dev/null
tmo=$((rounds * (quick ? 1200 : 3600)))
# A run of one setup keeps the other setup's rows and the commit they were measured at
# (commits.txt: "SETUP COMMIT" lines; a table made before that file existed names its commit in
# bench.md's first line), so that the table stays whole.
head=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
prev=$(sed -n '1s/.* at commit \([0-9a-f?]*\).*/\1/p' "$out/bench.md" 2>/dev/null || true)
kept=$(mktemp) commits=$(mktemp)
for s in 1vm 2vm; do
	if { [ $s = 1vm ] && [ $one = 1 ]; } || { [ $s = 2vm ] && [ $two = 1 ]; }; then
		echo "$s $head" >>"$commits"
	elif [ -f "$out/bench.csv" ]; then
		grep "^$s," "$out/bench.csv" >>"$kept" || true
		c=$(awk -v s=$s '$1 == s { print $2 }' "$out/commits.txt" 2>/dev/null || true)
		echo "$s ${c:-${prev:-?}}" >>"$commits"
	fi
done
echo "setup,round,driver,test,size,value,unit" >"$out/bench.csv"
cat "$kept" >>"$out/bench.csv"
mv "$commits" "$out/commits.txt"
rm -f "$kept"
if [ $one = 1 ]; then
	qemu/run-vm.sh --flavour stock --script qemu/tests/bench.sh --name bench-1vm --timeout "$tmo" --args "$rounds,$quick" || true
	tail -n +2 build/vm/bench-1vm/vm0/bench.csv | sed "s/^/1vm,/" >>"$out/bench.csv"
fi
if [ $two = 1 ]; then
	# One boot per round and driver: an rdma_rxe server has hung its VM in the kernel here, and
	# the other VM can only give it up; in one boot for all, that lost every later run.
	for r in $(seq 1 "$rounds"); do
		for drv in rxe siw roxe; do
			name=bench-2vm-$r-$drv
			qemu/run-vm.sh --flavour stock --two-vm --script qemu/tests/bench.sh --name "$name" \
				--timeout $((quick ? 900 : 1800)) --args "1,$quick,$drv,$r" || true
			tail -n +2 "build/vm/$name/vm1/bench.csv" | sed "s/^/2vm,/" >>"$out/bench.csv"
			# The serving VM's CPU time over the 64 KiB runs (the report adds both VMs').
			tail -n +2 "build/vm/$name/vm0/bench.csv" | grep '^[0-9]*,[a-z]*,cpu_s_' |
				sed "s/^/2vm,/" >>"$out/bench.csv"
		done
	done
fi
BENCH_COMMAND="tools/bench.sh${args:+ $args}" python3 tools/bench_report.py "$out/bench.csv" "$out"
cat "$out/bench.md"
