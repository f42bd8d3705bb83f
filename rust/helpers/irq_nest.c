// SPDX-License-Identifier: GPL-2.0
/*
 * An interrupt-safe spinlock for kernels whose `kernel` crate has no `SpinLockIrq`
 * (rust/compat/irq_nest.rs): spin_lock_irqsave and friends are macros, and a guard's saved
 * flags are not enough in Rust.
 *
 * Safe Rust may drop two guards in either order. With the flags kept in each guard, dropping
 * the outer guard first turns interrupts back on while the inner lock is still held (Rust for
 * Linux rejected that pattern for its SpinLockIrq). So, as the crate's own type does with
 * local_interrupt_disable(), interrupts are counted per CPU: the first lock of a nest saves the
 * flags, the last unlock restores them, whatever the order between. Interrupts stay off from
 * the first lock to the last unlock, so the task cannot migrate in between and the count is
 * this CPU's throughout. On PREEMPT_RT spinlock_t sleeps and spin_lock_irqsave leaves
 * interrupts on; the lock alone is taken there.
 */
#include <linux/irqflags.h>
#include <linux/percpu.h>
#include <linux/spinlock.h>
#include "helpers.h"

#ifndef CONFIG_PREEMPT_RT
struct roxe_irq_nest {
	unsigned int depth;
	unsigned long flags;
};

static DEFINE_PER_CPU(struct roxe_irq_nest, roxe_irq_nest);

static void roxe_irq_nest_enter(unsigned long flags)
{
	if (this_cpu_inc_return(roxe_irq_nest.depth) == 1)
		this_cpu_write(roxe_irq_nest.flags, flags);
}

static void roxe_irq_nest_leave(void)
{
	if (this_cpu_dec_return(roxe_irq_nest.depth) == 0)
		local_irq_restore(this_cpu_read(roxe_irq_nest.flags));
}
#endif

void roxe_helper_spin_lock_init(spinlock_t *lock, const char *name, struct lock_class_key *key)
{
#ifdef CONFIG_DEBUG_SPINLOCK
# if defined(CONFIG_PREEMPT_RT)
	__spin_lock_init(lock, name, key, false);
# else
	__raw_spin_lock_init(spinlock_check(lock), name, key, LD_WAIT_CONFIG);
# endif
#else
	spin_lock_init(lock);
#endif
}

void roxe_helper_spin_lock_irq_nest(spinlock_t *lock)
{
#ifdef CONFIG_PREEMPT_RT
	spin_lock(lock);
#else
	unsigned long flags;

	local_irq_save(flags);
	roxe_irq_nest_enter(flags);
	spin_lock(lock);
#endif
}

void roxe_helper_spin_unlock_irq_nest(spinlock_t *lock)
{
	spin_unlock(lock);
#ifndef CONFIG_PREEMPT_RT
	roxe_irq_nest_leave();
#endif
}

int roxe_helper_spin_trylock_irq_nest(spinlock_t *lock)
{
#ifdef CONFIG_PREEMPT_RT
	return spin_trylock(lock);
#else
	unsigned long flags;

	local_irq_save(flags);
	if (!spin_trylock(lock)) {
		local_irq_restore(flags);
		return 0;
	}
	roxe_irq_nest_enter(flags);
	return 1;
#endif
}

void roxe_helper_spin_assert_is_held(spinlock_t *lock)
{
	lockdep_assert_held(lock);
}

bool roxe_helper_irqs_disabled(void)
{
	return irqs_disabled();
}

bool roxe_helper_preempt_rt(void)
{
	return IS_ENABLED(CONFIG_PREEMPT_RT);
}
