#!/bin/bash
# What a kernel ULP gets in struct ib_wc: qemu/kverbs/kverbs_check.c, a kernel verbs consumer
# module, runs its checks on load and fails the load if one fails. Argument: driver.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}
step "$DRV-load" load_driver "$DRV" || finish_tests
check "$DRV-kverbs-insmod" 900 insmod "/roxe/build/$ROXE_FLAVOUR/roxe_kverbs_check.ko" "dev=$RDMA_DEV"
dmesg | grep -E 'roxe_kverbs_check: (PASS|FAIL) ' | sed 's/.*roxe_kverbs_check: //' | while read -r st name rest; do
	echo "$st $DRV-kverbs-$name $rest" >>/out/results
done
check "$DRV-kverbs-rmmod" 60 rmmod roxe_kverbs_check
check "$DRV-unload" 60 unload_driver "$DRV"
finish_tests
