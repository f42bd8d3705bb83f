// SPDX-License-Identifier: GPL-2.0

//! How far the requester got with a WQE ([`WqeProgress`]) and the PSNs it takes ([`psns_of`]):
//! the bytes sent so far follow from the PSNs used, and a retry resumes a WQE at any of its PSNs
//! ([`WqeProgress::resume_at`]).

use super::*;

/// log2 of the segment in bytes: every segment is a power of two, so segmenting is shifting and
/// no division (and no division by zero) is involved.
pub(super) const fn mtu_shift(mtu: Pmtu) -> u32 {
    mtu.shift()
}

/// Number of MTU-sized packets a message of `len` bytes needs; an empty message still travels
/// in one packet.
const fn packets_for(len: u32, mtu: Pmtu) -> u32 {
    (len.saturating_sub(1) >> mtu_shift(mtu)).saturating_add(1)
}

/// The number of PSNs a WQE consumes on a QP with `cfg`.
///
/// An RDMA READ request takes one PSN per packet of its response (IBA 9.7.4.1.3: the responder
/// numbers the response packets from the request's PSN); a SEND or RDMA WRITE one per packet;
/// an atomic, FLUSH or ATOMIC WRITE one; a datagram always one; local operations none.
pub const fn psns_of(wqe: &SendWqe, cfg: &ReqConfig) -> u32 {
    match wqe.opcode {
        SendOpcode::LocalInv | SendOpcode::BindMw | SendOpcode::RegMr => 0,
        SendOpcode::CmpAndSwp
        | SendOpcode::FetchAndAdd
        | SendOpcode::Flush
        | SendOpcode::AtomicWrite => 1,
        _ if cfg.is_datagram() => 1,
        _ => packets_for(wqe.length, cfg.mtu),
    }
}

/// How far the requester got with one WQE; the kernel keeps one per started WQE.
///
/// Every packet of a message but the last carries exactly one MTU of payload, so the PSNs used
/// so far determine the bytes sent so far ([`WqeProgress::offset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WqeProgress {
    /// PSN of the WQE's first packet.
    pub first_psn: Psn,
    /// PSNs consumed so far: the index of the next packet in the message.
    pub psns_used: u32,
}

impl WqeProgress {
    /// A WQE about to send its first packet with PSN `first_psn` (the QP's next PSN).
    pub const fn start(first_psn: Psn) -> WqeProgress {
        WqeProgress {
            first_psn,
            psns_used: 0,
        }
    }

    /// The PSN of the next packet; once the WQE is fully sent, the PSN of the next WQE.
    pub const fn next_psn(&self) -> Psn {
        self.first_psn.add(self.psns_used)
    }

    /// The PSN of the WQE's last packet (for an RDMA READ, of its last response packet). For a
    /// local operation, which uses none, the PSN before `first_psn`.
    pub const fn last_psn(&self, wqe: &SendWqe, cfg: &ReqConfig) -> Psn {
        self.first_psn.add(psns_of(wqe, cfg).wrapping_sub(1))
    }

    /// Bytes of the message covered by the packets sent so far (for a resumed RDMA READ: the
    /// bytes already received).
    pub const fn offset(&self, wqe: &SendWqe, cfg: &ReqConfig) -> u32 {
        let covered = (self.psns_used as u64) << mtu_shift(cfg.mtu);
        if covered < wqe.length as u64 {
            covered as u32
        } else {
            wqe.length
        }
    }

    /// Whether every packet of the WQE has been sent.
    pub const fn is_done(&self, wqe: &SendWqe, cfg: &ReqConfig) -> bool {
        self.psns_used >= psns_of(wqe, cfg)
    }

    /// The progress of a WQE whose packets start at `first_psn` when the requester goes back to
    /// `from_psn` (a retry after a NAK, an implicit NAK or a timeout). `None` if `from_psn` is
    /// not one of the WQE's PSNs. PSNs are told apart within half the sequence space (IBA
    /// 9.7.1), so a WQE must use fewer than 2^23 PSNs; the maximum message size keeps it far
    /// below (8 MiB at MTU 256 is 32768).
    pub const fn resume_at(
        wqe: &SendWqe,
        first_psn: Psn,
        from_psn: Psn,
        cfg: &ReqConfig,
    ) -> Option<WqeProgress> {
        let index = from_psn.diff(first_psn);
        if index < 0 || index as u32 >= psns_of(wqe, cfg) {
            return None;
        }
        Some(WqeProgress {
            first_psn,
            psns_used: index as u32,
        })
    }
}
