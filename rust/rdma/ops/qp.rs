// SPDX-License-Identifier: GPL-2.0

//! The trampolines of `qp.rs`'s ops (see [`Adapter`]).

use super::Adapter;
use crate::rdma::driver::Driver;
use crate::rdma::qp::*;
use crate::rdma::revocable::RcuRevocable;
use crate::rdma::{bindings, cq::Cq, device::Device, object::UData, pd::Pd, srq::Srq};
use core::ptr::NonNull;
use kernel::{error::from_result, ffi, prelude::*, sync::Arc};

impl<T: Driver> Adapter<T> {
    /// `ib_device_ops.create_qp`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn create_qp(
        ibqp: *mut bindings::ib_qp,
        init: *mut bindings::ib_qp_init_attr,
        udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The core passes a fresh QP of our device (its `pd` and `device` set), a
            // valid init attribute whose CQs/SRQ are live objects of our device, and a udata that
            // lives for the command.
            let (dev, init_ref, udata) = unsafe {
                (
                    Device::<T>::from_raw((*ibqp).device),
                    &mut *init,
                    UData::from_raw(udata),
                )
            };
            // SAFETY: As above: every object named is live for the call, of our driver.
            let mut qinit = unsafe {
                QpInit::<T> {
                    qp_type: init_ref.qp_type,
                    cap: QpCap::from_raw(&init_ref.cap),
                    sq_sig_all: init_ref.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
                    create_flags: init_ref.create_flags,
                    port_num: init_ref.port_num,
                    pd: Pd::<T>::from_raw((*ibqp).pd),
                    send_cq: cq_ref::<T>(init_ref.send_cq),
                    recv_cq: cq_ref::<T>(init_ref.recv_cq),
                    srq: (!init_ref.srq.is_null()).then(|| Srq::<T>::from_raw(init_ref.srq)),
                    unsupported_parts: !init_ref.xrcd.is_null()
                        || !init_ref.rwq_ind_tbl.is_null()
                        || init_ref.source_qpn != 0,
                }
            };
            // INVARIANT: The QP stays live until `destroy_qp`, which revokes the notifier first.
            let raw = RawQp(NonNull::new(ibqp).ok_or(EINVAL)?);
            let notifier = Arc::new(
                QpNotifier {
                    qp: RcuRevocable::new(raw),
                },
                GFP_KERNEL,
            )?;
            let created = T::create_qp(dev, &mut qinit, notifier.clone(), udata.as_ref())?;
            qinit.cap.write_to(&mut init_ref.cap);
            // SAFETY: Fresh QP of `size_ib_qp` bytes; the core reads `qp_num` after we return.
            unsafe {
                (*ibqp).qp_num = created.qp_num;
                Qp::<T>::init_data(
                    ibqp,
                    QpSlot {
                        data: created.data,
                        notifier,
                    },
                );
            }
            Ok(0)
        })
    }

    /// `ib_device_ops.modify_qp`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn modify_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        mask: ffi::c_int,
        udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        from_result(|| {
            let mask = mask as u32;
            // SAFETY: A live QP of ours; valid attributes whose source GID attribute, if any,
            // the core holds for the call; the udata lives for the command.
            let (qp, attr, udata) = unsafe {
                (
                    Qp::<T>::from_raw(ibqp),
                    QpAttr::from_raw(&*attr, mask)?,
                    UData::from_raw(udata),
                )
            };
            T::modify_qp(qp, &attr, mask, udata.as_ref())?;
            Ok(0)
        })
    }

    /// `ib_device_ops.query_qp`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn query_qp(
        ibqp: *mut bindings::ib_qp,
        attr: *mut bindings::ib_qp_attr,
        _mask: ffi::c_int,
        init: *mut bindings::ib_qp_init_attr,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: A live QP of ours; the core passes structures to fill.
            let (qp, attr, init) = unsafe { (Qp::<T>::from_raw(ibqp), &mut *attr, &mut *init) };
            let (a, sq_sig_all) = T::query_qp(qp)?;
            a.write_to(attr);
            // SAFETY: The QP's fields below are set by the core at creation and never change.
            unsafe {
                init.event_handler = (*ibqp).event_handler;
                init.qp_context = (*ibqp).qp_context;
                init.send_cq = (*ibqp).send_cq;
                init.recv_cq = (*ibqp).recv_cq;
                init.srq = (*ibqp).srq;
                init.qp_type = (*ibqp).qp_type;
            }
            a.cap.write_to(&mut init.cap);
            init.sq_sig_type = if sq_sig_all {
                bindings::ib_sig_type_IB_SIGNAL_ALL_WR
            } else {
                bindings::ib_sig_type_IB_SIGNAL_REQ_WR
            };
            init.port_num = a.port_num;
            Ok(0)
        })
    }

    /// `ib_device_ops.attach_mcast`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn attach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> ffi::c_int {
        // SAFETY: A live QP of ours; `gid` points to the command's GID for the call.
        let (qp, mgid) = unsafe { (Qp::<T>::from_raw(ibqp), (*gid).raw) };
        match T::attach_mcast(qp, &mgid) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_device_ops.detach_mcast`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn detach_mcast(
        ibqp: *mut bindings::ib_qp,
        gid: *mut bindings::ib_gid,
        _lid: u16,
    ) -> ffi::c_int {
        // SAFETY: As in `attach_mcast`.
        let (qp, mgid) = unsafe { (Qp::<T>::from_raw(ibqp), (*gid).raw) };
        match T::detach_mcast(qp, &mgid) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// `ib_device_ops.destroy_qp`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn destroy_qp(
        ibqp: *mut bindings::ib_qp,
        _udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        // SAFETY: The core destroys only QPs whose creation succeeded.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        if let Err(e) = T::destroy_qp(qp) {
            return e.to_errno();
        }
        // Waits for an RCU grace period: no event handler runs past this point.
        qp.notifier().qp.revoke();
        // SAFETY: Destroyed; the core frees the memory after we return.
        drop(unsafe { Qp::<T>::take_data(ibqp) });
        0
    }

    /// `ib_device_ops.post_send`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn post_send(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> ffi::c_int {
        // SAFETY: A live QP of ours.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        // SAFETY: The QP has a user object exactly when user space created it.
        let is_user = unsafe { !(*ibqp).uobject.is_null() };
        if is_user {
            // The core's copies of the command's WRs are not passed (`Driver::post_send_user`).
            return match T::post_send_user(qp) {
                Ok(()) => 0,
                Err(e) => e.to_errno(),
            };
        }
        // SAFETY: Kernel consumers pass a valid list of work requests for a live QP of ours.
        unsafe { Self::post_send_kernel(ibqp, wr, bad_wr) }
    }
}

/// # Safety
///
/// `cq` is NULL or a live CQ of driver `T` for `'a`.
unsafe fn cq_ref<'a, T: Driver>(cq: *mut bindings::ib_cq) -> Option<&'a Cq<T>> {
    // SAFETY: By the function's safety requirements.
    (!cq.is_null()).then(|| unsafe { Cq::<T>::from_raw(cq) })
}
