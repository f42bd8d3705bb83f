#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make test`: host tests first, then every QEMU test (two at a time), then one summary line
# "N passed, N failed". Each guest check counts once, and each VM run counts once more for its own
# verdict (guest exit code and the kernel-log splat check).
#   qemu/test-all.sh [--qemu-only] [--only NAME-REGEX] [--list FILE] [--stock-as FLAVOUR]
#                    [--debug-as debug-rustup|debug-rt]
# The tests are the built-in harness checks plus qemu/tests/extra.list; --list FILE runs the
# tests of FILE instead (the long forms: qemu/tests/baseline.list, qemu/tests/pyverbs.list).
# --stock-as stock-RELEASE runs only the stock-kernel tests, on that Debian kernel instead
# (qemu/matrix.sh), each named stock-RELEASE-NAME. --debug-as debug-rustup (debug-rt) runs only
# the debug-kernel tests, on the debug kernel built with this machine's rustup toolchain (with
# PREEMPT_RT) instead (qemu/matrix.sh), each named debug-rustup-NAME (debug-rt-NAME).
. "$(dirname "$0")/lib.sh"
cd "$ROXE_TOP"

qemu_only=0 only="" list=qemu/tests/extra.list builtin=1 stock_as="" debug_as=""
while [ $# -gt 0 ]; do
	case "$1" in
	--qemu-only) qemu_only=1 ;;
	--only) only=$2; shift ;;
	--list) list=$2; builtin=0; qemu_only=1; shift ;;
	--stock-as) stock_as=$2; qemu_only=1; shift ;;
	--debug-as) debug_as=$2; qemu_only=1; shift ;;
	*) die "unknown option $1" ;;
	esac
	shift
done

passed=0 failed=0
failures=()
count() { # count PASS|FAIL NAME
	if [ "$1" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$2"); fi
}
t0=$SECONDS

if [ $qemu_only = 0 ]; then
	log "== host tests"
	if out=$(tools/hosttest.sh 2>&1); then hrc=0; else hrc=1; fi
	printf '%s\n' "$out" | tail -25
	# cargo prints "test result: ok. N passed; M failed; ..." per test binary.
	hp=$(printf '%s\n' "$out" | sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' | paste -sd+ | bc)
	hf=$(printf '%s\n' "$out" | sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' | paste -sd+ | bc)
	passed=$((passed + ${hp:-0})); failed=$((failed + ${hf:-0}))
	if [ $hrc != 0 ] || [ -z "$hp" ]; then count FAIL "host tests (exit $hrc)"; else count PASS host-tests; fi
	# A short fuzzing run of the protocol logic (`make fuzz` is the long form).
	fs=${ROXE_FUZZ_SECONDS:-60}
	log "== fuzz ($fs s)"
	mkdir -p build
	if tools/fuzz.sh "$fs" >build/fuzz.log 2>&1; then
		grep -E '^fuzz.sh:|^stat::number_of_executed_units' build/fuzz.log | tail -8
		count PASS "fuzz-${fs}s"
	else
		tail -25 build/fuzz.log
		count FAIL "fuzz-${fs}s (see build/fuzz.log)"
	fi
fi

log "== preparing kernels, guest image and modules"
qemu/host-deps.sh
qemu/buildroot.sh
qemu/kernel-debug.sh >/dev/null
prune_old kernel-debug "$(readlink -f "$ROXE_CACHE/kernel-debug")"
qemu/kernel-stock.sh >/dev/null
qemu/guest-image.sh >/dev/null
qemu/build-module.sh debug >/dev/null || die "module build failed (debug)"
qemu/build-module.sh stock >/dev/null || die "module build failed (stock)"
# siw for Debian's kernels, which lack it (blktests over siw, the bench), and rdma_rxe where one lacks it.
qemu/soft-rdma-build.sh stock >/dev/null || die "soft RDMA drivers build failed"
# The module index the guests' install_module uses.
qemu/module-index.sh debug >/dev/null || die "module index failed (debug)"
qemu/module-index.sh stock >/dev/null || die "module index failed (stock)"
if [ -n "$stock_as" ]; then
	qemu/kernel-stock.sh "${stock_as#stock-}" >/dev/null || die "no kernel for $stock_as"
	qemu/build-module.sh "$stock_as" >/dev/null || die "module build failed ($stock_as)"
	qemu/soft-rdma-build.sh "$stock_as" >/dev/null || die "soft RDMA drivers build failed ($stock_as)"
	qemu/module-index.sh "$stock_as" >/dev/null || die "module index failed ($stock_as)"
fi
if [ -n "$debug_as" ]; then
	case $debug_as in
	debug-rustup) ROXE_RUST=rustup qemu/kernel-debug.sh >/dev/null || die "no kernel for $debug_as" ;;
	debug-rt) ROXE_DEBUG_RT=1 qemu/kernel-debug.sh >/dev/null || die "no kernel for $debug_as" ;;
	*) die "--debug-as takes debug-rustup or debug-rt" ;;
	esac
	qemu/build-module.sh "$debug_as" >/dev/null || die "module build failed ($debug_as)"
	qemu/module-index.sh "$debug_as" >/dev/null || die "module index failed ($debug_as)"
fi
# blktests, built for the guest (qemu/tests/blktests.sh).
qemu/blktests-build.sh >/dev/null || die "blktests build failed"
# The hostile-user program qemu/tests/verbs-fuzz.sh runs (the guest has no compiler).
tools/verbs-fuzz/build.sh >/dev/null || die "verbs-fuzz build failed"
if [ $qemu_only = 0 ]; then
	# Host side, against the prepared trees: a probe cannot fail silently (tools/probe-check.sh).
	log "== feature probes"
	pout=$(tools/probe-check.sh debug stock 2>&1) || true
	printf '%s\n' "$pout" | sed 's/^/  /'
	while read -r st rest; do
		case "$st" in PASS|FAIL) count "$st" "host: $rest" ;; esac
	done <<<"$pout"
	printf '%s\n' "$pout" | grep -qE '^(PASS|FAIL) ' || count FAIL "host: tools/probe-check.sh printed no result"
	log "== lint (rustfmt, clippy)"
	if tools/lint.sh; then count PASS lint; else count FAIL "lint (rustfmt or clippy; see above)"; fi
fi

# name | flavour | guest script | guest timeout (s) | run-vm options | expected verdict
TESTS=()
[ $builtin = 1 ] && TESTS=(
	"selftest-stock|stock|qemu/tests/selftest.sh|120||pass"
	# The debug kernel's self-test opens core-debug's boot (extra.list), which saves a boot.
	# The splat check is the same for both flavours: prove it on the one that boots in 10 s.
	"harness-catches-warn|stock|qemu/tests/selftest.sh|180|--args warn|fail"
)
[ -f "$list" ] && while IFS= read -r l; do
	case "$l" in ''|'#'*) ;; *) TESTS+=("$l") ;; esac
done <"$list"
# retarget FROM TO: only the tests of flavour FROM, each run on flavour TO and named TO-NAME.
retarget() {
	local t name flavour rest sel=()
	for t in "${TESTS[@]}"; do
		IFS='|' read -r name flavour rest <<<"$t"
		[ "$flavour" = "$1" ] && sel+=("$2-$name|$2|$rest")
	done
	TESTS=("${sel[@]}")
}
[ -z "$stock_as" ] || retarget stock "$stock_as"
[ -z "$debug_as" ] || retarget debug "$debug_as"

# Tests run ROXE_JOBS at a time (default 2): a guest under TCG leaves the host's CPUs idle for
# much of its run (boots, sleeps, waits on its peer; a serial run kept two cores about 55% busy),
# so two at once finish the suite in well under the serial time. A two-VM test counts as one job
# (its VMs have one vCPU each). The lists name the longest tests first, so that the last to end
# do not run alone. Each run's host-side output goes to build/vm/NAME.log, printed when it ends.
jobs=${ROXE_JOBS:-2}
mkdir -p build/vm
declare -A running=() # PID of a test's runner -> its line
start_test() { # start_test LINE
	local name flavour script tmo opts expect
	IFS='|' read -r name flavour script tmo opts expect <<<"$1"
	log "== $name ($flavour) starts"
	(
		s=$SECONDS
		# shellcheck disable=SC2086
		if qemu/run-vm.sh --flavour "$flavour" --script "$script" --name "$name" --timeout "$tmo" \
			$opts >"build/vm/$name.log" 2>&1; then v=pass; else v=fail; fi
		echo "$v $((SECONDS - s))" >"build/vm/$name.verdict"
	) &
	running[$!]=$1
}
finish_test() { # finish_test LINE: counts the results of a test that has ended
	local name flavour script tmo opts expect verdict secs r c st rest why
	IFS='|' read -r name flavour script tmo opts expect <<<"$1"
	read -r verdict secs <"build/vm/$name.verdict" 2>/dev/null || { verdict=fail secs=?; }
	sed "s|^|  $name: |" "build/vm/$name.log" 2>/dev/null || true
	for r in build/vm/"$name"/vm*/results; do
		[ -f "$r" ] || continue
		while read -r st rest; do
			[ "$expect" = fail ] && continue # a run expected to fail counts only by its verdict
			count "$st" "$name: $rest"
		done <"$r"
	done
	if [ "$verdict" = "$expect" ]; then
		count PASS "$name"; log "$name: ok (verdict $verdict as expected, $secs s)"
	else
		# Why the run failed when no check did (guest exit code, splat, QEMU killed or ended with
		# no verdict, boot hang), in the summary line itself: a CI run may keep only the end of
		# this output.
		why=$({ grep -aE 'exited with|QEMU killed|boot hang|no verdict|retrying' "build/vm/$name.log"
			grep -a -m2 '^  ' "build/vm/$name.log"; } 2>/dev/null | sed 's/^ *//' |
			awk '!seen[$0]++' | head -6 | cut -c1-160 | paste -sd';' || true)
		count FAIL "$name (verdict $verdict, expected $expect${why:+: $why})"; log "$name: FAILED ($secs s)"
		# What the guest said about its failures (check() follows each FAIL with the tail of
		# its log): a CI run keeps only this output, not build/vm.
		for c in build/vm/"$name"/vm*/console.log; do
			[ -f "$c" ] && grep -a -A16 '\] FAIL ' "$c" | head -60 | sed "s|^|  ${c#build/vm/}: |" || true
		done
	fi
}
reap() { # waits for one running test to end and counts it
	local pid=""
	wait -n -p pid "${!running[@]}" || true
	[ -n "$pid" ] || return 0
	finish_test "${running[$pid]}"
	unset "running[$pid]"
}

for t in "${TESTS[@]}"; do
	IFS='|' read -r name _ <<<"$t"
	[ -n "$only" ] && ! [[ $name =~ $only ]] && continue
	while [ ${#running[@]} -ge "$jobs" ]; do reap; done
	start_test "$t"
done
while [ ${#running[@]} -gt 0 ]; do reap; done

log "== done in $((SECONDS - t0)) s"
for f in "${failures[@]}"; do echo "  failed: $f"; done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
