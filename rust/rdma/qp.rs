// SPDX-License-Identifier: GPL-2.0

//! Queue pairs (`struct ib_qp`): creation, modification (the IB state machine), query,
//! destruction, and the asynchronous events a QP raises.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::revocable::RcuRevocable;
use super::{
    ah::AddressVector, bindings, cq::Cq, device::DriverTypes, object::Object, pd::Pd, srq::Srq,
};
use core::ptr::NonNull;
use kernel::{prelude::*, sync::Arc};

/// A queue pair of driver `T`.
pub type Qp<T> = Object<bindings::ib_qp, QpSlot<T>, T>;

/// What the core's QP allocation holds after the C object.
pub struct QpSlot<T: DriverTypes> {
    pub(in crate::rdma) data: T::Qp,
    pub(in crate::rdma) notifier: Arc<QpNotifier>,
}

impl<T: DriverTypes> Qp<T> {
    /// The driver's data of the QP.
    pub fn qp_data(&self) -> &T::Qp {
        &self.data().data
    }

    /// The notifier of this QP's consumer.
    pub fn notifier(&self) -> &Arc<QpNotifier> {
        &self.data().notifier
    }

    /// The QP number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: Live QP (type invariant of `Object`); set at creation, never changed.
        unsafe { (*self.as_raw()).qp_num }
    }
}

/// Work queue sizes of a QP (`struct ib_qp_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpCap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send WR.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive WR.
    pub max_recv_sge: u32,
    /// Bytes of inline data per send WR.
    pub max_inline_data: u32,
}

impl QpCap {
    pub(in crate::rdma) fn from_raw(c: &bindings::ib_qp_cap) -> QpCap {
        QpCap {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    pub(in crate::rdma) fn write_to(&self, c: &mut bindings::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// Creation attributes of a QP (`struct ib_qp_init_attr`), with the objects it refers to.
pub struct QpInit<'a, T: DriverTypes> {
    /// `enum ib_qp_type`, raw: the driver refuses types it lacks.
    pub qp_type: u32,
    /// Requested sizes; the driver writes back what it allocated.
    pub cap: QpCap,
    /// Every send WR generates a completion (`IB_SIGNAL_ALL_WR`).
    pub sq_sig_all: bool,
    /// `IB_QP_CREATE_*` flags.
    pub create_flags: u32,
    /// Port, for special QPs.
    pub port_num: u32,
    /// The QP's protection domain.
    pub pd: &'a Pd<T>,
    /// Completion queue of the send queue.
    pub send_cq: Option<&'a Cq<T>>,
    /// Completion queue of the receive queue.
    pub recv_cq: Option<&'a Cq<T>>,
    /// Shared receive queue, if the QP takes receives from one.
    pub srq: Option<&'a Srq<T>>,
    /// The QP asks for an XRC domain, an RSS indirection table or a source QPN: none supported.
    pub unsupported_parts: bool,
}

/// What a driver's `create_qp` returns.
pub struct QpCreated<D> {
    /// The driver's data.
    pub data: D,
    /// The QP number the driver assigned.
    pub qp_num: u32,
}

/// `enum ib_qp_attr_mask` bits as a plain mask.
pub type QpAttrMask = u32;

/// Attributes of `modify_qp` and `query_qp` (`struct ib_qp_attr`), the fields a RoCE HCA uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpAttr {
    /// `enum ib_qp_state`.
    pub qp_state: u32,
    /// The state the consumer believes the QP is in.
    pub cur_qp_state: u32,
    /// `enum ib_mtu`.
    pub path_mtu: u32,
    /// `enum ib_mig_state`.
    pub path_mig_state: u32,
    /// Q_Key for UD.
    pub qkey: u32,
    /// Expected PSN of the receive side.
    pub rq_psn: u32,
    /// Next PSN of the send side.
    pub sq_psn: u32,
    /// Remote QP number (connected QPs).
    pub dest_qp_num: u32,
    /// `IB_ACCESS_REMOTE_*` rights remote peers have on this QP.
    pub qp_access_flags: u32,
    /// Queue sizes.
    pub cap: QpCap,
    /// Primary path, present when the mask has `IB_QP_AV` (modify) or it is set (query).
    pub av: Option<AddressVector>,
    /// P_Key index.
    pub pkey_index: u16,
    /// Raise `IB_EVENT_SQ_DRAINED` when SQD is reached.
    pub en_sqd_async_notify: bool,
    /// Query only: the SQ is still draining in SQD.
    pub sq_draining: bool,
    /// Outstanding RDMA READs/atomics this QP initiates.
    pub max_rd_atomic: u8,
    /// Outstanding RDMA READs/atomics this QP serves.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code (IBA table 45).
    pub min_rnr_timer: u8,
    /// Port number.
    pub port_num: u32,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite).
    pub rnr_retry: u8,
}

impl QpAttr {
    /// # Safety
    ///
    /// `a` is a valid attribute structure; if `mask` has `IB_QP_AV`, its address vector's source
    /// GID attribute is alive for the call.
    pub(in crate::rdma) unsafe fn from_raw(
        a: &bindings::ib_qp_attr,
        mask: QpAttrMask,
    ) -> Result<QpAttr> {
        let av = if mask & bindings::ib_qp_attr_mask_IB_QP_AV != 0 {
            // SAFETY: By the function's safety requirements.
            Some(unsafe { AddressVector::from_raw(&a.ah_attr) }?)
        } else {
            None
        };
        Ok(QpAttr {
            qp_state: a.qp_state,
            cur_qp_state: a.cur_qp_state,
            path_mtu: a.path_mtu,
            path_mig_state: a.path_mig_state,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qp_num,
            qp_access_flags: a.qp_access_flags as u32,
            cap: QpCap::from_raw(&a.cap),
            av,
            pkey_index: a.pkey_index,
            en_sqd_async_notify: a.en_sqd_async_notify != 0,
            sq_draining: a.sq_draining != 0,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            port_num: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
        })
    }

    pub(in crate::rdma) fn write_to(&self, a: &mut bindings::ib_qp_attr) {
        a.qp_state = self.qp_state;
        a.cur_qp_state = self.cur_qp_state;
        a.path_mtu = self.path_mtu;
        a.path_mig_state = self.path_mig_state;
        a.qkey = self.qkey;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qp_num = self.dest_qp_num;
        a.qp_access_flags = self.qp_access_flags as i32;
        self.cap.write_to(&mut a.cap);
        if let Some(av) = &self.av {
            av.write_to(&mut a.ah_attr);
        }
        a.pkey_index = self.pkey_index;
        a.en_sqd_async_notify = u8::from(self.en_sqd_async_notify);
        a.sq_draining = u8::from(self.sq_draining);
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.min_rnr_timer = self.min_rnr_timer;
        a.port_num = self.port_num;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
    }
}

/// Asynchronous QP events (`enum ib_event_type`, the QP ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpEvent {
    /// First packet received in RTR: the connection is established (IBA 11.6.3.1).
    CommEstablished,
    /// The SQ drained in SQD.
    SqDrained,
    /// The QP went to the error state for a reason not tied to one WR.
    Fatal,
    /// A request violated the transport's rules (e.g. an invalid opcode sequence).
    RequestError,
    /// A remote access violation was detected on a request this QP served.
    AccessError,
    /// The last WQE of an SRQ-attached QP in the error state was consumed.
    LastWqeReached,
}

impl QpEvent {
    fn as_raw(self) -> bindings::ib_event_type {
        match self {
            QpEvent::CommEstablished => bindings::ib_event_type_IB_EVENT_COMM_EST,
            QpEvent::SqDrained => bindings::ib_event_type_IB_EVENT_SQ_DRAINED,
            QpEvent::Fatal => bindings::ib_event_type_IB_EVENT_QP_FATAL,
            QpEvent::RequestError => bindings::ib_event_type_IB_EVENT_QP_REQ_ERR,
            QpEvent::AccessError => bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR,
            QpEvent::LastWqeReached => bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED,
        }
    }
}

/// A raw QP pointer usable while the notifier is not revoked.
///
/// # Invariants
///
/// Points to a live `ib_qp` until the [`RcuRevocable`] holding it is revoked.
#[derive(Clone, Copy)]
pub(in crate::rdma) struct RawQp(pub(in crate::rdma) NonNull<bindings::ib_qp>);

// SAFETY: Events may be raised from any context and CPU.
unsafe impl Send for RawQp {}
// SAFETY: The pointer itself is never mutated.
unsafe impl Sync for RawQp {}

/// Raises a QP's asynchronous events to its consumer; inert once the QP is destroyed.
pub struct QpNotifier {
    pub(in crate::rdma) qp: RcuRevocable<RawQp>,
}

impl QpNotifier {
    /// The QP's C object while it is alive, for `ib_wc.qp` of kernel completions.
    pub(crate) fn raw_ptr(&self) -> Option<*mut bindings::ib_qp> {
        self.qp.try_access_with(|qp| qp.0.as_ptr())
    }

    /// Raises `event` on the QP (`ib_qp.event_handler`, which the core wraps to report it to
    /// user space as well). Returns `false` if the QP is already destroyed.
    pub fn event(&self, event: QpEvent) -> bool {
        self.qp
            .try_access_with(|qp| {
                let raw = qp.0.as_ptr();
                // SAFETY: Not revoked, so the QP is live; handler and context are set by the core
                // before the QP is used.
                unsafe {
                    let mut ev = bindings::ib_event {
                        device: (*raw).device,
                        event: event.as_raw(),
                        ..Default::default()
                    };
                    ev.element.qp = raw;
                    if let Some(handler) = (*raw).event_handler {
                        handler(&mut ev, (*raw).qp_context);
                    }
                }
            })
            .is_some()
    }
}
