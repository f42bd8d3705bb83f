#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Where the time goes when perf cannot say: under TCG, perf's cpu-clock samples in a one-vCPU
# guest all land in the idle loop (pv_native_safe_halt), busy or not. This traces the inclusive
# duration of a chosen set of network-path and driver functions (function_graph, ftrace filter)
# for a short window of a long perftest run, in each VM, and leaves the trace in
# /out/fgraph.txt; tools/fgraph_sum.py adds it up per function (calls, total, per call).
# Durations include the tracer's own overhead: compare functions, not absolute times.
# Arguments: DRIVER TOOL SIZE SECONDS TRACE_SECONDS [QPS] (two VMs: VM 0 serves, VM 1 is the
# client; one VM: both, through the device's own GID; QPS: perftest -q).
#   qemu/run-vm.sh --flavour stock --two-vm --script qemu/tests/fgraph.sh --args roxe,ib_write_bw,65536,15,0.5
#   python3 tools/fgraph_sum.py build/vm/fgraph-stock/vm1/fgraph.txt
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe} TOOL=${2:-ib_write_bw} SIZE=${3:-65536} SECS=${4:-15} TSECS=${5:-0.5} QPS=${6:-}
TWO=0; grep -qw 'roxe.two=1' /proc/cmdline && TWO=1
# One VM: no peer to wait for; the client connects to this VM's own address.
[ $TWO = 0 ] && { barrier() { :; }; ROXE_VM=1; PEER_IP=$SELF_IP; }
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs nodev $T || { fail "no tracefs"; finish_tests; }
step load load_driver "$DRV" || finish_tests
gid=$(gid_index_v4)
# siw is iWARP: it connects through rdma_cm only, on its one GID.
cm=
[ "$DRV" = siw ] && { cm=-R; gid=0; }
# The network path both drivers share, then each driver's entry points (names that do not
# exist in this kernel or are not loaded are skipped; roxe's Rust functions have no ftrace entry
# hooks, so its C helpers stand for them).
F="handle_softirqs net_rx_action __napi_poll virtnet_poll virtnet_poll_tx free_old_xmit start_xmit
ip_local_out ip_route_output_flow __alloc_skb __dev_queue_xmit virtqueue_notify __pskb_pull_tail
udp_rcv skb_release_data __ip_select_ident virtqueue_add_outbuf ib_uverbs_write ib_uverbs_post_send
skb_segment_list rxe_rcv rxe_xmit_packet rxe_requester rxe_responder rxe_completer rxe_icrc_check
rxe_udp_encap_recv roxe_helper_crc32_le roxe_helper_prepare4 roxe_helper_send4
roxe_helper_send4_batch roxe_helper_route4_batch roxe_helper_skb_linearize hrtimer_start_range_ns
hrtimer_try_to_cancel clockevents_program_event do_syscall_64 tcp_v4_rcv tcp_sendmsg_locked
tcp_write_xmit tcp_ack siw_tcp_rx_data siw_qp_sq_process siw_qp_llp_data_ready siw_sq_start
siw_cq_notify_now try_to_wake_up roxe_helper_copy_from_page roxe_helper_copy_to_page rxe_mr_copy
rxe_post_send roxe_helper_copy_page_to_page"
for f in $F; do echo "$f" >>$T/set_ftrace_filter 2>/dev/null; done
say "tracing $(wc -l <$T/set_ftrace_filter) functions"
echo function_graph >$T/current_tracer
echo 1 >$T/options/funcgraph-tail
echo 60000 >$T/buffer_size_kb
echo 0 >$T/tracing_on
barrier up 120
# Latency tools run a fixed count of round trips, more than the run lasts; the timeout ends them.
case "$TOOL" in
*_lat) len="-n 1000000" ;;
*) len="-D $SECS" ;;
esac
args="-d $RDMA_DEV -x $gid $cm -s $SIZE $len -F${QPS:+ -q $QPS}"
if [ $TWO = 0 ]; then
	timeout $((SECS + 60)) $TOOL $args >/dev/null 2>&1 &
	sleep 2
	timeout $((SECS + 60)) $TOOL $args "$PEER_IP" >/out/perftest.txt 2>&1 &
	sleep $((SECS / 2 - 2))
elif [ "$ROXE_VM" = 0 ]; then
	timeout $((SECS + 60)) $TOOL $args >/dev/null 2>&1 &
	barrier go 60
	sleep $((SECS / 2))
else
	barrier go 60
	sleep 1
	timeout $((SECS + 60)) $TOOL $args "$PEER_IP" >/out/perftest.txt 2>&1 &
	sleep $((SECS / 2 - 1))
fi
echo 1 >$T/tracing_on
sleep "$TSECS"
echo 0 >$T/tracing_on
cp $T/trace /out/fgraph.txt
echo nop >$T/current_tracer
wait
check "fgraph-trace" 5 test -s /out/fgraph.txt
barrier done 120
unload_driver "$DRV"
finish_tests
