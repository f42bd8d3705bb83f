#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Boots one or two test VMs under TCG and runs a guest script in each; always returns.
#
#   qemu/run-vm.sh --flavour debug|stock|stock-RELEASE --script qemu/tests/X.sh [--name N] [--timeout SECS]
#                  [--two-vm] [--smp N] [--mem SIZE] [--args a,b,c]
#
# The project directory is shared read-only (tag roxe), the kernel's modules as /lib/modules, and a
# results directory build/vm/<name>/vm<i>/ (tag out). In two-VM mode the VMs are joined by a QEMU
# `dgram` netdev over 127.0.0.1 (one vCPU each) and share build/vm/<name>/sync for barriers.
# Exit status: 0 only if every guest script exited 0 and no kernel log shows a splat.
# ROXE_QEMU_EXTRA: more QEMU arguments (split at spaces), e.g. a TCG plugin for counting
# (tools/tbcount/).
. "$(dirname "$0")/lib.sh"

flavour=debug script="" name="" timeout=600 two=0 smp=2 mem=2G args=""
while [ $# -gt 0 ]; do
	case "$1" in
	--flavour) flavour=$2; shift ;;
	--script) script=$2; shift ;;
	--name) name=$2; shift ;;
	--timeout) timeout=$2; shift ;;
	--two-vm) two=1 ;;
	--smp) smp=$2; shift ;;
	--mem) mem=$2; shift ;;
	--args) args=$2; shift ;;
	*) die "unknown option $1" ;;
	esac
	shift
done
[ -n "$script" ] && [ -f "$ROXE_TOP/$script" ] || die "--script must name a file under the project"
[ -n "$name" ] || name=$(basename "$script" .sh)-$flavour

kdir=$(flavour_kernel "$flavour")
# The debug kernel boots directly; Debian's (stock, stock-RELEASE) through a small initramfs.
case "$flavour" in
debug*) kernel="$kdir/bzImage"; initrd=() ;;
*) kernel="$kdir/vmlinuz"; initrd=(-initrd "$kdir/initrd.img") ;;
esac
[ -f "$kernel" ] || die "no $flavour kernel: run qemu/kernel-$flavour.sh (or make kernels)"
img="$ROXE_CACHE/guest.img"
[ -f "$img" ] || die "no guest image: run qemu/guest-image.sh"
mods="$(readlink -f "$kdir")/modules/lib/modules"

res="$ROXE_TOP/build/vm/$name"
rm -rf "$res"; mkdir -p "$res/sync"
nvm=1; [ $two = 1 ] && { nvm=2; smp=1; }
# Boot takes ~16 s on the debug kernel under TCG; allow generously for a loaded machine.
host_timeout=$((timeout + 180))
port=$((20000 + ($$ % 10000) * 2))

# A guest that prints nothing for this long before its script starts is taken as hung in
# boot (seen under TCG on a loaded host: a livelock right after SMP bring-up, the vCPUs
# spinning); the run is then retried once. A slow boot keeps printing, so it is not cut short.
boot_stall=${ROXE_BOOT_STALL:-180}
# A two-VM test ends both guests within seconds of each other (their scripts meet at barriers
# to the end); a guest still running this long after its peer's QEMU ended is stuck (an
# rdma_rxe server hung in the kernel, whose client gave it up) and is stopped, failing the run,
# instead of holding the host until the run's timeout.
peer_grace=${ROXE_PEER_GRACE:-300}

# host_udp_answer: while two VMs run, answers their requests for the host's count of UDP datagrams
# dropped for want of socket receive buffer (/proc/net/snmp, Udp RcvbufErrors): where a burst the
# receiving QEMU's `dgram` socket cannot take is lost, which neither guest sees. A guest asks by
# creating sync/host-udp.NAME (qemu/guest/lib.sh: host_udp_drops); the answer is
# sync/host-udp.NAME.val. It stops with the run, or with this script if it is killed.
host_udp_answer() {
	local f
	while kill -0 "$$" 2>/dev/null; do
		for f in "$res"/sync/host-udp.*; do
			case $f in *.val | *.tmp) continue ;; esac
			[ -e "$f" ] && [ ! -e "$f.val" ] || continue
			awk '/^Udp:/ { if (h) { print $n; exit } for (i = 1; i <= NF; i++) if ($i == "RcvbufErrors") n = i; h = 1 }' \
				/proc/net/snmp >"$f.tmp" && mv "$f.tmp" "$f.val"
		done
		sleep 0.2
	done
}

# run_once: boots the VM(s), waits for them; returns 0, 1 (a failure), 3 (a boot hang) or 4
# (QEMU crashed).
run_once() {
	local answer=""
	pids=()
	rm -rf "$res/sync"; mkdir -p "$res/sync"
	if [ $two = 1 ]; then
		host_udp_answer &
		answer=$!
	fi
	local st=0
	run_vms || st=$?
	[ -z "$answer" ] || { kill "$answer" && wait "$answer"; } 2>/dev/null || true
	return $st
}

# run_vms: run_once's boot and wait.
run_vms() {
	local i
	for i in $(seq 0 $((nvm - 1))); do
		out="$res/vm$i"; rm -rf "$out"; mkdir -p "$out"
		if [ $two = 1 ]; then
			net="dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=$((port + i)),remote.type=inet,remote.host=127.0.0.1,remote.port=$((port + 1 - i))"
		else
			# QEMU's user-mode network with restrict=on: it drains every frame eth0 sends (a
			# peerless hub stalls the TX queue instead) and isolates the guest.
			net="user,id=n0,restrict=on"
		fi
		# tsc=unstable: under multi-threaded TCG the clocksource watchdog sees the TSC skew
		# against the HPET at run time (tens of seconds into a boot, or much later) and marks it
		# unstable; the static key that flips then, while the other vCPU runs, can kill the guest
		# with `Oops: int3` in sched_clock_cpu, a random failed run that is no test's fault.
		# Unstable from boot, nothing switches at run time.
		timeout -k 10 "$host_timeout" qemu-system-x86_64 \
			-accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" \
			-display none -monitor none -serial "file:$out/console.log" -no-reboot \
			-kernel "$kernel" "${initrd[@]}" \
			-append "console=ttyS0 root=/dev/vda rw init=/sbin/roxe-boot panic=-1 oops=panic no5lvl no_timer_check tsc=unstable \
roxe.script=$script roxe.vm=$i roxe.two=$two roxe.timeout=$timeout roxe.flavour=$flavour roxe.args=$args" \
			-drive "file=$img,if=virtio,format=raw,snapshot=on" \
			-virtfs "local,path=$ROXE_TOP,mount_tag=roxe,security_model=none,readonly=on" \
			-virtfs "local,path=$mods,mount_tag=mods,security_model=none,readonly=on" \
			-virtfs "local,path=$out,mount_tag=out,security_model=none" \
			-virtfs "local,path=$res/sync,mount_tag=sync,security_model=none" \
			-netdev "$net" -device "virtio-net-pci,netdev=n0,mac=52:54:00:77:00:0$((i + 1))" \
			${ROXE_QEMU_EXTRA:-} </dev/null >"$out/qemu.log" 2>&1 &
		pids+=($!)
	done
	# Boot watchdog: until every guest reached its script, a console silent for $boot_stall s
	# means a hung boot: stop all VMs of the run (a two-VM test needs both).
	local hung=0 started alive now m
	while :; do
		alive=0 started=1
		for i in $(seq 0 $((nvm - 1))); do
			kill -0 "${pids[$i]}" 2>/dev/null && alive=1
			grep -q 'roxe-init: running' "$res/vm$i/console.log" 2>/dev/null || started=0
		done
		[ $alive = 0 ] || [ $started = 1 ] && break
		now=$(date +%s)
		for i in $(seq 0 $((nvm - 1))); do
			grep -q 'roxe-init: running' "$res/vm$i/console.log" 2>/dev/null && continue
			m=$(stat -c %Y "$res/vm$i/console.log" 2>/dev/null || echo "$now")
			[ $((now - m)) -ge "$boot_stall" ] && hung=1
		done
		if [ $hung = 1 ]; then
			log "boot hang: a guest console was silent for ${boot_stall}s before its script started"
			kill "${pids[@]}" 2>/dev/null
			wait "${pids[@]}" 2>/dev/null
			return 3
		fi
		sleep 5
	done
	[ $nvm = 2 ] && stop_stuck_peer
	local st=0 qrc rc crashed=0
	for i in $(seq 0 $((nvm - 1))); do
		wait "${pids[$i]}"; qrc=$?
		out="$res/vm$i"
		[ $qrc = 124 ] || [ $qrc = 137 ] && log "vm$i: QEMU killed after ${host_timeout}s"
		rc=$(cat "$out/rc" 2>/dev/null || echo "none")
		if [ "$rc" != 0 ]; then
			log "vm$i: guest script $script exited with '$rc' (console: $out/console.log)"
			st=1
		fi
		if ! "$ROXE_TOP/qemu/check-dmesg.sh" "$out/console.log" "$out/dmesg"; then
			log "vm$i: kernel log shows a splat (see above)"
			st=1
		elif [ "$rc" = none ] && no_verdict "$i" "$qrc"; then
			crashed=1
		fi
	done
	[ $crashed = 1 ] && return 4
	return $st
}

# no_verdict I QRC: guest I ended without its script's exit code: says how QEMU ended and the
# last lines of the console and of QEMU's own log, so that a CI run, which keeps only this
# output, shows whether the guest powered off, reset or QEMU itself died. True when QEMU died of
# SIGILL, SIGABRT, SIGBUS, SIGFPE or SIGSEGV (a guest cannot end its emulator so, and its kernel
# reported nothing): a crash of the emulator, not of the guest, which the caller retries once.
no_verdict() {
	local i=$1 qrc=$2 o="$res/vm$1"
	log "vm$i: no verdict: QEMU exited with code $qrc; the console's last lines:"
	tail -n 6 "$o/console.log" 2>/dev/null | cut -c1-160 | sed 's/^/    /'
	log "vm$i: QEMU's log:"
	tail -n 4 "$o/qemu.log" 2>/dev/null | cut -c1-160 | sed 's/^/    /'
	case $qrc in 132 | 134 | 135 | 136 | 139) return 0 ;; esac
	return 1
}

# stop_stuck_peer: in a two-VM run, waits for both QEMUs to end, and stops one still running
# $peer_grace s after the other ended.
stop_stuck_peer() {
	local i ended=0 up
	while :; do
		up=()
		for i in 0 1; do kill -0 "${pids[$i]}" 2>/dev/null && up+=("$i"); done
		[ ${#up[@]} = 0 ] && return 0
		if [ ${#up[@]} = 1 ]; then
			[ $ended = 0 ] && ended=$SECONDS
			if [ $((SECONDS - ended)) -ge "$peer_grace" ]; then
				log "vm${up[0]}: still running ${peer_grace}s after its peer ended: stopped"
				kill "${pids[${up[0]}]}" 2>/dev/null || true
				return 0
			fi
		fi
		sleep 2
	done
}

status=0
run_once || status=$?
case $status in
3) log "retrying the run once after the boot hang" ;;
4) log "retrying the run once after QEMU crashed" ;;
esac
if [ $status = 3 ] || [ $status = 4 ]; then
	status=0
	run_once || status=$?
fi
[ $status -le 1 ] || status=1
exit $status
