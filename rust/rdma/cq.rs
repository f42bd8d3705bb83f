// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`).
//!
//! The core allocates the CQ ([`Cq<T>`], an [`Object`] with the driver's data after the C
//! object). Completions reach the CQ's consumer through a [`CqNotifier`]: the driver keeps it for
//! its data path, and it stops working (revoked, after an RCU grace period) before the core frees
//! the C object, so a late completion can never call into a destroyed CQ.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    bindings,
    device::{Adapter, Device, Driver},
    object::{Object, UData},
};
use core::ptr::NonNull;
use kernel::{error::from_result, ffi, prelude::*, revocable::Revocable, sync::Arc};

/// A completion queue of driver `T`.
pub type Cq<T> = Object<bindings::ib_cq, CqSlot<T>, T>;

/// What the core's CQ allocation holds after the C object.
pub struct CqSlot<T: Driver> {
    data: T::Cq,
    notifier: Arc<CqNotifier>,
}

impl<T: Driver> Cq<T> {
    /// The driver's data of the CQ.
    pub fn cq_data(&self) -> &T::Cq {
        &self.data().data
    }

    /// The notifier of this CQ's consumer.
    pub fn notifier(&self) -> &Arc<CqNotifier> {
        &self.data().notifier
    }
}

/// Creation attributes of a CQ (`struct ib_cq_init_attr`).
#[derive(Clone, Copy, Debug)]
pub struct CqInit {
    /// Minimum number of entries requested.
    pub cqe: u32,
    /// Completion vector (interrupt) the consumer chose.
    pub comp_vector: u32,
    /// Creation flags (`IB_UVERBS_CQ_FLAGS_*`); a driver rejects those it lacks.
    pub flags: u32,
}

/// Which completions arm the next notification (`enum ib_cq_notify_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotifyFlags(u32);

impl NotifyFlags {
    /// Notify on the next solicited completion (or error completion).
    pub const SOLICITED: u32 = bindings::ib_cq_notify_flags_IB_CQ_SOLICITED;
    /// Notify on the next completion.
    pub const NEXT_COMP: u32 = bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP;
    /// Mask of the two above.
    pub const SOLICITED_MASK: u32 = bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK;
    /// Report whether completions arrived since the last poll (the op returns `true`).
    pub const REPORT_MISSED_EVENTS: u32 = bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS;

    /// The raw flags.
    pub fn bits(self) -> u32 {
        self.0
    }
}

/// A raw CQ pointer usable while the notifier is not revoked.
///
/// # Invariants
///
/// Points to a live `ib_cq` until the [`Revocable`] holding it is revoked.
struct RawCq(NonNull<bindings::ib_cq>);

// SAFETY: The core's CQ handlers may be called from any context and CPU.
unsafe impl Send for RawCq {}
// SAFETY: See above; the pointer itself is never mutated.
unsafe impl Sync for RawCq {}

/// Delivers a CQ's completion notifications and asynchronous events to its consumer.
///
/// Cloned into the driver's data path freely; revoked by the CQ's destruction, after which its
/// methods do nothing.
#[pin_data]
pub struct CqNotifier {
    #[pin]
    cq: Revocable<RawCq>,
}

impl CqNotifier {
    /// Calls the consumer's completion handler (the CQ was armed and a completion arrived).
    /// Returns `false` if the CQ is already destroyed.
    ///
    /// Context: any; the uverbs handler only queues an event for the process.
    pub fn completion(&self) -> bool {
        self.cq
            .try_access_with(|cq| {
                let raw = cq.0.as_ptr();
                // SAFETY: Not revoked, so the CQ is live (invariant of `RawCq`); the handler and
                // context are set by the core before the CQ is used and never change.
                unsafe {
                    if let Some(handler) = (*raw).comp_handler {
                        handler(raw, (*raw).cq_context);
                    }
                }
            })
            .is_some()
    }

    /// Reports a CQ error (`IB_EVENT_CQ_ERR`, e.g. an overrun) to the consumer.
    pub fn error_event(&self) {
        self.cq.try_access_with(|cq| {
            let raw = cq.0.as_ptr();
            // SAFETY: As in `completion`: live while not revoked.
            unsafe {
                let mut ev = bindings::ib_event {
                    device: (*raw).device,
                    event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                    ..Default::default()
                };
                ev.element.cq = raw;
                if let Some(handler) = (*raw).event_handler {
                    handler(&mut ev, (*raw).cq_context);
                }
            }
        });
    }
}

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
            let notifier = Arc::pin_init(
                pin_init!(CqNotifier { cq <- Revocable::new(raw) }),
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
