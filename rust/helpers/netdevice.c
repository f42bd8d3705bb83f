// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/linux/netdevice.h and include/linux/if_vlan.h. */
#include <linux/if_vlan.h>
#include <linux/netdevice.h>
#include <net/addrconf.h>
#include "helpers.h"

bool roxe_helper_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

bool roxe_helper_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

void roxe_helper_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

void roxe_helper_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

struct net_device *roxe_helper_netdev_notifier_info_to_dev(const struct netdev_notifier_info *info)
{
	return netdev_notifier_info_to_dev(info);
}

struct net *roxe_helper_dev_net(const struct net_device *dev)
{
	return dev_net(dev);
}

bool roxe_helper_is_vlan_dev(const struct net_device *dev)
{
	return is_vlan_dev(dev);
}

/* Whether @addr (16 bytes, network order) is an IPv6 address of an interface in @dev's network
 * namespace. ipv6_chk_addr walks the namespace's address hash under RCU: any context. */
bool roxe_helper_ipv6_addr_is_local(const struct net_device *dev, const u8 *addr)
{
#if IS_ENABLED(CONFIG_IPV6)
	return ipv6_chk_addr(dev_net(dev), (const struct in6_addr *)addr, NULL, 0);
#else
	return false;
#endif
}
