// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/linux/vmalloc.h and include/linux/highmem.h. */
#include <linux/highmem.h>
#include <linux/vmalloc.h>
#include "helpers.h"

void *roxe_helper_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

/* Copies out of a (possibly highmem) page; the range must not cross the page end. */
void roxe_helper_copy_from_page(struct page *page, size_t offset, void *dst, size_t len)
{
	memcpy_from_page(dst, page, offset, len);
}

/* Copies into a page and keeps the data cache coherent for user mappings of it. */
void roxe_helper_copy_to_page(struct page *page, size_t offset, const void *src, size_t len)
{
	memcpy_to_page(page, offset, src, len);
}
