/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Prototypes of roxe's C helpers: plain functions for the static inline functions and macros of
 * the C headers that Rust cannot call directly. One .c file per C header; every name is
 * roxe_helper_<what it wraps>, so it can never clash with the kernel's own rust_helper_* symbols.
 */
#ifndef ROXE_HELPERS_H
#define ROXE_HELPERS_H

#include <linux/hrtimer.h>
#include <linux/workqueue.h>
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
bool roxe_helper_ipv6_addr_is_local(const struct net_device *dev, const u8 *addr);

/* net/udp_tunnel.h */
int roxe_helper_udp_tunnel_sock_create(struct net *net, bool ipv6, __be16 port,
				       int (*encap_rcv)(struct sock *sk, struct sk_buff *skb),
				       struct socket **sockp);
struct net *roxe_helper_dev_net_get(const struct net_device *dev);
void roxe_helper_put_net(struct net *net);
u64 roxe_helper_net_cookie(const struct net *net);

/* linux/skbuff.h */
void roxe_helper_kfree_skb(struct sk_buff *skb);

/* rdma/: udata, mmap entries, umem */
struct ib_udata;
struct ib_ucontext;
struct uverbs_attr_bundle;
struct rdma_user_mmap_entry;
struct ib_umem;
struct ib_device;
struct page;
struct xarray;
struct ib_ucontext *roxe_helper_udata_to_ucontext(struct ib_udata *udata);
struct ib_udata *roxe_helper_attrs_to_udata(struct uverbs_attr_bundle *attrs);
u64 roxe_helper_rdma_user_mmap_get_offset(const struct rdma_user_mmap_entry *entry);
struct ib_umem *roxe_helper_ib_umem_get_va(struct ib_device *device, unsigned long addr,
					   size_t size, int access);
size_t roxe_helper_ib_umem_num_pages(struct ib_umem *umem);
int roxe_helper_ib_umem_offset(struct ib_umem *umem);
size_t roxe_helper_umem_fill_pages(struct ib_umem *umem, struct page **pages, size_t max);

/* linux/vmalloc.h, linux/highmem.h */
void *roxe_helper_vmalloc_user(unsigned long size);
void roxe_helper_copy(void *dst, const void *src, size_t len);
bool roxe_helper_virt_range_valid(u64 va, size_t len);
void roxe_helper_zero(void *dst, size_t len);
void roxe_helper_copy_from_page(struct page *page, size_t offset, void *dst, size_t len);
void roxe_helper_copy_to_page(struct page *page, size_t offset, const void *src, size_t len);
void roxe_helper_copy_page_to_page(struct page *dst, size_t dst_offset, struct page *src,
				   size_t src_offset, size_t len);

/* linux/xarray.h, linux/timer.h, linux/workqueue.h */
void roxe_helper_xa_init_alloc(struct xarray *xa);
/* params.c: roxe's module parameters */
bool roxe_helper_param_rxe_compat(void);

/* irq_nest.c */
void roxe_helper_spin_lock_init(spinlock_t *lock, const char *name, struct lock_class_key *key);
void roxe_helper_spin_lock_irq_nest(spinlock_t *lock);
void roxe_helper_spin_unlock_irq_nest(spinlock_t *lock);
int roxe_helper_spin_trylock_irq_nest(spinlock_t *lock);
void roxe_helper_spin_assert_is_held(spinlock_t *lock);
bool roxe_helper_irqs_disabled(void);
bool roxe_helper_preempt_rt(void);

/* sync.c */
void roxe_helper_cond_resched(void);
int roxe_helper_xa_alloc_cyclic_irqsafe(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max,
				   u32 *next, gfp_t gfp);
int roxe_helper_xa_insert_irqsafe(struct xarray *xa, unsigned long index, void *entry, gfp_t gfp);
void roxe_helper_xa_store_irqsafe(struct xarray *xa, unsigned long index, void *entry);
void roxe_helper_xa_release_irqsafe(struct xarray *xa, unsigned long index);
void *roxe_helper_xa_erase_irqsafe(struct xarray *xa, unsigned long index);
void *roxe_helper_xa_find_from(struct xarray *xa, unsigned long *index);
void roxe_helper_xa_set_mark_irqsafe(struct xarray *xa, unsigned long index, unsigned int mark);
void roxe_helper_xa_clear_mark_irqsafe(struct xarray *xa, unsigned long index, unsigned int mark);
void *roxe_helper_xa_find_marked_from(struct xarray *xa, unsigned long *index, unsigned int mark);
struct timer_list;
void roxe_helper_timer_setup(struct timer_list *timer, void (*fn)(struct timer_list *));
void roxe_helper_timer_arm_ms(struct timer_list *timer, unsigned int ms);
u64 roxe_helper_jiffies_ms(void);
/*
 * linux/hrtimer.h: a high-resolution timer with slack, whose expiry queues a work item on the BH
 * workqueue, so that @fn runs in softirq context; it does not re-arm itself. The enum-returning
 * C callback stays on the C side.
 */
struct roxe_hrtimer {
	struct hrtimer timer;
	struct work_struct work;
	void (*fn)(struct roxe_hrtimer *t);
};
void roxe_helper_hrtimer_setup(struct roxe_hrtimer *t, void (*fn)(struct roxe_hrtimer *t));
void roxe_helper_hrtimer_arm_us(struct roxe_hrtimer *t, unsigned int us);
void roxe_helper_hrtimer_arm_us_slack(struct roxe_hrtimer *t, unsigned int us, unsigned int slack_us);
bool roxe_helper_hrtimer_try_to_cancel(struct roxe_hrtimer *t);
void roxe_helper_hrtimer_cancel(struct roxe_hrtimer *t);
u64 roxe_helper_ktime_ns(void);
void roxe_helper_init_work_bh(struct work_struct *work, void (*fn)(struct work_struct *));
void roxe_helper_init_work(struct work_struct *work, void (*fn)(struct work_struct *));
void roxe_helper_queue_work_bh(struct work_struct *work);
bool roxe_helper_queue_work_bh_other(struct work_struct *work);
unsigned int roxe_helper_num_online_cpus(void);
void roxe_helper_local_bh_disable(void);
void roxe_helper_local_bh_enable(void);

/* rdma/ib_umem_odp.h, linux/mmu_notifier.h, linux/hmm.h: ODP umems */
struct ib_umem_odp;
struct mmu_interval_notifier;
struct mmu_notifier_range;
struct ib_umem_odp *roxe_helper_umem_odp_of_notifier(struct mmu_interval_notifier *mni);
void roxe_helper_umem_odp_lock(struct ib_umem_odp *odp);
void roxe_helper_umem_odp_unlock(struct ib_umem_odp *odp);
unsigned long roxe_helper_umem_odp_start(struct ib_umem_odp *odp);
unsigned long roxe_helper_umem_odp_end(struct ib_umem_odp *odp);
bool roxe_helper_mmu_range_blockable(const struct mmu_notifier_range *range);
void roxe_helper_mmu_range_bounds(const struct mmu_notifier_range *range, unsigned long *start,
				  unsigned long *end);
void roxe_helper_mmu_interval_set_seq(struct mmu_interval_notifier *mni, unsigned long seq);
int roxe_helper_umem_odp_map_and_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool fault);
size_t roxe_helper_umem_odp_pages(struct ib_umem_odp *odp, size_t first, size_t count,
				  unsigned long *out);
void roxe_helper_umem_odp_set_private(struct ib_umem_odp *odp, void *private);
void *roxe_helper_umem_odp_private(struct ib_umem_odp *odp);
struct ib_umem_odp *roxe_helper_umem_odp_alloc_implicit(struct ib_device *dev, int access);
void roxe_helper_umem_odp_release_implicit(struct ib_umem_odp *root);
unsigned long roxe_helper_totalram_pages(void);
void roxe_helper_queue_work_unbound(struct work_struct *work);

/* net: transmit and receive */
struct sk_buff *roxe_helper_alloc_tx_skb(struct net_device *ndev, unsigned int len);
unsigned char *roxe_helper_skb_data(struct sk_buff *skb);
unsigned int roxe_helper_skb_headlen(const struct sk_buff *skb);
int roxe_helper_skb_linearize(struct sk_buff *skb);
unsigned char *roxe_helper_skb_network_header(const struct sk_buff *skb, unsigned int *len);
struct net_device *roxe_helper_skb_dev(const struct sk_buff *skb);
int roxe_helper_prepare4(struct sk_buff *skb, struct net_device *ndev, __be32 saddr, __be32 daddr,
			 __be16 sport, u8 tos, u8 ttl, bool route);
int roxe_helper_send4(struct sk_buff *skb);
int roxe_helper_route4_batch(struct sk_buff *head, struct net_device *ndev, __be32 saddr,
			     __be32 daddr, unsigned int n, u16 *first_id);
int roxe_helper_send4_batch(struct sk_buff *head, struct sk_buff **rest, unsigned int n);
int roxe_helper_prepare6(struct sk_buff *skb, struct net_device *ndev, const u8 *saddr,
			 const u8 *daddr, __be16 sport, u8 tclass, u8 hop_limit, bool route);
int roxe_helper_send6(struct sk_buff *skb);
void roxe_helper_loopback_prepare(struct sk_buff *skb);
u32 roxe_helper_crc32_le(u32 crc, const void *p, size_t len);
void roxe_helper_skb_queue_init(struct sk_buff_head *q);
bool roxe_helper_skb_queue_empty(const struct sk_buff_head *q);

#endif
