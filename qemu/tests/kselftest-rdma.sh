#!/bin/bash
# The kernel's own rdma selftests (tools/testing/selftests/rdma/*.sh of the kernel source the
# modules are built against, extracted with the helper they source by qemu/build-module.sh
# into build/kselftest/), unchanged, on rdma_rxe and then on roxe. The scripts load rdma_rxe
# and say `type rxe`; for roxe, roxe.ko is installed as modules are and
# tools/modprobe.d/roxe-rxe-compat.conf put in /etc/modprobe.d (Documentation/install.md), so
# the same scripts load and drive roxe. Each script's exit status is its result (0 pass, 4
# skip, else fail); its stderr and `bash -x` trace are kept in /out. Every script that passes
# on rdma_rxe must pass on roxe; the table of both is printed at the end. rxe_sent_rcvd_bytes.sh
# passes only if the port counters it compared moved.
# Arguments: the scripts to run (default: all of them).
. /roxe/qemu/guest/lib.sh
DIR=/roxe/build/kselftest/rdma
[ -d "$DIR" ] || { fail "no $DIR (qemu/build-module.sh extracts it)"; finish_tests; }
[ $# -gt 0 ] || set -- $(cd "$DIR" && ls *.sh)
load_rdma_core
# As on a distribution (kmod static-nodes at boot): /dev/net/tun exists before tun is loaded, and
# opening it loads tun; rxe_test_NETDEV_UNREGISTER.sh relies on that after an earlier script's
# cleanup has unloaded tun.
[ -e /dev/net/tun ] || { mkdir -p /dev/net && mknod /dev/net/tun c 10 200; }
install_roxe || fail "install roxe.ko"
result() { case $1 in 0) echo pass ;; 4) echo skip ;; *) echo "fail($1)" ;; esac; }
declare -A RES
for s in "$@"; do
	for drv in rxe roxe; do
		if [ $drv = roxe ]; then rxe_compat_conf on; else rxe_compat_conf off; fi
		rc=0
		timeout -k 5 300 bash -x "$DIR/$s" >"/out/ks-$drv-$s.out" 2>"/out/ks-$drv-$s.trace" || rc=$?
		RES[$drv,$s]=$(result $rc)
		# rxe_sent_rcvd_bytes.sh compares port_xmit_data with port_rcv_data; a device without
		# port counters would compare 0 with 0 and pass, so the values it compared (from the
		# trace) must have moved, alike.
		if [ $s = rxe_sent_rcvd_bytes.sh ] && [ $rc = 0 ]; then
			sent=$(awk '$2 == "echo" && $3 == "sent" { print $4 - $5 }' "/out/ks-$drv-$s.trace")
			rcvd=$(awk '$2 == "echo" && $3 == "rcvd" { print $4 - $5 }' "/out/ks-$drv-$s.trace")
			say "$drv: port_xmit_data +$sent port_rcv_data +$rcvd (units of 4 octets)"
			[ -n "$sent" ] && [ "$sent" -gt 0 ] && [ "$sent" = "$rcvd" ] || RES[$drv,$s]="fail(counters did not move)"
		fi
		say "$s on $drv: ${RES[$drv,$s]}"
		[ $rc = 0 ] || grep -v '^+' "/out/ks-$drv-$s.trace" | tail -5 | sed 's/^/    /'
		# Leave nothing behind for the next run, whatever the script did.
		rmmod roxe 2>/dev/null; rmmod rdma_rxe 2>/dev/null
		if grep -qw -e roxe -e rdma_rxe /proc/modules; then fail "$s-$drv-left-a-module-loaded"; fi
	done
	if [ "${RES[rxe,$s]}" = pass ] && [ "${RES[roxe,$s]}" != pass ]; then
		fail "kselftest-$s (rdma_rxe: pass, roxe: ${RES[roxe,$s]})"
	else
		pass "kselftest-$s (rdma_rxe: ${RES[rxe,$s]}, roxe: ${RES[roxe,$s]})"
	fi
done
rxe_compat_conf off
say "| script | rdma_rxe | roxe |"
for s in "$@"; do say "| \`$s\` | ${RES[rxe,$s]} | ${RES[roxe,$s]} |"; done
kmemleak_check
finish_tests
