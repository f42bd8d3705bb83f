// SPDX-License-Identifier: GPL-2.0

//! Completer logic (IBA 9.7.5 and rxe's rxe_comp.c, as pure decisions): what an ACK, NAK, RNR NAK, read response or atomic acknowledge means for the oldest outstanding send WQEs, retransmission and the retry counters, and the completion status of each WQE.
//!
//! The completer of an RC QP keeps a [`CompState`]: the PSN of the next response it expects,
//! the retry counters and whether a retry is under way. For each received response packet the
//! kernel fills an [`AckFacts`] ([`AckFacts::from_packet`]) and asks [`on_response`] what it
//! means for the oldest send WQE that has started ([`Outstanding`]); when the retransmission
//! timer fires it asks [`on_ack_timeout`]. Both update the state and answer a [`CompAction`].
//!
//! Acknowledgements are cumulative: a response for PSN `n` tells that the responder executed
//! every request before `n` (it executes them in order), so one packet may complete several
//! WQEs. The answer [`CompAction::CompleteAndRecheck`] says so: complete the oldest WQE, then
//! ask again with the same packet for the next one.
//!
//! UC and UD have no completer: their WQEs complete once sent ([`completes_without_ack`]).

use core::cmp::Ordering;

use super::cqe::WcStatus;
use super::mtu::Pmtu;
use super::opcode::{ExtHeader, Opcode, Operation, Transport};
use super::packet::{Aeth, NakCode, Packet, Syndrome};
use super::psn::Psn;
use super::qp_state::{ack_timeout_ns, rnr_retry_is_infinite, rnr_timer_us};
use super::req::{is_local_op, psns_of, ReqConfig, WqeProgress, READ_REQUEST_PSNS};
use super::wqe::{QpType, SendOpcode, SendWqe};

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

/// What a transport retry (ACK timeout, PSN sequence error NAK, implicit NAK) may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutVerdict {
    /// Retransmit; one retry was used.
    Retry,
    /// No retry is left: the WQE completes with `IB_WC_RETRY_EXC_ERR`.
    Exhausted,
}

/// What an RNR NAK may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RnrVerdict {
    /// Wait for the RNR timer, then retransmit.
    Wait,
    /// No RNR retry is left: the WQE completes with `IB_WC_RNR_RETRY_EXC_ERR`.
    Exhausted,
}

/// The two retry counters of an RC requester (IBA 9.7.6.1.3 and 9.7.5.2.8): transport retries
/// and RNR retries, each counting down from the QP's `retry_cnt` and `rnr_retry` attributes.
/// Both go back to their attribute values whenever a response shows progress (IBA 9.7.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryCounters {
    retry_cnt: u8,
    rnr_retry: u8,
    retries_left: u8,
    rnr_retries_left: u8,
}

impl RetryCounters {
    /// Counters for the attributes `retry_cnt` and `rnr_retry` (3-bit values; higher ones are
    /// cut to 7, which `check_retry_cnt` and `check_rnr_retry` refuse anyway).
    pub const fn new(retry_cnt: u8, rnr_retry: u8) -> RetryCounters {
        let retry_cnt = if retry_cnt > 7 { 7 } else { retry_cnt };
        let rnr_retry = if rnr_retry > 7 { 7 } else { rnr_retry };
        RetryCounters {
            retry_cnt,
            rnr_retry,
            retries_left: retry_cnt,
            rnr_retries_left: rnr_retry,
        }
    }

    /// Transport retries left.
    pub const fn retries_left(&self) -> u8 {
        self.retries_left
    }

    /// RNR retries left (meaningless when the attribute is 7, "retry forever").
    pub const fn rnr_retries_left(&self) -> u8 {
        self.rnr_retries_left
    }

    /// Uses a transport retry. Timeouts, PSN sequence error NAKs and implicit NAKs all count.
    /// Unlike rxe, which never decrements a `retry_cnt` of 7, 7 means seven retries: only the
    /// RNR retry count has an "infinite" value (IBA 9.7.5.2.8).
    pub fn on_timeout(&mut self) -> TimeoutVerdict {
        match self.retries_left.checked_sub(1) {
            Some(left) => {
                self.retries_left = left;
                TimeoutVerdict::Retry
            }
            None => TimeoutVerdict::Exhausted,
        }
    }

    /// Uses an RNR retry; an `rnr_retry` of 7 never runs out.
    pub fn on_rnr_nak(&mut self) -> RnrVerdict {
        if rnr_retry_is_infinite(self.rnr_retry) {
            return RnrVerdict::Wait;
        }
        match self.rnr_retries_left.checked_sub(1) {
            Some(left) => {
                self.rnr_retries_left = left;
                RnrVerdict::Wait
            }
            None => RnrVerdict::Exhausted,
        }
    }

    /// Refills both counters: a response made progress.
    pub fn reset(&mut self) {
        self.retries_left = self.retry_cnt;
        self.rnr_retries_left = self.rnr_retry;
    }
}

/// The least time, in ms, roxe waits for an acknowledgement before a transport retry.
///
/// IBA 9.7.6.1.3 makes 4.096 us * 2^timeout the least time before a retry, not the most: a soft
/// HCA may be far slower than the consumer assumed (a debug kernel under emulation takes
/// hundreds of ms over a 100 KB message), and an early retry only adds duplicates to a busy
/// responder and spends the retry count without a loss.
pub const MIN_ACK_TIMEOUT_MS: u64 = 500;

/// The local ACK timeout in ms for the QP attribute `timeout` (0: no timer, IBA 9.7.6.1.3),
/// never below [`MIN_ACK_TIMEOUT_MS`]. The device's tick checks timers every 10 ms, so
/// finer values would mean nothing.
pub const fn ack_timeout_ms(timeout: u8) -> u64 {
    match ack_timeout_ns(timeout) {
        None => 0,
        Some(ns) => {
            let ms = ns / 1_000_000;
            if ms < MIN_ACK_TIMEOUT_MS {
                MIN_ACK_TIMEOUT_MS
            } else {
                ms
            }
        }
    }
}

/// The completer's state for one RC QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompState {
    /// The PSN of the next response expected: every PSN before it is acknowledged. Retries
    /// start from it.
    pub expected_psn: Psn,
    /// The requester's segment (`Pmtu`), which sizes RDMA READ response packets.
    pub mtu: Pmtu,
    /// The retry counters.
    pub counters: RetryCounters,
    /// A retry was started and no response has shown progress since. Further NAKs and
    /// implicit NAKs are then ignored, so that one loss starts one retry; only a timeout starts
    /// another (the retransmission itself may be lost).
    pub retry_pending: bool,
}

impl CompState {
    /// The state of a QP entering RTS with send PSN `sq_psn`.
    pub const fn new(sq_psn: Psn, mtu: Pmtu, retry_cnt: u8, rnr_retry: u8) -> CompState {
        CompState {
            expected_psn: sq_psn,
            mtu,
            counters: RetryCounters::new(retry_cnt, rnr_retry),
            retry_pending: false,
        }
    }

    /// A response showed progress: refill the counters and end any retry.
    fn progress(&mut self) {
        self.counters.reset();
        self.retry_pending = false;
    }

    /// Acknowledges every PSN before `psn`.
    fn acknowledge_before(&mut self, psn: Psn) {
        if psn.diff(self.expected_psn) > 0 {
            self.expected_psn = psn;
        }
    }

    /// Starts a transport retry from the expected PSN, unless one is under way (`forced`: a
    /// timeout, which retries regardless).
    fn start_retry(&mut self, forced: bool) -> CompAction {
        if self.retry_pending && !forced {
            return CompAction::Ignore;
        }
        match self.counters.on_timeout() {
            TimeoutVerdict::Retry => {
                self.retry_pending = true;
                CompAction::Retry {
                    from_psn: self.expected_psn,
                }
            }
            TimeoutVerdict::Exhausted => CompAction::Error {
                status: WcStatus::RetryExcErr,
            },
        }
    }
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
    const fn holds(&self, psn: Psn) -> bool {
        psn.diff(self.first_psn) >= 0 && psn.diff(self.last_psn) <= 0
    }
}

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

/// What the kernel does with a response packet or a timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompAction {
    /// Drop the packet: a duplicate or stale response, one for a PSN not sent yet, one the
    /// oldest WQE cannot use yet (READ response data past a gap already asked for again), or
    /// nothing is outstanding.
    Ignore,
    /// The packet acknowledged part of the oldest WQE; nothing completes.
    Progress,
    /// The packet acknowledged the oldest WQE: complete it successfully. Done with the packet.
    Complete,
    /// The packet acknowledged the oldest WQE implicitly (its PSN is beyond the WQE's): complete
    /// it successfully, then ask [`on_response`] again with the same packet for the next WQE.
    CompleteAndRecheck,
    /// Place the payload at `offset` of the RDMA READ's local buffers (IBA 9.7.4.1.3: response
    /// packet `k` carries bytes from `k * mtu`). If that fails, complete the WQE with
    /// `IB_WC_LOC_PROT_ERR` and move the QP to the error state. Then, if `completes`, complete
    /// the WQE successfully.
    ReadData {
        /// Offset in the message.
        offset: u32,
        /// Bytes to place (the whole payload).
        len: u32,
        /// The packet is the last of the response.
        completes: bool,
    },
    /// Store the original value of the atomic into the WQE's 8-byte buffer (in host order), then
    /// complete it successfully (`IB_WC_LOC_PROT_ERR` if the store fails).
    AtomicResult {
        /// The value before the atomic operation.
        orig: u64,
    },
    /// Retransmit from `from_psn`: the WQE holding it resumes there and later WQEs restart.
    Retry {
        /// The first PSN to send again.
        from_psn: Psn,
    },
    /// The responder had no receive WQE: wait `delay_us`, then retransmit from `from_psn`.
    RnrWait {
        /// The delay the RNR NAK asked for (IBA 9.7.5.2.8).
        delay_us: u32,
        /// The first PSN to send again.
        from_psn: Psn,
    },
    /// Complete the oldest WQE with `status` and move the QP to the error state (the other
    /// WQEs then flush with `IB_WC_WR_FLUSH_ERR`).
    Error {
        /// The completion status.
        status: WcStatus,
    },
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
        // The READ need not be fully sent: its later requests (READ_REQUEST_PSNS) wait for
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
            // The requester asks for a long READ in requests of READ_REQUEST_PSNS aligned from
            // the WQE's first PSN: the response to each starts at such a boundary and ends before
            // the next one or at the WQE's last PSN (a re-request from the middle is answered
            // from there on, IBA 9.7.5.1.2).
            let boundary = index as u32 % READ_REQUEST_PSNS == 0;
            let request_end = is_last || (index as u32).wrapping_add(1) % READ_REQUEST_PSNS == 0;
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

/// The retransmission timer fired (IBA 9.7.6.1.3: no response within the local ACK timeout).
/// Retries from the expected PSN, even while another retry is under way, unless nothing is
/// outstanding: no started WQE (`oldest` is `None`) or every PSN sent below `psn_limit` is
/// acknowledged. The answer is [`CompAction::Ignore`], [`CompAction::Retry`] or
/// [`CompAction::Error`] with `IB_WC_RETRY_EXC_ERR` for the oldest WQE.
pub fn on_ack_timeout(
    state: &mut CompState,
    oldest: Option<&Outstanding>,
    psn_limit: Psn,
) -> CompAction {
    if oldest.is_none() || state.expected_psn.diff(psn_limit) >= 0 {
        return CompAction::Ignore;
    }
    state.start_retry(true)
}

#[cfg(test)]
mod tests {
    use super::super::mtu::{IbMtu, Pmtu};
    use super::super::packet::Msn;
    use super::*;

    const MTU: Pmtu = Pmtu::of(IbMtu::Mtu1024);

    fn state(psn: u32) -> CompState {
        CompState::new(Psn::new(psn), MTU, 3, 2)
    }

    fn out(op: SendOpcode, first: u32, last: u32, length: u32) -> Outstanding {
        Outstanding {
            op,
            first_psn: Psn::new(first),
            last_psn: Psn::new(last),
            fully_sent: true,
            length,
        }
    }

    fn aeth(syndrome: Syndrome) -> Option<Aeth> {
        Some(Aeth {
            syndrome,
            msn: Msn::new(0),
        })
    }

    const ACK: Syndrome = Syndrome::Ack { credits: 0x1f };

    fn ack(psn: u32, syndrome: Syndrome) -> AckFacts {
        AckFacts {
            opcode: Opcode::RC_ACKNOWLEDGE,
            psn: Psn::new(psn),
            aeth: aeth(syndrome),
            payload_len: 0,
            atomic_orig: None,
        }
    }

    fn read_resp(opcode: Opcode, psn: u32, len: u32) -> AckFacts {
        let has_aeth = opcode != Opcode::RC_RDMA_READ_RESPONSE_MIDDLE;
        AckFacts {
            opcode,
            psn: Psn::new(psn),
            aeth: if has_aeth { aeth(ACK) } else { None },
            payload_len: len,
            atomic_orig: None,
        }
    }

    const LIMIT: Psn = Psn::new(1000);

    #[test]
    fn ack_completes_a_send() {
        let mut s = state(10);
        let w = out(SendOpcode::Send, 10, 12, 3000);
        // A coalesced ACK for the middle packet is progress.
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(11, ACK), LIMIT),
            CompAction::Progress
        );
        assert_eq!(s.expected_psn, Psn::new(12));
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(12, ACK), LIMIT),
            CompAction::Complete
        );
        assert_eq!(s.expected_psn, Psn::new(13));
        // A duplicate of it is stale.
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(11, ACK), LIMIT),
            CompAction::Ignore
        );
    }

    #[test]
    fn cumulative_ack_completes_several_wqes() {
        let mut s = state(10);
        let a = out(SendOpcode::RdmaWrite, 10, 10, 8);
        let b = out(SendOpcode::Send, 11, 11, 8);
        let c = out(SendOpcode::Send, 12, 13, 1500);
        let facts = ack(13, ACK);
        assert_eq!(
            on_response(&mut s, Some(&a), &facts, LIMIT),
            CompAction::CompleteAndRecheck
        );
        assert_eq!(
            on_response(&mut s, Some(&b), &facts, LIMIT),
            CompAction::CompleteAndRecheck
        );
        assert_eq!(
            on_response(&mut s, Some(&c), &facts, LIMIT),
            CompAction::Complete
        );
        assert_eq!(s.expected_psn, Psn::new(14));
        assert_eq!(on_response(&mut s, None, &facts, LIMIT), CompAction::Ignore);
    }

    #[test]
    fn responses_for_unsent_psns_are_dropped() {
        let mut s = state(10);
        let w = out(SendOpcode::Send, 10, 10, 8);
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(11, ACK), Psn::new(11)),
            CompAction::Ignore
        );
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(10, ACK), Psn::new(11)),
            CompAction::Complete
        );
        // Requests are not responses.
        let req = AckFacts {
            opcode: Opcode::RC_SEND_ONLY,
            ..ack(10, ACK)
        };
        assert_eq!(
            on_response(&mut s, Some(&w), &req, LIMIT),
            CompAction::Ignore
        );
    }

    #[test]
    fn read_response_places_data_in_order() {
        // 2500 bytes at MTU 1024: PSNs 20, 21, 22 with 1024, 1024, 452 bytes.
        let mut s = state(20);
        let w = out(SendOpcode::RdmaRead, 20, 22, 2500);
        let first = read_resp(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 20, 1024);
        assert_eq!(
            on_response(&mut s, Some(&w), &first, LIMIT),
            CompAction::ReadData {
                offset: 0,
                len: 1024,
                completes: false
            }
        );
        // A gap (PSN 22 before 21): the READ is asked again from 21, once for the gap.
        let last = read_resp(Opcode::RC_RDMA_READ_RESPONSE_LAST, 22, 452);
        assert_eq!(
            on_response(&mut s, Some(&w), &last, LIMIT),
            CompAction::Retry {
                from_psn: Psn::new(21)
            }
        );
        assert_eq!(
            on_response(&mut s, Some(&w), &last, LIMIT),
            CompAction::Ignore
        );
        let middle = read_resp(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 21, 1024);
        assert_eq!(
            on_response(&mut s, Some(&w), &middle, LIMIT),
            CompAction::ReadData {
                offset: 1024,
                len: 1024,
                completes: false
            }
        );
        assert_eq!(
            on_response(&mut s, Some(&w), &last, LIMIT),
            CompAction::ReadData {
                offset: 2048,
                len: 452,
                completes: true
            }
        );
        assert_eq!(s.expected_psn, Psn::new(23));
    }

    #[test]
    fn read_response_shape_is_checked() {
        let bad = CompAction::Error {
            status: WcStatus::BadRespErr,
        };
        let w = out(SendOpcode::RdmaRead, 20, 22, 2500);
        // A short non-final packet.
        let mut s = state(20);
        assert_eq!(
            on_response(
                &mut s,
                Some(&w),
                &read_resp(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 20, 1000),
                LIMIT
            ),
            bad
        );
        // A MIDDLE where the response must start.
        let mut s = state(20);
        assert_eq!(
            on_response(
                &mut s,
                Some(&w),
                &read_resp(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 20, 1024),
                LIMIT
            ),
            bad
        );
        // An ONLY for a three-packet read.
        let mut s = state(20);
        assert_eq!(
            on_response(
                &mut s,
                Some(&w),
                &read_resp(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 20, 1024),
                LIMIT
            ),
            bad
        );
        // A restarted response (FIRST at PSN 21 after a retry) is fine.
        let mut s = state(21);
        assert_eq!(
            on_response(
                &mut s,
                Some(&w),
                &read_resp(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 21, 1024),
                LIMIT
            ),
            CompAction::ReadData {
                offset: 1024,
                len: 1024,
                completes: false
            }
        );
        // READ data for a SEND.
        let mut s = state(20);
        let send = out(SendOpcode::Send, 20, 20, 8);
        assert_eq!(
            on_response(
                &mut s,
                Some(&send),
                &read_resp(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 20, 8),
                LIMIT
            ),
            bad
        );
        // An empty zero-length read.
        let mut s = state(20);
        let empty = out(SendOpcode::RdmaRead, 20, 20, 0);
        assert_eq!(
            on_response(
                &mut s,
                Some(&empty),
                &read_resp(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 20, 0),
                LIMIT
            ),
            CompAction::ReadData {
                offset: 0,
                len: 0,
                completes: true
            }
        );
    }

    #[test]
    fn implicit_nak_for_an_unanswered_read() {
        let mut s = state(30);
        let read = out(SendOpcode::RdmaRead, 30, 31, 2048);
        // An ACK for a later SEND while the READ's response never came: retry from the READ.
        assert_eq!(
            on_response(&mut s, Some(&read), &ack(32, ACK), LIMIT),
            CompAction::Retry {
                from_psn: Psn::new(30)
            }
        );
        assert_eq!(s.counters.retries_left(), 2);
        // One retry per loss: a second implicit NAK is ignored until progress or a timeout.
        assert_eq!(
            on_response(&mut s, Some(&read), &ack(32, ACK), LIMIT),
            CompAction::Ignore
        );
        assert_eq!(
            on_ack_timeout(&mut s, Some(&read), LIMIT),
            CompAction::Retry {
                from_psn: Psn::new(30)
            }
        );
        assert_eq!(s.counters.retries_left(), 1);
        // A bare ACK inside a READ's PSNs answers nothing.
        assert_eq!(
            on_response(&mut s, Some(&read), &ack(30, ACK), LIMIT),
            CompAction::Ignore
        );
    }

    #[test]
    fn atomic_acknowledge() {
        let mut s = state(5);
        let w = out(SendOpcode::FetchAndAdd, 5, 5, 8);
        let facts = AckFacts {
            opcode: Opcode::RC_ATOMIC_ACKNOWLEDGE,
            atomic_orig: Some(0x1234),
            ..ack(5, ACK)
        };
        assert_eq!(
            on_response(&mut s, Some(&w), &facts, LIMIT),
            CompAction::AtomicResult { orig: 0x1234 }
        );
        assert_eq!(s.expected_psn, Psn::new(6));
        let mut s = state(5);
        let send = out(SendOpcode::Send, 5, 5, 8);
        assert_eq!(
            on_response(&mut s, Some(&send), &facts, LIMIT),
            CompAction::Error {
                status: WcStatus::BadRespErr
            }
        );
    }

    #[test]
    fn flush_and_atomic_write_take_an_empty_read_response() {
        for op in [SendOpcode::Flush, SendOpcode::AtomicWrite] {
            let mut s = state(7);
            let w = out(op, 7, 7, 8);
            let only = read_resp(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 7, 0);
            assert_eq!(
                on_response(&mut s, Some(&w), &only, LIMIT),
                CompAction::Complete
            );
            let mut s = state(7);
            assert_eq!(
                on_response(&mut s, Some(&w), &ack(7, ACK), LIMIT),
                CompAction::Complete
            );
            let mut s = state(7);
            assert_eq!(
                on_response(&mut s, Some(&w), &ack(8, ACK), LIMIT),
                CompAction::CompleteAndRecheck
            );
        }
    }

    #[test]
    fn naks() {
        let w = out(SendOpcode::Send, 40, 41, 2000);
        for (code, status) in [
            (NakCode::InvalidRequest, WcStatus::RemInvReqErr),
            (NakCode::RemoteAccessError, WcStatus::RemAccessErr),
            (NakCode::RemoteOperationalError, WcStatus::RemOpErr),
            (NakCode::Reserved(9), WcStatus::RemOpErr),
        ] {
            let mut s = state(40);
            assert_eq!(
                on_response(&mut s, Some(&w), &ack(41, Syndrome::Nak(code)), LIMIT),
                CompAction::Error { status }
            );
        }
        // A sequence error NAK at 41 acknowledges 40 and retries from 41.
        let mut s = state(40);
        let seq = ack(41, Syndrome::Nak(NakCode::PsnSequenceError));
        assert_eq!(
            on_response(&mut s, Some(&w), &seq, LIMIT),
            CompAction::Retry {
                from_psn: Psn::new(41)
            }
        );
        assert_eq!(s.expected_psn, Psn::new(41));
        assert_eq!(
            on_response(&mut s, Some(&w), &seq, LIMIT),
            CompAction::Ignore
        );
        // A NAK for a later WQE completes the earlier one first.
        let mut s = state(39);
        let before = out(SendOpcode::Send, 39, 39, 8);
        assert_eq!(
            on_response(&mut s, Some(&before), &seq, LIMIT),
            CompAction::CompleteAndRecheck
        );
        // An error NAK for a READ that was partly answered.
        let mut s = state(52);
        let read = out(SendOpcode::RdmaRead, 50, 55, 6000);
        let late = ack(50, Syndrome::Nak(NakCode::RemoteAccessError));
        assert_eq!(
            on_response(&mut s, Some(&read), &late, LIMIT),
            CompAction::Error {
                status: WcStatus::RemAccessErr
            }
        );
        // A reserved syndrome is dropped.
        let mut s = state(40);
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(40, Syndrome::Reserved(0x40)), LIMIT),
            CompAction::Ignore
        );
    }

    #[test]
    fn rnr_naks() {
        let mut s = state(60);
        let w = out(SendOpcode::Send, 60, 60, 8);
        let rnr = ack(60, Syndrome::RnrNak { timer: 14 });
        assert_eq!(
            on_response(&mut s, Some(&w), &rnr, LIMIT),
            CompAction::RnrWait {
                delay_us: 1280,
                from_psn: Psn::new(60)
            }
        );
        assert_eq!(
            on_response(&mut s, Some(&w), &rnr, LIMIT),
            CompAction::RnrWait {
                delay_us: 1280,
                from_psn: Psn::new(60)
            }
        );
        assert_eq!(
            on_response(&mut s, Some(&w), &rnr, LIMIT),
            CompAction::Error {
                status: WcStatus::RnrRetryExcErr
            }
        );
        // 7 retries forever.
        let mut s = CompState::new(Psn::new(60), MTU, 3, 7);
        for _ in 0..100 {
            assert!(matches!(
                on_response(&mut s, Some(&w), &rnr, LIMIT),
                CompAction::RnrWait { .. }
            ));
        }
    }

    #[test]
    fn ack_timeout_has_a_floor() {
        assert_eq!(ack_timeout_ms(0), 0);
        // 4.096 us * 2^14 = 67 ms: raised to the floor.
        assert_eq!(ack_timeout_ms(14), MIN_ACK_TIMEOUT_MS);
        // 4.096 us * 2^18 = 1073 ms.
        assert_eq!(ack_timeout_ms(18), 1073);
        assert_eq!(ack_timeout_ms(31), 8_796_093);
        assert!(ack_timeout_ms(60) > 0);
    }

    #[test]
    fn long_read_responses_come_per_request() {
        // 130 responses at MTU 1024 (PSNs 0..=129): requests of 128 and 2.
        let bad = CompAction::Error {
            status: WcStatus::BadRespErr,
        };
        let w = out(SendOpcode::RdmaRead, 0, 129, 130 * 1024);
        let mut s = state(0);
        s.expected_psn = Psn::new(127);
        // The first request's responses end at 127, the second's start at 128.
        assert_eq!(
            on_response(
                &mut s.clone(),
                Some(&w),
                &read_resp(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 127, 1024),
                LIMIT
            ),
            bad
        );
        assert!(matches!(
            on_response(&mut s, Some(&w), &read_resp(Opcode::RC_RDMA_READ_RESPONSE_LAST, 127, 1024), LIMIT),
            CompAction::ReadData { offset, completes: false, .. } if offset == 127 * 1024
        ));
        assert_eq!(
            on_response(
                &mut s.clone(),
                Some(&w),
                &read_resp(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 128, 1024),
                LIMIT
            ),
            bad
        );
        assert!(matches!(
            on_response(&mut s, Some(&w), &read_resp(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 128, 1024), LIMIT),
            CompAction::ReadData { offset, completes: false, .. } if offset == 128 * 1024
        ));
        assert!(matches!(
            on_response(
                &mut s,
                Some(&w),
                &read_resp(Opcode::RC_RDMA_READ_RESPONSE_LAST, 129, 1024),
                LIMIT
            ),
            CompAction::ReadData {
                completes: true,
                ..
            }
        ));
    }

    #[test]
    fn read_gap_asks_again_once_per_gap() {
        // 5 responses at MTU 1024: PSNs 30..=34.
        let mut s = state(30);
        let w = out(SendOpcode::RdmaRead, 30, 34, 5 * 1024);
        let r = |op, psn| read_resp(op, psn, 1024);
        assert!(matches!(
            on_response(
                &mut s,
                Some(&w),
                &r(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 30),
                LIMIT
            ),
            CompAction::ReadData { .. }
        ));
        // 31 lost: 32 asks again from 31; 33 and 34 of the first transmission change nothing.
        assert_eq!(
            on_response(
                &mut s,
                Some(&w),
                &r(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 32),
                LIMIT
            ),
            CompAction::Retry {
                from_psn: Psn::new(31)
            }
        );
        assert_eq!(
            on_response(
                &mut s,
                Some(&w),
                &r(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 33),
                LIMIT
            ),
            CompAction::Ignore
        );
        assert_eq!(s.counters.retries_left(), 2);
        // The replay from 31 is progress: the counters refill; a new gap asks again.
        assert!(matches!(
            on_response(
                &mut s,
                Some(&w),
                &r(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 31),
                LIMIT
            ),
            CompAction::ReadData { offset: 1024, .. }
        ));
        assert_eq!((s.counters.retries_left(), s.retry_pending), (3, false));
        assert_eq!(
            on_response(
                &mut s,
                Some(&w),
                &r(Opcode::RC_RDMA_READ_RESPONSE_LAST, 34),
                LIMIT
            ),
            CompAction::Retry {
                from_psn: Psn::new(32)
            }
        );
        // A READ whose later requests are not sent yet asks all the same.
        let mut s = state(30);
        let mut w2 = w;
        w2.fully_sent = false;
        assert_eq!(
            on_response(
                &mut s,
                Some(&w2),
                &r(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 32),
                LIMIT
            ),
            CompAction::Retry {
                from_psn: Psn::new(30)
            }
        );
        // An atomic's responses have no gap to ask about.
        let mut s = state(30);
        let a = out(SendOpcode::FetchAndAdd, 30, 30, 8);
        assert_eq!(
            on_response(&mut s, Some(&a), &ack(31, ACK), LIMIT),
            CompAction::Retry {
                from_psn: Psn::new(30)
            }
        );
    }

    #[test]
    fn timeouts() {
        let mut s = state(70);
        let w = out(SendOpcode::Send, 70, 70, 8);
        for _ in 0..3 {
            assert_eq!(
                on_ack_timeout(&mut s, Some(&w), LIMIT),
                CompAction::Retry {
                    from_psn: Psn::new(70)
                }
            );
        }
        assert_eq!(
            on_ack_timeout(&mut s, Some(&w), LIMIT),
            CompAction::Error {
                status: WcStatus::RetryExcErr
            }
        );
        // Progress refills the counters.
        let mut s = state(70);
        assert_eq!(
            on_ack_timeout(&mut s, Some(&w), LIMIT),
            CompAction::Retry {
                from_psn: Psn::new(70)
            }
        );
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(70, ACK), LIMIT),
            CompAction::Complete
        );
        assert_eq!((s.counters.retries_left(), s.retry_pending), (3, false));
        // Nothing outstanding: nothing to do.
        assert_eq!(on_ack_timeout(&mut s, None, LIMIT), CompAction::Ignore);
        assert_eq!(
            on_ack_timeout(&mut s, Some(&w), Psn::new(71)),
            CompAction::Ignore
        );
    }

    #[test]
    fn retransmitted_wqe_completes_on_the_repeated_ack() {
        let mut s = state(80);
        let mut w = out(SendOpcode::Send, 80, 81, 2000);
        w.fully_sent = false;
        // The ACK of the first transmission arrives while the WQE is being sent again.
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(81, ACK), LIMIT),
            CompAction::Progress
        );
        w.fully_sent = true;
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(81, ACK), LIMIT),
            CompAction::Complete
        );
    }

    #[test]
    fn counters() {
        let mut c = RetryCounters::new(7, 0);
        for _ in 0..7 {
            assert_eq!(c.on_timeout(), TimeoutVerdict::Retry);
        }
        assert_eq!(c.on_timeout(), TimeoutVerdict::Exhausted);
        assert_eq!(c.on_rnr_nak(), RnrVerdict::Exhausted);
        c.reset();
        assert_eq!(c.retries_left(), 7);
        assert_eq!(RetryCounters::new(200, 9).retries_left(), 7);
    }

    #[test]
    fn helpers() {
        assert!(acked_through(Psn::new(5), Psn::new(5)));
        assert!(acked_through(Psn::new(0xff_ffff), Psn::new(2)));
        assert!(!acked_through(Psn::new(2), Psn::new(0xff_ffff)));
        assert!(completes_without_ack(QpType::Ud, SendOpcode::Send));
        assert!(completes_without_ack(QpType::Uc, SendOpcode::RdmaWrite));
        assert!(completes_without_ack(QpType::Rc, SendOpcode::LocalInv));
        assert!(!completes_without_ack(QpType::Rc, SendOpcode::Send));
        let cfg = ReqConfig {
            qp_type: QpType::Rc,
            mtu: MTU,
            qp_num: 1,
            dest_qp_num: 2,
            qkey: 0,
            pkey: 0xffff,
            max_rd_atomic: 1,
        };
        let wqe = SendWqe {
            wr_id: 0,
            opcode: SendOpcode::RdmaRead,
            flags: 0,
            ex: 0,
            wr: [0; 32],
            length: 9000,
            payload: super::super::wqe::Payload::Sges { num: 1 },
        };
        let o = Outstanding::of(
            &wqe,
            &WqeProgress {
                first_psn: Psn::new(0xff_fffc),
                psns_used: 9,
            },
            &cfg,
        );
        assert_eq!(
            o,
            Outstanding {
                op: SendOpcode::RdmaRead,
                first_psn: Psn::new(0xff_fffc),
                last_psn: Psn::new(4),
                fully_sent: true,
                length: 9000
            }
        );
    }
}
