// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/net/udp_tunnel.h. */
#include <net/udp_tunnel.h>
#include "helpers.h"

/*
 * Creates a kernel UDP socket bound to @port on the wildcard address of @net and turns it into
 * an encapsulation socket whose packets go to @encap_rcv in softirq context. udp_sock_create()
 * is static inline, and the two config structs are easier to fill in C.
 */
int roxe_helper_udp_tunnel_sock_create(struct net *net, bool ipv6, __be16 port,
				       int (*encap_rcv)(struct sock *sk, struct sk_buff *skb),
				       struct socket **sockp)
{
	struct udp_port_cfg port_cfg = { };
	struct udp_tunnel_sock_cfg tnl_cfg = { };
	int err;

	if (ipv6) {
		port_cfg.family = AF_INET6;
		port_cfg.ipv6_v6only = 1;
	} else {
		port_cfg.family = AF_INET;
	}
	port_cfg.local_udp_port = port;
	err = udp_sock_create(net, &port_cfg, sockp);
	if (err)
		return err;
	tnl_cfg.encap_type = 1;
	tnl_cfg.encap_rcv = encap_rcv;
	setup_udp_tunnel_sock(net, (*sockp)->sk, &tnl_cfg);
	return 0;
}

/*
 * A counted reference on @dev's network namespace, or NULL when that namespace is already being
 * dismantled (its count reached zero): maybe_get_net() is static inline.
 */
struct net *roxe_helper_dev_net_get(const struct net_device *dev)
{
	return maybe_get_net(dev_net(dev));
}

void roxe_helper_put_net(struct net *net)
{
	put_net(net);
}

/* The namespace's cookie: a number no other namespace of this boot has had or will have. */
u64 roxe_helper_net_cookie(const struct net *net)
{
	return net->net_cookie;
}
