// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/rdma/ (udata, mmap entries, umem). */
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include "helpers.h"

struct ib_ucontext *roxe_helper_udata_to_ucontext(struct ib_udata *udata)
{
	return rdma_udata_to_uverbs_attr_bundle(udata)->context;
}

struct ib_udata *roxe_helper_attrs_to_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

u64 roxe_helper_rdma_user_mmap_get_offset(const struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_get_offset(entry);
}

struct ib_umem *roxe_helper_ib_umem_get_va(struct ib_device *device, unsigned long addr,
					   size_t size, int access)
{
	return ib_umem_get_va(device, addr, size, access);
}

size_t roxe_helper_ib_umem_num_pages(struct ib_umem *umem)
{
	return ib_umem_num_pages(umem);
}

int roxe_helper_ib_umem_offset(struct ib_umem *umem)
{
	return ib_umem_offset(umem);
}

/*
 * Stores the umem's pages, in address order, into @pages (at most @max); returns how many. The
 * device uses virtual DMA, so the scatter list's pages are the pinned user pages.
 */
size_t roxe_helper_umem_fill_pages(struct ib_umem *umem, struct page **pages, size_t max)
{
	struct sg_page_iter iter;
	size_t n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &iter, 0) {
		if (n == max)
			break;
		pages[n++] = sg_page_iter_page(&iter);
	}
	return n;
}
