// SPDX-License-Identifier: GPL-2.0

//! What a response packet means for the oldest outstanding WQE ([`on_response`]): ACKs, NAKs and
//! RNR NAKs, RDMA READ response data, atomic acknowledges, stale and duplicate responses.

use super::*;

/// The facts of a received response packet the completer looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AckFacts {
    /// The BTH opcode.
    pub opcode: Opcode,
    /// The BTH PSN.
    pub psn: Psn,
    /// The AETH (absent in an RDMA READ Response Middle).
    pub aeth: Option<Aeth>,
    /// Payload bytes (RDMA READ response data).
    pub payload_len: u32,
    /// The original remote value of an atomic acknowledge.
    pub atomic_orig: Option<u64>,
}

impl AckFacts {
    /// The facts of a checked packet.
    pub fn from_packet<T: AsRef<[u8]>>(p: &Packet<T>) -> AckFacts {
        AckFacts {
            opcode: p.opcode(),
            psn: p.psn(),
            aeth: p.aeth(),
            payload_len: u32::try_from(p.payload_len()).unwrap_or(u32::MAX),
            atomic_orig: p.atomic_ack_eth().map(|a| a.orig),
        }
    }
}

/// The completion status for a NAK code. The PSN sequence error is no error: it asks for a
/// retry.
pub const fn nak_status(code: NakCode) -> Option<WcStatus> {
    match code {
        NakCode::PsnSequenceError => None,
        NakCode::InvalidRequest => Some(WcStatus::RemInvReqErr),
        NakCode::RemoteAccessError => Some(WcStatus::RemAccessErr),
        // An RD-only code or a reserved one cannot answer an RC request; like rxe, report
        // the responder's failure as an operational error.
        NakCode::RemoteOperationalError | NakCode::InvalidRdRequest | NakCode::Reserved(_) => {
            Some(WcStatus::RemOpErr)
        }
    }
}

/// Decides what response `ack` means for the oldest outstanding WQE `oldest` (`None` when no
/// started WQE awaits completion), updating `state`.
///
/// `psn_limit` is one past the highest PSN the requester has ever sent on the QP (a retry does
/// not lower it): responses at or beyond it answer nothing that was sent and are dropped.
///
/// The checks, in order:
/// 1. Only RC response opcodes count.
/// 2. A PSN beyond the oldest WQE acknowledges it (the responder executes requests in order),
///    unless it needs response data: then that response was lost and the requester retries
///    (implicit NAK).
/// 3. A PSN before the expected one is a duplicate, with two exceptions: an ACK for the last PSN
///    of a WQE whose retransmission had not finished when the first ACK came, and an error NAK
///    that the responder sent for a READ it had partly answered.
/// 4. READ response data must come in PSN order: a response past a gap is dropped and the
///    requester asks again for the rest of the READ (once per gap); other responses ahead of
///    an unanswered READ or atomic are dropped and the timeout retries.
/// 5. The response must fit the WQE: READ data for an RDMA READ, an atomic acknowledge for an
///    atomic, an empty READ response or an ACK for FLUSH and ATOMIC WRITE, an ACK or NAK for the
///    rest. A mismatch is `IB_WC_BAD_RESP_ERR`.
pub fn on_response(
    state: &mut CompState,
    oldest: Option<&Outstanding>,
    ack: &AckFacts,
    psn_limit: Psn,
) -> CompAction {
    let info = match ack.opcode.info() {
        Some(info) if info.is_response() && matches!(info.transport(), Transport::Rc) => info,
        _ => return CompAction::Ignore,
    };
    let wqe = match oldest {
        Some(wqe) => wqe,
        None => return CompAction::Ignore,
    };
    if ack.psn.diff(psn_limit) >= 0 {
        return CompAction::Ignore;
    }
    // An AETH the opcode calls for but the facts lack: nothing reliable to act on.
    if info.has(ExtHeader::Aeth) && ack.aeth.is_none() {
        return CompAction::Ignore;
    }

    if ack.psn.diff(wqe.last_psn) > 0 {
        // The PSN is beyond the WQE's last one.
        if !wqe.fully_sent {
            // The WQE is being retransmitted; its new packets will be acknowledged again.
            return CompAction::Ignore;
        }
        if needs_response_data(wqe.op) {
            return state.start_retry(false);
        }
        state.acknowledge_before(wqe.last_psn.next());
        state.progress();
        return CompAction::CompleteAndRecheck;
    }

    let ahead = ack.psn.diff(state.expected_psn);
    if ahead < 0 {
        return stale_response(state, wqe, ack, info.operation());
    }
    if ahead > 0 && needs_response_data(wqe.op) {
        // Responses are sent and delivered in PSN order on a path that does not reorder (IBA
        // 9.7.5.1.2), so a READ response beyond the expected one means the ones in between were
        // lost. Waiting for the local ACK timer would stall a long READ for a whole timeout per
        // loss: ask again for the rest at once, once per gap (`retry_pending` holds until the
        // re-asked responses show progress). Anything else ahead of an unanswered READ or atomic
        // is dropped; the timer recovers it.
        // The READ need not be fully sent: its later requests (read_request_size) wait for
        // these responses.
        if matches!(info.operation(), Operation::RdmaReadResponse)
            && matches!(wqe.op, SendOpcode::RdmaRead)
        {
            return state.start_retry(false);
        }
        return CompAction::Ignore;
    }
    match info.operation() {
        Operation::RdmaReadResponse => read_response(state, wqe, ack, info.opcode()),
        Operation::AtomicAcknowledge => atomic_acknowledge(state, wqe, ack),
        Operation::Acknowledge => acknowledge(state, wqe, ack),
        _ => CompAction::Ignore,
    }
}

/// A response older than the expected PSN (step 3 of [`on_response`]).
fn stale_response(
    state: &mut CompState,
    wqe: &Outstanding,
    ack: &AckFacts,
    op: Operation,
) -> CompAction {
    if !matches!(op, Operation::Acknowledge) {
        return CompAction::Ignore;
    }
    match ack.aeth.map(|a| a.syndrome) {
        Some(Syndrome::Ack { .. })
            if ack.psn == wqe.last_psn && wqe.fully_sent && !needs_response_data(wqe.op) =>
        {
            state.progress();
            CompAction::Complete
        }
        Some(Syndrome::Nak(code)) if wqe.holds(ack.psn) => match nak_status(code) {
            Some(status) => CompAction::Error { status },
            None => CompAction::Ignore,
        },
        _ => CompAction::Ignore,
    }
}

/// RDMA READ response data, or the empty READ response that answers FLUSH and ATOMIC WRITE.
/// The PSN is the expected one.
fn read_response(
    state: &mut CompState,
    wqe: &Outstanding,
    ack: &AckFacts,
    opcode: Opcode,
) -> CompAction {
    let bad = CompAction::Error {
        status: WcStatus::BadRespErr,
    };
    // FIRST, LAST and ONLY carry an AETH, which must be an ACK.
    if let Some(aeth) = ack.aeth {
        if !matches!(aeth.syndrome, Syndrome::Ack { .. }) {
            return bad;
        }
    }
    let (starts, ends) = match opcode.info() {
        Some(info) => (info.starts_message(), info.ends_message()),
        None => return CompAction::Ignore,
    };
    let is_last = ack.psn == wqe.last_psn;
    match wqe.op {
        SendOpcode::Flush | SendOpcode::AtomicWrite => {
            // Annex A19: the response is a single RDMA READ Response Only without payload.
            if starts && ends && is_last && ack.payload_len == 0 {
                state.acknowledge_before(ack.psn.next());
                state.progress();
                CompAction::Complete
            } else {
                bad
            }
        }
        SendOpcode::RdmaRead => {
            let index = ack.psn.diff(wqe.first_psn);
            if index < 0 {
                return CompAction::Ignore;
            }
            // The response's packet `index` holds bytes from `index * mtu`. The first packet must
            // start a message; a later one may (the responder restarted the response for a
            // retried request) or may not (it resumed the one in progress, as rxe's does). The
            // PSN of the last packet, and only it, ends the message.
            let offset = (index as u64) << state.mtu.bytes().trailing_zeros();
            // The requester asks for a long READ in requests of read_request_size aligned from
            // the WQE's first PSN: the response to each starts at such a boundary and ends before
            // the next one or at the WQE's last PSN (a re-request from the middle is answered
            // from there on, IBA 9.7.5.1.2).
            // A power of two.
            let mask = read_request_size(state.mtu).wrapping_sub(1);
            let boundary = index as u32 & mask == 0;
            let request_end = is_last || (index as u32).wrapping_add(1) & mask == 0;
            if (boundary && !starts) || ends != request_end || offset > u64::from(wqe.length) {
                return bad;
            }
            let offset = offset as u32;
            let expected_len = if is_last {
                wqe.length.saturating_sub(offset)
            } else {
                state.mtu.bytes()
            };
            if ack.payload_len != expected_len {
                return bad;
            }
            state.acknowledge_before(ack.psn.next());
            state.progress();
            CompAction::ReadData {
                offset,
                len: ack.payload_len,
                completes: is_last,
            }
        }
        _ => bad,
    }
}

/// An atomic acknowledge at the expected PSN.
fn atomic_acknowledge(state: &mut CompState, wqe: &Outstanding, ack: &AckFacts) -> CompAction {
    let bad = CompAction::Error {
        status: WcStatus::BadRespErr,
    };
    if !matches!(ack.aeth.map(|a| a.syndrome), Some(Syndrome::Ack { .. })) {
        return bad;
    }
    if !matches!(wqe.op, SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd) || ack.psn != wqe.last_psn
    {
        return bad;
    }
    let orig = match ack.atomic_orig {
        Some(orig) => orig,
        None => return CompAction::Ignore,
    };
    state.acknowledge_before(ack.psn.next());
    state.progress();
    CompAction::AtomicResult { orig }
}

/// An ACK, RNR NAK or NAK at or after the expected PSN, inside the oldest WQE.
fn acknowledge(state: &mut CompState, wqe: &Outstanding, ack: &AckFacts) -> CompAction {
    let syndrome = match ack.aeth {
        Some(aeth) => aeth.syndrome,
        None => return CompAction::Ignore,
    };
    match syndrome {
        Syndrome::Ack { .. } => {
            // A bare ACK cannot carry READ data or an atomic's result.
            if needs_response_data(wqe.op) {
                return CompAction::Ignore;
            }
            state.acknowledge_before(ack.psn.next());
            state.progress();
            if ack.psn == wqe.last_psn && wqe.fully_sent {
                CompAction::Complete
            } else {
                CompAction::Progress
            }
        }
        Syndrome::RnrNak { timer } => {
            // The responder executed everything before the NAKed PSN and resumes there.
            state.acknowledge_before(ack.psn);
            match state.counters.on_rnr_nak() {
                RnrVerdict::Wait => CompAction::RnrWait {
                    delay_us: rnr_timer_us(timer),
                    from_psn: ack.psn,
                },
                RnrVerdict::Exhausted => CompAction::Error {
                    status: WcStatus::RnrRetryExcErr,
                },
            }
        }
        Syndrome::Nak(code) => match nak_status(code) {
            Some(status) => CompAction::Error { status },
            None => {
                // PSN sequence error: the NAK's PSN is the one the responder expects, so
                // everything before it arrived. Moving forward is progress; then retry from it.
                if ack.psn.diff(state.expected_psn) > 0 {
                    state.acknowledge_before(ack.psn);
                    state.progress();
                }
                state.start_retry(false)
            }
        },
        // A reserved syndrome means nothing: drop the packet.
        Syndrome::Reserved(_) => CompAction::Ignore,
    }
}
