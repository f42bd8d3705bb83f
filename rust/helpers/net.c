// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers for the RoCEv2 transmit and receive paths: socket buffers, IPv4 routing and headers
 * (include/linux/skbuff.h, include/net/route.h, include/net/ip.h), and the CRC32 library.
 * Route lookup and header pushing are static inline in the headers, hence these wrappers.
 */
#include <linux/crc32.h>
#include <linux/ip.h>
#include <linux/skbuff.h>
#include <linux/udp.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/route.h>
#include <net/udp.h>
#include <rdma/ib_verbs.h>
#include "helpers.h"

/* A buffer for one outgoing packet: @len bytes of zeroed data after room for the link, IP and
 * UDP headers. */
struct sk_buff *roxe_helper_alloc_tx_skb(struct net_device *ndev, unsigned int len)
{
	unsigned int head = LL_RESERVED_SPACE(ndev) + sizeof(struct ipv6hdr) + sizeof(struct udphdr);
	struct sk_buff *skb = alloc_skb(head + len, GFP_ATOMIC);

	if (!skb)
		return NULL;
	skb_reserve(skb, head);
	roxe_helper_zero(skb_put(skb, len), len);
	skb->dev = ndev;
	return skb;
}

unsigned char *roxe_helper_skb_data(struct sk_buff *skb)
{
	return skb->data;
}

unsigned int roxe_helper_skb_headlen(const struct sk_buff *skb)
{
	return skb_headlen(skb);
}

int roxe_helper_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

/* The bytes from the network header to the current data pointer (the IP header on receive). */
unsigned char *roxe_helper_skb_network_header(const struct sk_buff *skb, unsigned int *len)
{
	int n = skb->data - skb_network_header(skb);

	*len = n > 0 ? n : 0;
	return skb_network_header(skb);
}

struct net_device *roxe_helper_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

/*
 * Pushes the UDP header of a RoCEv2 packet leaving from @sport: destination port 4791, checksum
 * zero (RoCEv2 allows it, IBA A17.4.2; the ICRC protects the payload).
 */
static void roxe_push_udp(struct sk_buff *skb, __be16 sport)
{
	struct udphdr *uh = skb_push(skb, sizeof(*uh));

	skb_reset_transport_header(skb);
	uh->source = sport;
	uh->dest = htons(ROCE_V2_UDP_DPORT);
	uh->len = htons(skb->len);
	uh->check = 0;
}

/* Routes @skb from @saddr to @daddr out of @ndev over UDP and attaches the route. */
static int roxe_route4(struct sk_buff *skb, struct net_device *ndev, __be32 saddr, __be32 daddr)
{
	struct flowi4 fl = {};
	struct rtable *rt;

	fl.flowi4_oif = ndev->ifindex;
	fl.saddr = saddr;
	fl.daddr = daddr;
	fl.flowi4_proto = IPPROTO_UDP;
	rt = ip_route_output_key(dev_net(ndev), &fl);
	if (IS_ERR(rt))
		return PTR_ERR(rt);
	skb_scrub_packet(skb, false);
	skb_clear_hash(skb);
	skb_dst_set(skb, &rt->dst);
	memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
	return 0;
}

/*
 * Routes an IPv4 RoCEv2 packet out of @ndev and pushes its UDP and IP headers (the ICRC covers
 * them, so they are built here rather than by udp_tunnel_xmit_skb). The UDP checksum is zero,
 * as RoCEv2 allows (IBA A17.4.2). Without @route (a packet to this host's own address, which is
 * delivered without leaving memory), only the headers: no route lookup, no IP ID.
 */
int roxe_helper_prepare4(struct sk_buff *skb, struct net_device *ndev, __be32 saddr, __be32 daddr,
			 __be16 sport, u8 tos, u8 ttl, bool route)
{
	struct iphdr *iph;

	if (route) {
		int err = roxe_route4(skb, ndev, saddr, daddr);

		if (err)
			return err;
	}

	roxe_push_udp(skb, sport);

	skb_push(skb, sizeof(*iph));
	skb_reset_network_header(skb);
	iph = ip_hdr(skb);
	iph->version = IPVERSION;
	iph->ihl = sizeof(*iph) >> 2;
	iph->tot_len = htons(skb->len);
	iph->frag_off = htons(IP_DF);
	iph->protocol = IPPROTO_UDP;
	iph->tos = tos;
	iph->daddr = daddr;
	iph->saddr = saddr;
	iph->ttl = ttl;
	if (route)
		__ip_select_ident(dev_net(ndev), iph, 1);
	else
		iph->id = 0;
	skb->protocol = htons(ETH_P_IP);
	return 0;
}

/* Whether @skb's data starts at the IPv4 and UDP headers roxe_helper_prepare4() pushed. */
static bool roxe_headers_pushed4(const struct sk_buff *skb)
{
	return skb->protocol == htons(ETH_P_IP) && !skb_is_nonlinear(skb) &&
	       skb_transport_header_was_set(skb) && skb_network_header(skb) == skb->data &&
	       skb_network_header_len(skb) == sizeof(struct iphdr) &&
	       skb->len >= sizeof(struct iphdr) + sizeof(struct udphdr);
}

/*
 * Routes the first of a batch of @n IPv4 packets whose UDP and IP headers are pushed (without a
 * route) and reserves @n consecutive IP IDs for them, the first returned in @first_id: the
 * batch leaves as one UDP fraglist GSO packet, and segmentation numbers the segments' IDs up
 * from the first one's (inet_gso_segment), so the ICRC of each packet, which covers its IP ID,
 * can be computed before the batch is sent.
 */
int roxe_helper_route4_batch(struct sk_buff *head, struct net_device *ndev, __be32 saddr,
			     __be32 daddr, unsigned int n, u16 *first_id)
{
	int err;

	if (!roxe_headers_pushed4(head))
		return -EINVAL;
	err = roxe_route4(head, ndev, saddr, daddr);
	if (err)
		return err;
	__ip_select_ident(dev_net(ndev), ip_hdr(head), n);
	*first_id = ntohs(ip_hdr(head)->id);
	return 0;
}

/*
 * Sends @head (routed by roxe_helper_route4_batch()) and the @n packets of @rest (headers
 * pushed, IDs following the head's) as one GSO packet of type UDP_L4 | FRAGLIST, the form GRO
 * gives forwarded UDP flows: each packet stays a segment of its own with the headers it has,
 * and segmentation (in software for devices without fraglist GSO) hands the segments to the
 * driver in one go, so it is kicked once for the batch. The head's UDP length covers the whole
 * batch as GRO sets it (segmentation restores the first segment's); the UDP checksum is zero
 * and stays so (CHECKSUM_UNNECESSARY: nothing to fill in). Consumes all the skbs.
 */
int roxe_helper_send4_batch(struct sk_buff *head, struct sk_buff **rest, unsigned int n)
{
	struct skb_shared_info *sh = skb_shinfo(head);
	unsigned int payload, total = head->len;
	struct sk_buff **tail = &sh->frag_list;
	unsigned int i;

	/* Only what the Rust side's order of calls produces is sent; anything else is dropped. */
	for (i = 0; i < n; i++)
		total += roxe_headers_pushed4(rest[i]) ? rest[i]->len : U16_MAX;
	if (!skb_dst(head) || !roxe_headers_pushed4(head) || total > U16_MAX) {
		for (i = 0; i < n; i++)
			kfree_skb(rest[i]);
		kfree_skb(head);
		return -EINVAL;
	}
	payload = head->len - sizeof(struct iphdr) - sizeof(struct udphdr);
	for (i = 0; i < n; i++) {
		struct sk_buff *s = rest[i];

		s->next = NULL;
		*tail = s;
		tail = &s->next;
		head->len += s->len;
		head->data_len += s->len;
		head->truesize += s->truesize;
	}
	sh->gso_size = payload;
	sh->gso_type = SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST;
	sh->gso_segs = n + 1;
	head->ip_summed = CHECKSUM_UNNECESSARY;
	udp_hdr(head)->len = htons(head->len - sizeof(struct iphdr));
	return ip_local_out(dev_net(skb_dst(head)->dev), NULL, head);
}

/* Sends a packet prepared by roxe_helper_prepare4(); consumes the skb. */
int roxe_helper_send4(struct sk_buff *skb)
{
	if (!skb_dst(skb)) {
		kfree_skb(skb);
		return -EHOSTUNREACH;
	}
	return ip_local_out(dev_net(skb_dst(skb)->dev), NULL, skb);
}

/* Makes a prepared packet look received: data at the UDP header, as encap_rcv sees it. */
void roxe_helper_loopback_prepare(struct sk_buff *skb)
{
	skb_pull(skb, skb_transport_offset(skb));
}

/* The IPv6 counterpart of roxe_helper_prepare4(): route (with @route), then UDP and IPv6
 * headers. */
int roxe_helper_prepare6(struct sk_buff *skb, struct net_device *ndev, const u8 *saddr,
			 const u8 *daddr, __be16 sport, u8 tclass, u8 hop_limit, bool route)
{
	struct flowi6 fl6 = {};
	struct dst_entry *dst;
	struct ipv6hdr *ip6h;

	if (route) {
		fl6.flowi6_oif = ndev->ifindex;
		memcpy(&fl6.saddr, saddr, sizeof(fl6.saddr));
		memcpy(&fl6.daddr, daddr, sizeof(fl6.daddr));
		fl6.flowi6_proto = IPPROTO_UDP;
		dst = ip6_dst_lookup_flow(dev_net(ndev), NULL, &fl6, NULL);
		if (IS_ERR(dst))
			return PTR_ERR(dst);
		if (dst->error) {
			int err = dst->error;

			dst_release(dst);
			return err;
		}
		skb_scrub_packet(skb, false);
		skb_clear_hash(skb);
		skb_dst_set(skb, dst);
		memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
	}

	roxe_push_udp(skb, sport);

	skb_push(skb, sizeof(*ip6h));
	skb_reset_network_header(skb);
	ip6h = ipv6_hdr(skb);
	ip6_flow_hdr(ip6h, tclass, htonl(0));
	ip6h->payload_len = htons(skb->len - sizeof(*ip6h));
	ip6h->nexthdr = IPPROTO_UDP;
	ip6h->hop_limit = hop_limit;
	memcpy(&ip6h->saddr, saddr, sizeof(ip6h->saddr));
	memcpy(&ip6h->daddr, daddr, sizeof(ip6h->daddr));
	skb->protocol = htons(ETH_P_IPV6);
	return 0;
}

/* Sends a packet prepared by roxe_helper_prepare6(); consumes the skb. */
int roxe_helper_send6(struct sk_buff *skb)
{
	if (!skb_dst(skb)) {
		kfree_skb(skb);
		return -EHOSTUNREACH;
	}
	return ip6_local_out(dev_net(skb_dst(skb)->dev), NULL, skb);
}

u32 roxe_helper_crc32_le(u32 crc, const void *p, size_t len)
{
	return crc32_le(crc, p, len);
}

void roxe_helper_skb_queue_init(struct sk_buff_head *q)
{
	skb_queue_head_init(q);
}

bool roxe_helper_skb_queue_empty(const struct sk_buff_head *q)
{
	return skb_queue_empty_lockless(q);
}
