// SPDX-License-Identifier: GPL-2.0

//! Memory shared with user space: ring buffers a provider library maps with `mmap()` on the
//! device's command file, and the core's mmap entries (`struct rdma_user_mmap_entry`) that hand
//! them out by offset.
//!
//! A [`UserBuf`] is `vmalloc_user` memory. The process that maps it may write any byte of it at
//! any time, so the kernel never forms a Rust reference into it: every access goes through a
//! bounds-checked copy or an atomic load/store at a checked, aligned offset, and whatever it
//! reads is data to validate, never a structure to trust.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/linux/vmalloc.h`](srctree/include/linux/vmalloc.h)

use super::{bindings, object::UData};
use core::{mem::size_of, ptr::NonNull};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, Relaxed, Release},
        Arc,
    },
    types::Opaque,
};

/// Page size of the kernel, the granule of user mappings.
pub const PAGE_SIZE: usize = kernel::page::PAGE_SIZE;

/// Zeroed, page-granular kernel memory that user space may map (`vmalloc_user`).
///
/// # Invariants
///
/// `ptr` is the start of a `vmalloc_user` allocation of `len` bytes (a multiple of `PAGE_SIZE`),
/// owned by this object and freed when it drops.
pub struct UserBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: The buffer is plain memory; all access is by raw copies and atomics, valid from any
// thread.
unsafe impl Send for UserBuf {}
// SAFETY: As above: no method hands out references into the memory.
unsafe impl Sync for UserBuf {}

impl UserBuf {
    /// Allocates `len` bytes rounded up to whole pages, zeroed.
    pub fn new(len: usize) -> Result<Self> {
        let len = len.checked_next_multiple_of(PAGE_SIZE).ok_or(ENOMEM)?;
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: Any size may be requested; NULL is returned on failure.
        let ptr = unsafe { bindings::roxe_helper_vmalloc_user(len) };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: A fresh allocation of `len` bytes.
        Ok(UserBuf { ptr, len })
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether `[offset, offset + n)` lies in the buffer.
    fn in_bounds(&self, offset: usize, n: usize) -> bool {
        offset.checked_add(n).is_some_and(|end| end <= self.len)
    }

    /// The 32-bit word at `offset` as an atomic, if in bounds and aligned.
    fn word(&self, offset: usize) -> Option<&Atomic<u32>> {
        if !self.in_bounds(offset, size_of::<u32>()) || offset % size_of::<u32>() != 0 {
            return None;
        }
        // SAFETY: In bounds and aligned (the buffer is page aligned), and the memory lives as long
        // as `self`. Every kernel access to shared words is atomic; user space also uses atomics
        // on them, and a racing plain write can only change the value we read.
        Some(unsafe { Atomic::from_ptr(self.ptr.as_ptr().add(offset).cast::<u32>()) })
    }

    /// Loads the word at `offset` with acquire ordering: what user space wrote before publishing
    /// this value is visible after it. Out of bounds or misaligned offsets read as 0.
    pub fn load_acquire(&self, offset: usize) -> u32 {
        self.word(offset).map_or(0, |w| w.load(Acquire))
    }

    /// Loads the word at `offset` without ordering (0 if out of bounds or misaligned).
    pub fn load_relaxed(&self, offset: usize) -> u32 {
        self.word(offset).map_or(0, |w| w.load(Relaxed))
    }

    /// Stores `value` at `offset` with release ordering: our earlier writes to the buffer are
    /// visible to a reader that sees this value. Ignored if out of bounds or misaligned.
    pub fn store_release(&self, offset: usize, value: u32) {
        if let Some(w) = self.word(offset) {
            w.store(value, Release);
        }
    }

    /// Stores `value` at `offset` without ordering. Ignored if out of bounds or misaligned.
    pub fn store_relaxed(&self, offset: usize, value: u32) {
        if let Some(w) = self.word(offset) {
            w.store(value, Relaxed);
        }
    }

    /// Copies `dst.len()` bytes from `offset` out of the buffer.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result {
        if !self.in_bounds(offset, dst.len()) {
            return Err(EINVAL);
        }
        // SAFETY: The source range is in bounds; the destination is a distinct kernel slice.
        // Concurrent user writes can only change which bytes are copied, and any bytes are valid
        // `u8`s.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        Ok(())
    }

    /// Copies `src` into the buffer at `offset`.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result {
        if !self.in_bounds(offset, src.len()) {
            return Err(EINVAL);
        }
        // SAFETY: The destination range is in bounds and is not aliased by any Rust reference.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len())
        };
        Ok(())
    }

    fn as_raw(&self) -> *mut ffi::c_void {
        self.ptr.as_ptr().cast()
    }
}

use kernel::ffi;

impl Drop for UserBuf {
    fn drop(&mut self) {
        // SAFETY: Owned allocation (type invariant). Pages still mapped into a process keep a page
        // reference of their own and are freed when it unmaps them.
        unsafe { bindings::vfree(self.as_raw()) };
    }
}

/// Where user space finds a mapped buffer: the `mmap()` offset and size (`struct mminfo` of the
/// rxe ABI).
#[derive(Clone, Copy, Debug, Default)]
pub struct MmapInfo {
    /// The offset to pass to `mmap()`.
    pub offset: u64,
    /// The size of the mapping in bytes.
    pub size: u32,
}

/// A buffer offered to a user context for mapping, as the core's mmap entry.
///
/// # Invariants
///
/// Allocated as a `KBox` by [`MmapEntry::insert`]; once inserted, owned by the core's entry table
/// and freed by [`mmap_free`] when its reference count drops to zero.
#[repr(C)]
struct Entry {
    raw: Opaque<bindings::rdma_user_mmap_entry>,
    buf: Arc<UserBuf>,
}

/// An mmap entry offered to a user context. Dropping it withdraws the offer: later `mmap()` calls
/// at its offset fail, existing mappings stay valid (they hold the pages).
///
/// # Invariants
///
/// `entry` was inserted into its context's table and not yet removed by us.
pub struct MmapEntry {
    entry: NonNull<bindings::rdma_user_mmap_entry>,
    info: MmapInfo,
}

// SAFETY: The core's entry table is locked internally; removal may happen on any thread.
unsafe impl Send for MmapEntry {}
// SAFETY: No shared-reference method mutates anything.
unsafe impl Sync for MmapEntry {}

impl MmapEntry {
    /// Offers `buf` for mapping to the process whose command `udata` is.
    pub fn insert(udata: &UData<'_>, buf: Arc<UserBuf>) -> Result<MmapEntry> {
        let len = buf.len();
        let size = u32::try_from(len).map_err(|_| EINVAL)?;
        let entry = KBox::new(
            Entry {
                raw: Opaque::zeroed(),
                buf,
            },
            GFP_KERNEL,
        )?;
        let raw = KBox::into_raw(entry);
        // SAFETY: `raw` is a valid, zeroed entry the core may take over; the context is the one of
        // the command in progress, alive during it.
        let err = unsafe {
            bindings::rdma_user_mmap_entry_insert(
                udata.ucontext_raw(),
                Opaque::cast_into(core::ptr::addr_of!((*raw).raw)),
                len,
            )
        };
        if err != 0 {
            // SAFETY: Not inserted, so still ours.
            drop(unsafe { KBox::from_raw(raw) });
            return Err(Error::from_errno(err));
        }
        // SAFETY: Inserted: the entry lives until removed and released.
        let entry = unsafe { Opaque::cast_into(core::ptr::addr_of!((*raw).raw)) };
        // SAFETY: `entry` is a live inserted entry.
        let offset = unsafe { bindings::roxe_helper_rdma_user_mmap_get_offset(entry) };
        // INVARIANT: Inserted above.
        Ok(MmapEntry {
            entry: NonNull::new(entry).ok_or(EINVAL)?,
            info: MmapInfo { offset, size },
        })
    }

    /// Where user space maps the buffer.
    pub fn info(&self) -> MmapInfo {
        self.info
    }
}

impl Drop for MmapEntry {
    fn drop(&mut self) {
        // SAFETY: Inserted and not removed (type invariant). The core drops its table reference;
        // `mmap_free` runs once no mapping call holds the entry.
        unsafe { bindings::rdma_user_mmap_entry_remove(self.entry.as_ptr()) };
    }
}

/// The `mmap` op: maps the buffer of the entry at the VMA's offset.
///
/// # Safety
///
/// Called by the core with a live context of a device whose entries are all [`Entry`]s, and a
/// VMA being set up for its command file.
pub(crate) unsafe extern "C" fn mmap(
    uctx: *mut bindings::ib_ucontext,
    vma: *mut bindings::vm_area_struct,
) -> ffi::c_int {
    // SAFETY: By the function's safety requirements.
    let entry = unsafe { bindings::rdma_user_mmap_entry_get(uctx, vma) };
    if entry.is_null() {
        return EINVAL.to_errno();
    }
    // CAST: `raw` is the first field of the `#[repr(C)]` `Entry`.
    let e = entry.cast::<Entry>();
    // SAFETY: The entry is one of ours and the reference taken above keeps it alive.
    let buf = unsafe { &(*e).buf };
    // SAFETY: The VMA is being set up; `rdma_user_mmap_entry_get` checked that it fits the
    // entry's size, and `remap_vmalloc_range` itself checks it against the allocation.
    let err = unsafe { bindings::remap_vmalloc_range(vma, buf.as_raw(), 0) };
    // SAFETY: Drops the reference taken above.
    unsafe { bindings::rdma_user_mmap_entry_put(entry) };
    err
}

/// The `mmap_free` op: the last reference to an entry is gone.
///
/// # Safety
///
/// `entry` is one of ours ([`MmapEntry::insert`]), no longer referenced by the core.
pub(crate) unsafe extern "C" fn mmap_free(entry: *mut bindings::rdma_user_mmap_entry) {
    // SAFETY: Allocated by `KBox::into_raw` in `insert`; the core is done with it.
    drop(unsafe { KBox::from_raw(entry.cast::<Entry>()) });
}
