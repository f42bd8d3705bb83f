// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/linux/xarray.h, timers, the BH workqueue and bottom-half masking. */
#include <linux/bottom_half.h>
#include <linux/jiffies.h>
#include <linux/spinlock.h>
#include <linux/hrtimer.h>
#include <linux/timer.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include "helpers.h"

/*
 * Object pools: allocating XArrays whose lock disables interrupts, because kernel consumers
 * create and destroy address handles with interrupts disabled (the CM under a spinlock taken
 * with irqsave), and the data path reaches the same pools from softirq. Lookups use RCU and
 * take no lock.
 */
void roxe_helper_xa_init_alloc(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_IRQ);
}

int roxe_helper_xa_alloc_cyclic_irqsafe(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max,
				   u32 *next, gfp_t gfp)
{
	unsigned long flags;
	int ret;

	xa_lock_irqsave(xa, flags);
	ret = __xa_alloc_cyclic(xa, id, entry, XA_LIMIT(min, max), next, gfp);
	xa_unlock_irqrestore(xa, flags);
	return ret;
}

int roxe_helper_xa_insert_irqsafe(struct xarray *xa, unsigned long index, void *entry, gfp_t gfp)
{
	unsigned long flags;
	int ret;

	xa_lock_irqsave(xa, flags);
	ret = __xa_insert(xa, index, entry, gfp);
	xa_unlock_irqrestore(xa, flags);
	return ret;
}

/* Stores into an index reserved by an allocation: no memory is needed, so it cannot fail. */
void roxe_helper_xa_store_irqsafe(struct xarray *xa, unsigned long index, void *entry)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	__xa_store(xa, index, entry, GFP_ATOMIC);
	xa_unlock_irqrestore(xa, flags);
}

void roxe_helper_xa_release_irqsafe(struct xarray *xa, unsigned long index)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	__xa_cmpxchg(xa, index, XA_ZERO_ENTRY, NULL, 0);
	xa_unlock_irqrestore(xa, flags);
}

void *roxe_helper_xa_erase_irqsafe(struct xarray *xa, unsigned long index)
{
	unsigned long flags;
	void *old;

	xa_lock_irqsave(xa, flags);
	old = __xa_erase(xa, index);
	xa_unlock_irqrestore(xa, flags);
	return old;
}

/* The first entry at or after *@index, which is updated to its index; NULL if none. */
void *roxe_helper_xa_find_from(struct xarray *xa, unsigned long *index)
{
	return xa_find(xa, index, ULONG_MAX, XA_PRESENT);
}

void roxe_helper_timer_setup(struct timer_list *timer, void (*fn)(struct timer_list *))
{
	timer_setup(timer, fn, 0);
}

/* Arms @timer to fire @ms milliseconds from now. */
void roxe_helper_timer_arm_ms(struct timer_list *timer, unsigned int ms)
{
	mod_timer(timer, jiffies + msecs_to_jiffies(ms));
}

static enum hrtimer_restart roxe_hrtimer_expired(struct hrtimer *timer)
{
	struct roxe_hrtimer *t = container_of(timer, struct roxe_hrtimer, timer);

	t->fn(t);
	return HRTIMER_NORESTART;
}

/* Soft mode: the callback runs in softirq context, where the data path runs too. */
void roxe_helper_hrtimer_setup(struct roxe_hrtimer *t, void (*fn)(struct roxe_hrtimer *t))
{
	t->fn = fn;
	hrtimer_setup(&t->timer, roxe_hrtimer_expired, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
}

/* Arms @t to fire @us microseconds from now (re-arming an armed timer moves its expiry). */
void roxe_helper_hrtimer_arm_us(struct roxe_hrtimer *t, unsigned int us)
{
	hrtimer_start(&t->timer, (u64)us * NSEC_PER_USEC, HRTIMER_MODE_REL_SOFT);
}

/* Stops @t unless its callback is running: 1 stopped, 0 was not armed, -1 running. */
int roxe_helper_hrtimer_try_to_cancel(struct roxe_hrtimer *t)
{
	return hrtimer_try_to_cancel(&t->timer);
}

/* Stops @t, waiting for a running callback. */
void roxe_helper_hrtimer_cancel(struct roxe_hrtimer *t)
{
	hrtimer_cancel(&t->timer);
}

u64 roxe_helper_jiffies_ms(void)
{
	return jiffies64_to_msecs(get_jiffies_64());
}

void roxe_helper_init_work(struct work_struct *work, void (*fn)(struct work_struct *))
{
	INIT_WORK(work, fn);
}

/* Queues @work on the BH workqueue: it runs in softirq context, soon, on this CPU. */
void roxe_helper_queue_work_bh(struct work_struct *work)
{
	queue_work(system_bh_wq, work);
}

/* local_bh_disable() and local_bh_enable() are inline. */
void roxe_helper_local_bh_disable(void)
{
	local_bh_disable();
}

void roxe_helper_local_bh_enable(void)
{
	local_bh_enable();
}
