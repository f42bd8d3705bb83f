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
//! An implicit ODP memory ([`OdpMem::register_implicit`], `ibv_reg_mr(pd, NULL, SIZE_MAX,
//! IBV_ACCESS_ON_DEMAND)`) spans the whole address space of the process. The core gives it a
//! root umem without a range (`ib_umem_odp_alloc_implicit`); the pages live in children, one
//! explicit ODP umem of [`CHILD_BYTES`] per aligned chunk that an access touched
//! (`ib_umem_odp_alloc_child`), created by the fault that first needs them and each with its own
//! table and notifier as above. A sorted list of the children, under a spinlock of its own, lets
//! the data path find a page's child; only faults add to it, and only the release empties it,
//! both under the root's mutex. At most [`MAX_CHILDREN`] children exist: past that, pages of new
//! chunks fail as unmapped memory does.
//!
//! What the core allocates for a registration (its tables cover the whole range, touched or
//! not) is charged to an [`OdpAccount`] before the core is called: an explicit memory's range at
//! registration, an implicit one's children as they are made; [`OdpMem::release`] gives it back.
//!
//! Lock order: the fault/release mutex (of the memory, or of the implicit root), then the umem
//! mutex, then the table spinlock; the implicit children's list lock, then a child's table lock.
//!
//! C headers: [`include/rdma/ib_umem_odp.h`](srctree/include/rdma/ib_umem_odp.h),
//! [`include/linux/mmu_notifier.h`](srctree/include/linux/mmu_notifier.h)

use super::{
    bh::{new_bh_lock, BhLock},
    bindings,
    device::{Device, DriverTypes},
    mmap::PAGE_SIZE,
};
use core::ptr::NonNull;
use kernel::{
    ffi, new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, Mutex,
    },
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

/// log2 of the bytes of one child of an implicit ODP memory: 2 MiB, so that a child's table and
/// the core's pfn list are one page each.
const CHILD_SHIFT: u32 = 21;
/// Bytes of one child of an implicit ODP memory.
pub const CHILD_BYTES: u64 = 1 << CHILD_SHIFT;
/// Pages of one child.
const CHILD_PAGES: usize = 1 << (CHILD_SHIFT - PAGE_SHIFT);
/// Most children of one implicit ODP memory: 16 GiB of distinct chunks, about 9 KiB each of
/// kernel memory. Bounds what a consumer, or a peer holding its R_Key, can make the kernel
/// allocate by touching addresses all over the address space.
pub const MAX_CHILDREN: usize = 8192;
/// Pages an implicit ODP memory spans: the whole 64-bit address space.
const IMPLICIT_PAGES: usize = 1 << (64 - PAGE_SHIFT);
/// Chunks of an implicit ODP memory remembered as unable to get a child (the oldest forgotten
/// first): an access to one fails at once, as a failed fault does, instead of waiting for a
/// fault that can never make its page present.
const FAILED_CHUNKS: usize = 8;

/// Bytes kept per page of on-demand paging memory, whether the page is ever touched: the
/// RDMA core's pfn list and DMA address list (`ib_init_umem_odp`, 8 bytes each) and this
/// module's table (8 bytes).
pub const TABLE_BYTES_PER_PAGE: usize = 24;

/// A bound on the pages of the on-demand paging memories charged to it.
///
/// Registering a range for on-demand paging pins nothing, so neither `RLIMIT_MEMLOCK` nor the
/// memory cgroup sees it, yet the core allocates [`TABLE_BYTES_PER_PAGE`] for every page of
/// the range at registration: whoever registers decides what an unprivileged process can make
/// the kernel allocate, and refuses the rest (`ENOMEM`) before the core allocates.
pub struct OdpBudget {
    used: Atomic<u64>,
    max: u64,
    refused: Atomic<u64>,
}

impl OdpBudget {
    /// A budget of `max_pages` pages.
    pub fn new(max_pages: u64) -> Self {
        OdpBudget {
            used: Atomic::new(0),
            max: max_pages,
            refused: Atomic::new(0),
        }
    }

    /// A budget of `num / den` of the machine's RAM, in pages of range.
    pub fn of_ram(num: u64, den: u64) -> Self {
        // SAFETY: `totalram_pages` only reads a counter.
        let ram = unsafe { bindings::roxe_helper_totalram_pages() } as u64;
        Self::new(ram.saturating_mul(num) / den.max(1))
    }

    /// The most pages it allows.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Pages charged now.
    pub fn used(&self) -> u64 {
        self.used.load(Relaxed)
    }

    /// Charges that were refused through this budget (see [`OdpAccount`]).
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    fn charge(&self, n: u64) -> Result {
        let mut cur = self.used.load(Relaxed);
        loop {
            match cur.checked_add(n) {
                Some(next) if next <= self.max => match self.used.cmpxchg(cur, next, Relaxed) {
                    Ok(_) => return Ok(()),
                    Err(now) => cur = now,
                },
                _ => return Err(ENOMEM),
            }
        }
    }

    fn uncharge(&self, n: u64) {
        self.used.fetch_sub(n, Relaxed);
    }
}

/// The budgets one on-demand paging memory is charged to, every page against both: for
/// example its process's (`inner`) and its device's (`outer`). A refusal by either counts in
/// the outer one's [`OdpBudget::refused`].
pub struct OdpAccount {
    inner: Arc<OdpBudget>,
    outer: Arc<OdpBudget>,
}

impl OdpAccount {
    /// An account charging `inner` and `outer`.
    pub fn new(inner: Arc<OdpBudget>, outer: Arc<OdpBudget>) -> Self {
        OdpAccount { inner, outer }
    }

    fn charge(&self, pages: usize) -> Result {
        let n = pages as u64;
        let r = self
            .inner
            .charge(n)
            .and_then(|()| self.outer.charge(n).inspect_err(|_| self.inner.uncharge(n)));
        if r.is_err() {
            self.outer.refused.add(1, Relaxed);
        }
        r
    }

    fn uncharge(&self, pages: usize) {
        let n = pages as u64;
        self.inner.uncharge(n);
        self.outer.uncharge(n);
    }
}

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

impl TableState {
    /// Page `index` for an access of `len` bytes at `offset` in it.
    fn page(
        &self,
        index: usize,
        offset: usize,
        len: usize,
    ) -> Result<*mut bindings::page, OdpMiss> {
        if self.released {
            return Err(OdpMiss::Released);
        }
        if offset.checked_add(len).is_none_or(|end| end > PAGE_SIZE) {
            return Err(OdpMiss::Range);
        }
        match *self.pages.get(index).ok_or(OdpMiss::Range)? {
            MISSING => Err(OdpMiss::Missing),
            FAILED => Err(OdpMiss::Failed),
            p => Ok(p as *mut bindings::page),
        }
    }
}

/// The pointer to a umem, owned by a [`Region`] or an implicit [`OdpMem`].
#[derive(Clone, Copy)]
struct UmemPtr(NonNull<bindings::ib_umem_odp>);

// SAFETY: The umem is not tied to a thread; all uses are serialised by the mutex it sits behind.
unsafe impl Send for UmemPtr {}

#[pin_data]
struct Inner {
    /// The umem until [`Region::release`]; the mutex keeps faults and the release apart (a
    /// fault sleeps while using the umem).
    #[pin]
    umem: Mutex<Option<UmemPtr>>,
    /// The page table; the umem's `private` points here once the table is ready.
    #[pin]
    table: BhLock<TableState>,
    /// First address of the umem (page-aligned) and its number of pages.
    start: u64,
    npages: usize,
}

/// One ODP umem with its page table: the memory of an explicit ODP MR, or one child of an
/// implicit one.
///
/// # Invariants
///
/// - `inner.umem` holds, until [`Region::release`], a live umem registered with
///   [`NOTIFIER_OPS`] (from `ib_umem_odp_get` or `ib_umem_odp_alloc_child`), whose `private`
///   is NULL or points to `inner.table` (written under the umem mutex), and whose first page
///   and page count are `inner.start` and `inner.npages`.
/// - Every page address in the table is a page of the umem's range that the notifier has not
///   invalidated since it was stored: it is valid while the table's lock is held.
struct Region {
    inner: Pin<KBox<Inner>>,
}

/// The children of an implicit ODP memory.
///
/// # Invariants
///
/// `list` is sorted by chunk, holds each chunk at most once and at most [`MAX_CHILDREN`]
/// children (its capacity grows by doubling, up to that); the region of chunk `c` spans the
/// [`CHILD_PAGES`] pages from `c << CHILD_SHIFT`. Only [`Implicit::child`] and
/// [`OdpMem::release`] change it, both under the root mutex.
struct Children {
    list: KVec<Child>,
    /// The memory was released: nothing may be accessed any more.
    released: bool,
    /// Chunks whose child could not be made for a reason that does not pass (an address range
    /// the core cannot register, such as the last chunk of the address space, whose end
    /// overflows; an address space that is gone), most recent at `failed_next - 1`.
    failed: [Option<u64>; FAILED_CHUNKS],
    failed_next: usize,
}

impl Children {
    fn has_failed(&self, chunk: u64) -> bool {
        self.failed.contains(&Some(chunk))
    }
}

/// A child of an implicit ODP memory: the region of one [`CHILD_BYTES`] chunk of the address
/// space. Shared only so that a fault can use it after dropping the list's lock; the last
/// reference always goes in process context (a fault, or the release).
#[derive(Clone)]
struct Child {
    chunk: u64,
    region: Arc<Region>,
}

#[pin_data]
struct Implicit {
    /// The root umem (`ib_umem_odp_alloc_implicit`) until [`OdpMem::release`]; held while a
    /// fault adds a child and while the release takes them all away.
    #[pin]
    root: Mutex<Option<UmemPtr>>,
    #[pin]
    children: BhLock<Children>,
}

enum Kind {
    /// An explicit ODP MR's range.
    Explicit(Region),
    /// The whole address space, in children made on demand.
    Implicit(Pin<KBox<Implicit>>),
}

/// Pages of user memory mapped on demand, with MMU interval notifiers of ours: one range
/// ([`OdpMem::register`]) or the whole address space ([`OdpMem::register_implicit`]). Pages
/// are named by index: from the range's first page, or for an implicit memory the page number
/// in the address space (`address >> PAGE_SHIFT`).
pub struct OdpMem {
    kind: Kind,
    /// What the memory's pages are charged to.
    account: OdpAccount,
    /// Pages charged (an explicit memory's range, an implicit one's children), given back by
    /// [`OdpMem::release`].
    charged: Atomic<u64>,
}

/// The umem a C allocator returned: an error pointer becomes its error, NULL `EINVAL`.
fn umem_result(umem: *mut bindings::ib_umem_odp) -> Result<NonNull<bindings::ib_umem_odp>> {
    NonNull::new(kernel::error::from_err_ptr(umem)?).ok_or(EINVAL)
}

/// The notifier callbacks of every [`Region`].
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
/// `Region::new` set up (registered, so the umem is alive), with `range` valid for the call.
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
    // SAFETY: Our ops are registered only on the notifier of an ODP umem (`Region::new`),
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
    let table = private.cast::<BhLock<TableState>>();
    if !table.is_null() && start < end {
        let first = (start - ustart) >> PAGE_SHIFT;
        let last = (end - 1 - ustart) >> PAGE_SHIFT;
        // Once cleared under the lock, no copy still uses these pages and none can start.
        // SAFETY: `private` points to the table of the `Region` owning this umem (type
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
fn clear(table: &BhLock<TableState>, first: usize, end: usize) {
    let mut i = first;
    while i < end {
        let stop = end.min(i.saturating_add(CLEAR_BATCH));
        let mut t = table.lock();
        for e in t.pages.iter_mut().take(stop).skip(i) {
            *e = MISSING;
        }
        i = stop;
    }
}

impl Region {
    /// Sets up the table for `npages` pages from `start` (page-aligned) and attaches the umem
    /// `make` creates for that range. Process context.
    fn new(
        start: u64,
        npages: usize,
        make: impl FnOnce() -> Result<NonNull<bindings::ib_umem_odp>>,
    ) -> Result<Region> {
        // The table takes 8 bytes per page of the range, which the caller chooses: charged to
        // the caller's memory cgroup, and a range too large for it is ENOMEM, never a warning
        // of the allocator (`kvmalloc` refuses sizes past INT_MAX with one unless told not to).
        let flags = GFP_KERNEL_ACCOUNT | __GFP_NOWARN;
        let mut pages = KVVec::with_capacity(npages, flags).map_err(|_| ENOMEM)?;
        pages.resize(npages, MISSING, flags).map_err(|_| ENOMEM)?;
        let inner = KBox::pin_init(
            pin_init!(Inner {
                umem <- new_mutex!(None, "rdma_odp_umem"),
                table <- new_bh_lock!(TableState { pages, released: false }, "rdma_odp_table"),
                start,
                npages,
            }),
            GFP_KERNEL,
        )?;
        let umem = make()?;
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
        // SAFETY: A live umem; the table is pinned in its box for as long as the region lives,
        // and the umem is released (unregistering the notifier) before. Written under the umem
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
        Ok(Region { inner })
    }

    /// Faults (or, without `fault`, snapshots) pages `first..first + count` (clamped to the
    /// region) and stores them in the table. Process context: it sleeps. A failed fault marks
    /// the pages still missing as failed (until their range is invalidated again), unless it
    /// was transient.
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

    /// Releases the umem: unregisters the notifier (waiting for a running invalidation) and
    /// forgets every page. Process context.
    fn release(&self) {
        let mut guard = self.inner.umem.lock();
        if let Some(UmemPtr(umem)) = guard.take() {
            {
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

impl Drop for Region {
    fn drop(&mut self) {
        // Process context: regions are released by deregistration, by the release of their
        // implicit memory, or by a registration that failed part-way.
        self.release();
    }
}

impl Implicit {
    /// Remembers that `chunk` cannot get a child (see [`Children::failed`]).
    fn mark_failed(&self, chunk: u64) {
        let mut c = self.children.lock();
        if !c.has_failed(chunk) {
            let at = c.failed_next % FAILED_CHUNKS;
            c.failed[at] = Some(chunk);
            c.failed_next = at + 1;
        }
    }

    /// The child of `chunk`, made (and added to the list) if there is none yet. Process
    /// context, with the root mutex held: `root` is the live root umem.
    fn child(
        &self,
        root: NonNull<bindings::ib_umem_odp>,
        chunk: u64,
        account: &OdpAccount,
        charged: &Atomic<u64>,
    ) -> Result<Arc<Region>> {
        // Only this function (under the root mutex) adds to the list, so room found here stays.
        loop {
            let (len, room) = {
                let c = self.children.lock();
                match c.list.binary_search_by_key(&chunk, |ch| ch.chunk) {
                    Ok(i) => return Ok(c.list[i].region.clone()),
                    Err(_) => (c.list.len(), c.list.capacity()),
                }
            };
            if len >= MAX_CHILDREN {
                return Err(ENOSPC);
            }
            if len < room {
                break;
            }
            // Full: a list twice the size, filled with copies under the lock and swapped in
            // whole, so the data path never sees it half-built.
            let mut bigger =
                KVec::with_capacity((room * 2).clamp(16, MAX_CHILDREN), GFP_KERNEL_ACCOUNT)?;
            let _old = {
                let mut c = self.children.lock();
                // Within the capacity reserved above: no allocation.
                bigger.extend_from_slice(&c.list, GFP_ATOMIC)?;
                core::mem::replace(&mut c.list, bigger)
            };
            // `_old` goes after the lock: its references are copies, never a region's last.
        }
        // A new child: its pages count against the budgets before the core allocates them.
        account.charge(CHILD_PAGES)?;
        self.make_child(root, chunk)
            .inspect(|_| {
                charged.add(CHILD_PAGES as u64, Relaxed);
            })
            .inspect_err(|_| account.uncharge(CHILD_PAGES))
    }

    /// Makes the child of `chunk` and adds it to the list, in the room [`Implicit::child`]
    /// found. Process context, with the root mutex held.
    fn make_child(&self, root: NonNull<bindings::ib_umem_odp>, chunk: u64) -> Result<Arc<Region>> {
        let start = chunk.checked_shl(CHILD_SHIFT).ok_or(EINVAL)?;
        let addr = ffi::c_ulong::try_from(start).map_err(|_| EINVAL)?;
        let region = Region::new(start, CHILD_PAGES, || {
            // SAFETY: `root` is a live implicit root (the caller holds the mutex the release
            // takes first), and the helper keeps its mm_struct allocated; the ops are a static.
            let umem = unsafe {
                bindings::ib_umem_odp_alloc_child(
                    root.as_ptr(),
                    addr,
                    CHILD_BYTES as usize,
                    &NOTIFIER_OPS,
                )
            };
            umem_result(umem)
        })?;
        let region = Arc::new(region, GFP_KERNEL)?;
        let mut c = self.children.lock();
        let at = c
            .list
            .binary_search_by_key(&chunk, |ch| ch.chunk)
            .err()
            .ok_or(EEXIST)?;
        // Within the room found above: shifts the entries after it, allocates nothing. (A
        // refusal hands back the child, a copy: never a region's last reference.)
        c.list
            .insert_within_capacity(
                at,
                Child {
                    chunk,
                    region: region.clone(),
                },
            )
            .map_err(|_| ENOMEM)?;
        drop(c);
        Ok(region)
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
        account: OdpAccount,
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
        // The whole range counts against the budgets before the core allocates its tables.
        account.charge(npages)?;
        let region = Region::new(start, npages, || {
            // SAFETY: The device is alive; the ops are a static; the call registers the
            // notifier on the current process's mm or fails.
            let umem = unsafe {
                bindings::ib_umem_odp_get(
                    dev.as_raw(),
                    addr_ulong,
                    len_usize,
                    access as i32,
                    &NOTIFIER_OPS,
                )
            };
            umem_result(umem)
        })
        .inspect_err(|_| account.uncharge(npages))?;
        // Take in what is mapped already (a snapshot: nothing faults, nothing fails).
        let _ = region.map(0, npages, false);
        Ok(OdpMem {
            kind: Kind::Explicit(region),
            account,
            charged: Atomic::new(npages as u64),
        })
    }

    /// Registers the whole address space of the calling process for on-demand paging with
    /// `access` (implicit ODP: `IB_ACCESS_ON_DEMAND` over `[0, U64_MAX)`). Nothing is mapped
    /// until a fault asks for it. Process context.
    pub fn register_implicit<T: DriverTypes>(
        dev: &Device<T>,
        access: u32,
        account: OdpAccount,
    ) -> Result<OdpMem> {
        let imp = KBox::pin_init(
            pin_init!(Implicit {
                root <- new_mutex!(None, "rdma_odp_root"),
                children <- new_bh_lock!(
                    Children {
                        list: KVec::new(),
                        released: false,
                        failed: [None; FAILED_CHUNKS],
                        failed_next: 0,
                    },
                    "rdma_odp_children"
                ),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: The device is alive; the root belongs to the current process, whose
        // mm_struct the helper keeps allocated until the root is released.
        let root =
            unsafe { bindings::roxe_helper_umem_odp_alloc_implicit(dev.as_raw(), access as i32) };
        let root = umem_result(root)?;
        *imp.root.lock() = Some(UmemPtr(root));
        Ok(OdpMem {
            kind: Kind::Implicit(imp),
            account,
            charged: Atomic::new(0),
        })
    }

    /// Number of pages the memory spans (for an implicit one, the whole address space).
    pub fn page_count(&self) -> usize {
        match &self.kind {
            Kind::Explicit(r) => r.inner.npages,
            Kind::Implicit(_) => IMPLICIT_PAGES,
        }
    }

    /// Faults pages `first..first + count` (clamped to the memory) in with the access of the
    /// registration, and makes them accessible. Process context: it sleeps. A failure marks
    /// the pages still missing as failed (until their range is invalidated again), unless it was
    /// transient. An implicit memory first makes the children the range needs; when it has
    /// [`MAX_CHILDREN`], the fault fails (`ENOSPC`) and pages of other chunks stay failed; a
    /// chunk whose child cannot be made for a lasting reason (the core refuses its range) fails
    /// too, and is remembered as failed ([`FAILED_CHUNKS`]).
    pub fn fault(&self, first: usize, count: usize) -> Result {
        let imp = match &self.kind {
            Kind::Explicit(r) => return r.map(first, count, true),
            Kind::Implicit(imp) => imp,
        };
        let guard = imp.root.lock();
        let Some(UmemPtr(root)) = *guard else {
            return Err(ENOENT);
        };
        if first >= IMPLICIT_PAGES {
            return Err(EINVAL);
        }
        let end = first.saturating_add(count).min(IMPLICIT_PAGES);
        let mut page = first;
        while page < end {
            let chunk = page / CHILD_PAGES;
            let base = chunk * CHILD_PAGES;
            let n = (base + CHILD_PAGES).min(end) - page;
            let child = imp.child(root, chunk as u64, &self.account, &self.charged);
            let child = child.inspect_err(|e| {
                // Out of memory or of children may pass; anything else will not.
                if *e != ENOMEM && *e != ENOSPC && *e != EAGAIN {
                    imp.mark_failed(chunk as u64);
                }
            })?;
            child.map(page - base, n, true)?;
            page += n;
        }
        Ok(())
    }

    /// Runs `f` with the pages as they are now: while it runs no page it can see is invalidated.
    /// Process or softirq context, hard interrupts enabled; `f` runs with bottom halves off
    /// under the table's spinlock (an implicit memory's list lock, and each child's table lock
    /// while one of its pages is used), so it must be short (a packet's copy) and take no lock.
    pub fn access<R>(&self, f: impl FnOnce(&OdpPages<'_>) -> R) -> R {
        // Each arm's guard masks bottom halves for as long as it holds its lock (`BhLock`).
        match &self.kind {
            Kind::Explicit(r) => {
                let table = r.inner.table.lock();
                let pages = OdpPages {
                    view: View::Table(&table),
                };
                f(&pages)
            }
            Kind::Implicit(imp) => {
                let children = imp.children.lock();
                let pages = OdpPages {
                    view: View::Children(&children),
                };
                f(&pages)
            }
        }
    }

    /// Releases the memory: unregisters the notifiers (waiting for a running invalidation) and
    /// forgets every page; later accesses get [`OdpMiss::Released`]. Process context. Called
    /// by deregistration, so that the memory goes even while a late packet still holds the MR.
    pub fn release(&self) {
        match &self.kind {
            Kind::Explicit(r) => r.release(),
            Kind::Implicit(imp) => imp.release(),
        }
        // Once: later calls find nothing charged.
        self.account
            .uncharge(self.charged.xchg(0, Relaxed) as usize);
    }
}

impl Implicit {
    /// Releases the children and the root (see [`OdpMem::release`]). Process context.
    fn release(&self) {
        let mut guard = self.root.lock();
        let Some(UmemPtr(root)) = guard.take() else {
            return;
        };
        let list = {
            let mut c = self.children.lock();
            c.released = true;
            core::mem::replace(&mut c.list, KVec::new())
        };
        // The list held the last reference to each child (a fault holding one would hold the
        // root mutex too): each is released here, in process context.
        drop(list);
        // SAFETY: Owned, released once, after its children (whose notifiers are gone).
        unsafe { bindings::roxe_helper_umem_odp_release_implicit(root.as_ptr()) };
    }
}

impl Drop for OdpMem {
    fn drop(&mut self) {
        // Normally released by deregistration already (in process context); otherwise this is
        // a registration that failed part-way, also in process context.
        self.release();
    }
}

/// What an [`OdpPages`] looks at.
enum View<'a> {
    /// The table of an explicit memory, locked.
    Table(&'a TableState),
    /// The children of an implicit memory, their list locked.
    Children(&'a Children),
}

/// The pages of an [`OdpMem`] while its table (or list of children) is locked.
pub struct OdpPages<'a> {
    view: View<'a>,
}

impl OdpPages<'_> {
    /// Runs `f` on page `index`, for an access of `len` bytes at `offset`, while the page
    /// cannot be invalidated.
    fn with_page<R>(
        &self,
        index: usize,
        offset: usize,
        len: usize,
        f: impl FnOnce(*mut bindings::page) -> R,
    ) -> Result<R, OdpMiss> {
        match &self.view {
            View::Table(t) => t.page(index, offset, len).map(f),
            View::Children(c) => {
                if c.released {
                    return Err(OdpMiss::Released);
                }
                if index >= IMPLICIT_PAGES {
                    return Err(OdpMiss::Range);
                }
                let chunk = (index / CHILD_PAGES) as u64;
                match c.list.binary_search_by_key(&chunk, |ch| ch.chunk) {
                    Ok(i) => {
                        // Under the list's lock (`OdpMem::access`): this lock nests inside it,
                        // and neither is taken the other way round.
                        let t = c.list[i].region.inner.table.lock();
                        t.page(index % CHILD_PAGES, offset, len).map(f)
                    }
                    // No room for a child, or none can be made: as memory that cannot be
                    // mapped.
                    Err(_) if c.list.len() >= MAX_CHILDREN || c.has_failed(chunk) => {
                        Err(OdpMiss::Failed)
                    }
                    Err(_) => Err(OdpMiss::Missing),
                }
            }
        }
    }

    /// Whether page `index` can be accessed now.
    pub fn check(&self, index: usize) -> Result<(), OdpMiss> {
        self.with_page(index, 0, 0, |_| ())
    }

    /// Copies from page `index` at `offset` into `dst` (not crossing the page end).
    pub fn read(&self, index: usize, offset: usize, dst: &mut [u8]) -> Result<(), OdpMiss> {
        self.with_page(index, offset, dst.len(), |page| {
            // SAFETY: A page of the memory, valid while its table's lock is held (type
            // invariant of `Region`), which `with_page` holds while this runs; the range is
            // inside the page; `dst` is a kernel buffer distinct from it.
            unsafe {
                bindings::roxe_helper_copy_from_page(
                    page,
                    offset,
                    dst.as_mut_ptr().cast(),
                    dst.len(),
                )
            }
        })
    }

    /// Copies `src` into page `index` at `offset` (not crossing the page end).
    pub fn write(&self, index: usize, offset: usize, src: &[u8]) -> Result<(), OdpMiss> {
        self.with_page(index, offset, src.len(), |page| {
            // SAFETY: As in `read`; for a writable registration only pages faulted with write
            // access are in the table, and the data path checks the MR's rights before writing.
            unsafe {
                bindings::roxe_helper_copy_to_page(page, offset, src.as_ptr().cast(), src.len())
            }
        })
    }
}
