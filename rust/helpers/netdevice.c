// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/linux/netdevice.h and include/linux/if_vlan.h. */
#include <linux/if_vlan.h>
#include <linux/netdevice.h>
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
