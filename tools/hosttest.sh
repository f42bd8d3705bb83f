#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Host-side tests: the pure-logic crate under cargo, plus the source rules that keep unsafe code
# and raw bindings out of drivers/. The cargo target directory is cached outside the clone.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# One target directory per clone: cargo's freshness check follows the source paths it recorded,
# so two clones sharing one directory could each take the other's build for up to date.
export CARGO_TARGET_DIR=${ROXE_CACHE:-/var/cache/roxe}/cargo-target/$(printf %s "$top" | sha256sum | cut -c1-12)
mkdir -p "$CARGO_TARGET_DIR"
status=0

# drivers/ uses safe APIs only: no `unsafe`, no `bindings::`. Comments may mention neither.
bad=$(grep -rnE '^\s*[^/]*(\bunsafe\s*(\{|fn\b|impl\b|extern\b|trait\b)|\bbindings::)' "$top/drivers" --include='*.rs' || true)
if [ -n "$bad" ]; then
	echo "drivers/ must not contain unsafe code or name bindings::" >&2
	echo "$bad" >&2
	status=1
fi
# No unwrap/expect/panic in kernel code (host-only `#[cfg(test)]` modules, which close each file
# by convention, are exempt).
if ! awk '
	FNR == 1 { in_test = 0 }
	/#!?\[cfg\(test\)\]/ { in_test = 1 }
	!in_test && $0 !~ /^[[:space:]]*\/\// && /\.unwrap\(\)|\.expect\(|panic!\(/ { print FILENAME ":" FNR ": " $0; bad = 1 }
	END { exit bad }' $(find "$top/drivers" "$top/rust" -name '*.rs' ! -name generated.rs) >&2; then
	echo "kernel code must not unwrap, expect or panic (see above)" >&2
	status=1
fi
# Every unsafe block in rust/ carries a SAFETY comment (the kernel's clippy lint checks it too).
awk '
	FNR == 1 { safe = -100 }
	/^[[:space:]]*\/\/ SAFETY:/ { safe = FNR }
	/unsafe \{/ && $0 !~ /SAFETY/ { if (FNR - safe > 8) { print FILENAME ":" FNR ": unsafe block without a SAFETY comment"; bad = 1 } }
	END { exit bad }' $(find "$top/rust" -name '*.rs' ! -name generated.rs) || status=1

# The import graph (tools/deps.py): no cycle in proto/, between the driver's folders and files,
# in rust/rdma/ or in rust/soft/.
python3 "$top/tools/deps.py" --enforce drivers/infiniband/sw/roxe/proto --enforce drivers/infiniband/sw/roxe \
	--enforce rust/rdma --enforce rust/soft || status=1
# rust/rdma/ mirrors the RDMA core: it uses nothing of the soft-HCA platform beside it.
if grep -rn 'crate::soft\b' "$top/rust/rdma"; then
	echo "hosttest: rust/rdma/ uses rust/soft/" >&2
	status=1
fi
# rust/rdma/ is the RDMA core's mirror: no item it defines names roxe, rxe or a scheduler of the
# soft HCA's, and no string in it names roxe (comments aside; the C helpers' roxe_helper_ names
# are rust/'s shared glue).
if sed -e 's@//.*@@' "$top"/rust/rdma/*.rs "$top"/rust/rdma/ops/*.rs |
	grep -nE '\b(fn|struct|enum|trait|type|const|static|mod|union)\s+\w*([Rr]oxe|[Rr]xe|RXE|Sched|Deferred|[Tt]ick|[Kk]ick)\w*|"[^"]*roxe[^"]*"'; then
	echo "hosttest: rust/rdma/ names roxe, rxe or the soft HCA's scheduler" >&2
	status=1
fi
# The driver calls up through no function pointer standing in for a call: no field or type
# alias of a function pointer type (the stages are called by name; tools/deps.py sees the graph).
if grep -rnE '(:|=)\s*(unsafe\s+)?(extern\s+"C"\s+)?fn\s*\(' "$top/drivers/infiniband/sw/roxe" --include='*.rs'; then
	echo "hosttest: a function pointer in drivers/" >&2
	status=1
fi
# Documentation/architecture.md has a row for every file of the driver and of rust/, and no other.
python3 "$top/tools/archcheck.py" || status=1
# Size rules (tools/shape.py): at most 800 lines of code per file, 6 parameters and 100 lines
# per function.
python3 "$top/tools/shape.py" || status=1
# How tools/blktests_report.py reads blktests' ./check output (verdicts, variants, a stopped boot).
python3 "$top/tools/test_blktests_report.py" 2>&1 || status=1

cd "$top/tools/proto"
cargo test --quiet 2>&1 || status=1
exit $status
