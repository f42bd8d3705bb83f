// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues (`struct ib_srq`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::revocable::RcuRevocable;
use super::{bindings, device::DriverTypes, object::Object, pd::Pd};
use core::ptr::NonNull;
use kernel::sync::Arc;

/// A shared receive queue of driver `T`.
pub type Srq<T> = Object<bindings::ib_srq, SrqSlot<T>, T>;

/// What the core's SRQ allocation holds after the C object.
pub struct SrqSlot<T: DriverTypes> {
    pub(in crate::rdma) data: T::Srq,
    pub(in crate::rdma) notifier: Arc<SrqNotifier>,
}

impl<T: DriverTypes> Srq<T> {
    /// The driver's data of the SRQ.
    pub fn srq_data(&self) -> &T::Srq {
        &self.data().data
    }

    /// The notifier of this SRQ's consumer.
    pub fn notifier(&self) -> &Arc<SrqNotifier> {
        &self.data().notifier
    }
}

/// SRQ sizes and limit (`struct ib_srq_attr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrqAttr {
    /// Queue depth.
    pub max_wr: u32,
    /// Scatter/gather entries per receive WR.
    pub max_sge: u32,
    /// Raise `IB_EVENT_SRQ_LIMIT_REACHED` when fewer WRs than this remain (0: disarmed).
    pub srq_limit: u32,
}

/// `modify_srq` mask bits (`enum ib_srq_attr_mask`).
pub mod srq_mask {
    /// Resize the queue.
    pub const MAX_WR: u32 = super::bindings::ib_srq_attr_mask_IB_SRQ_MAX_WR;
    /// Arm the limit event.
    pub const LIMIT: u32 = super::bindings::ib_srq_attr_mask_IB_SRQ_LIMIT;
}

/// Creation attributes of an SRQ.
pub struct SrqInit<'a, T: DriverTypes> {
    /// Requested sizes; the driver writes back what it allocated.
    pub attr: SrqAttr,
    /// Only `IB_SRQT_BASIC` is a plain SRQ; XRC and tag-matching SRQs are refused.
    pub basic: bool,
    /// The SRQ's protection domain.
    pub pd: &'a Pd<T>,
}

/// A raw SRQ pointer usable while the notifier is not revoked.
///
/// # Invariants
///
/// Points to a live `ib_srq` until the [`RcuRevocable`] holding it is revoked.
#[derive(Clone, Copy)]
pub(in crate::rdma) struct RawSrq(pub(in crate::rdma) NonNull<bindings::ib_srq>);

// SAFETY: Events may be raised from any context and CPU.
unsafe impl Send for RawSrq {}
// SAFETY: The pointer itself is never mutated.
unsafe impl Sync for RawSrq {}

/// Raises an SRQ's limit event to its consumer; inert once the SRQ is destroyed.
pub struct SrqNotifier {
    pub(in crate::rdma) srq: RcuRevocable<RawSrq>,
}

impl SrqNotifier {
    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED` (IBA 11.5.2.4: the limit disarms itself when it fires).
    pub fn limit_reached(&self) {
        self.srq.try_access_with(|srq| {
            let raw = srq.0.as_ptr();
            // SAFETY: Not revoked, so the SRQ is live; handler and context are set by the core
            // before the SRQ is used.
            unsafe {
                let mut ev = bindings::ib_event {
                    device: (*raw).device,
                    event: bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
                    ..Default::default()
                };
                ev.element.srq = raw;
                if let Some(handler) = (*raw).event_handler {
                    handler(&mut ev, (*raw).srq_context);
                }
            }
        });
    }
}
