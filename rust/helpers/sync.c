// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/linux/spinlock.h and include/linux/xarray.h. */
#include <linux/jiffies.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/xarray.h>
#include "helpers.h"

void roxe_helper_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

void roxe_helper_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

bool roxe_helper_spin_trylock_bh(spinlock_t *lock)
{
	return spin_trylock_bh(lock);
}

void roxe_helper_xa_init_alloc_bh(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_BH);
}

int roxe_helper_xa_alloc_cyclic_bh(struct xarray *xa, u32 *id, void *entry, u32 min, u32 max,
				   u32 *next, gfp_t gfp)
{
	return xa_alloc_cyclic_bh(xa, id, entry, XA_LIMIT(min, max), next, gfp);
}

int roxe_helper_xa_insert_bh(struct xarray *xa, unsigned long index, void *entry, gfp_t gfp)
{
	return xa_insert_bh(xa, index, entry, gfp);
}

/* Stores into an index reserved by an allocation: no memory is needed, so it cannot fail. */
void roxe_helper_xa_store_bh(struct xarray *xa, unsigned long index, void *entry)
{
	xa_store_bh(xa, index, entry, GFP_ATOMIC);
}

void roxe_helper_xa_release_bh(struct xarray *xa, unsigned long index)
{
	xa_lock_bh(xa);
	__xa_cmpxchg(xa, index, XA_ZERO_ENTRY, NULL, 0);
	xa_unlock_bh(xa);
}

void *roxe_helper_xa_erase_bh(struct xarray *xa, unsigned long index)
{
	return xa_erase_bh(xa, index);
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

u64 roxe_helper_jiffies_ms(void)
{
	return jiffies64_to_msecs(get_jiffies_64());
}
