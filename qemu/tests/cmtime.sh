#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Control-path cost: 20 sequential rping connections (connect, one ping, disconnect; each a new
# rping process) against a persistent rping server, three rounds per driver or build, in one
# boot. A variant is rxe, roxe (this build) or roxe-NAME (build/exp/roxe-NAME.ko).
#   qemu/run-vm.sh --flavour stock --script qemu/tests/cmtime.sh --args rxe+roxe
# Prints "RESULT VARIANT ROUND CONNECTED MS" lines and leaves them in /out/cmtime.txt.
. /roxe/qemu/guest/lib.sh
load_variant() {
	case $1 in
	rxe | roxe) load_driver "$1" ;;
	*)
		load_rdma_core && insmod "/roxe/build/exp/$1.ko" && RDMA_DEV=roxe0 &&
			rdma link add roxe0 type roxe netdev "$NETDEV" && wait_port_active roxe0
		;;
	esac
}
for variant in ${1//+/ }; do
	step "load-$variant" load_variant "$variant" || continue
	for r in 1 2 3; do
		rping -s -a "$SELF_IP" -P >/dev/null 2>&1 &
		server=$!
		sleep 1
		t0=$(date +%s%N)
		ok=0
		for i in $(seq 1 20); do
			timeout 20 rping -c -a "$SELF_IP" -C 1 >/dev/null 2>&1 && ok=$((ok + 1))
		done
		ms=$((($(date +%s%N) - t0) / 1000000))
		kill $server
		wait $server 2>/dev/null
		say "RESULT $variant $r $ok $ms"
		echo "RESULT $variant $r $ok $ms" >>/out/cmtime.txt
		if [ $ok = 20 ]; then pass "cmtime-$variant-$r"; else fail "cmtime-$variant-$r ($ok/20)"; fi
	done
	rdma link delete "$RDMA_DEV"
	case $variant in rxe) rmmod rdma_rxe ;; *) rmmod roxe ;; esac
done
finish_tests
