#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# roxe against rdma_rxe, side by side, on Debian's stock kernel (the one users run), one VM
# (loopback) and two VMs. Each run boots once and alternates the two drivers round by round;
# the table reports the median of the rounds and the roxe/rxe ratio (bandwidth: higher is
# better; latency: lower is better). Writes Documentation/bench/{bench.csv,bench.md,bench.png}.
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
tmo=$((rounds * (quick ? 900 : 2400)))
echo "setup,round,driver,test,size,value,unit" >"$out/bench.csv"
if [ $one = 1 ]; then
	qemu/run-vm.sh --flavour stock --script qemu/tests/bench.sh --name bench-1vm --timeout "$tmo" --args "$rounds,$quick" || true
	tail -n +2 build/vm/bench-1vm/vm0/bench.csv | sed "s/^/1vm,/" >>"$out/bench.csv"
fi
if [ $two = 1 ]; then
	qemu/run-vm.sh --flavour stock --two-vm --script qemu/tests/bench.sh --name bench-2vm --timeout "$tmo" --args "$rounds,$quick" || true
	tail -n +2 build/vm/bench-2vm/vm1/bench.csv | sed "s/^/2vm,/" >>"$out/bench.csv"
fi
BENCH_COMMAND="tools/bench.sh${args:+ $args}" python3 tools/bench_report.py "$out/bench.csv" "$out"
cat "$out/bench.md"
