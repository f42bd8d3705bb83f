#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make matrix`: roxe on every Rust-enabled kernel Debian offers a trixie system beyond the one
# `make test` uses (the newest amd64 release of each series in trixie-backports), and on the
# newest amd64 kernel of Debian unstable, and the newest of Debian's real-time (rt-amd64) and
# cloud (cloud-amd64) flavours.
# Each is prepared as the stock kernel is
# (qemu/kernel-stock.sh RELEASE: Debian's packages, its Rust metadata regenerated with the
# toolchain that built it: trixie's build root, or unstable's for unstable's kernel), roxe is built
# against it, and the stock-kernel tests of `make test` run on it (qemu/test-all.sh --stock-as
# stock-RELEASE). Each outcome is written to qemu/kernels.lock (release, package version, rustc,
# bindgen, result, date); a build failure keeps its compiler output in build/matrix-RELEASE.log.
# Last, the debug kernel of make test (same source and options) in two variants, roxe built
# against each and the debug-kernel tests of make test run on it (qemu/test-all.sh --debug-as):
# `debug-rustup`, built with this machine's rustup toolchain (stable) and bindgen from crates.io
# instead of Debian's rustc and bindgen (qemu/kernel-debug.sh with ROXE_RUST=rustup), and
# `debug-rt`, built with PREEMPT_RT (ROXE_DEBUG_RT=1: qemu/config/rt.config), where lockdep and
# DEBUG_ATOMIC_SLEEP report what Debian's rt kernel cannot (a sleep in atomic context).
#   qemu/matrix.sh [[sid:]RELEASE... | debug-rustup | debug-rt]   (default: the releases above,
#                                        but the one make test runs: qemu/kernel-stock.sh's
#                                        default, and both debug variants)
. "$(dirname "$0")/lib.sh"
cd "$ROXE_TOP"
qemu/buildroot.sh
LOCK=qemu/kernels.lock

# in_suite SUITE CMD...: in_buildroot in SUITE's build root.
in_suite() {
	local suite=$1; shift
	(ROXE_SUITE=$suite BUILDROOT_LINK=$(buildroot_link "$suite") in_buildroot "$@")
}

# amd64_releases SUITE: the amd64 kernel releases SUITE offers, oldest first.
amd64_releases() {
	in_suite "$1" apt-cache search --names-only \
		'^linux-headers-[0-9]+\.[0-9]+\.[0-9]+\+deb[0-9]+-amd64$' | awk '{print $1}' |
		sed 's/^linux-headers-//' | sort -V
}

rels=("$@")
if [ ${#rels[@]} = 0 ]; then
	mapfile -t rels < <(amd64_releases trixie |
		awk -F. '{ s = $1 "." $2; if (!(s in last)) order[n++] = s; last[s] = $0 }
			END { for (i = 0; i < n; i++) print last[order[i]] }')
	ROXE_SUITE=sid qemu/buildroot.sh
	sid_rel=$(amd64_releases sid | tail -1)
	[ -n "$sid_rel" ] && rels+=("sid:$sid_rel")
	# Debian's real-time flavour, newest release: PREEMPT_RT (spinlocks sleep, softirqs run in
	# threads, spin_lock_irqsave leaves interrupts on).
	# Debian's cloud flavour, newest release: no rdma_rxe and no siw, the kernel of Debian's cloud
	# images and of many CI runners (the harness builds both peers, and 9p, for it).
	for flav in rt cloud; do
		f_rel=$(newest_release "$flav-amd64")
		[ -n "$f_rel" ] && rels+=("$f_rel")
	done
	rels+=(debug-rustup debug-rt)
fi

record() { # record SUITE RELEASE VERSION RESULT: replaces RELEASE's line of the lock file
	# (the toolchain: the build root's, or ROXE_TOOLCHAIN_BIN's when set)
	local suite=$1 rel=$2 ver=$3 res=$4 rustc bindgen
	rustc=$(in_suite "$suite" rustc --version | awk '{print $2}')
	bindgen=$(in_suite "$suite" bindgen --version 2>/dev/null | awk '{print $2}')
	[ -f "$LOCK" ] || printf '%s\n' "# make matrix (qemu/matrix.sh): release | Debian package version | rustc | bindgen | result | date" >"$LOCK"
	grep -v "^$rel |" "$LOCK" >"$LOCK.tmp" || true
	printf '%s | %s | %s | %s | %s | %s\n' "$rel" "$ver" "$rustc" "$bindgen" "$res" "$(date -u +%F)" >>"$LOCK.tmp"
	{ head -1 "$LOCK.tmp"; tail -n +2 "$LOCK.tmp" | sort -V; } >"$LOCK"
	rm -f "$LOCK.tmp"
	log "$rel: $res"
}

# debug_variant debug-rustup|debug-rt: the debug kernel built with rustup's stable toolchain, or
# built with PREEMPT_RT (qemu/config/rt.config; Debian's toolchain), and the debug-kernel tests of
# make test on it.
debug_variant() {
	local fl=$1 tcbin="" tc rel ver out e
	local -a kenv
	ver="linux-source $(in_suite trixie dpkg-query -W -f='${Version}' linux-source-7.3)"
	case $fl in
	debug-rustup)
		log "== debug kernel, rustup's toolchain"
		tc=$(qemu/rustup-toolchain.sh) || { record trixie "$fl" "$ver" "no toolchain"; return 1; }
		tcbin=$tc/bin kenv=(ROXE_RUST=rustup)
		;;
	debug-rt)
		log "== debug kernel, PREEMPT_RT"
		kenv=(ROXE_DEBUG_RT=1)
		;;
	*) die "unknown debug variant $fl" ;;
	esac
	if ! out=$(env "${kenv[@]}" qemu/kernel-debug.sh 2>&1); then
		printf '%s\n' "$out" | tail -5
		ROXE_TOOLCHAIN_BIN=$tcbin record trixie "$fl" "$ver" "not built: $(printf '%s\n' "$out" | grep ERROR | tail -1 | sed 's/.*ERROR: //')"
		return 1
	fi
	rel="$(cat "$(flavour_kernel "$fl")/build/include/config/kernel.release")-$fl"
	mkdir -p build
	if ! qemu/build-module.sh "$fl" >"build/matrix-$fl.log" 2>&1; then
		e=$(grep -m1 -A1 '^error' "build/matrix-$fl.log" | tr -s ' \n' ' ' | cut -c1-120)
		ROXE_TOOLCHAIN_BIN=$tcbin record trixie "$rel" "$ver" "build fails: $e"
		return 1
	fi
	grep -h 'PROBE   features' "build/matrix-$fl.log" >&2 || true
	if res=$(qemu/test-all.sh --debug-as "$fl" 2>&1 | tee "build/matrix-$fl-test.log" | tail -1); then
		ROXE_TOOLCHAIN_BIN=$tcbin record trixie "$rel" "$ver" "pass ($res)"
	else
		ROXE_TOOLCHAIN_BIN=$tcbin record trixie "$rel" "$ver" "fail ($res)"
		return 1
	fi
}

tested=$(cat "$(qemu/kernel-stock.sh)/release")
status=0
for entry in "${rels[@]}"; do
	case "$entry" in debug-rustup | debug-rt)
		debug_variant "$entry" || status=1
		continue
		;;
	esac
	suite=trixie rel=$entry
	case "$entry" in sid:*) suite=sid rel=${entry#sid:} ;; esac
	[ $# = 0 ] && [ "$rel" = "$tested" ] && { log "$rel: make test runs it"; continue; }
	ver=$(in_suite "$suite" apt-cache policy "linux-headers-$rel" | awk '/Candidate:/ {print $2}')
	case "$suite:$ver" in
	trixie:*~bpo* | sid:?*) ;;
	*) log "$rel ($ver) is neither a trixie-backports nor an unstable kernel: skipped"; continue ;;
	esac
	log "== $rel ($ver, $suite)"
	if ! out=$(ROXE_SUITE=$suite qemu/kernel-stock.sh "$rel" 2>&1); then
		printf '%s\n' "$out" | tail -5
		record "$suite" "$rel" "$ver" "not prepared: $(printf '%s\n' "$out" | grep ERROR | tail -1 | sed 's/.*ERROR: //')"
		status=1; continue
	fi
	mkdir -p build
	if ! qemu/build-module.sh "stock-$rel" >"build/matrix-$rel.log" 2>&1; then
		e=$(grep -m1 -A1 '^error' "build/matrix-$rel.log" | tr -s ' \n' ' ' | cut -c1-120)
		record "$suite" "$rel" "$ver" "build fails: $e"
		status=1; continue
	fi
	if res=$(qemu/test-all.sh --stock-as "stock-$rel" 2>&1 | tee "build/matrix-$rel-test.log" | tail -1); then
		record "$suite" "$rel" "$ver" "pass ($res)"
	else
		record "$suite" "$rel" "$ver" "fail ($res)"
		status=1
	fi
done
exit $status
