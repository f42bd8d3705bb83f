// SPDX-License-Identifier: GPL-2.0

//! Memory regions (`struct ib_mr`), pinned user memory (`struct ib_umem`) and memory windows
//! (`struct ib_mw`).
//!
//! MRs, unlike the other verbs objects, are allocated by the driver: [`Mr<T>`] is a `KBox` with
//! the C object first, handed to the core at registration and taken back at deregistration.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)

use super::{
    bindings,
    device::{Device, DriverTypes},
    object::Object,
};
use core::{cell::UnsafeCell, ops::Range, ptr::NonNull};
use kernel::{ffi, prelude::*, types::Opaque};

/// User memory pinned for an MR (`ib_umem_get`): its pages stay resident and cannot move until
/// this is dropped. Pinned pages count against the process's `RLIMIT_MEMLOCK` (`pinned_vm`),
/// unless it has `CAP_IPC_LOCK`.
///
/// # Invariants
///
/// `umem` is a live umem from `ib_umem_get_va`, released on drop; `pages` holds its pages in
/// address order, each non-NULL and valid while the umem lives.
pub struct PinnedPages {
    umem: NonNull<bindings::ib_umem>,
    pages: KVVec<*mut bindings::page>,
    first_page_offset: usize,
}

// SAFETY: The umem and its pages are not tied to a thread; copies to and from pinned pages are
// valid from any context.
unsafe impl Send for PinnedPages {}
// SAFETY: Shared access only reads the page array and copies to/from page memory.
unsafe impl Sync for PinnedPages {}

impl PinnedPages {
    /// Pins `[addr, addr + len)` of the calling process. `writable` asks for write access (a
    /// local- or remote-writable MR); read-only pinning of read-only memory also works.
    pub fn pin<T: DriverTypes>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: u32,
    ) -> Result<PinnedPages> {
        let len_usize = usize::try_from(len).map_err(|_| EINVAL)?;
        let addr_ulong = ffi::c_ulong::try_from(addr).map_err(|_| EINVAL)?;
        // SAFETY: The device is alive; the call pins pages of the current process or fails.
        let umem = unsafe {
            bindings::roxe_helper_ib_umem_get_va(dev.as_raw(), addr_ulong, len_usize, access as i32)
        };
        let umem = kernel::error::from_err_ptr(umem)?;
        let umem = NonNull::new(umem).ok_or(EINVAL)?;
        // SAFETY: A live umem.
        let npages = unsafe { bindings::roxe_helper_ib_umem_num_pages(umem.as_ptr()) };
        let mut pages = KVVec::with_capacity(npages, GFP_KERNEL).inspect_err(|_| {
            // SAFETY: Ours to release on failure.
            unsafe { bindings::ib_umem_release(umem.as_ptr()) };
        })?;
        // SAFETY: A live umem; `pages` has room for `npages` pointers.
        let filled = unsafe {
            bindings::roxe_helper_umem_fill_pages(
                umem.as_ptr(),
                pages.spare_capacity_mut().as_mut_ptr().cast(),
                npages,
            )
        };
        // SAFETY: The helper initialised the first `filled` (at most `npages`) slots.
        unsafe { pages.inc_len(filled.min(npages)) };
        // SAFETY: A live umem.
        let offset = unsafe { bindings::roxe_helper_ib_umem_offset(umem.as_ptr()) };
        let this = PinnedPages {
            umem,
            pages,
            first_page_offset: offset as usize,
        };
        // A NULL page would mean the scatter list ended early: refuse rather than guess.
        if this.pages.len() != npages || this.pages.iter().any(|p| p.is_null()) {
            return Err(EFAULT);
        }
        Ok(this)
    }

    /// Number of pinned pages.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Offset of the registered start address in the first page.
    pub fn first_page_offset(&self) -> usize {
        self.first_page_offset
    }

    fn page(&self, index: usize, offset: usize, len: usize) -> Result<*mut bindings::page> {
        let page = *self.pages.get(index).ok_or(EINVAL)?;
        if offset
            .checked_add(len)
            .is_none_or(|end| end > super::mmap::PAGE_SIZE)
        {
            return Err(EINVAL);
        }
        Ok(page)
    }

    /// Copies from page `index` at `offset` into `dst` (which must not cross the page end).
    pub fn read(&self, index: usize, offset: usize, dst: &mut [u8]) -> Result {
        let page = self.page(index, offset, dst.len())?;
        // SAFETY: A pinned page of a live umem; the range is inside the page; `dst` is a kernel
        // buffer distinct from it.
        unsafe {
            bindings::roxe_helper_copy_from_page(page, offset, dst.as_mut_ptr().cast(), dst.len())
        };
        Ok(())
    }

    /// Copies `src` into page `index` at `offset` (not crossing the page end).
    pub fn write(&self, index: usize, offset: usize, src: &[u8]) -> Result {
        let page = self.page(index, offset, src.len())?;
        // SAFETY: As in `read`; the page was pinned writable when the MR allows local or remote
        // writes, which the data path checks before writing.
        unsafe { bindings::roxe_helper_copy_to_page(page, offset, src.as_ptr().cast(), src.len()) };
        Ok(())
    }

    /// Whether one of pages `range` is one of `other`'s pages `other_range`: a buffer registered
    /// twice pins its pages twice, so two MRs (or two ranges of one) may name the same page.
    /// `None` if a range is out of bounds. Meant for ranges of a few pages: a page of ours is
    /// compared with all of `other`'s when a 64-bit filter of their page frames (consecutive
    /// frames fall on different bits) says it may be among them.
    pub fn shares_any(
        &self,
        range: Range<usize>,
        other: &PinnedPages,
        other_range: Range<usize>,
    ) -> Option<bool> {
        let (ours, theirs) = (self.pages.get(range)?, other.pages.get(other_range)?);
        // With a virtual memory map (x86-64's) the `struct page`s form one array indexed by
        // frame number, so consecutive frames fall on different bits; without one the filter
        // only lets more pages through to the comparison.
        let bit = |p: &*mut bindings::page| {
            1u64 << ((*p as usize / core::mem::size_of::<bindings::page>().max(1)) % 64)
        };
        let filter = theirs.iter().fold(0u64, |f, p| f | bit(p));
        Some(
            ours.iter()
                .any(|p| filter & bit(p) != 0 && theirs.contains(p)),
        )
    }

    /// Copies `len` bytes from page `src_index` of `src` at `src_offset` into page `index` at
    /// `offset` (neither range crossing its page's end). The two may be one page pinned twice,
    /// their ranges overlapping: the bytes then move as by `memmove`.
    pub fn copy_from(
        &self,
        index: usize,
        offset: usize,
        src: &PinnedPages,
        src_index: usize,
        src_offset: usize,
        len: usize,
    ) -> Result {
        let to = self.page(index, offset, len)?;
        let from = src.page(src_index, src_offset, len)?;
        // SAFETY: Pinned pages of live umems (`self` and `src` are borrowed); both ranges lie
        // inside their pages (`page`), and when the pages are one the helper maps it once and
        // moves the bytes with memmove. As for `write`, the page was pinned writable when the MR
        // allows writes, which the data path checks before writing.
        unsafe { bindings::roxe_helper_copy_page_to_page(to, offset, from, src_offset, len) };
        Ok(())
    }
}

impl Drop for PinnedPages {
    fn drop(&mut self) {
        // SAFETY: Owned umem (type invariant), released once: unpins and unaccounts the pages.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}

/// A memory region of driver `T`, allocated by the driver.
///
/// # Invariants
///
/// Allocated by the registration adapters as a `KBox`, handed to the core, and freed by
/// `dereg_mr`; `data` is initialised throughout. `page_scratch` is touched only inside
/// `map_mr_sg` (its capacity is the MR's `max_num_sg`, zero for other MRs).
#[repr(C)]
pub struct Mr<T: DriverTypes> {
    pub(in crate::rdma) ib: Opaque<bindings::ib_mr>,
    pub(in crate::rdma) data: T::Mr,
    /// Fast-registration MRs: where `map_mr_sg` collects the page list before handing it to
    /// the driver. The consumer owns such an MR and never maps it from two threads at once
    /// (the `ib_map_mr_sg` contract), so the cell has one user at a time.
    pub(in crate::rdma) page_scratch: UnsafeCell<KVec<u64>>,
    /// Fast-registration MRs: the identity of the MR's `FastRegMem` (its grant's), which the
    /// page lists `map_mr_sg` makes for this MR carry; 0 for other MRs.
    pub(in crate::rdma) fast_reg_id: u64,
}

impl<T: DriverTypes> Mr<T> {
    /// The driver's data.
    pub fn data(&self) -> &T::Mr {
        &self.data
    }

    /// The device the MR belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: A live MR: `device` is set at registration (see `finish_mr`) and the device
        // outlives its MRs.
        unsafe { Device::<T>::from_raw((*self.ib.get()).device) }
    }

    /// The memory keys the core reports.
    pub fn keys(&self) -> (u32, u32) {
        // SAFETY: A live MR; the keys are written at registration, before the core sees it.
        unsafe { ((*self.ib.get()).lkey, (*self.ib.get()).rkey) }
    }
}

/// The page list `ib_map_mr_sg` built for a fast-registration MR: the pages, in order, that
/// will back `[iova, iova + length)` once a REG_MR work request makes the MR valid.
///
/// A software HCA uses virtual DMA, so the "DMA addresses" are kernel virtual addresses of
/// `1 << page_shift`-aligned blocks the consumer owns.
pub struct FastRegPages<'a> {
    /// The MR's `FastRegMem` identity (`Mr::fast_reg_id`): the list is staged only there.
    pub(in crate::rdma) owner: u64,
    pub(in crate::rdma) pages: &'a [u64],
    pub(in crate::rdma) iova: u64,
    pub(in crate::rdma) length: u64,
    pub(in crate::rdma) page_shift: u32,
}

impl FastRegPages<'_> {
    /// Address of each page. Made only by the `map_mr_sg` op, so that a driver can hand
    /// [`FastRegMem`](super::kverbs::FastRegMem) no page the consumer did not map.
    pub fn pages(&self) -> &[u64] {
        self.pages
    }

    /// The first byte's address (the MR's IOVA): inside `pages()[0]`.
    pub fn iova(&self) -> u64 {
        self.iova
    }

    /// Bytes mapped.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// log2 of the page size the consumer chose.
    pub fn page_shift(&self) -> u32 {
        self.page_shift
    }
}

/// What a driver's registration returns.
pub struct MrCreated<D> {
    /// The driver's data.
    pub data: D,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
}

/// A user MR registration request (`reg_user_mr`).
pub struct UserMrRequest {
    /// Start of the user buffer.
    pub start: u64,
    /// Length in bytes.
    pub length: u64,
    /// The address the MR is accessed by (IOVA), usually `start`.
    pub iova: u64,
    /// `IB_ACCESS_*` flags.
    pub access: u32,
}

/// `rereg_user_mr` flags (`enum ib_mr_rereg_flags`).
pub mod rereg {
    /// New address range.
    pub const TRANS: u32 = super::bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS;
    /// New protection domain.
    pub const PD: u32 = super::bindings::ib_mr_rereg_flags_IB_MR_REREG_PD;
    /// New access rights.
    pub const ACCESS: u32 = super::bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS;
}

impl PinnedPages {
    /// Whether the pinned pages can serve a registration with `access` after a rereg with
    /// `flags` (`ib_umem_check_rereg`: e.g. read-only pinned pages cannot become writable).
    pub fn check_rereg(&self, flags: u32, access: u32) -> Result {
        // SAFETY: The umem is alive (type invariant).
        kernel::error::to_result(unsafe {
            bindings::ib_umem_check_rereg(self.umem.as_ptr(), flags as i32, access as i32)
        })
    }
}

/// A memory window of driver `T` (allocated by the core).
pub type Mw<T> = Object<bindings::ib_mw, <T as DriverTypes>::Mw, T>;
