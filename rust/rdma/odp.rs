// SPDX-License-Identifier: GPL-2.0

//! On-demand paging memory (`struct ib_umem_odp`): user memory that is not pinned. Its pages are
//! found when needed (`hmm_range_fault`) and forgotten when the kernel's memory management
//! invalidates them (munmap, `madvise(MADV_DONTNEED)`, migration, fork's write protection, ...)
//! through an MMU interval notifier.
//!
//! A software HCA copies to and from these pages in softirq context, where nothing may sleep, so
//! it cannot use the umem's own page list (written by `hmm_range_fault` without a lock) nor its
//! mutex. [`OdpMem`] therefore keeps its own page table under a spinlock, always taken with
//! bottom halves off and never with hard interrupts off: the copies it guards are a packet's
//! payload, and hard interrupts stay on while payload moves.
//!
//! - [`OdpMem::fault`] (process context) faults a range with
//!   `ib_umem_odp_map_dma_and_lock`, which returns with the umem mutex held and the pfn list
//!   valid for the range (it retried until no invalidation raced with it); under that mutex it
//!   copies the range's pages into the table, under the spinlock.
//! - The notifier's invalidate callback takes the umem mutex, bumps the notifier sequence, clears
//!   the range's entries under the spinlock, then lets the core unmap the range. Only after the
//!   callback returns may the pages be freed or moved. The entries are cleared a batch at a
//!   time ([`CLEAR_BATCH`]), the lock released in between: an invalidation of gigabytes does
//!   not hold bottom halves off for all of it, and a copy between two batches still finds only
//!   pages that are mapped (the core unmaps them after the callback).
//! - [`OdpMem::access`] (process or softirq context) runs the copies under the spinlock. An entry present there
//!   is a page that cannot go away before the lock is released, since the callback that would
//!   let it go waits for the lock first. A missing entry is reported, never waited for.
//!
//! Lock order: the fault/release mutex, then the umem mutex, then the table spinlock.
//!
//! C headers: [`include/rdma/ib_umem_odp.h`](srctree/include/rdma/ib_umem_odp.h),
//! [`include/linux/mmu_notifier.h`](srctree/include/linux/mmu_notifier.h)

use super::{
    bh, bindings,
    device::{Device, DriverTypes},
    mmap::PAGE_SIZE,
};
use core::ptr::NonNull;
use kernel::{
    ffi, new_mutex, new_spinlock,
    prelude::*,
    sync::{Mutex, SpinLock},
};

const PAGE_SHIFT: u32 = kernel::page::PAGE_SHIFT as u32;

/// A table entry: the page is not known (never faulted, or invalidated).
const MISSING: usize = 0;
/// A table entry: the last fault of the page failed (no mapping, no permission). An invalidation
/// of the range makes it [`MISSING`] again.
const FAILED: usize = 1;
// Any other value is the address of the `struct page` (aligned, so never 0 or 1).

/// Entries cleared per hold of the table lock (see the module documentation).
const CLEAR_BATCH: usize = 4096;

/// Why an ODP page cannot be accessed now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OdpMiss {
    /// Not faulted in (or invalidated since): a fault in process context brings it in.
    Missing,
    /// Faulting it failed: the memory is not mapped with the rights the MR needs.
    Failed,
    /// The memory was released (the MR is being deregistered).
    Released,
    /// The index or range is outside the memory.
    Range,
}

/// The driver's page table of an ODP umem.
struct TableState {
    /// One entry per page of the umem: [`MISSING`], [`FAILED`] or a page address.
    pages: KVVec<usize>,
    /// The umem was released: nothing may be accessed any more.
    released: bool,
}

/// The pointer to the umem, owned by [`OdpMem`].
#[derive(Clone, Copy)]
struct UmemPtr(NonNull<bindings::ib_umem_odp>);

// SAFETY: The umem is not tied to a thread; all uses are serialised by the mutex it sits behind.
unsafe impl Send for UmemPtr {}

#[pin_data]
struct Inner {
    /// The umem until [`OdpMem::release`]; the mutex keeps faults and the release apart (a fault
    /// sleeps while using the umem).
    #[pin]
    umem: Mutex<Option<UmemPtr>>,
    /// The page table; the umem's `private` points here once the table is ready.
    #[pin]
    table: SpinLock<TableState>,
    /// First address of the umem (page-aligned) and its number of pages.
    start: u64,
    npages: usize,
}

/// Pages of user memory mapped on demand, with an MMU interval notifier of ours.
///
/// # Invariants
///
/// - `inner.umem` holds, until [`OdpMem::release`], a live umem from `ib_umem_odp_get`
///   registered with [`NOTIFIER_OPS`], whose `private` is NULL or points to `inner.table`
///   (written under the umem mutex), and whose first page and page count are `inner.start` and
///   `inner.npages`.
/// - Every page address in the table is a page of the umem's range that the notifier has not
///   invalidated since it was stored: it is valid while the table's lock is held.
pub struct OdpMem {
    inner: Pin<KBox<Inner>>,
}

/// The notifier callbacks of every [`OdpMem`].
static NOTIFIER_OPS: bindings::mmu_interval_notifier_ops = bindings::mmu_interval_notifier_ops {
    invalidate: Some(invalidate),
    ..null_ops()
};

/// The other members of the ops (none today) stay NULL.
const fn null_ops() -> bindings::mmu_interval_notifier_ops {
    // SAFETY: The ops are function pointers, for which all-zeroes is `None`.
    unsafe { core::mem::MaybeUninit::zeroed().assume_init() }
}

/// The invalidate callback: forget the pages of the range, then let the core unmap them.
///
/// # Safety
///
/// Only the mmu notifier core calls this, for the interval notifier of an ODP umem that
/// `OdpMem::register` set up (registered, so the umem is alive), with `range` valid for the call.
unsafe extern "C" fn invalidate(
    mni: *mut bindings::mmu_interval_notifier,
    range: *const bindings::mmu_notifier_range,
    cur_seq: ffi::c_ulong,
) -> bool {
    // SAFETY: The core passes a live range.
    if !unsafe { bindings::roxe_helper_mmu_range_blockable(range) } {
        // Taking the umem mutex could block: the core retries in a context that may.
        return false;
    }
    // SAFETY: Our ops are registered only on the notifier of an ODP umem (`OdpMem::register`),
    // alive while the notifier is registered, i.e. during this call.
    let odp = unsafe { bindings::roxe_helper_umem_odp_of_notifier(mni) };
    let (mut rstart, mut rend): (ffi::c_ulong, ffi::c_ulong) = (0, 0);
    // SAFETY: A live range; the out-pointers are locals.
    unsafe { bindings::roxe_helper_mmu_range_bounds(range, &mut rstart, &mut rend) };
    // SAFETY: A live umem (above). The sequence is set under the umem mutex, as a fault that
    // checks it (`mmu_interval_read_retry`) does.
    unsafe {
        bindings::roxe_helper_umem_odp_lock(odp);
        bindings::roxe_helper_mmu_interval_set_seq(mni, cur_seq);
    }
    // SAFETY: A live umem.
    let (ustart, uend) = unsafe {
        (
            bindings::roxe_helper_umem_odp_start(odp),
            bindings::roxe_helper_umem_odp_end(odp),
        )
    };
    let (start, end) = (rstart.max(ustart), rend.min(uend));
    // SAFETY: `private` is written under the umem mutex, which we hold.
    let private = unsafe { bindings::roxe_helper_umem_odp_private(odp) };
    let table = private.cast::<SpinLock<TableState>>();
    if !table.is_null() && start < end {
        let first = (start - ustart) >> PAGE_SHIFT;
        let last = (end - 1 - ustart) >> PAGE_SHIFT;
        // Once cleared under the lock, no copy still uses these pages and none can start.
        // SAFETY: `private` points to the table of the `OdpMem` owning this umem (type
        // invariant), which outlives the notifier's registration (`release` unregisters it
        // before the table can be freed).
        clear(unsafe { &*table }, first, last + 1);
    }
    if start < end {
        // SAFETY: The umem mutex is held, as the call requires.
        unsafe { bindings::ib_umem_odp_unmap_dma_pages(odp, start as u64, end as u64) };
    }
    // SAFETY: Taken above.
    unsafe { bindings::roxe_helper_umem_odp_unlock(odp) };
    true
}

/// Makes entries `first..end` of the table [`MISSING`], [`CLEAR_BATCH`] at a time. Process
/// context, interrupts enabled.
fn clear(table: &SpinLock<TableState>, first: usize, end: usize) {
    let mut i = first;
    while i < end {
        let stop = end.min(i.saturating_add(CLEAR_BATCH));
        let _bh = bh::disable();
        let mut t = table.lock();
        for e in t.pages.iter_mut().take(stop).skip(i) {
            *e = MISSING;
        }
        i = stop;
    }
}

impl OdpMem {
    /// Registers `[addr, addr + len)` of the calling process for on-demand paging with `access`
    /// (`IB_ACCESS_*`, including `IB_ACCESS_ON_DEMAND`), and takes in the pages already mapped
    /// (without faulting any). Process context.
    pub fn register<T: DriverTypes>(
        dev: &Device<T>,
        addr: u64,
        len: u64,
        access: u32,
    ) -> Result<OdpMem> {
        let addr_ulong = ffi::c_ulong::try_from(addr).map_err(|_| EINVAL)?;
        let len_usize = usize::try_from(len).map_err(|_| EINVAL)?;
        if len_usize == 0 {
            return Err(EINVAL);
        }
        let end = addr.checked_add(len).ok_or(EINVAL)?;
        let page_mask = PAGE_SIZE as u64 - 1;
        let start = addr & !page_mask;
        let npages =
            usize::try_from((end.checked_add(page_mask).ok_or(EINVAL)? & !page_mask) - start)
                .map_err(|_| EINVAL)?
                >> PAGE_SHIFT;
        // The table takes 8 bytes per page of the range, which the caller chooses: charged to
        // the caller's memory cgroup, and a range too large for it is ENOMEM, never a warning
        // of the allocator (`kvmalloc` refuses sizes past INT_MAX with one unless told not to).
        let flags = GFP_KERNEL_ACCOUNT | __GFP_NOWARN;
        let mut pages = KVVec::with_capacity(npages, flags).map_err(|_| ENOMEM)?;
        pages.resize(npages, MISSING, flags).map_err(|_| ENOMEM)?;
        let inner = KBox::pin_init(
            pin_init!(Inner {
                umem <- new_mutex!(None, "roxe_odp_umem"),
                table <- new_spinlock!(TableState { pages, released: false }, "roxe_odp_table"),
                start,
                npages,
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The device is alive; the ops are a static; the call registers the notifier on
        // the current process's mm or fails.
        let umem = unsafe {
            bindings::ib_umem_odp_get(
                dev.as_raw(),
                addr_ulong,
                len_usize,
                access as i32,
                &NOTIFIER_OPS,
            )
        };
        let umem = kernel::error::from_err_ptr(umem)?;
        let umem = NonNull::new(umem).ok_or(EINVAL)?;
        // SAFETY: A live umem.
        let (ustart, uend) = unsafe {
            (
                bindings::roxe_helper_umem_odp_start(umem.as_ptr()),
                bindings::roxe_helper_umem_odp_end(umem.as_ptr()),
            )
        };
        if ustart as u64 != start || (uend - ustart) >> PAGE_SHIFT != npages {
            // Huge-page umems (another page size) are not offered.
            // SAFETY: Ours, released once.
            unsafe { bindings::ib_umem_odp_release(umem.as_ptr()) };
            return Err(EINVAL);
        }
        // SAFETY: A live umem; the table is pinned in its box for as long as `OdpMem` lives, and
        // the umem is released (unregistering the notifier) before. Written under the umem
        // mutex, which the callback takes before reading it: an invalidation before this point
        // had no entry to clear, since the table is empty.
        unsafe {
            bindings::roxe_helper_umem_odp_lock(umem.as_ptr());
            bindings::roxe_helper_umem_odp_set_private(
                umem.as_ptr(),
                core::ptr::from_ref(&inner.table).cast_mut().cast(),
            );
            bindings::roxe_helper_umem_odp_unlock(umem.as_ptr());
        }
        *inner.umem.lock() = Some(UmemPtr(umem));
        let this = OdpMem { inner };
        // Take in what is mapped already (a snapshot: nothing faults, nothing fails).
        let _ = this.map(0, npages, false);
        Ok(this)
    }

    /// Number of pages the memory spans.
    pub fn page_count(&self) -> usize {
        self.inner.npages
    }

    /// Faults pages `first..first + count` (clamped to the memory) in with the access of the
    /// registration, and makes them accessible. Process context: it sleeps. A failure marks the
    /// pages still missing as failed (until their range is invalidated again), unless it was
    /// transient.
    pub fn fault(&self, first: usize, count: usize) -> Result {
        self.map(first, count, true)
    }

    fn map(&self, first: usize, count: usize, fault: bool) -> Result {
        let guard = self.inner.umem.lock();
        let Some(UmemPtr(umem)) = *guard else {
            return Err(ENOENT);
        };
        if first >= self.inner.npages {
            return Err(EINVAL);
        }
        let count = count.min(self.inner.npages - first);
        if count == 0 {
            return Ok(());
        }
        let va = self.inner.start + ((first as u64) << PAGE_SHIFT);
        let len = (count as u64) << PAGE_SHIFT;
        // SAFETY: A live umem (we hold the mutex that guards its release); the range lies inside
        // it. On success the call returns with the umem mutex held.
        let r =
            unsafe { bindings::roxe_helper_umem_odp_map_and_lock(umem.as_ptr(), va, len, fault) };
        if r < 0 {
            let e = Error::from_errno(r);
            if fault && e != EBUSY && e != EAGAIN {
                // At most the pages of one fault: the caller bounds `count`.
                let _bh = bh::disable();
                let mut t = self.inner.table.lock();
                for p in t.pages.iter_mut().skip(first).take(count) {
                    if *p == MISSING {
                        *p = FAILED;
                    }
                }
            }
            return Err(e);
        }
        {
            let _bh = bh::disable();
            let mut t = self.inner.table.lock();
            if let Some(slots) = t.pages.get_mut(first..first + count) {
                // SAFETY: The umem mutex is held (the pfn list is stable and valid for the range:
                // no invalidation ran since the fault); `slots` has `count` entries. It stores
                // only the pages of valid entries (with write access for a writable umem).
                unsafe {
                    bindings::roxe_helper_umem_odp_pages(
                        umem.as_ptr(),
                        first,
                        count,
                        slots.as_mut_ptr().cast(),
                    )
                };
            }
        }
        // SAFETY: Taken by the successful call above.
        unsafe { bindings::roxe_helper_umem_odp_unlock(umem.as_ptr()) };
        Ok(())
    }

    /// Runs `f` with the pages as they are now: while it runs no page it can see is invalidated.
    /// Process or softirq context, hard interrupts enabled; `f` runs with bottom halves off
    /// under the table's spinlock, so it must be short (a packet's copy) and take no lock.
    pub fn access<R>(&self, f: impl FnOnce(&OdpPages<'_>) -> R) -> R {
        let _bh = bh::disable();
        let t = self.inner.table.lock();
        f(&OdpPages { state: &t })
    }

    /// Releases the umem: unregisters the notifier (waiting for a running invalidation) and
    /// forgets every page; later accesses get [`OdpMiss::Released`]. Process context. Called
    /// by deregistration, so that the memory goes even while a late packet still holds the MR.
    pub fn release(&self) {
        let mut guard = self.inner.umem.lock();
        if let Some(UmemPtr(umem)) = guard.take() {
            {
                let _bh = bh::disable();
                self.inner.table.lock().released = true;
            }
            // Accesses see `released` from here on; the entries go a batch at a time.
            clear(&self.inner.table, 0, self.inner.npages);
            // SAFETY: Owned (type invariant), released once: the notifier is removed, so the
            // callback no longer reads `private`.
            unsafe { bindings::ib_umem_odp_release(umem.as_ptr()) };
        }
    }
}

impl Drop for OdpMem {
    fn drop(&mut self) {
        // Normally released by deregistration already (in process context); otherwise this is
        // a registration that failed part-way, also in process context.
        self.release();
    }
}

/// The pages of an [`OdpMem`] while its table is locked.
pub struct OdpPages<'a> {
    state: &'a TableState,
}

impl OdpPages<'_> {
    fn page(
        &self,
        index: usize,
        offset: usize,
        len: usize,
    ) -> Result<*mut bindings::page, OdpMiss> {
        if self.state.released {
            return Err(OdpMiss::Released);
        }
        if offset.checked_add(len).is_none_or(|end| end > PAGE_SIZE) {
            return Err(OdpMiss::Range);
        }
        match *self.state.pages.get(index).ok_or(OdpMiss::Range)? {
            MISSING => Err(OdpMiss::Missing),
            FAILED => Err(OdpMiss::Failed),
            p => Ok(p as *mut bindings::page),
        }
    }

    /// Whether page `index` can be accessed now.
    pub fn check(&self, index: usize) -> Result<(), OdpMiss> {
        self.page(index, 0, 0).map(|_| ())
    }

    /// Copies from page `index` at `offset` into `dst` (not crossing the page end).
    pub fn read(&self, index: usize, offset: usize, dst: &mut [u8]) -> Result<(), OdpMiss> {
        let page = self.page(index, offset, dst.len())?;
        // SAFETY: A page of the umem, valid while the table lock is held (type invariant of
        // `OdpMem`); the range is inside the page; `dst` is a kernel buffer distinct from it.
        unsafe {
            bindings::roxe_helper_copy_from_page(page, offset, dst.as_mut_ptr().cast(), dst.len())
        };
        Ok(())
    }

    /// Copies `src` into page `index` at `offset` (not crossing the page end).
    pub fn write(&self, index: usize, offset: usize, src: &[u8]) -> Result<(), OdpMiss> {
        let page = self.page(index, offset, src.len())?;
        // SAFETY: As in `read`; for a writable registration only pages faulted with write access
        // are in the table, and the data path checks the MR's rights before writing.
        unsafe { bindings::roxe_helper_copy_to_page(page, offset, src.as_ptr().cast(), src.len()) };
        Ok(())
    }
}
