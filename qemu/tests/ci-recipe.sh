#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make ci-recipe` (qemu/tests/ci-recipe.list; the host side is qemu/ci-recipe.sh): runs
# build/ci-recipe/recipe.sh, the commands of Documentation/install.md's CI recipe as written
# there, in the project's checkout, with apt pointed at the flat repository of their packages
# (the guest has no network) in place of Debian's mirror. Then checks what the recipe promises:
# DKMS has roxe installed for this kernel, roxe0 is an active RDMA device, and both ends of the
# ping-pong reported their transfer.
. /roxe/qemu/guest/lib.sh
rel=$(uname -r)
ci=/roxe/build/ci-recipe
export rel

step ci-writable writable_system || finish_tests
offline_apt() {
	mkdir -p /etc/apt/sources.list.d.off || return 1
	mv /etc/apt/sources.list.d/* /etc/apt/sources.list.d.off/ 2>/dev/null
	[ ! -f /etc/apt/sources.list ] || mv /etc/apt/sources.list /etc/apt/sources.list.off
	echo "deb [trusted=yes] file:$ci/repo ./" >/etc/apt/sources.list.d/ci-recipe.list
}
step ci-offline-apt offline_apt || finish_tests

recipe() {
	cd /roxe && DEBIAN_FRONTEND=noninteractive bash -ex "$ci/recipe.sh"
}
export -f recipe
export ci
check ci-recipe-runs 6600 bash -c 'recipe >/out/recipe.log 2>&1; rc=$?; tail -40 /out/recipe.log; exit $rc'
check ci-dkms-installed 60 sh -c 'dkms status roxe | tee /dev/stderr | grep -q "roxe/0.1, $rel, .*: installed"'
check ci-roxe-from-dkms 30 sh -c 'modinfo -n roxe | grep -q "/updates/dkms/roxe.ko"'
check ci-device-active 60 wait_port_active roxe0
# ibv_rc_pingpong prints "N bytes in T seconds = R Mbit/sec" once at each end.
check ci-pingpong-both-ends 30 sh -c '[ "$(grep -c " bytes in .* seconds = " /out/recipe.log)" = 2 ]'
finish_tests
