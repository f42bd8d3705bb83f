// SPDX-License-Identifier: GPL-2.0

//! The trampolines of `mr.rs`'s ops (see [`Adapter`]).

use super::Adapter;
use crate::rdma::driver::Driver;
use crate::rdma::mr::*;
use crate::rdma::{bindings, device::Device, kverbs::FastRegGrant, object::UData, pd::Pd};
use core::cell::UnsafeCell;
use kernel::{ffi, prelude::*, types::Opaque};

impl<T: Driver> Adapter<T> {
    pub(crate) fn finish_mr(
        pd: *mut bindings::ib_pd,
        created: MrCreated<T::Mr>,
        iova: u64,
        length: u64,
    ) -> *mut bindings::ib_mr {
        Self::finish_mr_with(pd, created, (iova, length), KVec::new(), 0)
    }

    fn finish_mr_with(
        pd: *mut bindings::ib_pd,
        created: MrCreated<T::Mr>,
        (iova, length): (u64, u64),
        page_scratch: KVec<u64>,
        fast_reg_id: u64,
    ) -> *mut bindings::ib_mr {
        // The box first: without it the driver's MR (its pinned pages, its key) goes back
        // through `dereg_mr` rather than being dropped with no one to release it.
        let slot = match KBox::<Mr<T>>::new_uninit(GFP_KERNEL) {
            Ok(slot) => slot,
            Err(e) => {
                // SAFETY: `pd` is the live PD of the call, on a device of `T`.
                let dev = unsafe { Device::<T>::from_raw((*pd).device) };
                T::dereg_mr(dev, created.data);
                return err_ptr(e.into());
            }
        };
        let mr = KBox::into_raw(KBox::write(
            slot,
            Mr::<T> {
                ib: Opaque::zeroed(),
                data: created.data,
                page_scratch: UnsafeCell::new(page_scratch),
                fast_reg_id,
            },
        ));
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
            return err_ptr(crate::compat::errno::eopnotsupp());
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
            fast_reg_id: _,
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
        let grant = FastRegGrant::new();
        let fast_reg_id = grant.id();
        let created = match T::alloc_mr(pd, max_num_sg, grant) {
            Ok(c) => c,
            Err(e) => return err_ptr(e),
        };
        // The driver accepted `max_num_sg`; reserve the scratch page list now so that mapping,
        // which consumers may do in atomic context, never allocates.
        match KVec::with_capacity(max_num_sg as usize, GFP_KERNEL) {
            Ok(scratch) => Self::finish_mr_with(ibpd, created, (0, 0), scratch, fast_reg_id),
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
            owner: mr.fast_reg_id,
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

/// `ERR_PTR(e)`: an error returned through a pointer-returning op.
fn err_ptr<P>(e: Error) -> *mut P {
    core::ptr::without_provenance_mut(e.to_errno() as isize as usize)
}
