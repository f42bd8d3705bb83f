// SPDX-License-Identifier: GPL-2.0

//! Whether a WQE may start or go on now ([`may_start`], [`may_continue`]): fence, local
//! invalidate ordering, RDMA READ/atomic credits, the RC PSN window and the RDMA READ response
//! window.

use super::*;

/// How far (in PSNs) an RC requester may run ahead of the oldest unacknowledged PSN before it
/// waits for acknowledgements (rxe's `RXE_MAX_UNACKED_PSNS`). It bounds the retransmission work a
/// single loss causes and keeps PSN comparisons far inside the half-space IBA 9.7.1 allows. A
/// WQE that has started may overshoot it: an RDMA READ request reserves all its response PSNs
/// at once.
pub const MAX_UNACKED_PSNS: u32 = 128;

/// The PSN window of a path with segment `mtu`: [`MAX_UNACKED_PSNS`] units
/// ([`Pmtu::wire_units`]), so 128 PSNs at MTU 1024 and below, 32 at 4096: from MTU 1024 up,
/// the same 128 KiB in flight.
pub const fn psn_window(mtu: Pmtu) -> u32 {
    MAX_UNACKED_PSNS >> mtu.wire_shift()
}

/// The most RDMA READ response PSNs (at MTU 1024, [`read_response_window`]) the requester lets be
/// outstanding when it starts a READ that takes several requests: such a READ starts only if its
/// first request ([`read_request_size`]) fits beside what is outstanding, or nothing is (a READ
/// that one request covers has [`SINGLE_REQUEST_READ_WINDOW`]). The responder answers each request
/// with a burst of responses that nothing paces, and bursts of several READs add up until the
/// receiving host's socket drops them; a WRITE's packets are paced by the sender's own CPU. The
/// measurements that chose 64: `Documentation/performance.md`, "Constants".
pub const READ_RESPONSE_WINDOW: u32 = 64;

/// [`READ_RESPONSE_WINDOW`] on a path with segment `mtu`: 64 units ([`Pmtu::wire_units`]), so
/// from MTU 1024 up 64 KiB of responses, 16 PSNs at MTU 4096; a burst of 64 responses of 4 KiB
/// is more than the receiving host's socket buffer (212992 bytes by default) holds.
pub const fn read_response_window(mtu: Pmtu) -> u32 {
    READ_RESPONSE_WINDOW >> mtu.wire_shift()
}

/// The most RDMA READ response PSNs (at MTU 1024, [`single_request_read_window`]) outstanding
/// beside which a READ that one request asks for whole (at most [`read_request_size`]) may
/// start: the next request goes out once half of the last one's responses have arrived, so
/// that the responder answers it while the requester takes in the rest, instead of the wire's
/// round trip passing idle between READs, and at most one and a half requests' responses are
/// on the wire at once. Longer READs keep to
/// [`READ_RESPONSE_WINDOW`]: their later requests go out alone, and a loss at the end of one is
/// found only by the ACK timer. The measurements behind both: `Documentation/performance.md`,
/// "Constants". Both count PSNs of 1 KiB ([`read_response_window`],
/// [`single_request_read_window`]).
pub const SINGLE_REQUEST_READ_WINDOW: u32 = READ_REQUEST_PSNS + READ_REQUEST_PSNS / 2;

/// [`SINGLE_REQUEST_READ_WINDOW`] on a path with segment `mtu`: one and a half requests of
/// [`read_request_size`].
pub const fn single_request_read_window(mtu: Pmtu) -> u32 {
    let request = read_request_size(mtu);
    request + request / 2
}

const fn min_u32(a: u32, b: u32) -> u32 {
    if a < b {
        a
    } else {
        b
    }
}

/// Whether the operation occupies one of the initiator depth's slots until its response
/// arrives. RDMA READ and the atomics do by IBA definition; rxe also counts ATOMIC WRITE.
/// FLUSH is counted too because the responder keeps a READ/atomic resource for it (rxe's
/// `rxe_prepare_res` takes one for READ, atomics, ATOMIC WRITE and FLUSH) so that it can
/// replay the response; staying within the peer's resources is what the depth is for.
pub const fn needs_rd_atomic_credit(op: SendOpcode) -> bool {
    matches!(
        op,
        SendOpcode::RdmaRead
            | SendOpcode::CmpAndSwp
            | SendOpcode::FetchAndAdd
            | SendOpcode::AtomicWrite
            | SendOpcode::Flush
    )
}

/// The requester's view of what is in flight on the QP, for [`may_start`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    /// The oldest PSN not yet acknowledged (the completer's expected PSN).
    pub oldest_unacked_psn: Psn,
    /// The PSN the next packet gets.
    pub next_psn: Psn,
    /// Started WQEs that hold an initiator-depth credit ([`needs_rd_atomic_credit`]) and have
    /// not completed. The kernel adds one when [`StartVerdict::Go`] says so and subtracts one
    /// when such a WQE completes, whatever its status.
    pub rd_atomic_in_flight: u32,
    /// Whether any WQE posted before this one has not completed yet.
    pub earlier_wqes_pending: bool,
}

/// Whether the next WQE may start, and why not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StartVerdict {
    /// Start it. `takes_credit`: the WQE now holds an initiator-depth credit.
    Go {
        /// Whether to count the WQE in [`InFlight::rd_atomic_in_flight`].
        takes_credit: bool,
    },
    /// The WQE is fenced and an RDMA READ or atomic before it has not completed.
    WaitFence,
    /// A local invalidate waits for every earlier WQE to complete.
    WaitEarlierWqes,
    /// Every initiator-depth credit is taken.
    WaitRdAtomicCredit,
    /// The RC PSN window is full ([`psn_window`]).
    WaitPsnWindow,
    /// The WQE can never start (an RDMA READ or atomic with an initiator depth of 0): complete
    /// it with this status.
    Refuse(WcStatus),
}

/// The segment `wqe`'s windows count by ([`Pmtu::wire_units`]): what its packets carry, the
/// path's segment at most ([`Pmtu::fitting`]), so that a message shorter than a jumbo MTU
/// counts fewer units a PSN than a long one. The requester's windows here and its part in its
/// peer's window both count by it.
pub const fn window_segment(wqe: &SendWqe, cfg: &ReqConfig) -> Pmtu {
    cfg.mtu.fitting(wqe.length)
}

/// Whether the RC requester may send a packet with PSN `next` while `oldest_unacked` is the
/// oldest PSN without an acknowledgement, on a path with segment `mtu` ([`psn_window`]).
pub const fn psn_window_open(next: Psn, oldest_unacked: Psn, mtu: Pmtu) -> bool {
    next.diff(oldest_unacked) < psn_window(mtu) as i32
}

/// Whether `wqe` may send its first packet (or run, if local) now.
///
/// `already_started` is set when the WQE is sent again after a retry: it passed its fence and
/// took its credit the first time, so only the PSN window applies.
///
/// - Fence (`IBV_SEND_FENCE`, IBA 10.8.3.3): wait until no RDMA READ or atomic (nor FLUSH or
///   ATOMIC WRITE, which hold the same credits) started before it is outstanding.
/// - Local invalidate: like rxe, waits for every earlier WQE, so that nothing still in flight
///   uses the key it invalidates.
/// - Initiator depth: at most `max_rd_atomic` credit-holding WQEs in flight. With a depth of 0
///   such a WQE could never start; rxe leaves it hanging, roxe completes it with
///   `IB_WC_LOC_QP_OP_ERR`.
/// - PSN window (RC): the first packet must fit [`psn_window`] of the WQE's
///   [`window_segment`].
/// - RDMA READ response window (RC): the READ's first request must fit beside the PSNs
///   outstanding within [`single_request_read_window`] (one request asks for the whole READ)
///   or [`read_response_window`] (several do), unless nothing is outstanding.
pub const fn may_start(
    wqe: &SendWqe,
    already_started: bool,
    state: &InFlight,
    cfg: &ReqConfig,
) -> StartVerdict {
    if matches!(wqe.opcode, SendOpcode::LocalInv) && state.earlier_wqes_pending {
        return StartVerdict::WaitEarlierWqes;
    }
    if !already_started && wqe.flags & send_flags::FENCE != 0 && state.rd_atomic_in_flight > 0 {
        return StartVerdict::WaitFence;
    }
    if is_local_op(wqe.opcode) {
        return StartVerdict::Go {
            takes_credit: false,
        };
    }
    let seg = window_segment(wqe, cfg);
    if matches!(cfg.qp_type, QpType::Rc)
        && !psn_window_open(state.next_psn, state.oldest_unacked_psn, seg)
    {
        return StartVerdict::WaitPsnWindow;
    }
    if matches!(wqe.opcode, SendOpcode::RdmaRead) && matches!(cfg.qp_type, QpType::Rc) {
        let outstanding = state.next_psn.diff(state.oldest_unacked_psn);
        let psns = psns_of(wqe, cfg);
        let request = read_request_size(cfg.mtu);
        let first_request = min_u32(psns, request);
        let window = if psns <= request {
            single_request_read_window(seg)
        } else {
            read_response_window(seg)
        };
        if outstanding > 0 && (outstanding as u32).saturating_add(first_request) > window {
            return StartVerdict::WaitPsnWindow;
        }
    }
    let takes_credit = needs_rd_atomic_credit(wqe.opcode) && !already_started;
    if takes_credit {
        if cfg.max_rd_atomic == 0 {
            return StartVerdict::Refuse(WcStatus::LocQpOpErr);
        }
        if state.rd_atomic_in_flight >= cfg.max_rd_atomic {
            return StartVerdict::WaitRdAtomicCredit;
        }
    }
    StartVerdict::Go { takes_credit }
}

/// Whether a started WQE may send its next packet: the RC PSN window applies, and the next
/// request of a long RDMA READ ([`read_request_size`]) waits until every PSN before it is
/// acknowledged, so that one request per WQE is outstanding.
pub const fn may_continue(wqe: &SendWqe, state: &InFlight, cfg: &ReqConfig) -> StartVerdict {
    if matches!(cfg.qp_type, QpType::Rc)
        && !psn_window_open(
            state.next_psn,
            state.oldest_unacked_psn,
            window_segment(wqe, cfg),
        )
    {
        return StartVerdict::WaitPsnWindow;
    }
    if matches!(wqe.opcode, SendOpcode::RdmaRead)
        && state.next_psn.diff(state.oldest_unacked_psn) > 0
    {
        return StartVerdict::WaitPsnWindow;
    }
    StartVerdict::Go {
        takes_credit: false,
    }
}
