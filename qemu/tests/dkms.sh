#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make dkms` (qemu/tests/dkms.list): roxe through DKMS on Debian's stock kernel, as a user installs
# it (Documentation/install.md). Installs Debian's packages that qemu/dkms-debs.sh put in
# /roxe/build/dkms/debs (dkms, the kernel's headers and linux-source, its rustc, rust-src and
# bindgen), roxe's source into /usr/src/roxe-VERSION, then `dkms add`, `dkms build` (the headers
# have no Rust metadata: dkms.conf's PRE_BUILD regenerates it with tools/rust-kernel-prep) and
# `dkms install`; modinfo; modprobe roxe; `rdma link add` and ibv_rc_pingpong in loopback;
# `rdma link add` with roxe unloaded (the rdma-link-roxe alias loads it); `dkms remove --all`
# and nothing of roxe left.
. /roxe/qemu/guest/lib.sh
rel=$(uname -r)
dk=/roxe/build/dkms
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' $dk/src/dkms.conf)
export rel ver dk

# The image has about 1.2 GB free and the packages need more, and the build unpacks the kernel
# source (about 2 GB with the prepared tree): /usr, /lib/modules and /var/lib/dkms go to memory
# (writable_system; the run gives the guest 8 GiB).
step dkms-writable writable_system || finish_tests

install_packages() {
	# The image keeps no package lists: apt installs the files given, from nothing but them.
	mkdir -p /var/lib/apt/lists/partial /var/cache/apt/archives/partial || return 1
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		-o Dpkg::Options::=--force-confdef $dk/debs/*.deb
}
export -f install_packages
check dkms-packages 2400 install_packages || finish_tests
check dkms-headers 30 test -f "/lib/modules/$rel/build/.config"

# The documented install: the source under /usr/src/roxe-VERSION (`git archive HEAD`, as
# qemu/dkms-debs.sh made it), then dkms.
check dkms-source 120 cp -a $dk/src "/usr/src/roxe-$ver" || finish_tests
check dkms-prep-check 120 "/usr/src/roxe-$ver/tools/rust-kernel-prep" --check "$rel"
check dkms-add 120 dkms add "roxe/$ver" || finish_tests
t=$SECONDS
check dkms-build 5400 dkms build "roxe/$ver" -k "$rel" ||
	{ sed -n '/^Running the pre_build/,$p' /var/lib/dkms/roxe/"$ver"/build/make.log | tail -40; finish_tests; }
say "dkms build took $((SECONDS - t)) s"
grep -h -E '^dkms-pre-build|^rust-kernel-prep' /var/lib/dkms/roxe/"$ver"/build/make.log \
	/var/lib/dkms/roxe/"$ver"/"$rel"/*/log/make.log 2>/dev/null
t=$SECONDS
check dkms-install 1200 dkms install "roxe/$ver" -k "$rel" || finish_tests
say "dkms install took $((SECONDS - t)) s"
check dkms-status 60 sh -c 'dkms status roxe | tee /dev/stderr | grep -q "roxe/$ver, $rel, .*: installed"'
check dkms-installed-path 30 sh -c 'ls /lib/modules/$rel/updates/dkms/roxe.ko*'
modinfo roxe >/out/modinfo.txt 2>&1
cat /out/modinfo.txt
has_modinfo() { grep -Eq "$1" /out/modinfo.txt; }
export -f has_modinfo
check dkms-modinfo-description 30 has_modinfo '^description: +[^ ]'
check dkms-modinfo-license 30 has_modinfo '^license: +GPL'
check dkms-modinfo-alias 30 has_modinfo '^alias: +rdma-link-roxe$'
check dkms-modinfo-parm 30 has_modinfo '^parm: +rxe_compat:[^ ].* \(bool\)$'

# modprobe pulls in what roxe depends on; the verbs user side needs ib_uverbs as well.
check dkms-modprobe 120 modprobe roxe
load_rdma_core
check dkms-link-add 60 sh -c 'rdma link add roxe0 type roxe netdev eth0 && rdma link show'
check dkms-port-active 60 wait_port_active roxe0
gid=$(gid_index_v4 roxe0) || fail "dkms: roxe0 has no RoCE v2 IPv4 GID"
pingpong() {
	timeout 50 ibv_rc_pingpong -d roxe0 -g "$1" -n 1000 -c >/out/pingpong-server.log 2>&1 &
	local p=$! rc=0
	retry_client 20 ibv_rc_pingpong -d roxe0 -g "$1" -n 1000 -c 127.0.0.1 || rc=$?
	wait $p || rc=$?
	return $rc
}
export -f pingpong
check dkms-pingpong 120 pingpong "${gid:-1}"
check dkms-unload 60 sh -c 'rdma link delete roxe0 && rmmod roxe'
# `rdma link add ... type roxe` with roxe unloaded: the RDMA core asks modprobe for rdma-link-roxe.
autoload() {
	! grep -q '^roxe ' /proc/modules || return 1
	rdma link add roxe0 type roxe netdev eth0 || return 1
	grep '^roxe ' /proc/modules && rdma link delete roxe0 && rmmod roxe
}
export -f autoload
check dkms-autoload 120 autoload

t=$SECONDS
check dkms-remove 1200 dkms remove "roxe/$ver" --all
say "dkms remove took $((SECONDS - t)) s"
rm -rf "/usr/src/roxe-$ver"
nothing_left() {
	local f
	f=$(find /lib/modules/"$rel" -name 'roxe.ko*' 2>/dev/null)
	[ -z "$f" ] || { echo "left: $f"; return 1; }
	[ ! -e /var/lib/dkms/roxe ] || { echo "left: /var/lib/dkms/roxe"; find /var/lib/dkms/roxe | head -20; return 1; }
	! grep -q roxe "/lib/modules/$rel/modules.dep" || { echo "left in modules.dep"; return 1; }
}
export -f nothing_left
check dkms-nothing-left 60 nothing_left
expect_fail dkms-modprobe-gone 60 modprobe roxe
expect_fail dkms-modinfo-gone 60 modinfo roxe
finish_tests
