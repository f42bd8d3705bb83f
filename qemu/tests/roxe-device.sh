#!/bin/bash
# roxe device lifecycle with stock tools: creation, attributes, port state and events, MTU,
# GIDs, teardown by `rdma link delete`, by netdev deletion and by rmmod, and exclusion of rdma_rxe.
. /roxe/qemu/guest/lib.sh
KO=/roxe/build/$ROXE_FLAVOUR/roxe.ko
load_rdma_core

# --- roxe refuses to load beside rdma_rxe, and rdma_rxe beside roxe --------------------------
modprobe rdma_rxe
expect_fail roxe-refused-beside-rxe 30 insmod $KO
check roxe-refusal-explained 10 sh -c "dmesg | grep -q 'rdma_rxe is loaded: roxe and rdma_rxe share'"
rmmod rdma_rxe
check roxe-insmod 30 insmod $KO
expect_fail rxe-refused-beside-roxe 30 modprobe rdma_rxe
check rxe-refusal-explained 10 sh -c "dmesg | grep -q 'refusing to load rdma_rxe'"

# --- creation and attributes ------------------------------------------------------------------
check link-add 30 rdma link add roxe0 type roxe netdev eth0
check link-show 60 sh -c "rdma link show | tee /out/link.txt | grep -q 'link roxe0/1 state ACTIVE physical_state LINK_UP netdev eth0'"
check ibv-devices 60 sh -c "ibv_devices | tee /out/devices.txt | grep -q roxe0"
ibv_devinfo -v -d roxe0 >/out/devinfo.txt 2>&1
cat /out/devinfo.txt | head -60
check devinfo-transport 5 grep -q 'transport:.*InfiniBand (0)' /out/devinfo.txt
check devinfo-link-layer 5 grep -q 'link_layer:.*Ethernet' /out/devinfo.txt
check devinfo-port-active 5 grep -q 'state:.*PORT_ACTIVE (4)' /out/devinfo.txt
check devinfo-mtu-1024 5 grep -q 'active_mtu:.*1024 (3)' /out/devinfo.txt
check devinfo-vendor-rxe 5 grep -q 'vendor_id:.*0xffffff' /out/devinfo.txt
mac=$(cat /sys/class/net/eth0/address)
guid=$(printf '%02x%s:%sff:fe%s:%s%s' $((0x${mac:0:2} ^ 2)) "${mac:3:2}" "${mac:6:2}" "${mac:9:2}" "${mac:12:2}" "${mac:15:2}")
check devinfo-guid-from-mac 5 grep -q "node_guid:.*$guid" /out/devinfo.txt
check devinfo-gid-ipv4 5 grep -q 'GID\[.*\]:.*::ffff:192.168.77.1, RoCE v2' /out/devinfo.txt
check devinfo-gid-ipv6 5 grep -q 'GID\[.*\]:.*fd77::1, RoCE v2' /out/devinfo.txt
check sysfs-driver-abi 5 sh -c "cat /sys/class/infiniband_verbs/uverbs*/abi_version | grep -qx 2"
check pyverbs-context 60 python3 /roxe/qemu/tests/py/device_basics.py context roxe0
check pyverbs-pd 60 python3 /roxe/qemu/tests/py/device_basics.py pds roxe0
expect_fail link-add-duplicate 30 rdma link add roxe1 type roxe netdev eth0

# --- MTU follows the netdev -------------------------------------------------------------------
ip link set eth0 mtu 3000
check mtu-3000-gives-2048 60 sh -c "ibv_devinfo -d roxe0 | grep -q 'active_mtu:.*2048 (4)'"
ip link set eth0 mtu 1500
check mtu-back-to-1024 60 sh -c "ibv_devinfo -d roxe0 | grep -q 'active_mtu:.*1024 (3)'"

# --- a new address becomes a GID --------------------------------------------------------------
ip addr add 192.168.78.9/24 dev eth0
check gid-new-address 60 sh -c "until grep -q '0000:0000:0000:0000:0000:ffff:c0a8:4e09' /sys/class/infiniband/roxe0/ports/1/gids/*; do sleep 0.5; done"
ip addr del 192.168.78.9/24 dev eth0
check gid-address-removed 60 sh -c "while grep -q '0000:0000:0000:0000:0000:ffff:c0a8:4e09' /sys/class/infiniband/roxe0/ports/1/gids/*; do sleep 0.5; done"

# --- link down/up: port state and async events -------------------------------------------------
ibv_asyncwatch -d roxe0 >/out/asyncwatch.txt 2>&1 &
watch=$!
sleep 2
ip link set eth0 down
check port-down 60 sh -c "until ibv_devinfo -d roxe0 | grep -q 'PORT_DOWN'; do sleep 0.5; done"
ip link set eth0 up
check port-up-again 60 sh -c "until ibv_devinfo -d roxe0 | grep -q 'PORT_ACTIVE'; do sleep 0.5; done"
sleep 2
kill $watch 2>/dev/null; wait $watch 2>/dev/null
cat /out/asyncwatch.txt
check event-port-err 5 grep -q 'IBV_EVENT_PORT_ERR' /out/asyncwatch.txt
check event-port-active 5 grep -q 'IBV_EVENT_PORT_ACTIVE' /out/asyncwatch.txt
ip addr add 192.168.77.1/24 dev eth0 2>/dev/null

# --- teardown paths -----------------------------------------------------------------------------
check link-delete 30 rdma link delete roxe0
check link-gone 60 sh -c "! rdma link show | grep -q roxe0"
ip link add vroxe0 type veth peer name vroxe1
ip link set vroxe0 up; ip link set vroxe1 up
check link-add-veth 30 rdma link add roxe1 type roxe netdev vroxe0
check veth-device-present 60 sh -c "ibv_devices | grep -q roxe1"
ip link del vroxe0
check veth-delete-removes-device 30 sh -c "while ibv_devices | grep -q roxe1; do sleep 0.5; done"
check link-add-again 30 rdma link add roxe0 type roxe netdev eth0
check rmmod-with-device 60 rmmod roxe
check no-device-after-rmmod 60 sh -c "! ls /sys/class/infiniband/ 2>/dev/null | grep -q roxe"
check reload-and-rmmod 60 sh -c "insmod $KO && rdma link add roxe0 type roxe netdev eth0 && rmmod roxe"
kmemleak_check
finish_tests
