#!/bin/bash
# Diagnostic for comparing driver builds between two VMs (not in make test): each round loads
# every variant in turn in the same boot and runs the listed perftest tests between the VMs,
# printing "RESULT round=R VARIANT TOOL SIZE = VALUE" (bandwidth MiB/s, atomics kops/s, or t_avg
# us; between two VMs followed by host_drops=N, the datagrams the host's sockets dropped for want
# of receive buffer over the run, qemu/guest/lib.sh's host_udp_drops) on VM 1 and each test's
# device counter deltas on both. How performance.md's variants were
# compared.
# Args (commas between, "+" inside): VARIANTS ROUNDS TESTS MTU ITERS (iterations of a bandwidth
# run; a latency run does three quarters of them); a test is TOOL:SIZE or TOOL:SIZE:QPS (perftest
# -q QPS), e.g.
#   qemu/run-vm.sh --flavour stock --two-vm --script qemu/tests/diag2vm.sh --timeout 1600 \
#     --args "rxe+roxe+roxe-old,3,ib_write_lat:2+ib_write_bw:65536"
# Variants: rxe, roxe (the build under test), roxe-NAME (build/exp/roxe-NAME.ko, a copy of an
# older or modified build/stock/roxe.ko), tcp (no driver: each bandwidth test moves the same
# bytes by iperf3's TCP instead, in writes of the test's size: the ceiling the wire sets). Each
# side's deltas include its CPU (/proc/stat jiffies: cpu_busy, cpu_softirq, cpu_idle) and its
# netdev's packets; on the host, tools/host-sample.sh says where the host's CPU goes over a
# RESULT line's t=T0..T1. Without --two-vm the same runs go through the device's own GID in one
# VM (loopback, the server in the background), as bench.sh's 1vm half.
. /roxe/qemu/guest/lib.sh
TWO=0; grep -qw 'roxe.two=1' /proc/cmdline && TWO=1
# One VM: no peer to wait for, and this VM is the client.
[ $TWO = 0 ] && { barrier() { :; }; ROXE_VM=1; PEER_IP=127.0.0.1; }
VARIANTS=${1:-rxe+roxe}; VARIANTS=${VARIANTS//+/ }; ROUNDS=${2:-1}; TESTS=${3:-"ib_write_bw:65536 ib_send_bw:65536 ib_send_lat:2 ib_write_lat:2"}; TESTS=${TESTS//+/ }; MTU=${4:-1500}; ITERS=${5:-400}
ip link set "$NETDEV" mtu "$MTU" || fail "mtu"
snap() { local d=/sys/class/infiniband/$RDMA_DEV/ports/1/hw_counters f; for f in $d/*; do [ -e "$f" ] && echo "$(basename $f)=$(cat $f)"; done
	awk '/^cpu / { print "cpu_busy=" $2 + $3 + $4 + $7 + $8; print "cpu_softirq=" $8; print "cpu_idle=" $5 + $6 }' /proc/stat; ethtool -S $NETDEV 2>/dev/null | awk "/kicks|tx_queue_0_packets|rx_queue_0_packets/ { sub(\":\",\"\"); print \$1\"=\"\$2 }"; }
delta() { join -t= <(echo "$1" | sort) <(echo "$2" | sort) | awk -F= '$3!=$2 { printf "%s+%d ", $1, $3-$2 }'; }
k=0
for r in $(seq 1 $ROUNDS); do for var in $VARIANTS; do
	case $var in
	rxe) drv=rxe; step "load-$var-$r" load_driver rxe || { unload_driver rxe; continue; } ;;
	roxe) drv=roxe; step "load-$var-$r" load_driver roxe || { unload_driver roxe; continue; } ;;
	roxe-*) drv=roxe; load_rdma_core; insmod /roxe/build/exp/$var.ko || fail "insmod $var"; RDMA_DEV=roxe0; export RDMA_DEV
		rdma link add roxe0 type roxe netdev "$NETDEV"; wait_port_active roxe0 ;;
	tcp) drv="" RDMA_DEV=${RDMA_DEV:-none} ;;
	esac
	gid=0; [ -n "$drv" ] && gid=$(gid_index_v4)
	barrier "up-$var-$r" 120
	for t in $TESTS; do
		IFS=: read -r tool size qps <<<"$t"; k=$((k+1))
		case $tool in *lat) n=$((ITERS * 3 / 4)) ;; *) n=$ITERS ;; esac
		args="-d $RDMA_DEV -x $gid -s $size -n $n -F${qps:+ -q $qps}"
		srv="$tool $args" cli="$tool $args $PEER_IP"
		if [ $var = tcp ]; then
			case $tool in *lat | ib_atomic_bw) continue ;; esac
			tool=iperf3 srv="iperf3 -s -1" cli="iperf3 -c $PEER_IP -n $((n * size * ${qps:-1})) -l $size -J"
		fi
		s0=$(snap)
		if [ $ROXE_VM = 0 ]; then barrier "b$k" 120; timeout 150 $srv >/dev/null 2>&1; barrier "e$k" 200
			say "SERVER $var $tool: $(delta "$s0" "$(snap)")"
		else
			barrier "b$k" 120
			t0=$(date +%s) hd0="" hd1=""
			[ $TWO = 1 ] && hd0=$(host_udp_drops "d$k-0")
			[ $TWO = 0 ] && { timeout 150 $srv >/dev/null 2>&1 & }
			out=$(retry_client 30 timeout 120 $cli 2>/dev/null)
			[ $TWO = 0 ] && wait
			case $tool in *lat) v=$(echo "$out" | awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+/ { print $6 }' | tail -1) ;;
			iperf3) v=$(echo "$out" | iperf3_mibs) ;;
			ib_atomic_bw) v=$(echo "$out" | awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { print $5 * 1000 }' | tail -1) ;;
			*) v=$(echo "$out" | awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { print $4 }' | tail -1) ;; esac
			[ -n "$hd0" ] && hd1=$(host_udp_drops "d$k-1")
			say "RESULT round=$r $var $tool $size${qps:+ q=$qps} = $v  (t=$t0..$(date +%s))${hd1:+ host_drops=$((hd1 - hd0))}"
			say "CLIENT $var $tool: $(delta "$s0" "$(snap)")"
			barrier "e$k" 200
		fi
	done
	barrier "down-$var-$r" 300
	[ -n "$drv" ] && unload_driver $drv
done; done
pass done
finish_tests
