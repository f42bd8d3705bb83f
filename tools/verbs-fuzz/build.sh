#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Builds tools/verbs-fuzz/verbs_fuzz.c into build/verbs-fuzz/verbs_fuzz in the trixie build root,
# the guest's distribution, so that it runs against the guest's libibverbs.so.1 (the guest image
# has no compiler). qemu/tests/verbs-fuzz.sh runs it as /roxe/build/verbs-fuzz/verbs_fuzz.
# Then checks the program's ICRC against the known answers of proto/icrc.rs.
. "$(dirname "$0")/../../qemu/lib.sh"
src="$ROXE_TOP/tools/verbs-fuzz/verbs_fuzz.c"
out="$ROXE_TOP/build/verbs-fuzz"
mkdir -p "$out"
"$ROXE_TOP/qemu/buildroot.sh" # the rdma-core headers, once
in_buildroot gcc -O2 -g -Wall -Werror -o "$out/verbs_fuzz.tmp" "$src" -libverbs
mv "$out/verbs_fuzz.tmp" "$out/verbs_fuzz"
in_buildroot "$out/verbs_fuzz" --selftest
echo "$out/verbs_fuzz"
