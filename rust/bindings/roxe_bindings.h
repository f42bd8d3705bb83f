/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Input of roxe's own bindgen run (see Kbuild): the RDMA core, the pieces of the network stack
 * the driver sits on, and the prototypes of our C helpers. Generated per kernel tree, because
 * struct layouts depend on the kernel's configuration (lockdep, KASAN, ...).
 */
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/notifier.h>
#include <linux/random.h>
#include <linux/siphash.h>
#include <linux/skbuff.h>
#include <net/udp_tunnel.h>
#include <linux/xarray.h>
#include <linux/vmalloc.h>
#include <linux/mm_types.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/rdma_netlink.h>
#include <uapi/rdma/rdma_user_rxe.h>
#include <uapi/rdma/ib_user_verbs.h>

#include "../helpers/helpers.h"
