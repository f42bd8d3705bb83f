#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The feature probes cannot fail silently (Kbuild, "Feature probes"). For each harness kernel
# flavour given (default: debug and stock), against its prepared tree, in the build root:
#   - probe-control-FLAVOUR: a build of roxe.ko in a scratch copy of the sources whose rustc gets
#     a wrong target (KRUSTFLAGS=--target=..., as a wrong toolchain or a missing flag would do)
#     must fail, say that the control probe does not compile, and show the compiler's error;
#   - probe-result-FLAVOUR: the module's real build (build/FLAVOUR, qemu/build-module.sh) compiled
#     the control probe, and for each probe either wrote its cfg or kept the compiler's error.
# One PASS or FAIL line per check (make test counts them); exit status 1 if any failed.
#   tools/probe-check.sh [FLAVOUR...]
. "$(dirname "$0")/../qemu/lib.sh"
cd "$ROXE_TOP"
[ $# -gt 0 ] || set -- debug stock
passed=0 failed=0
result() { # result PASS|FAIL NAME DETAIL
	echo "$1 $2${3:+ ($3)}"
	if [ "$1" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}
crate=drivers/infiniband/sw/roxe/roxe_main
for flavour in "$@"; do
	kernel=$(flavour_kernel "$flavour")
	kdir=$(readlink -f "$kernel/build")
	[ -d "$kdir" ] || { result FAIL "probe-control-$flavour" "no $flavour kernel tree"; continue; }
	(
		use_kernel_suite "$kernel"
		read -ra mkargs <<<"$(kernel_make_args "$flavour" "$kdir")"
		scratch="$ROXE_TOP/build/probe-check-$flavour"
		rm -rf "$scratch"; mkdir -p "$scratch"
		module_sources "$scratch"
		in_buildroot make -C "$kdir" M="$scratch" "${mkargs[@]}" -j1 \
			KRUSTFLAGS=--target=x86_64-roxe-no-such-target roxe.ko >"$scratch.log" 2>&1
	) && rc=0 || rc=$?
	log=$ROXE_TOP/build/probe-check-$flavour.log
	if [ $rc = 0 ]; then
		result FAIL "probe-control-$flavour" "make succeeded with a wrong --target"
	elif ! grep -q 'roxe: the control probe rust/probe/control.rs does not compile' "$log"; then
		result FAIL "probe-control-$flavour" "make failed without naming the control probe: $(grep -m1 -i error "$log" | cut -c1-120)"
	elif ! grep -q '^    error' "$log"; then
		result FAIL "probe-control-$flavour" "the compiler's error is not shown"
	elif [ -e "$ROXE_TOP/build/probe-check-$flavour/$crate.o" ]; then
		result FAIL "probe-control-$flavour" "the crate was compiled after the control probe failed"
	else
		result PASS "probe-control-$flavour" "$(grep -m1 '^    error' "$log" | sed 's/^ *//' | cut -c1-100)"
	fi
	# The real build's probe results.
	out="$ROXE_TOP/build/$flavour"
	cfg="$out/$crate.probe"
	if [ ! -f "$cfg" ] || [ ! -f "$out/rust/probe-out/control.rmeta" ]; then
		result FAIL "probe-result-$flavour" "no probe file or control probe output in $out (run qemu/build-module.sh $flavour)"
		continue
	fi
	bad="" found=""
	for p in rust/probe/*.rs; do
		p=$(basename "$p" .rs)
		[ "$p" = control ] && continue
		if grep -qx -- "--cfg=roxe_$p" "$cfg"; then found="$found $p"
		elif ! grep -q '^error' "$out/rust/probe-out/$p.log" 2>/dev/null; then bad="$bad $p"; fi
	done
	if [ -n "$bad" ]; then
		result FAIL "probe-result-$flavour" "neither a cfg nor a compiler error for:$bad"
	else
		result PASS "probe-result-$flavour" "found:${found:- none}"
	fi
done
[ $failed = 0 ]
