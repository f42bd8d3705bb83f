// SPDX-License-Identifier: GPL-2.0

//! Object pools indexed by number (QPN, memory key index, AH number...), with lookups that the
//! softirq data path can make without taking a lock.
//!
//! A [`Pool<T>`] is an XArray of reference-counted entries ([`PoolRef<T>`]) whose lock disables
//! interrupts (`XA_FLAGS_LOCK_IRQ`, taken with irqsave: kernel consumers create and destroy
//! address handles with interrupts off). Lookups ([`Pool::get`]) run under RCU and return a new
//! reference. The pool's own reference is dropped only after an RCU grace period following the
//! erase, so a lookup that found the entry has taken its reference before the pool's can go:
//! [`Pool::remove`] waits for the grace period and hands the reference back (for objects whose
//! drop must run in process context, such as MRs that unpin pages), [`Pool::remove_deferred`]
//! drops it from an RCU callback without waiting (any context; the object's drop must not
//! sleep).
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h)

use super::bindings;
use core::ops::Deref;
use core::{ffi::c_void, marker::PhantomData};
use kernel::{
    ffi,
    prelude::*,
    sync::{rcu, Arc, ArcBorrow},
    types::{ForeignOwnable, Opaque},
};

/// An object in a pool, with the RCU callback head that defers the pool's last reference.
#[pin_data]
pub struct Entry<T> {
    rcu: Opaque<bindings::callback_head>,
    #[pin]
    value: T,
}

// SAFETY: The RCU head is only written by `call_rcu` once the entry left the pool; otherwise an
// `Entry<T>` is a `T`.
unsafe impl<T: Send> Send for Entry<T> {}
// SAFETY: As above; shared access never touches the RCU head.
unsafe impl<T: Sync> Sync for Entry<T> {}

impl<T> Deref for Entry<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

/// A counted reference to a pooled object.
pub type PoolRef<T> = Arc<Entry<T>>;

/// Allocation context of an insertion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alloc {
    /// May sleep.
    Kernel,
    /// Atomic context (e.g. address handles created by kernel consumers under a spinlock).
    Atomic,
}

impl Alloc {
    fn gfp(self) -> bindings::gfp_t {
        match self {
            Alloc::Kernel => kernel::bindings::GFP_KERNEL,
            Alloc::Atomic => kernel::bindings::GFP_ATOMIC,
        }
    }
}

/// A search mark of a pool's entries ([`Pool::for_each_marked`]): what a driver marks is its
/// own (for example, the objects with work due).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum PoolMark {
    /// The first mark (the XArray's `XA_MARK_1`).
    One = 1,
    /// The second mark (`XA_MARK_2`).
    Two = 2,
}

/// A pool of `Arc<T>` indexed by `u32`.
///
/// # Invariants
///
/// - `xa` is initialised with `XA_FLAGS_ALLOC | XA_FLAGS_LOCK_IRQ`.
/// - Every entry is a pointer from `PoolRef::<T>::into_foreign`, owned by the pool.
#[pin_data(PinnedDrop)]
pub struct Pool<T: Send + Sync + 'static> {
    #[pin]
    xa: Opaque<bindings::xarray>,
    /// Next index to try for cyclic allocation; written only under the XArray lock.
    next: Opaque<u32>,
    _t: PhantomData<PoolRef<T>>,
}

// SAFETY: The XArray is internally locked; entries are `Arc<T>` with `T: Send + Sync`.
unsafe impl<T: Send + Sync + 'static> Send for Pool<T> {}
// SAFETY: As above.
unsafe impl<T: Send + Sync + 'static> Sync for Pool<T> {}

impl<T: Send + Sync + 'static> Pool<T> {
    /// Creates an empty pool.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // INVARIANT: Initialised with the allocating, BH-locked flags.
            // SAFETY: `xa_init_flags` initialises the slot fully.
            xa <- Opaque::ffi_init(|xa| unsafe {
                bindings::roxe_helper_xa_init_alloc(xa);
            }),
            next: Opaque::new(0),
            _t: PhantomData,
        })
    }

    fn xa(&self) -> *mut bindings::xarray {
        self.xa.get()
    }

    /// Reserves a free index in `min..=max`, cycling through the range so that a freed number
    /// is not reused at once (a late packet for a destroyed QP must not reach its successor).
    /// Lookups miss a reserved index until [`Reservation::fill`] stores the object, which may
    /// need the index to be built (a QP number, a memory key).
    pub fn reserve(&self, min: u32, max: u32, alloc: Alloc) -> Result<Reservation<'_, T>> {
        let mut id = 0u32;
        // SAFETY: `xa` is initialised (type invariant); a NULL entry reserves the index; `next`
        // is only touched under the XArray lock, which the call takes.
        let ret = unsafe {
            bindings::roxe_helper_xa_alloc_cyclic_irqsafe(
                self.xa(),
                &mut id,
                core::ptr::null_mut(),
                min,
                max,
                self.next.get(),
                alloc.gfp(),
            )
        };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(Reservation {
            pool: self,
            index: id,
            filled: false,
        })
    }

    /// Creates an object at exactly `index` (`EBUSY` if taken) and returns a reference.
    pub fn insert(
        &self,
        index: u32,
        init: impl PinInit<T, Error>,
        alloc: Alloc,
    ) -> Result<PoolRef<T>> {
        let item = Self::new_entry(init, alloc)?;
        let ptr = item.clone().into_foreign();
        // SAFETY: As in `reserve`; `ptr` is a valid entry.
        let ret = unsafe {
            bindings::roxe_helper_xa_insert_irqsafe(
                self.xa(),
                index as ffi::c_ulong,
                ptr.cast(),
                alloc.gfp(),
            )
        };
        if ret < 0 {
            // SAFETY: Not inserted: we still own the reference.
            drop(unsafe { PoolRef::<T>::from_foreign(ptr) });
            return Err(Error::from_errno(ret));
        }
        Ok(item)
    }

    fn new_entry(init: impl PinInit<T, Error>, alloc: Alloc) -> Result<PoolRef<T>> {
        let flags = match alloc {
            Alloc::Kernel => GFP_KERNEL,
            Alloc::Atomic => GFP_ATOMIC,
        };
        Arc::pin_init(
            try_pin_init!(Entry::<T> { rcu: Opaque::uninit(), value <- init }),
            flags,
        )
    }

    /// Looks up `index` and returns a new reference. Any context.
    pub fn get(&self, index: u32) -> Option<PoolRef<T>> {
        let _guard = rcu::read_lock();
        // SAFETY: `xa` is initialised; `xa_load` may run under RCU alone.
        let ptr = unsafe { bindings::xa_load(self.xa(), index as ffi::c_ulong) };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: The entry came from `into_foreign`, and the pool's reference stays alive for an
        // RCU grace period after its removal (see `remove`), which cannot end while we hold the
        // read lock.
        let borrowed: ArcBorrow<'_, Entry<T>> = unsafe { PoolRef::<T>::borrow(ptr.cast()) };
        Some(borrowed.into())
    }

    /// Calls `f` with every object in the pool, in index order, each with a reference taken
    /// under RCU. Objects inserted or removed meanwhile may or may not be visited. Any context.
    pub fn for_each(&self, f: impl FnMut(u32, &PoolRef<T>)) {
        self.walk(None, f);
    }

    /// Calls `f` with every object that carries `mark`, in index order, each with a reference
    /// taken under RCU: the search skips unmarked parts of the index space, so it costs what is
    /// marked, not what the pool holds. Objects marked or unmarked meanwhile may or may not be
    /// visited. Any context.
    pub fn for_each_marked(&self, mark: PoolMark, f: impl FnMut(u32, &PoolRef<T>)) {
        self.walk(Some(mark), f);
    }

    /// [`Pool::for_each`] (`mark` `None`) and [`Pool::for_each_marked`].
    fn walk(&self, mark: Option<PoolMark>, mut f: impl FnMut(u32, &PoolRef<T>)) {
        let mut index: ffi::c_ulong = 0;
        loop {
            let item = {
                let _guard = rcu::read_lock();
                // SAFETY: `xa` is initialised; `xa_find` may run under RCU alone.
                let ptr = unsafe {
                    match mark {
                        None => bindings::roxe_helper_xa_find_from(self.xa(), &mut index),
                        Some(m) => bindings::roxe_helper_xa_find_marked_from(
                            self.xa(),
                            &mut index,
                            m as u32,
                        ),
                    }
                };
                if ptr.is_null() {
                    return;
                }
                // SAFETY: As in `get`: the pool's reference outlives our read-side section.
                let borrowed: ArcBorrow<'_, Entry<T>> = unsafe { PoolRef::<T>::borrow(ptr.cast()) };
                PoolRef::<T>::from(borrowed)
            };
            f(index as u32, &item);
            index = match index.checked_add(1) {
                Some(i) => i,
                None => return,
            };
        }
    }

    /// Sets `mark` on the object at `index`, if there is one (a removed object loses its
    /// marks). Any context.
    pub fn set_mark(&self, index: u32, mark: PoolMark) {
        // SAFETY: `xa` is initialised; the helper takes the XArray's lock, interrupts off.
        unsafe {
            bindings::roxe_helper_xa_set_mark_irqsafe(self.xa(), index as ffi::c_ulong, mark as u32)
        };
    }

    /// Clears `mark` on the object at `index`. Any context.
    pub fn clear_mark(&self, index: u32, mark: PoolMark) {
        // SAFETY: As in `set_mark`.
        unsafe {
            bindings::roxe_helper_xa_clear_mark_irqsafe(
                self.xa(),
                index as ffi::c_ulong,
                mark as u32,
            )
        };
    }

    /// Removes `index` and returns the pool's reference, after an RCU grace period so that no
    /// lookup still borrows it. Process context (it sleeps).
    ///
    /// The grace period is an expedited one within a budget ([`revocable::grace_period`]).
    /// Removals are destroy verbs (deregistering an MR, destroying a QP or an SRQ), and a
    /// consumer makes several per connection: rping's four MRs and a QP on each side, RTRS's
    /// per-path QPs and MRs, a process's whole teardown when it exits. A normal grace period
    /// lasts several scheduler ticks, and waiting one per object made a connection's teardown
    /// far slower than rdma_rxe's, which waits for nothing but the object's own references. An
    /// expedited one costs an interrupt per busy CPU, which is why a process that loops over
    /// create/destroy pairs gets normal ones past the budget.
    ///
    /// [`revocable::grace_period`]: super::revocable::grace_period
    pub fn remove(&self, index: u32) -> Option<PoolRef<T>> {
        // SAFETY: `xa` is initialised.
        let ptr =
            unsafe { bindings::roxe_helper_xa_erase_irqsafe(self.xa(), index as ffi::c_ulong) };
        if ptr.is_null() {
            return None;
        }
        super::revocable::grace_period();
        // SAFETY: The entry came from `into_foreign` and is no longer in the pool or borrowed.
        Some(unsafe { PoolRef::<T>::from_foreign(ptr.cast()) })
    }

    /// Removes `index` without waiting: the pool's reference is dropped by an RCU callback
    /// after the grace period. Any context; `T`'s drop then runs in softirq if it was the last
    /// reference, so it must not sleep. Returns whether the index was present.
    pub fn remove_deferred(&self, index: u32) -> bool {
        // SAFETY: `xa` is initialised.
        let ptr =
            unsafe { bindings::roxe_helper_xa_erase_irqsafe(self.xa(), index as ffi::c_ulong) };
        if ptr.is_null() {
            return false;
        }
        // SAFETY: The entry came from `into_foreign` and left the pool: the reference is ours.
        let item = unsafe { PoolRef::<T>::from_foreign(ptr) };
        // The pool's reference passes to the RCU callback, as a raw pointer to the entry.
        let entry = Arc::into_raw(item);
        // SAFETY: The entry stays allocated until the callback drops the reference it now owns;
        // its RCU head is used only here, once.
        unsafe {
            bindings::call_rcu(
                Opaque::cast_into(core::ptr::addr_of!((*entry).rcu)),
                Some(Self::drop_after_grace_period),
            )
        };
        true
    }

    /// The RCU callback of `remove_deferred`.
    ///
    /// # Safety
    ///
    /// Only RCU calls this, once, with `head` the `rcu` field of an `Entry<T>` that
    /// `remove_deferred` queued together with the reference it owned.
    unsafe extern "C" fn drop_after_grace_period(head: *mut bindings::callback_head) {
        let offset = core::mem::offset_of!(Entry<T>, rcu);
        // SAFETY: `head` is the `rcu` field of an `Entry<T>` that `remove_deferred` turned into a
        // raw `Arc` pointer, whose reference this callback now drops.
        unsafe {
            let entry = head.cast::<u8>().sub(offset).cast::<Entry<T>>();
            drop(Arc::from_raw(entry));
        }
    }
}

/// A reserved index of a [`Pool`]: filled with an object, or released when dropped.
pub struct Reservation<'a, T: Send + Sync + 'static> {
    pool: &'a Pool<T>,
    index: u32,
    filled: bool,
}

impl<T: Send + Sync + 'static> Reservation<'_, T> {
    /// The reserved index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Creates the object and stores it at the reserved index, where lookups find it from now
    /// on; returns a reference.
    pub fn fill(mut self, init: impl PinInit<T, Error>) -> Result<PoolRef<T>> {
        let item = Pool::<T>::new_entry(init, Alloc::Atomic)?;
        let ptr = item.clone().into_foreign();
        // SAFETY: `xa` is initialised; the index is reserved, so storing needs no allocation and
        // cannot fail; `ptr` is a valid entry the pool now owns.
        unsafe {
            bindings::roxe_helper_xa_store_irqsafe(
                self.pool.xa(),
                self.index as ffi::c_ulong,
                ptr.cast(),
            )
        };
        self.filled = true;
        Ok(item)
    }
}

impl<T: Send + Sync + 'static> Drop for Reservation<'_, T> {
    fn drop(&mut self) {
        if !self.filled {
            // SAFETY: `xa` is initialised; releasing a reserved, unfilled index frees it.
            unsafe {
                bindings::roxe_helper_xa_release_irqsafe(self.pool.xa(), self.index as ffi::c_ulong)
            };
        }
    }
}

#[pinned_drop]
impl<T: Send + Sync + 'static> PinnedDrop for Pool<T> {
    fn drop(self: Pin<&mut Self>) {
        // Users empty their pools before dropping them; anything left is released here.
        let mut index: ffi::c_ulong = 0;
        loop {
            // SAFETY: `xa` is initialised; we have exclusive access.
            let ptr: *mut c_void =
                unsafe { bindings::roxe_helper_xa_find_from(self.xa(), &mut index) };
            if ptr.is_null() {
                break;
            }
            // SAFETY: As above.
            unsafe { bindings::roxe_helper_xa_erase_irqsafe(self.xa(), index) };
            // SAFETY: An owned entry from `into_foreign`; no lookup can run during drop.
            drop(unsafe { PoolRef::<T>::from_foreign(ptr.cast()) });
        }
        // Callbacks of `remove_deferred` may still hold entries; they need no pool.
        // SAFETY: Empty and initialised.
        unsafe { bindings::xa_destroy(self.xa()) };
    }
}
