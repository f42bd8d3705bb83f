#!/bin/bash
# Harness self-test: an out-of-tree Rust module built against this kernel's tree loads and
# unloads. With the argument `warn` the module WARNs on load, and the run must then fail.
. /roxe/qemu/guest/lib.sh
say "kernel $(uname -r)"
params=""
[ "${1:-}" = warn ] && params="warn=1"
check selftest-insmod 60 insmod "/roxe/build/$ROXE_FLAVOUR/roxe_selftest.ko" $params
check selftest-loaded 10 grep -q '^roxe_selftest ' /proc/modules
check selftest-rmmod 60 rmmod roxe_selftest
check selftest-dmesg 10 sh -c 'dmesg | grep -q "roxe_selftest: unloaded"'
finish_tests
