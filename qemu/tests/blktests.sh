#!/bin/bash
# blktests, unmodified (qemu/blktests-build.sh packs a built copy into build/blktests.tar), over one
# soft RDMA driver: `./check` with nvme_trtype=rdma, on roxe (USE_RXE=1 through rxe_compat:
# roxe.ko installed as modules are, tools/modprobe.d/roxe-rxe-compat.conf in /etc/modprobe.d, so
# blktests' `modprobe rdma_rxe` and `rdma link add ... type rxe` get roxe), on rdma_rxe (USE_RXE=1)
# or on siw (USE_RXE unset). Args: DRIVER (roxe|rxe|siw), TESTS ("+" between: groups or tests,
# e.g. nvme+srp+rnbd or nvme/003+nvme/004), MODE: `must-pass` (make test: every listed test passes,
# each a PASS/FAIL line) or `record` (make blktests: only that ./check ran to its end; its output,
# /out/blktests-DRIVER.log, is what tools/blktests_report.py reads to compare the drivers),
# and optionally TIMEOUT: blktests' own TIMEOUT setting (each test that honours it, fio's runs
# above all, stops after that many seconds; blktests' Documentation/running-tests.md) and one more
# setting of blktests' config, NAME=VALUE (e.g. NVMET_BLKDEV_TYPES=file: only the file-backed
# variant of the nvme target tests).
# blktests checks the kernel log around each test itself; the harness checks the whole boot's.
. /roxe/qemu/guest/lib.sh
DRV=${1:-roxe}; TESTS=${2:-nvme}; TESTS=${TESTS//+/ }; MODE=${3:-must-pass}
TMO=${4:-}; EXTRA=${5:-}
SRC=/roxe/build/blktests.tar
[ -f $SRC ] || { fail "no $SRC (qemu/blktests-build.sh)"; finish_tests; }
load_rdma_core || fail "load the RDMA core"
mount_configfs || fail "mount configfs"

case $DRV in
roxe)
	install_roxe || fail "install roxe.ko"
	rxe_compat_conf on
	use_rxe=1 ;;
rxe) use_rxe=1 ;;
siw)
	install_siw || fail "install siw.ko"
	use_rxe= ;;
*) fail "unknown driver $DRV"; finish_tests ;;
esac

# blktests reads kernel options from /proc/config.gz or /boot/config-RELEASE (the srp group's
# requirements, through common/multipath-over-rdma); the kernels here have neither, so the
# build's configuration goes to the latter (qemu/module-index.sh copies it to the share).
cfg=/boot/config-$(uname -r)
[ -f /proc/config.gz ] || [ -f "$cfg" ] || { mkdir -p /boot && cp "/roxe/build/$ROXE_FLAVOUR-modules/config" "$cfg"; } ||
	fail "no kernel configuration for blktests"

# The srp group finds its multipath devices by the links udev makes for them
# (/dev/disk/by-id/dm-uuid-mpath-*, tests/srp/rc get_bdev_path); the guest's init starts no udev,
# so the daemon runs for that group (new devices' events only: no coldplug).
if [[ " $TESTS " == *" srp"* ]]; then
	/usr/lib/systemd/systemd-udevd --daemon || fail "start systemd-udevd"
fi

# results/ and the config are written next to ./check: run a writable copy.
rm -rf /tmp/blktests && mkdir /tmp/blktests && tar -xf $SRC -C /tmp/blktests || fail "unpack blktests"
cd /tmp/blktests || finish_tests
say "blktests unpacked, $DRV ready"
cat >config <<CFG
nvme_trtype=rdma
USE_RXE=$use_rxe
CFG
[ -n "$TMO" ] && echo "TIMEOUT=$TMO" >>config
if [ -n "$EXTRA" ]; then
	[[ $EXTRA =~ ^[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9_./\ -]*$ ]] ||
		{ fail "bad blktests setting: $EXTRA"; finish_tests; }
	echo "$EXTRA" >>config
fi
# check's own loop has no overall bound: the guest script's timeout is that.
./check $TESTS 2>&1 | tee /out/blktests-$DRV.log
# A verdict per test and variant ("nvme/008 (tr=rdma bd=file)<TAB>passed"), read from the log by
# the parser make blktests' report uses on the host.
python3 /roxe/tools/blktests_report.py --parse /out/blktests-$DRV.log >/out/blktests-$DRV.tsv
cp -a results /out/blktests-$DRV-results 2>/dev/null
n=$(wc -l </out/blktests-$DRV.tsv)
say "blktests on $DRV: $n verdicts, $(grep -c passed /out/blktests-$DRV.tsv) passed," \
	"$(grep -c failed /out/blktests-$DRV.tsv) failed, $(grep -c 'not run' /out/blktests-$DRV.tsv) not run"
[ "$n" -gt 0 ] && pass "blktests-$DRV-ran" || fail "blktests-$DRV-ran (no verdicts)"
if [ "$MODE" = must-pass ]; then
	# Every variant of each listed test passes.
	for t in $TESTS; do
		if v=$(awk -F'\t' -v t="$t" '{ split($1, a, " ") } a[1] == t { n++; p += $2 == "passed" }
			END { printf "%d of %d variants passed", p, n; exit !(n > 0 && p == n) }' /out/blktests-$DRV.tsv)
		then pass "blktests-$DRV-${t/\//-} ($v)"; else fail "blktests-$DRV-${t/\//-} ($v)"; fi
	done
fi
rdma link show | sed 's/^/    /'
finish_tests
