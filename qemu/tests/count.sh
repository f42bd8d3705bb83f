#!/bin/bash
# What one perftest run executes, counted by the TCG plugin tools/tbcount (not timed): loopback
# through the device's own address in one VM. The plugin is given by the host:
#   gcc -O2 -shared -fPIC -fvisibility=hidden -o build/tbcount.so tools/tbcount/tbcount.c -lpthread
#   ROXE_QEMU_EXTRA="-plugin $PWD/build/tbcount.so,out=$PWD/build/vm/count/vm0/counts.txt" \
#     qemu/run-vm.sh --flavour stock --script qemu/tests/count.sh --name count --args roxe,ib_send_lat,64,20000
#   python3 tools/tbcount/attr.py --per 20000 build/vm/count/vm0 [another run's directory]
# (the plugin writes counts.txt when QEMU exits, after this script). Besides perftest's output,
# the guest leaves /out/kallsyms.txt, the symbols the counts are attributed to.
# Arguments: DRIVER TOOL SIZE ITERS
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe} TOOL=${2:-ib_send_lat} SIZE=${3:-64} ITERS=${4:-20000}
step "$DRV-load" load_driver "$DRV" || finish_tests
args=(-d "$RDMA_DEV" -R -F -s "$SIZE" -n "$ITERS")
timeout 600 "$TOOL" "${args[@]}" >/dev/null 2>&1 &
srv=$!
wait_listening
check count-run 600 timeout 550 "$TOOL" "${args[@]}" "$SELF_IP"
wait $srv
echo 0 >/proc/sys/kernel/kptr_restrict
check count-kallsyms 60 sh -c 'cat /proc/kallsyms >/out/kallsyms.txt'
grep -A1 '#bytes' /out/count-run.log
finish_tests
