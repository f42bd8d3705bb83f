// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/linux/vmalloc.h and include/linux/highmem.h. */
#include <linux/highmem.h>
#include <linux/instrumented.h>
#include <linux/overflow.h>
#include <linux/vmalloc.h>
#include "helpers.h"

void *roxe_helper_vmalloc_user(unsigned long size)
{
	return vmalloc_user(size);
}

/*
 * The data path's copy of payload bytes (to and from registered pages, into packets). On x86-64
 * it moves 8-byte words with `rep movsq` and the last 0..7 bytes with memcpy, instead of the
 * kernel's memcpy, which is `rep movsb` on CPUs with FSRM: under emulation (QEMU TCG, where
 * many CI users and roxe's own tests run) a byte string move costs one emulated iteration per
 * byte. Measured in the test guest (QEMU 10.0, -cpu max), 64 KiB copies: rep movsb 446 MiB/s,
 * rep movsq 3236 MiB/s. On hardware both run at memory speed. The asm is invisible to KASAN and
 * KCSAN, so the ranges are checked explicitly, as memcpy's instrumentation would.
 */
void roxe_helper_copy(void *dst, const void *src, size_t len)
{
	instrument_memcpy_before(dst, src, len);
#ifdef CONFIG_X86_64
	{
		void *d = dst;
		const void *s = src;
		size_t words = len / 8;

		asm volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(words) : : "memory");
		memcpy(d, s, len & 7);
	}
#else
	memcpy(dst, src, len);
#endif
	instrument_memcpy_after(dst, src, len, 0);
}

/* Zeroes packet buffers, with 8-byte string stores for the reason given above. */
void roxe_helper_zero(void *dst, size_t len)
{
	instrument_write(dst, len);
#ifdef CONFIG_X86_64
	{
		void *d = dst;
		size_t words = len / 8;

		asm volatile("rep stosq" : "+D"(d), "+c"(words) : "a"(0UL) : "memory");
		memset(d, 0, len & 7);
	}
#else
	memset(dst, 0, len);
#endif
}

/*
 * Whether va..va + len lies in the kernel's direct map of RAM (virt_addr_valid, a page at a
 * time): the memory a virtual DMA address of a kernel consumer names. Computes only.
 */
bool roxe_helper_virt_range_valid(u64 va, size_t len)
{
	u64 last, page;

	if (!len)
		return true;
	if (check_add_overflow(va, (u64)len - 1, &last))
		return false;
	for (page = va & PAGE_MASK;; page += PAGE_SIZE) {
		if (!virt_addr_valid((void *)(uintptr_t)page))
			return false;
		if (page >= (last & PAGE_MASK))
			return true;
	}
}

/* Copies out of a (possibly highmem) page; the range must not cross the page end. */
void roxe_helper_copy_from_page(struct page *page, size_t offset, void *dst, size_t len)
{
	char *from = kmap_local_page(page);

	roxe_helper_copy(dst, from + offset, len);
	kunmap_local(from);
}

/* Copies into a page and keeps the data cache coherent for user mappings of it. */
void roxe_helper_copy_to_page(struct page *page, size_t offset, const void *src, size_t len)
{
	char *to = kmap_local_page(page);

	roxe_helper_copy(to + offset, src, len);
	flush_dcache_page(page);
	kunmap_local(to);
}

/*
 * Copies from one page into another (a loopback WRITE from the sender's MR into the target's)
 * and keeps the data cache coherent for user mappings of the target. The two may be one page,
 * mapped once then (two mappings of a highmem page would hide the overlap from memmove).
 */
void roxe_helper_copy_page_to_page(struct page *dst, size_t dst_offset, struct page *src,
				   size_t src_offset, size_t len)
{
	char *to = kmap_local_page(dst);

	if (dst == src) {
		memmove(to + dst_offset, to + src_offset, len);
	} else {
		char *from = kmap_local_page(src);

		roxe_helper_copy(to + dst_offset, from + src_offset, len);
		kunmap_local(from);
	}
	flush_dcache_page(dst);
	kunmap_local(to);
}
