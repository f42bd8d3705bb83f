/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Prototypes of roxe's C helpers: plain functions for the static inline functions and macros of
 * the C headers that Rust cannot call directly. One .c file per C header; every name is
 * roxe_helper_<what it wraps>, so it can never clash with the kernel's own rust_helper_* symbols.
 */
#ifndef ROXE_HELPERS_H
#define ROXE_HELPERS_H

#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <net/udp_tunnel.h>

/* linux/netdevice.h */
bool roxe_helper_netif_running(const struct net_device *dev);
bool roxe_helper_netif_carrier_ok(const struct net_device *dev);
void roxe_helper_dev_hold(struct net_device *dev);
void roxe_helper_dev_put(struct net_device *dev);
struct net_device *roxe_helper_netdev_notifier_info_to_dev(const struct netdev_notifier_info *info);
struct net *roxe_helper_dev_net(const struct net_device *dev);
bool roxe_helper_is_vlan_dev(const struct net_device *dev);

/* net/udp_tunnel.h */
int roxe_helper_udp_tunnel_sock_create(struct net *net, bool ipv6, __be16 port,
				       int (*encap_rcv)(struct sock *sk, struct sk_buff *skb),
				       struct socket **sockp);

/* linux/skbuff.h */
void roxe_helper_kfree_skb(struct sk_buff *skb);

#endif
