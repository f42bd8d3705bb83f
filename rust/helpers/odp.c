// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers for include/rdma/ib_umem_odp.h, include/linux/mmu_notifier.h and include/linux/hmm.h:
 * the ODP umem's mutex, its notifier's sequence, reading its HMM pfn list (whose flag bits are
 * macros of the C side), and the mm_struct reference of an implicit root.
 */
#include <linux/hmm.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/sched/mm.h>
#include <rdma/ib_umem_odp.h>
#include "helpers.h"

struct ib_umem_odp *roxe_helper_umem_odp_of_notifier(struct mmu_interval_notifier *mni)
{
	return container_of(mni, struct ib_umem_odp, notifier);
}

void roxe_helper_umem_odp_lock(struct ib_umem_odp *odp)
{
	mutex_lock(&odp->umem_mutex);
}

void roxe_helper_umem_odp_unlock(struct ib_umem_odp *odp)
{
	mutex_unlock(&odp->umem_mutex);
}

unsigned long roxe_helper_umem_odp_start(struct ib_umem_odp *odp)
{
	return ib_umem_start(odp);
}

unsigned long roxe_helper_umem_odp_end(struct ib_umem_odp *odp)
{
	return ib_umem_end(odp);
}

bool roxe_helper_mmu_range_blockable(const struct mmu_notifier_range *range)
{
	return mmu_notifier_range_blockable(range);
}

void roxe_helper_mmu_range_bounds(const struct mmu_notifier_range *range, unsigned long *start,
				  unsigned long *end)
{
	*start = range->start;
	*end = range->end;
}

void roxe_helper_mmu_interval_set_seq(struct mmu_interval_notifier *mni, unsigned long seq)
{
	mmu_interval_set_seq(mni, seq);
}

/*
 * Faults (or, with @fault false, snapshots) [@va, @va + @len) of the umem with the access the
 * registration asked for: write access for a writable MR. Returns with umem_mutex held when it
 * returns >= 0.
 */
int roxe_helper_umem_odp_map_and_lock(struct ib_umem_odp *odp, u64 va, u64 len, bool fault)
{
	u64 access = odp->umem.writable ? HMM_PFN_WRITE : 0;

	return ib_umem_odp_map_dma_and_lock(odp, va, len, access, fault);
}

/*
 * With umem_mutex held: for each of the @count pfn-list entries from @first that is valid (and
 * writable, for a writable umem), stores its page into @out[i]; other slots are left alone.
 * Returns how many were stored.
 */
size_t roxe_helper_umem_odp_pages(struct ib_umem_odp *odp, size_t first, size_t count,
				  unsigned long *out)
{
	unsigned long need = HMM_PFN_VALID | (odp->umem.writable ? HMM_PFN_WRITE : 0);
	size_t i, n = 0;

	lockdep_assert_held(&odp->umem_mutex);
	for (i = 0; i < count; i++) {
		unsigned long pfn = odp->map.pfn_list[first + i];

		if ((pfn & need) == need) {
			out[i] = (unsigned long)hmm_pfn_to_page(pfn);
			n++;
		}
	}
	return n;
}

void roxe_helper_umem_odp_set_private(struct ib_umem_odp *odp, void *private)
{
	odp->private = private;
}

void *roxe_helper_umem_odp_private(struct ib_umem_odp *odp)
{
	return odp->private;
}

/* Queues @work on the default system workqueue (unbound): process context, may sleep. */
void roxe_helper_queue_work_unbound(struct work_struct *work)
{
	queue_work(system_dfl_wq, work);
}

/*
 * The root of an implicit ODP MR of the calling process. The core's root holds no reference on
 * the mm_struct it records, and children are made from it later, by a worker
 * (ib_umem_odp_alloc_child does mmget_not_zero on it): keep the mm_struct allocated (not the
 * address space) until roxe_helper_umem_odp_release_implicit.
 */
struct ib_umem_odp *roxe_helper_umem_odp_alloc_implicit(struct ib_device *dev, int access)
{
	struct ib_umem_odp *root = ib_umem_odp_alloc_implicit(dev, access);

	if (!IS_ERR(root))
		mmgrab(root->umem.owning_mm);
	return root;
}

/* Releases a root from roxe_helper_umem_odp_alloc_implicit, after all its children. */
void roxe_helper_umem_odp_release_implicit(struct ib_umem_odp *root)
{
	struct mm_struct *mm = root->umem.owning_mm;

	ib_umem_odp_release(root);
	mmdrop(mm);
}

/* rust/rdma/odp.rs: ODP budgets are fractions of RAM; totalram_pages() is an inline. */
unsigned long roxe_helper_totalram_pages(void)
{
	return totalram_pages();
}
