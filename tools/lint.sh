#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The formatting and lint gate of `make test`, with the build root's toolchain (the one that
# builds the modules): `rustfmt --check` over every Rust file of the tree (settings in
# .rustfmt.toml), then the modules compiled through clippy with the kernel's lint set and
# warnings as errors (`make CLIPPY=1`, qemu/build-module.sh with ROXE_CLIPPY=1), and the stack
# frames of the module it built (tools/stack-frames.py).
#   tools/lint.sh [fmt|clippy]   (default: both)
#   tools/lint.sh fix            reformat the tree in place
. "$(dirname "$0")/../qemu/lib.sh"
cd "$ROXE_TOP"
what=${1:-all}
status=0
mapfile -t files < <(git ls-files '*.rs')
if [ "$what" = fix ]; then
	in_buildroot rustfmt --config-path "$ROXE_TOP/.rustfmt.toml" "${files[@]/#/$ROXE_TOP/}"
	exit
fi
if [ "$what" != clippy ]; then
	if in_buildroot rustfmt --check --config-path "$ROXE_TOP/.rustfmt.toml" "${files[@]/#/$ROXE_TOP/}"; then
		echo "lint: rustfmt clean (${#files[@]} files)"
	else
		echo "lint: rustfmt --check failed: tools/lint.sh fix reformats the tree" >&2
		status=1
	fi
fi
if [ "$what" != fmt ]; then
	if ROXE_CLIPPY=1 qemu/build-module.sh stock >build/clippy.log 2>&1; then
		echo "lint: clippy clean"
		# The module clippy built: no stack frame above tools/stack-frames.py's limits.
		tools/stack-frames.py build/stock-clippy/roxe.ko || status=1
	else
		grep -E -A12 '^(warning|error)' build/clippy.log | head -80 >&2
		echo "lint: clippy failed (build/clippy.log)" >&2
		status=1
	fi
fi
exit $status
