// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`).
//!
//! The core allocates the CQ ([`Cq<T>`], an [`Object`] with the driver's data after the C
//! object). Completions reach the CQ's consumer through a [`CqNotifier`]: the driver keeps it for
//! its data path, and it stops working (revoked, after an RCU grace period) before the core frees
//! the C object, so a late completion can never call into a destroyed CQ.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::revocable::RcuRevocable;
use super::{bindings, device::DriverTypes, object::Object};
use core::ptr::NonNull;
use kernel::sync::Arc;

/// A completion queue of driver `T`.
pub type Cq<T> = Object<bindings::ib_cq, CqSlot<T>, T>;

/// What the core's CQ allocation holds after the C object.
pub struct CqSlot<T: DriverTypes> {
    pub(in crate::rdma) data: T::Cq,
    pub(in crate::rdma) notifier: Arc<CqNotifier>,
}

impl<T: DriverTypes> Cq<T> {
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
pub struct NotifyFlags(pub(in crate::rdma) u32);

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
/// Points to a live `ib_cq` until the [`RcuRevocable`] holding it is revoked.
#[derive(Clone, Copy)]
pub(in crate::rdma) struct RawCq(pub(in crate::rdma) NonNull<bindings::ib_cq>);

// SAFETY: The core's CQ handlers may be called from any context and CPU.
unsafe impl Send for RawCq {}
// SAFETY: See above; the pointer itself is never mutated.
unsafe impl Sync for RawCq {}

/// Delivers a CQ's completion notifications and asynchronous events to its consumer.
///
/// Cloned into the driver's data path freely; revoked by the CQ's destruction, after which its
/// methods do nothing.
pub struct CqNotifier {
    pub(in crate::rdma) cq: RcuRevocable<RawCq>,
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
