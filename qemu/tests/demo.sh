#!/bin/bash
# `make run`: load roxe into the booted kernel, create a device on eth0 and show it working
# with stock rdma-core tools. Writes a transcript to /out/demo.txt.
. /roxe/qemu/guest/lib.sh
exec > >(tee /out/demo.txt) 2>&1
echo "== kernel: $(uname -r)"
echo "== rdma-core: $(dpkg-query -W -f='${Version}' ibverbs-providers)"
load_rdma_core
if [ -f "/roxe/build/$ROXE_FLAVOUR/roxe.ko" ]; then DRV=roxe; else DRV=selftest; fi
step demo-load load_driver "$DRV" || finish_tests
if [ "$DRV" = roxe ]; then
	echo "== rdma link show"; rdma link show
	echo "== ibv_devices"; ibv_devices
	echo "== ibv_devinfo -v -d roxe0 (abridged)"
	ibv_devinfo -v -d roxe0 | grep -E 'hca_id|transport|node_guid|vendor_id|vendor_part|phys_port|state|active_mtu|max_mtu|link_layer|GID'
	check demo-port-active 10 sh -c "ibv_devinfo -d roxe0 | grep -q PORT_ACTIVE"
	check demo-pyverbs 30 python3 -c "import pyverbs.device as d; c = d.Context(name='roxe0'); a = c.query_device(); print('pyverbs: roxe0 vendor_id 0x%x max_qp %d port state %d' % (a.vendor_id, a.max_qp, c.query_port(1).state))"
	cat /out/demo-pyverbs.log
	check demo-unload 60 unload_driver roxe
else
	echo "== lsmod"; grep roxe_selftest /proc/modules
	check demo-unload 30 rmmod roxe_selftest
fi
dmesg | grep -E 'roxe' | tail -20
finish_tests
