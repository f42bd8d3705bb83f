// SPDX-License-Identifier: GPL-2.0

//! The trampolines of `cq.rs`'s ops (see [`Adapter`]).

use super::Adapter;
use crate::rdma::cq::*;
use crate::rdma::driver::Driver;
use crate::rdma::revocable::RcuRevocable;
use crate::rdma::{bindings, device::Device, object::UData};
use core::ptr::NonNull;
use kernel::{error::from_result, ffi, prelude::*, sync::Arc};

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.create_cq`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn create_cq(
        ibcq: *mut bindings::ib_cq,
        attr: *const bindings::ib_cq_init_attr,
        attrs: *mut bindings::uverbs_attr_bundle,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The core passes a fresh CQ of our device and valid attributes.
            let (dev, init) = unsafe {
                (
                    Device::<T>::from_raw((*ibcq).device),
                    CqInit {
                        cqe: (*attr).cqe,
                        comp_vector: (*attr).comp_vector,
                        flags: (*attr).flags,
                    },
                )
            };
            // SAFETY: A bundle, when given, lives for the command; its udata with it.
            let udata = unsafe { UData::from_raw(bindings::roxe_helper_attrs_to_udata(attrs)) };
            // INVARIANT: The CQ stays live until `destroy_cq`, which revokes the notifier first.
            let raw = RawCq(NonNull::new(ibcq).ok_or(EINVAL)?);
            let notifier = Arc::new(
                CqNotifier {
                    cq: RcuRevocable::new(raw),
                },
                GFP_KERNEL,
            )?;
            let (data, cqe) = T::create_cq(dev, &init, notifier.clone(), udata.as_ref())?;
            // SAFETY: Fresh CQ of `size_ib_cq` bytes; the core reads `cqe` as the real capacity.
            unsafe {
                (*ibcq).cqe = i32::try_from(cqe).unwrap_or(i32::MAX);
                Cq::<T>::init_data(ibcq, CqSlot { data, notifier });
            }
            Ok(0)
        })
    }

    /// `ib_device_ops.destroy_cq`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn destroy_cq(
        ibcq: *mut bindings::ib_cq,
        _udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        // SAFETY: The core destroys only CQs whose creation succeeded.
        let cq = unsafe { Cq::<T>::from_raw(ibcq) };
        if let Err(e) = T::destroy_cq(cq) {
            return e.to_errno();
        }
        // Waits for an RCU grace period: no completion handler runs past this point.
        cq.notifier().cq.revoke();
        // SAFETY: Destroyed; the core frees the memory after we return.
        drop(unsafe { Cq::<T>::take_data(ibcq) });
        0
    }

    /// `ib_device_ops.resize_cq`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn resize_cq(
        ibcq: *mut bindings::ib_cq,
        cqe: ffi::c_uint,
        udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: A live CQ of ours; the udata, if any, lives for the command.
            let (cq, udata) = unsafe { (Cq::<T>::from_raw(ibcq), UData::from_raw(udata)) };
            let cqe = T::resize_cq(cq, cqe, udata.as_ref())?;
            // SAFETY: The core serialises resize with the CQ's other commands.
            unsafe { (*ibcq).cqe = i32::try_from(cqe).unwrap_or(i32::MAX) };
            Ok(0)
        })
    }

    /// `ib_device_ops.req_notify_cq`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn req_notify_cq(
        ibcq: *mut bindings::ib_cq,
        flags: bindings::ib_cq_notify_flags,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: A live CQ of ours.
            let cq = unsafe { Cq::<T>::from_raw(ibcq) };
            Ok(i32::from(T::req_notify_cq(cq, NotifyFlags(flags))?))
        })
    }
}
