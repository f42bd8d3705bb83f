// SPDX-License-Identifier: GPL-2.0

//! The trampolines of `ah.rs`'s ops (see [`Adapter`]).

use super::Adapter;
use crate::rdma::ah::*;
use crate::rdma::driver::Driver;
use crate::rdma::{bindings, device::Device, object::UData, pd::Pd};
use kernel::{error::from_result, ffi};

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.create_ah`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn create_ah(
        ibah: *mut bindings::ib_ah,
        init: *mut bindings::rdma_ah_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The core passes a fresh AH of our device, its PD set (`_rdma_create_ah`
            // sets `ah->pd` before calling the driver, and the PD outlives the AH), and a valid
            // init attribute whose address vector and source GID attribute live for the call;
            // udata lives for it too.
            let (dev, pd, av, flags, udata) = unsafe {
                (
                    Device::<T>::from_raw((*ibah).device),
                    Pd::<T>::from_raw((*ibah).pd),
                    AddressVector::from_raw((*init).ah_attr),
                    (*init).flags,
                    UData::from_raw(udata),
                )
            };
            let av = av?;
            let ctx = if udata.is_some() {
                AhContext::User
            } else if flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0 {
                AhContext::KernelSleepable
            } else {
                AhContext::KernelAtomic
            };
            let data = T::create_ah(dev, pd, &av, ctx, udata.as_ref())?;
            // SAFETY: Fresh AH of `size_ib_ah` bytes.
            unsafe { Ah::<T>::init_data(ibah, data) };
            Ok(0)
        })
    }

    /// `ib_device_ops.destroy_ah`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn destroy_ah(
        ibah: *mut bindings::ib_ah,
        _flags: u32,
    ) -> ffi::c_int {
        // SAFETY: The core destroys only AHs whose creation succeeded; they are not used after.
        let data = unsafe { Ah::<T>::take_data(ibah) };
        // SAFETY: The AH's device is ours and alive.
        let dev = unsafe { Device::<T>::from_raw((*ibah).device) };
        T::destroy_ah(dev, data);
        0
    }

    /// `ib_device_ops.query_ah`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn query_ah(
        ibah: *mut bindings::ib_ah,
        attr: *mut bindings::rdma_ah_attr,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: A live AH of ours; the core passes a valid attribute to fill.
            let (ah, attr) = unsafe { (Ah::<T>::from_raw(ibah), &mut *attr) };
            T::query_ah(ah)?.write_to(attr);
            Ok(0)
        })
    }
}
