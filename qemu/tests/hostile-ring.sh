#!/bin/bash
# A process that writes garbage into its own mmap'd rings (SQ, RQ, SRQ, CQ: indices, opcodes,
# lengths, SGE counts, inline lengths, keys) while a second process runs verified RC traffic on
# the same device. Each hostile case must end as a real HCA ends it: the right error completion
# and the QP in error for that process only; the other process's bytes stay right; no splat
# (the harness checks dmesg), kmemleak clean. Cases: qemu/tests/py/hostile_ring.py.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
gid=$(gid_index_v4) || { fail "no RoCE v2 IPv4 GID"; finish_tests; }
PY=/roxe/qemu/tests/py/hostile_ring.py
rm -f /tmp/good.json /tmp/good.stop
python3 -X faulthandler $PY good "$RDMA_DEV" "$gid" /tmp/good.json /tmp/good.stop >/out/good.log 2>&1 &
good=$!
for _ in $(seq 1 120); do [ -s /tmp/good.json ] && break; sleep 0.5; done
[ -s /tmp/good.json ] || fail "the well-behaved process did not start"
check hostile-cases 240 python3 -X faulthandler $PY hostile "$RDMA_DEV" "$gid" /tmp/good.json
case_results "" hostile /out/hostile-cases.log
tail -1 /out/hostile-cases.log
touch /tmp/good.stop
if timeout 120 tail --pid=$good -f /dev/null && wait $good; then
	pass "well-behaved-process-traffic-verified: $(tail -1 /out/good.log)"
else
	fail "well-behaved-process (exit $?)"; tail -5 /out/good.log
fi
check "$DRV-unload" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
