// SPDX-License-Identifier: GPL-2.0

//! Which send WQEs a response answers: acknowledgements are cumulative ([`acked_through`]), so
//! one response may complete the oldest outstanding WQEs ([`Outstanding`]) one after the other;
//! which WQEs complete without a response ([`completes_without_ack`]) and which only with their
//! response's data ([`needs_response_data`]).

use super::*;

/// Whether a WQE completes as soon as the requester is done with it, without waiting for a
/// response: everything on UC and UD (they are never acknowledged) and local operations on any
/// QP.
pub const fn completes_without_ack(qp_type: QpType, op: SendOpcode) -> bool {
    !matches!(qp_type, QpType::Rc) || is_local_op(op)
}

/// Whether the WQE's completion needs data from its response: the bytes of an RDMA READ, the
/// original value of an atomic. Such a WQE cannot be acknowledged by a later response alone (a
/// later response while it is unanswered means its response was lost: an implicit NAK).
/// FLUSH and ATOMIC WRITE are answered by an empty RDMA READ response, but as it carries
/// nothing, a later acknowledgement completes them like a write (as in rxe).
pub const fn needs_response_data(op: SendOpcode) -> bool {
    matches!(
        op,
        SendOpcode::RdmaRead | SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd
    )
}

/// Whether a response for `ack_psn` acknowledges a WQE whose last PSN is `wqe_last_psn`: ACKs
/// are cumulative (IBA 9.7.5.1.2), so it does when `ack_psn` is that PSN or a later one.
pub const fn acked_through(wqe_last_psn: Psn, ack_psn: Psn) -> bool {
    !matches!(ack_psn.cmp_seq(wqe_last_psn), Ordering::Less)
}

/// The oldest send WQE that the requester has started and that has not completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outstanding {
    /// The operation.
    pub op: SendOpcode,
    /// PSN of its first packet.
    pub first_psn: Psn,
    /// PSN of its last packet (for an RDMA READ, of its last response packet).
    pub last_psn: Psn,
    /// Whether the requester has sent all its packets (in the current transmission: a WQE
    /// being retransmitted is not fully sent until its last packet goes out again).
    pub fully_sent: bool,
    /// The message length (for an RDMA READ, the bytes expected).
    pub length: u32,
}

impl Outstanding {
    /// The view of a started `wqe` with requester progress `progress`.
    pub const fn of(wqe: &SendWqe, progress: &WqeProgress, cfg: &ReqConfig) -> Outstanding {
        Outstanding {
            op: wqe.opcode,
            first_psn: progress.first_psn,
            last_psn: progress.first_psn.add(psns_of(wqe, cfg).saturating_sub(1)),
            fully_sent: progress.is_done(wqe, cfg),
            length: wqe.length,
        }
    }

    /// Whether `psn` is one of the WQE's PSNs.
    pub(super) const fn holds(&self, psn: Psn) -> bool {
        psn.diff(self.first_psn) >= 0 && psn.diff(self.last_psn) <= 0
    }
}
