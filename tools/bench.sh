#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# roxe against rdma_rxe and siw, side by side, on Debian's stock kernel (the one users run; siw
# built for it by qemu/soft-rdma-build.sh), one VM (loopback) and two VMs. One VM boots once and
# rotates the three drivers round by round (qemu/tests/bench.sh); two VMs boot once per round
# and driver, in the same rotation; tools/bench_report.py reports
# the medians of the rounds, roxe's ratios to both, the share of the guest's memcpy (one VM) or
# of iperf3's TCP (two VMs), CPU time per GiB, QP scaling and the goals with their verdicts.
# Writes Documentation/bench/{bench.csv,bench.md,bench.png,commits.txt}; with --one-vm-only or
# --two-vm-only the other setup's rows are kept from the previous table. --kernel RELEASE runs
# on that Debian kernel of `make matrix` instead (qemu/kernel-stock.sh RELEASE), into
# Documentation/bench/RELEASE/. --mtu N (with --two-vm-only) sets both VMs' netdev MTU to N
# (4200: IB MTU 4096, a jumbo wire; TCP's segments grow with it), into .../mtu-N/.
# A benchmark is only comparable on an otherwise idle host: the script refuses to start while
# another QEMU runs (--busy-ok overrides, for a trial), and the report gives the host's load
# average before and after.
#   tools/bench.sh [--rounds N] [--quick] [--one-vm-only | --two-vm-only] [--kernel RELEASE]
#                  [--mtu N] [--busy-ok]
set -euo pipefail
args="$*"
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
rounds=3 quick=0 one=1 two=1 release="" busy_ok=0 mtu=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift ;;
	--quick) quick=1 ;;
	--one-vm-only) two=0 ;;
	--two-vm-only) one=0 ;;
	--kernel) release=$2; shift ;;
	--busy-ok) busy_ok=1 ;;
	--mtu) mtu=$2; shift ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$mtu" ] && [ $one = 1 ]; then
	# Loopback never meets the netdev's MTU on roxe (its own segment) but does on rdma_rxe.
	echo "bench: --mtu needs --two-vm-only" >&2
	exit 2
fi
if [ $busy_ok = 0 ] && pgrep -x 'qemu-system-x86' >/dev/null; then
	echo "bench: another QEMU is running; its load would lower every figure (--busy-ok to run anyway)" >&2
	exit 1
fi
flavour=stock out=Documentation/bench
if [ -n "$release" ]; then
	flavour=stock-$release out=Documentation/bench/$release
	qemu/kernel-stock.sh "$release" >/dev/null
else
	qemu/kernel-stock.sh >/dev/null
fi
[ -z "$mtu" ] || out=$out/mtu-$mtu
mkdir -p "$out"
qemu/guest-image.sh >/dev/null
qemu/build-module.sh "$flavour" >/dev/null
qemu/soft-rdma-build.sh "$flavour" >/dev/null
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# The kernel release the guests boot (its modules directory's name).
kernel=$(. qemu/lib.sh && ls "$(flavour_kernel "$flavour")/modules/lib/modules")
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
	qemu/run-vm.sh --flavour "$flavour" --script qemu/tests/bench.sh --name bench-1vm --timeout "$tmo" --args "$rounds,$quick" || true
	tail -n +2 build/vm/bench-1vm/vm0/bench.csv | sed "s/^/1vm,/" >>"$out/bench.csv"
fi
if [ $two = 1 ]; then
	# One boot per round and driver: an rdma_rxe server has hung its VM in the kernel here, and
	# the other VM can only give it up; in one boot for all, that lost every later run.
	for r in $(seq 1 "$rounds"); do
		for drv in rxe siw roxe; do
			name=bench-2vm-$r-$drv
			# Its two scripts end together (bench.sh's barriers): a guest still running a minute
			# after its peer ended is a hung rdma_rxe server, stopped then (qemu/run-vm.sh).
			ROXE_PEER_GRACE=60 qemu/run-vm.sh --flavour "$flavour" --two-vm --script qemu/tests/bench.sh --name "$name" \
				--timeout $((quick ? 900 : 1800)) --args "1,$quick,$drv,$r${mtu:+,$mtu}" || true
			# A file or a row a hung guest did not write is no figure, and no reason to stop the
			# other boots (`set -e` would, through `pipefail`).
			tail -n +2 "build/vm/$name/vm1/bench.csv" 2>/dev/null | sed "s/^/2vm,/" >>"$out/bench.csv" || true
			# The serving VM's CPU time over the 64 KiB runs (the report adds both VMs').
			{ tail -n +2 "build/vm/$name/vm0/bench.csv" 2>/dev/null | grep '^[0-9]*,[a-z]*,cpu_s_' || true; } |
				sed "s/^/2vm,/" >>"$out/bench.csv"
		done
	done
fi
BENCH_COMMAND="tools/bench.sh${args:+ $args}" BENCH_KERNEL="$kernel" BENCH_MTU="$mtu" \
	BENCH_LOAD="$load_before, then $(cut -d' ' -f1-3 /proc/loadavg)" \
	python3 tools/bench_report.py "$out/bench.csv" "$out"
cat "$out/bench.md"
