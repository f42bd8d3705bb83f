#!/bin/bash
# rxe compatibility (Documentation/install.md): tools written for rdma_rxe use roxe unchanged.
# roxe.ko is installed as modules are (/lib/modules/$(uname -r)/extra, depmod) with
# tools/modprobe.d/roxe-rxe-compat.conf in /etc/modprobe.d; then:
#   - `rdma link add rxe0 type rxe` with no RDMA driver loaded loads roxe (the core's
#     request_module of rdma-link-rxe reaches rdma_rxe's alias, whose install line loads roxe
#     with rxe_compat=1), and rxe0 is a roxe device (roxe's own hw counters), which moves data
#     (a validating ibv_rc_pingpong over loopback); rdma_rxe stays unloaded;
#   - `rdma link delete` and `modprobe -r rdma_rxe` unload roxe;
#   - `modprobe rdma_rxe` loads roxe too, and then `rdma link add ... type roxe` works alike;
#   - without the parameter, roxe answers to `roxe` only: `type rxe` is refused (rdma_rxe
#     cannot load beside roxe), and no device appears.
# modinfo shows the parameter with its description and the rdma-link-roxe alias.
. /roxe/qemu/guest/lib.sh
load_rdma_core
KO=/roxe/build/$ROXE_FLAVOUR/roxe.ko
install_roxe || fail "install roxe.ko"
mods() { awk '$1 == "roxe" || $1 == "rdma_rxe" { printf "%s ", $1 }' /proc/modules; }
is_roxe_dev() { [ -f "/sys/class/infiniband/$1/ports/1/hw_counters/rcvd_peer_mismatch" ]; }
pingpong() {
	local gid; gid=$(gid_index_v4 "$1")
	ibv_rc_pingpong -d "$1" -g "$gid" -n 200 -s 4096 -c >/tmp/pp-server.log 2>&1 &
	local spid=$!
	retry_client 20 timeout 60 ibv_rc_pingpong -d "$1" -g "$gid" -n 200 -s 4096 -c 127.0.0.1
	local rc=$?
	wait $spid || rc=1
	return $rc
}
export -f mods is_roxe_dev pingpong

check modinfo 10 bash -c 'modinfo roxe | tee /dev/stderr | grep -q "^parm: *rxe_compat:Also answer to the link type rxe" && modinfo roxe | grep -q "^alias: *rdma-link-roxe"'

# Without the compatibility, `type rxe` is not roxe's.
insmod "$KO" || fail "insmod roxe"
expect_fail plain-roxe-refuses-type-rxe 30 rdma link add rxe0 type rxe netdev "$NETDEV"
check plain-roxe-no-rxe0 5 bash -c '[ ! -e /sys/class/infiniband/rxe0 ] && [ "$(mods)" = "roxe " ]'
rmmod roxe || fail "rmmod roxe"

rxe_compat_conf on
check link-add-type-rxe-loads-roxe 60 bash -c 'rdma link add rxe0 type rxe netdev '"$NETDEV"' && [ "$(mods)" = "roxe " ]'
check rxe0-is-roxe 30 bash -c 'wait_port_active rxe0 && is_roxe_dev rxe0 && rdma link show rxe0/1'
check rxe0-pingpong 120 pingpong rxe0
check link-delete 30 bash -c 'rdma link delete rxe0 && [ ! -e /sys/class/infiniband/rxe0 ]'
check modprobe-r-rdma_rxe-unloads-roxe 30 bash -c 'modprobe -r rdma_rxe && [ -z "$(mods)" ]'

check modprobe-rdma_rxe-loads-roxe 30 bash -c 'modprobe rdma_rxe && [ "$(mods)" = "roxe " ]'
check type-roxe-beside-type-rxe 60 bash -c 'rdma link add roxe0 type roxe netdev '"$NETDEV"' && wait_port_active roxe0 && is_roxe_dev roxe0 && rdma link delete roxe0'
check unload 30 bash -c 'modprobe -r rdma_rxe && [ -z "$(mods)" ]'
rxe_compat_conf off
kmemleak_check
finish_tests
