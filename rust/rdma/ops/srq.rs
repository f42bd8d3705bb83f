// SPDX-License-Identifier: GPL-2.0

//! The trampolines of `srq.rs`'s ops (see [`Adapter`]).

use super::Adapter;
use crate::rdma::driver::Driver;
use crate::rdma::revocable::RcuRevocable;
use crate::rdma::srq::*;
use crate::rdma::{bindings, device::Device, object::UData, pd::Pd};
use core::ptr::NonNull;
use kernel::{error::from_result, ffi, prelude::*, sync::Arc};

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.create_srq`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn create_srq(
        ibsrq: *mut bindings::ib_srq,
        init: *mut bindings::ib_srq_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The core passes a fresh SRQ of our device with `pd` set, valid attributes,
            // and a udata that lives for the command.
            let (dev, init_ref, udata) = unsafe {
                (
                    Device::<T>::from_raw((*ibsrq).device),
                    &mut *init,
                    UData::from_raw(udata),
                )
            };
            let mut sinit = SrqInit::<T> {
                attr: SrqAttr {
                    max_wr: init_ref.attr.max_wr,
                    max_sge: init_ref.attr.max_sge,
                    srq_limit: init_ref.attr.srq_limit,
                },
                basic: init_ref.srq_type == bindings::ib_srq_type_IB_SRQT_BASIC,
                // SAFETY: The core set `pd` to a live PD of our device.
                pd: unsafe { Pd::<T>::from_raw((*ibsrq).pd) },
            };
            // INVARIANT: The SRQ stays live until `destroy_srq`, which revokes the notifier first.
            let raw = RawSrq(NonNull::new(ibsrq).ok_or(EINVAL)?);
            let notifier = Arc::new(
                SrqNotifier {
                    srq: RcuRevocable::new(raw),
                },
                GFP_KERNEL,
            )?;
            let data = T::create_srq(dev, &mut sinit, notifier.clone(), udata.as_ref())?;
            init_ref.attr.max_wr = sinit.attr.max_wr;
            init_ref.attr.max_sge = sinit.attr.max_sge;
            // SAFETY: Fresh SRQ of `size_ib_srq` bytes.
            unsafe { Srq::<T>::init_data(ibsrq, SrqSlot { data, notifier }) };
            Ok(0)
        })
    }

    /// `ib_device_ops.modify_srq`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn modify_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: A live SRQ of ours, valid attributes, udata alive for the command.
            let (srq, a, udata) =
                unsafe { (Srq::<T>::from_raw(ibsrq), &*attr, UData::from_raw(udata)) };
            let attr = SrqAttr {
                max_wr: a.max_wr,
                max_sge: a.max_sge,
                srq_limit: a.srq_limit,
            };
            T::modify_srq(srq, &attr, mask, udata.as_ref())?;
            Ok(0)
        })
    }

    /// `ib_device_ops.query_srq`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn query_srq(
        ibsrq: *mut bindings::ib_srq,
        attr: *mut bindings::ib_srq_attr,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: A live SRQ of ours; the core passes a structure to fill.
            let (srq, a) = unsafe { (Srq::<T>::from_raw(ibsrq), &mut *attr) };
            let q = T::query_srq(srq)?;
            a.max_wr = q.max_wr;
            a.max_sge = q.max_sge;
            a.srq_limit = q.srq_limit;
            Ok(0)
        })
    }

    /// `ib_device_ops.destroy_srq`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn destroy_srq(
        ibsrq: *mut bindings::ib_srq,
        _udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        // SAFETY: The core destroys only SRQs whose creation succeeded (and no QP uses).
        let srq = unsafe { Srq::<T>::from_raw(ibsrq) };
        if let Err(e) = T::destroy_srq(srq) {
            return e.to_errno();
        }
        srq.notifier().srq.revoke();
        // SAFETY: Destroyed; the core frees the memory after we return.
        drop(unsafe { Srq::<T>::take_data(ibsrq) });
        0
    }
}
