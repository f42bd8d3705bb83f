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
    device::{Adapter, Device, Driver},
    kverbs::KernelMem,
    object::{Object, UData},
    pd::Pd,
};
use core::{cell::UnsafeCell, ptr::NonNull};
use kernel::{ffi, prelude::*, types::Opaque};

/// `ERR_PTR(e)`: an error returned through a pointer-returning op.
fn err_ptr<P>(e: Error) -> *mut P {
    core::ptr::without_provenance_mut(e.to_errno() as isize as usize)
}

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
    pub fn pin<T: Driver>(
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
pub struct Mr<T: Driver> {
    ib: Opaque<bindings::ib_mr>,
    data: T::Mr,
    /// Fast-registration MRs: where `map_mr_sg` collects the page list before handing it to
    /// the driver. The consumer owns such an MR and never maps it from two threads at once
    /// (the `ib_map_mr_sg` contract), so the cell has one user at a time.
    page_scratch: UnsafeCell<KVec<u64>>,
}

impl<T: Driver> Mr<T> {
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
    /// Address of each page.
    pub pages: &'a [u64],
    /// The first byte's address (the MR's IOVA): inside `pages[0]`.
    pub iova: u64,
    /// Bytes mapped.
    pub length: u64,
    /// log2 of the page size the consumer chose.
    pub page_shift: u32,
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
pub type Mw<T> = Object<bindings::ib_mw, <T as Driver>::Mw, T>;

impl<T: Driver> Adapter<T> {
    pub(crate) fn finish_mr(
        pd: *mut bindings::ib_pd,
        created: MrCreated<T::Mr>,
        iova: u64,
        length: u64,
    ) -> *mut bindings::ib_mr {
        Self::finish_mr_with(pd, created, iova, length, KVec::new())
    }

    fn finish_mr_with(
        pd: *mut bindings::ib_pd,
        created: MrCreated<T::Mr>,
        iova: u64,
        length: u64,
        page_scratch: KVec<u64>,
    ) -> *mut bindings::ib_mr {
        let mr = Mr::<T> {
            ib: Opaque::zeroed(),
            data: created.data,
            page_scratch: UnsafeCell::new(page_scratch),
        };
        let mr = match KBox::new(mr, GFP_KERNEL) {
            Ok(mr) => KBox::into_raw(mr),
            Err(e) => return err_ptr(e.into()),
        };
        // SAFETY: `mr` is a valid fresh allocation.
        let ib = Opaque::cast_into(unsafe { core::ptr::addr_of!((*mr).ib) });
        // SAFETY: Fresh, exclusively ours until returned; `pd` is the live PD of the call.
        unsafe {
            (*ib).device = (*pd).device;
            (*ib).pd = pd;
            (*ib).lkey = created.lkey;
            (*ib).rkey = created.rkey;
            (*ib).iova = iova;
            (*ib).length = length;
        }
        ib
    }

    /// `ib_device_ops.reg_user_mr`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn reg_user_mr(
        ibpd: *mut bindings::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: ffi::c_int,
        dmah: *mut bindings::ib_dmah,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        if !dmah.is_null() {
            return err_ptr(EOPNOTSUPP);
        }
        // SAFETY: A live PD of ours; the udata lives for the command.
        let (pd, udata) = unsafe { (Pd::<T>::from_raw(ibpd), UData::from_raw(udata)) };
        let req = UserMrRequest {
            start,
            length,
            iova,
            access: access as u32,
        };
        match T::reg_user_mr(pd, &req, udata.as_ref()) {
            Ok(created) => Self::finish_mr(ibpd, created, iova, length),
            Err(e) => err_ptr(e),
        }
    }

    /// `ib_device_ops.rereg_user_mr`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn rereg_user_mr(
        ibmr: *mut bindings::ib_mr,
        flags: ffi::c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: ffi::c_int,
        ibpd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> *mut bindings::ib_mr {
        // CAST: `ib` is the first field of the `#[repr(C)]` `Mr<T>`.
        // SAFETY: One of our MRs, alive during the command; the new PD, if any, is a live PD of
        // ours; the udata lives for the command.
        let (mr, udata) = unsafe { (&*ibmr.cast::<Mr<T>>(), UData::from_raw(udata)) };
        let flags = flags as u32;
        let new_pd = (flags & rereg::PD != 0 && !ibpd.is_null()).then(|| {
            // SAFETY: As above.
            unsafe { Pd::<T>::from_raw(ibpd) }
        });
        let req = UserMrRequest {
            start,
            length,
            iova,
            access: access as u32,
        };
        match T::rereg_user_mr(mr, flags, &req, new_pd, udata.as_ref()) {
            // NULL: changed in place; the core updates `pd` and, for a new range, `iova`/`length`.
            Ok(()) => core::ptr::null_mut(),
            Err(e) => err_ptr(e),
        }
    }

    /// `ib_device_ops.dereg_mr`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn dereg_mr(
        ibmr: *mut bindings::ib_mr,
        _udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        // SAFETY: The MR's device is ours and alive.
        let dev = unsafe { Device::<T>::from_raw((*ibmr).device) };
        {
            // CAST: `ib` is the first field of the `#[repr(C)]` `Mr<T>`.
            // SAFETY: One of our MRs (type invariant), live until freed below.
            let mr = unsafe { &*ibmr.cast::<Mr<T>>() };
            if let Err(e) = T::prepare_dereg_mr(dev, &mr.data) {
                // The core keeps the MR registered and returns the error to the caller.
                return e.to_errno();
            }
        }
        // CAST: As above.
        // SAFETY: One of our MRs (type invariant), handed back once by the core; the shared
        // borrow above has ended.
        let mr = unsafe { KBox::from_raw(ibmr.cast::<Mr<T>>()) };
        let Mr {
            ib: _,
            data,
            page_scratch: _,
        } = KBox::into_inner(mr);
        T::dereg_mr(dev, data);
        0
    }

    /// `ib_alloc_mr`: only `IB_MR_TYPE_MEM_REG` (fast registration) is offered.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn alloc_mr(
        ibpd: *mut bindings::ib_pd,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
    ) -> *mut bindings::ib_mr {
        if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
            return err_ptr(EINVAL);
        }
        // SAFETY: A live PD of ours.
        let pd = unsafe { Pd::<T>::from_raw(ibpd) };
        let created = match T::alloc_mr(pd, max_num_sg, KernelMem::new()) {
            Ok(c) => c,
            Err(e) => return err_ptr(e),
        };
        // The driver accepted `max_num_sg`; reserve the scratch page list now so that mapping,
        // which consumers may do in atomic context, never allocates.
        match KVec::with_capacity(max_num_sg as usize, GFP_KERNEL) {
            Ok(scratch) => Self::finish_mr_with(ibpd, created, 0, 0, scratch),
            Err(e) => {
                T::dereg_mr(pd.device(), created.data);
                err_ptr(e.into())
            }
        }
    }

    /// `ib_map_mr_sg`: the core's `ib_sg_to_pages` splits the scatterlist into pages of the
    /// consumer's page size, checks that they form one contiguous IOVA range and sets the MR's
    /// `iova` and `length`; the driver then takes the page list.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn map_mr_sg(
        ibmr: *mut bindings::ib_mr,
        sg: *mut bindings::scatterlist,
        sg_nents: ffi::c_int,
        sg_offset: *mut ffi::c_uint,
    ) -> ffi::c_int {
        // CAST: `ib` is the first field of the `#[repr(C)]` `Mr<T>`.
        // SAFETY: One of our MRs (from `alloc_mr`), owned by the consumer for the call.
        let mr = unsafe { &*ibmr.cast::<Mr<T>>() };
        // SAFETY: Only `map_mr_sg` and `set_page` (called by `ib_sg_to_pages` below, on this
        // thread) touch the scratch list, and the consumer does not map one MR concurrently.
        unsafe { (*mr.page_scratch.get()).clear() };
        // SAFETY: The scatterlist, its length and offset pointer come from the consumer as
        // `ib_map_mr_sg` received them; `set_page` matches the callback's contract.
        let mapped = unsafe {
            bindings::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(Self::set_page))
        };
        if mapped <= 0 {
            return mapped;
        }
        // SAFETY: `ib_sg_to_pages` wrote `iova` and `length`; `page_size` was set by
        // `ib_map_mr_sg` before calling us.
        let (iova, length, page_size) =
            unsafe { ((*ibmr).iova, (*ibmr).length, (*ibmr).page_size) };
        // SAFETY: As above: no other user of the scratch list now.
        let pages = unsafe { &*mr.page_scratch.get() };
        let list = FastRegPages {
            pages,
            iova,
            length,
            page_shift: page_size.trailing_zeros(),
        };
        match T::map_mr_sg(mr, &list) {
            Ok(()) => mapped,
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_sg_to_pages` callback: appends one page; refuses past the MR's `max_num_sg`, which
    /// makes `ib_sg_to_pages` stop and report how many scatterlist entries fit.
    ///
    /// # Safety
    ///
    /// Only `ib_sg_to_pages` calls this, from `map_mr_sg`, with that call's MR: the `ib` field of a
    /// live `Mr<T>`.
    unsafe extern "C" fn set_page(ibmr: *mut bindings::ib_mr, addr: u64) -> ffi::c_int {
        // CAST: `ib` is the first field of the `#[repr(C)]` `Mr<T>`.
        // SAFETY: Called by `ib_sg_to_pages` from `map_mr_sg` with that call's MR.
        let mr = unsafe { &*ibmr.cast::<Mr<T>>() };
        // SAFETY: See `map_mr_sg`: the scratch list has a single user during the mapping.
        let pages = unsafe { &mut *mr.page_scratch.get() };
        if pages.len() >= pages.capacity() {
            return ENOMEM.to_errno();
        }
        // Within the capacity reserved at allocation: never allocates.
        match pages.push(addr, GFP_ATOMIC) {
            Ok(()) => 0,
            Err(_) => ENOMEM.to_errno(),
        }
    }

    /// `ib_device_ops.alloc_mw`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn alloc_mw(
        ibmw: *mut bindings::ib_mw,
        udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        kernel::error::from_result(|| {
            // SAFETY: A fresh MW of our device with `pd` and `type_` set; udata for the command.
            let (pd, mw_type, udata) = unsafe {
                (
                    Pd::<T>::from_raw((*ibmw).pd),
                    (*ibmw).type_,
                    UData::from_raw(udata),
                )
            };
            let type2 = mw_type == bindings::ib_mw_type_IB_MW_TYPE_2;
            let (data, rkey) = T::alloc_mw(pd, type2, udata.as_ref())?;
            // SAFETY: Fresh MW of `size_ib_mw` bytes.
            unsafe {
                (*ibmw).rkey = rkey;
                Mw::<T>::init_data(ibmw, data);
            }
            Ok(0)
        })
    }

    /// `ib_device_ops.dealloc_mw`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn dealloc_mw(ibmw: *mut bindings::ib_mw) -> ffi::c_int {
        // SAFETY: The core deallocates only MWs whose allocation succeeded.
        let data = unsafe { Mw::<T>::take_data(ibmw) };
        // SAFETY: The MW's device is ours and alive.
        let dev = unsafe { Device::<T>::from_raw((*ibmw).device) };
        T::dealloc_mw(dev, data);
        0
    }
}
