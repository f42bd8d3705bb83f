#!/bin/bash
# rsocket, librdmacm's sockets over RDMA, between two VMs (VM 0 serves, VM 1 connects) or in one
# VM: rstream and riostream at 64 B, 4 KiB and 64 KiB with their data verification (-T v), then
# stock socket programs through librspreload.so (LD_PRELOAD): netcat sends a file to a plain
# Python socket sink, and its length and checksum must arrive unchanged. rsocket runs its stream over RC QPs: RDMA WRITE with immediate
# into the peer's receive ring, inline SENDs for credits, and for riostream the riomap'd buffer
# written directly. Arguments: DRV0 [DRV1], the driver of each VM (roxe or rxe).
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; [ "$ROXE_VM" = 1 ] && DRV=${2:-${1:-roxe}}
TWO=0; grep -qw 'roxe.two=1' /proc/cmdline && TWO=1
TAG="${1:-roxe}-${2:-${1:-roxe}}"
step "$DRV-load-vm$ROXE_VM" load_driver "$DRV" || finish_tests
SRV=$SELF_IP; [ $TWO = 1 ] && SRV=192.168.77.1
PRELOAD=$(ls /usr/lib/*/rsocket/librspreload.so 2>/dev/null | head -1)
[ $TWO = 1 ] && barrier ready 180
port=7471
for size in 64 4096 65536; do
	# Fewer transfers for larger messages: each run moves a few MiB each way.
	count=$((size >= 65536 ? 20 : 100))
	for tool in rstream riostream; do
		port=$((port + 1))
		cm_pair "$tool-$size" 180 $tool -b "$SRV" -p $port -S $size -C $count -I 2 -T v -- \
			$tool -s "$SRV" -p $port -S $size -C $count -I 2 -T v
	done
done
# Stock socket programs through the preload library: netcat sends 4 MiB of random data to a
# plain Python socket sink (netcat's own listener insists on SO_REUSEPORT, which rsockets do
# not have); what arrived must have the sent data's length and checksum. The sender's checksum
# reaches the server over /sync (two VMs) or /tmp (one VM).
nc_server() {
	local got want
	LD_PRELOAD=$PRELOAD timeout 120 python3 /roxe/qemu/tests/py/sock_sink.py "$SRV" 7600 >/tmp/rx.sum || return 1
	got=$(cat /tmp/rx.sum)
	if [ $TWO = 1 ]; then want=$(cat /sync/tx.sum); else want=$(cat /tmp/tx.sum); fi
	echo "received: $got, sent: $want"
	[ "$got" = "$want" ]
}
nc_client() {
	LD_PRELOAD=$PRELOAD nc -N "$SRV" 7600 </tmp/tx.bin
}
export PRELOAD SRV TWO
export -f nc_server nc_client
if [ -z "$PRELOAD" ]; then
	fail "$TAG: no librspreload.so"
else
	head -c 4194304 /dev/urandom >/tmp/tx.bin
	echo "4194304 $(sha256sum </tmp/tx.bin | cut -d' ' -f1)" >/tmp/tx.sum
	[ $TWO = 1 ] && [ "$ROXE_VM" = 1 ] && cp /tmp/tx.sum /sync/tx.sum
	cm_pair preload-netcat 180 bash -c nc_server -- bash -c nc_client
fi
[ $TWO = 1 ] && barrier done 300
check "$DRV-unload-vm$ROXE_VM" 60 unload_driver "$DRV"
[ "$DRV" = roxe ] && kmemleak_check
finish_tests
