#!/bin/bash
# rdma-core's own test suite (tests/run_tests.py, pyverbs) on a driver: rxe (the baseline) or roxe.
# Each test module runs in its own process with a timeout, so that one crash (the mlx5 DV tests
# segfault libibverbs on non-mlx5 devices) cannot hide the rest. Counts go to
# /out/pyverbs-counts.txt (total) and /out/pyverbs-modules.txt (per module). The check passes when
# the suite ran and every failing, erroring or crashing test is listed, with its reason, in
# qemu/tests/pyverbs-known-<driver>.txt.
. /roxe/qemu/guest/lib.sh
DRV=${1:-rxe}
# Optional: the modules to run (default: all), e.g. `--args roxe,test_pd,test_qp`.
shift
ONLY=" $* "
step "$DRV-load" load_driver "$DRV" || finish_tests
# The suite's huge-page tests (MRs over 2 MiB pages) skip without a reserve of them.
echo 64 >/proc/sys/vm/nr_hugepages
say "2 MiB huge pages reserved: $(cat /proc/sys/vm/nr_hugepages)"
gid=$(gid_index_v4)
cd /opt/rdma-core
: >/out/pyverbs-modules.txt
: >/out/pyverbs-failed.txt
T_RAN=0 T_PASS=0 T_SKIP=0 T_FAIL=0 T_ERR=0 T_CRASH=0
for f in tests/test_*.py; do
	mod=$(basename "$f" .py)
	[ "$ONLY" = "  " ] || [[ $ONLY == *" $mod "* ]] || continue
	log=/out/pyverbs-$mod.log
	timeout -k 10 300 python3 tests/run_tests.py --dev "$RDMA_DEV" --gid "$gid" -v "$mod" >"$log" 2>&1
	rc=$?
	ran=$(sed -n 's/^Ran \([0-9]*\) test.*/\1/p' "$log" | tail -1)
	summary=$(grep -E '^(OK|FAILED)' "$log" | tail -1)
	num() { echo "$summary" | sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
	skip=$(num skipped); fl=$(num failures); er=$(num errors)
	ran=${ran:-0}; skip=${skip:-0}; fl=${fl:-0}; er=${er:-0}
	crash=0
	if [ -z "$summary" ]; then crash=1; echo "$mod (crashed, exit $rc)" >>/out/pyverbs-failed.txt; fi
	grep -E '^(FAIL|ERROR): ' "$log" | sed 's/^[A-Z]*: //' >>/out/pyverbs-failed.txt
	ok=$((ran - skip - fl - er))
	echo "$mod ran=$ran passed=$ok skipped=$skip failures=$fl errors=$er crashed=$crash" >>/out/pyverbs-modules.txt
	T_RAN=$((T_RAN + ran)); T_PASS=$((T_PASS + ok)); T_SKIP=$((T_SKIP + skip))
	T_FAIL=$((T_FAIL + fl)); T_ERR=$((T_ERR + er)); T_CRASH=$((T_CRASH + crash))
done
echo "driver=$DRV kernel=$(uname -r) ran=$T_RAN passed=$T_PASS skipped=$T_SKIP failures=$T_FAIL errors=$T_ERR crashed_modules=$T_CRASH" |
	tee /out/pyverbs-counts.txt
sort -u -o /out/pyverbs-failed.txt /out/pyverbs-failed.txt
known=/roxe/qemu/tests/pyverbs-known-$DRV.txt
unexpected=$(grep -vxF -f <(sed -n 's/^\([^#][^|]*[^ |]\) *|.*/\1/p' "$known" 2>/dev/null) /out/pyverbs-failed.txt || true)
if [ "$T_RAN" -gt 0 ]; then pass "$DRV-pyverbs-ran ($T_RAN tests, $T_PASS passed)"; else fail "$DRV-pyverbs-ran"; fi
if [ -z "$unexpected" ]; then pass "$DRV-pyverbs-no-unexpected-failures"; else
	fail "$DRV-pyverbs-unexpected-failures"; echo "$unexpected" | sed 's/^/    /'; fi
check "$DRV-unload" 60 unload_driver "$DRV"
# On the debug kernel: nothing the suite created may leak (a no-op on the stock kernel).
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
