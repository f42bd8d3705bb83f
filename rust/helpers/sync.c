// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/linux/xarray.h, timers, the BH workqueue and bottom-half masking. */
#include <linux/bottom_half.h>
#include <linux/sched.h>
#include <linux/sched/isolation.h>
#include <linux/cpumask.h>
#include <linux/jiffies.h>
#include <linux/spinlock.h>
#include <linux/hrtimer.h>
#include <linux/timekeeping.h>
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

/* Search marks 1 and 2 (mark 0 is the allocator's free mark): @mark is 1 or 2. */
static xa_mark_t roxe_mark(unsigned int mark)
{
	return mark == 2 ? XA_MARK_2 : XA_MARK_1;
}

/* Sets @mark on the entry at @index, if there is one; any context. */
void roxe_helper_xa_set_mark_irqsafe(struct xarray *xa, unsigned long index, unsigned int mark)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	__xa_set_mark(xa, index, roxe_mark(mark));
	xa_unlock_irqrestore(xa, flags);
}

void roxe_helper_xa_clear_mark_irqsafe(struct xarray *xa, unsigned long index, unsigned int mark)
{
	unsigned long flags;

	xa_lock_irqsave(xa, flags);
	__xa_clear_mark(xa, index, roxe_mark(mark));
	xa_unlock_irqrestore(xa, flags);
}

/* The first entry with @mark at or after *@index, which is updated to its index; NULL if none. */
void *roxe_helper_xa_find_marked_from(struct xarray *xa, unsigned long *index, unsigned int mark)
{
	return xa_find(xa, index, ULONG_MAX, roxe_mark(mark));
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

/* Hard interrupt context: hands the callback to softirq context on this CPU. */
static enum hrtimer_restart roxe_hrtimer_expired(struct hrtimer *timer)
{
	struct roxe_hrtimer *t = container_of(timer, struct roxe_hrtimer, timer);

	roxe_helper_queue_work_bh(&t->work);
	return HRTIMER_NORESTART;
}

static void roxe_hrtimer_work(struct work_struct *work)
{
	struct roxe_hrtimer *t = container_of(work, struct roxe_hrtimer, work);

	t->fn(t);
}

/*
 * A hard (interrupt context) timer, because only those expire early within their slack: the
 * hrtimer interrupt runs every hard timer whose soft expiry has passed, while softirq timers
 * wait for their hard expiry (kernel/time/hrtimer.c, hrtimer_interrupt).
 */
void roxe_helper_hrtimer_setup(struct roxe_hrtimer *t, void (*fn)(struct roxe_hrtimer *t))
{
	t->fn = fn;
	INIT_WORK(&t->work, roxe_hrtimer_work);
	hrtimer_setup(&t->timer, roxe_hrtimer_expired, CLOCK_MONOTONIC, HRTIMER_MODE_REL);
}

/*
 * Arms @t to fire no sooner than @us microseconds from now and no later than one scheduler tick
 * after that (re-arming an armed timer moves its expiry). Within the slack the timer expires
 * with the tick's interrupt, so on a busy CPU arming and cancelling it never reprogram the clock
 * event device (a trip into the hypervisor for each, under QEMU's TSC deadline timer).
 */
void roxe_helper_hrtimer_arm_us(struct roxe_hrtimer *t, unsigned int us)
{
	hrtimer_start_range_ns(&t->timer, (u64)us * NSEC_PER_USEC, TICK_NSEC, HRTIMER_MODE_REL);
}

/*
 * Arms @t to fire no sooner than @us microseconds from now and no later than @slack_us after
 * that (re-arming an armed timer moves its expiry): for waits whose length matters more than
 * what reprogramming the clock event device costs.
 */
void roxe_helper_hrtimer_arm_us_slack(struct roxe_hrtimer *t, unsigned int us, unsigned int slack_us)
{
	hrtimer_start_range_ns(&t->timer, (u64)us * NSEC_PER_USEC, (u64)slack_us * NSEC_PER_USEC,
			       HRTIMER_MODE_REL);
}

/*
 * Stops @t without waiting: true when @fn will not run for the last arming, false when it runs
 * or has run since (the timer interrupt is handing it over, or its work was already taken).
 */
bool roxe_helper_hrtimer_try_to_cancel(struct roxe_hrtimer *t)
{
	int ret = hrtimer_try_to_cancel(&t->timer);

	if (ret < 0)
		return false;
	if (ret > 0)
		return true;
	return cancel_work(&t->work);
}

/* Stops @t for good, waiting for a running callback; may sleep. */
void roxe_helper_hrtimer_cancel(struct roxe_hrtimer *t)
{
	hrtimer_cancel(&t->timer);
	disable_work_sync(&t->work);
	/* A callback that ran meanwhile may have armed the timer; its work stays disabled. */
	hrtimer_cancel(&t->timer);
}

/* Nanoseconds of the monotonic clock, NMI-safe and lock-free. */
u64 roxe_helper_ktime_ns(void)
{
	return ktime_get_mono_fast_ns();
}

u64 roxe_helper_jiffies_ms(void)
{
	return jiffies64_to_msecs(get_jiffies_64());
}

/*
 * Works for the BH workqueue (softirq) and for a process-context workqueue are initialised at
 * different INIT_WORK sites: lockdep keys a work's completion by its site, and one key used in
 * both contexts reads as an inconsistent lock state.
 */
void roxe_helper_init_work_bh(struct work_struct *work, void (*fn)(struct work_struct *))
{
	INIT_WORK(work, fn);
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

/*
 * Queues @work on the BH workqueue of the next CPU after this one that the calling task may
 * run on (its affinity, hence its cpuset), that is active and that isolation leaves to
 * workqueues; false, queueing nothing, when there is none. Preemption stays off from the
 * choice to the queueing: the chosen CPU cannot go down in between (taking a CPU down waits for
 * every CPU to be preemptible), and work queued before it goes down is drained by
 * workqueue_softirq_dead(); a BH pool of a dead CPU would keep it pending.
 */
bool roxe_helper_queue_work_bh_other(struct work_struct *work)
{
	unsigned int self, cpu;
	bool queued = false;

	preempt_disable();
	self = smp_processor_id();
	for_each_cpu_wrap(cpu, current->cpus_ptr, self + 1 < nr_cpu_ids ? self + 1 : 0) {
		if (cpu == self || !cpu_active(cpu) || !housekeeping_cpu(cpu, HK_TYPE_WQ))
			continue;
		queue_work_on(cpu, system_bh_wq, work);
		queued = true;
		break;
	}
	preempt_enable();
	return queued;
}

unsigned int roxe_helper_num_online_cpus(void)
{
	return num_online_cpus();
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

/* rust/compat/task.rs: cond_resched is a macro (a static call on PREEMPT_DYNAMIC kernels). */
void roxe_helper_cond_resched(void)
{
	cond_resched();
}
