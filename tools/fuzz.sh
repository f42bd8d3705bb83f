#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Fuzzes roxe's pure protocol logic (tools/fuzz): every fuzz target in turn, SECONDS (default
# 30) split evenly between them (at least 1 s each), and exits non-zero if libFuzzer finds a
# crash in any; the crashing input lands in tools/fuzz/artifacts/<target>/.
#
# Runs on the stable toolchain: cargo-fuzz passes rustc some nightly-only flags (-Z...), which
# RUSTC_BOOTSTRAP=1 lets a stable rustc accept. No sanitizer by default: proto/ has no unsafe
# code, so AddressSanitizer would only slow the search; the build keeps debug assertions and
# overflow checks, and panics are what the targets report. FUZZ_SANITIZER=address turns it on.
#
# Each target's corpus grows in tools/fuzz/corpus/<target>/ (not committed). packet_parse starts
# from the packets in tools/fuzz/seeds.hex, any other target from tools/fuzz/seeds-<target>.hex
# if there is one. Build outputs go to the cache, outside the clone.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-30}
fuzz_dir=$top/tools/fuzz

case $seconds in
''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
cache=${ROXE_CACHE:-/var/cache/roxe}
# cargo-fuzz is a cargo subcommand, not part of a toolchain: use the one on PATH, or install it
# once into the cache (a fresh machine needs only cargo and crates.io). The install is locked so
# that two runs never build it at once, and lands atomically: a half-built one is never used.
if ! cargo fuzz --version >/dev/null 2>&1; then
	command -v cargo >/dev/null || { echo "fuzz.sh: cargo is missing (install rustup or Debian's cargo)" >&2; exit 2; }
	export PATH="$cache/cargo-fuzz/bin:$PATH"
	if ! cargo fuzz --version >/dev/null 2>&1; then
		mkdir -p "$cache"
		(
			flock 9
			cargo fuzz --version >/dev/null 2>&1 && exit 0
			echo "fuzz.sh: installing cargo-fuzz into $cache/cargo-fuzz" >&2
			rm -rf "$cache/cargo-fuzz.tmp"
			CARGO_TARGET_DIR="$cache/cargo-target/cargo-fuzz-install" \
				cargo install --locked --quiet --root "$cache/cargo-fuzz.tmp" cargo-fuzz@0.13.2 &&
				rm -rf "$cache/cargo-fuzz" && mv "$cache/cargo-fuzz.tmp" "$cache/cargo-fuzz"
		) 9>"$cache/.cargo-fuzz.lock" || { echo "fuzz.sh: cannot install cargo-fuzz" >&2; exit 2; }
	fi
fi

command -v c++ >/dev/null || { echo "fuzz.sh: libFuzzer needs a C++ compiler (apt-get install g++)" >&2; exit 2; }

export CARGO_TARGET_DIR=$cache/cargo-target/fuzz
export RUSTC_BOOTSTRAP=1
mkdir -p "$CARGO_TARGET_DIR"
cd "$top"
sanitizer=${FUZZ_SANITIZER:-none}

# Every [[bin]] of tools/fuzz/Cargo.toml, so that a new target is fuzzed without editing this.
mapfile -t targets < <(cargo fuzz list --fuzz-dir "$fuzz_dir")
if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets in $fuzz_dir" >&2
	exit 2
fi
per_target=$((seconds / ${#targets[@]}))
[ "$per_target" -ge 1 ] || per_target=1

# Seed files hold one input per line, in hex. They go to scratch directories that libFuzzer
# only reads, so the corpus directories hold just what the fuzzer itself found worth keeping.
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
seed_file() {
	if [ "$1" = packet_parse ]; then
		echo "$fuzz_dir/seeds.hex"
	else
		echo "$fuzz_dir/seeds-$1.hex"
	fi
}

# One build for all targets (-a: debug assertions), timed apart from the fuzzing.
start=$(date +%s)
cargo fuzz build --fuzz-dir "$fuzz_dir" --sanitizer "$sanitizer" -a
echo "fuzz.sh: build took $(($(date +%s) - start)) s"

failed=()
for target in "${targets[@]}"; do
	mkdir -p "$fuzz_dir/corpus/$target" "$seeds/$target"
	file=$(seed_file "$target")
	if [ -f "$file" ]; then
		n=0
		while IFS= read -r line; do
			case $line in '' | '#'*) continue ;; esac
			hex=${line//[[:space:]]/}
			printf '%b' "$(sed 's/../\\x&/g' <<<"$hex")" >"$seeds/$target/seed-$n"
			n=$((n + 1))
		done <"$file"
	fi
	t0=$(date +%s)
	# The corpus directory comes first: libFuzzer adds new inputs to it.
	if cargo fuzz run --fuzz-dir "$fuzz_dir" --sanitizer "$sanitizer" -a "$target" \
		"$fuzz_dir/corpus/$target" "$seeds/$target" -- -max_total_time="$per_target" -print_final_stats=1; then
		echo "fuzz.sh: $target ran clean for $(($(date +%s) - t0)) s"
	else
		echo "fuzz.sh: $target failed; replay an input from tools/fuzz/artifacts/$target/ with" >&2
		echo "  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$CARGO_TARGET_DIR cargo fuzz run --fuzz-dir tools/fuzz" \
			"--sanitizer $sanitizer -a $target tools/fuzz/artifacts/$target/<file>" >&2
		failed+=("$target")
	fi
done
echo "fuzz.sh: ${#targets[@]} targets, $(($(date +%s) - start)) s in all, build included"
if [ ${#failed[@]} -ne 0 ]; then
	echo "fuzz.sh: crashes in: ${failed[*]}" >&2
	exit 1
fi
