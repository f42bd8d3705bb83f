#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Fuzzes roxe's packet parsing (tools/fuzz, target packet_parse) for SECONDS (default 30) and
# exits non-zero if libFuzzer finds a crash; the crashing input lands in
# tools/fuzz/artifacts/packet_parse/.
#
# Runs on the stable toolchain: cargo-fuzz passes rustc some nightly-only flags (-Z...), which
# RUSTC_BOOTSTRAP=1 lets a stable rustc accept. No sanitizer by default: proto/ has no unsafe
# code, so AddressSanitizer would only slow the search; the build keeps debug assertions and
# overflow checks, and panics are what the target reports. FUZZ_SANITIZER=address turns it on.
#
# The corpus grows in tools/fuzz/corpus/packet_parse/ (not committed) and starts from the packets
# in tools/fuzz/seeds.hex. Build outputs go to the cache, outside the clone.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
target=packet_parse
fuzz_dir=$top/tools/fuzz

case $seconds in
''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
if ! cargo fuzz --version >/dev/null 2>&1; then
	echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2
	exit 2
fi

export CARGO_TARGET_DIR=${ROXE_CACHE:-/var/cache/roxe}/cargo-target/fuzz
export RUSTC_BOOTSTRAP=1
mkdir -p "$CARGO_TARGET_DIR" "$fuzz_dir/corpus/$target"

# One file per line of seeds.hex. They go to a scratch directory that libFuzzer only reads, so
# the corpus directory holds just what the fuzzer itself found worth keeping.
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
n=0
while IFS= read -r line; do
	case $line in '' | '#'*) continue ;; esac
	hex=${line//[[:space:]]/}
	printf '%b' "$(sed 's/../\\x&/g' <<<"$hex")" >"$seeds/seed-$n"
	n=$((n + 1))
done <"$fuzz_dir/seeds.hex"

start=$(date +%s)
cd "$top"
# -a: debug assertions. The corpus directory comes first: libFuzzer adds new inputs to it.
sanitizer=${FUZZ_SANITIZER:-none}
if ! cargo fuzz run --fuzz-dir "$fuzz_dir" --sanitizer "$sanitizer" -a "$target" \
	"$fuzz_dir/corpus/$target" "$seeds" -- -max_total_time="$seconds" -print_final_stats=1; then
	echo "fuzz.sh: $target failed; replay an input from tools/fuzz/artifacts/$target/ with" >&2
	echo "  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$CARGO_TARGET_DIR cargo fuzz run --fuzz-dir tools/fuzz" \
		"--sanitizer $sanitizer -a $target tools/fuzz/artifacts/$target/<file>" >&2
	exit 1
fi
echo "fuzz.sh: $target ran clean; $(($(date +%s) - start)) s in all, build included"
