// SPDX-License-Identifier: GPL-2.0

//! Work requests the requester finishes itself: the local operations (LOCAL_INV, BIND_MW,
//! REG_MR), which send nothing ([`LocalOp`]), and when a WQE finished without a response
//! completes ([`finished`]: in posting order).

use super::*;

/// Whether the operation runs on the local HCA only and sends nothing.
pub const fn is_local_op(op: SendOpcode) -> bool {
    matches!(
        op,
        SendOpcode::LocalInv | SendOpcode::BindMw | SendOpcode::RegMr
    )
}

/// A work request the HCA executes locally, without a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocalOp {
    /// Invalidate the MR or MW with this key.
    Invalidate {
        /// The L_Key or R_Key to invalidate (the WQE's `ex.invalidate_rkey`).
        rkey: u32,
    },
    /// Bind a memory window.
    BindMw(MwWr),
    /// Fast-register an MR.
    RegMr(RegMrWr),
}

impl LocalOp {
    /// The completion status when the operation fails (as rxe reports them).
    pub const fn failure_status(&self) -> WcStatus {
        match self {
            LocalOp::Invalidate { .. } | LocalOp::RegMr(_) => WcStatus::LocQpOpErr,
            LocalOp::BindMw(_) => WcStatus::MwBindErr,
        }
    }
}

/// What the requester does with a WQE it has finished itself, with no response to wait for: a
/// local operation it executed (BIND_MW, REG_MR, LOCAL_INV), or a WQE that failed before or
/// while it was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Finished {
    /// Complete it now: every WQE posted before it has completed.
    CompleteNow,
    /// Keep it, with its status, until every WQE before it has completed; the completer then
    /// completes it (IBA 10.8.3.1: a send queue's completions are returned in the order its
    /// WQEs were posted, local operations included). The requester goes on with the next WQE:
    /// the operation succeeded and has taken effect (a bind when it executes, IBA 10.6.7.2).
    HoldAndGoOn,
    /// Keep it as [`Finished::HoldAndGoOn`] does, but start nothing after it: it failed, and
    /// once its error completion is out the QP goes to the error state and the later WQEs
    /// flush (IBA 10.8.3.1, 10.3.1). The WQEs before it still complete with their own status.
    HoldAndStop,
}

/// What to do with a WQE the requester finished with `status` ([`Finished`]);
/// `earlier_wqes_pending` as in [`InFlight`]. rdma_rxe does the same for local operations:
/// `rxe_do_local_ops` marks the WQE done and its completer retires it from the head of the
/// send queue, in order.
pub const fn finished(earlier_wqes_pending: bool, status: WcStatus) -> Finished {
    if !earlier_wqes_pending {
        Finished::CompleteNow
    } else if matches!(status, WcStatus::Success) {
        Finished::HoldAndGoOn
    } else {
        Finished::HoldAndStop
    }
}
