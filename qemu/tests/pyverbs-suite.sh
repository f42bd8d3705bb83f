#!/bin/bash
# rdma-core's own test suite (tests/run_tests.py, pyverbs) on a driver: rxe (the baseline) or roxe.
# Records the counts in /out/pyverbs-counts.txt; the check passes when the suite ran and nothing
# failed or errored beyond the failures listed as known for that driver in
# qemu/tests/pyverbs-known-<driver>.txt (one test id per line, each with its reason).
. /roxe/qemu/guest/lib.sh
DRV=${1:-rxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4)
cd /opt/rdma-core
timeout -k 10 1500 python3 tests/run_tests.py --dev "$RDMA_DEV" --gid "$gid" -v >/out/pyverbs.log 2>&1
rc=$?
tail -5 /out/pyverbs.log
ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' /out/pyverbs.log)
summary=$(grep -E '^(OK|FAILED)' /out/pyverbs.log | tail -1)
num() { echo "$summary" | sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
skipped=$(num skipped); failures=$(num failures); errors=$(num errors)
ran=${ran:-0}; skipped=${skipped:-0}; failures=${failures:-0}; errors=${errors:-0}
passed=$((ran - skipped - failures - errors))
echo "driver=$DRV ran=$ran passed=$passed skipped=$skipped failures=$failures errors=$errors rc=$rc" | tee /out/pyverbs-counts.txt
# Test ids that failed or errored, for the record.
grep -E '^(FAIL|ERROR): ' /out/pyverbs.log | sed 's/^[A-Z]*: //' | sort -u >/out/pyverbs-failed.txt
known=/roxe/qemu/tests/pyverbs-known-$DRV.txt
unexpected=$(grep -vxF -f <(cut -d' ' -f1-2 "$known" 2>/dev/null | grep -v '^#') /out/pyverbs-failed.txt || true)
[ "$ran" -gt 0 ] && pass "$DRV-pyverbs-ran ($ran tests)" || fail "$DRV-pyverbs-ran"
if [ -z "$unexpected" ]; then pass "$DRV-pyverbs-no-unexpected-failures"; else
	fail "$DRV-pyverbs-unexpected-failures"; echo "$unexpected" | sed 's/^/    /'; fi
check "$DRV-unload" 60 unload_driver "$DRV"
finish_tests
