// SPDX-License-Identifier: GPL-2.0

//! The completer: acknowledgements and responses to this QP's requests, and completions.
//! Counterpart of rxe's `rxe_comp.c`.
//!
//! What a response or a timeout means (which WQEs complete and how, retries, RNR waits, implicit
//! NAKs, the retry counters) is decided by [`crate::proto::comp`]; this file places READ data and
//! atomic results, rewinds the requester and posts completions.
//!
//! Context: [`receive`] runs in the receive pipeline (softirq, or the loopback drainer), [`tick`]
//! from the device's tick (softirq). Both update the send state under the QP's send lock, post
//! completions after releasing it, then run the requester, which a completion may have unblocked.

#![deny(unsafe_code)]

use crate::rdma::device::{now_ms, now_ns, Device};
use crate::{
    counters::Counter,
    hca::Roxe,
    mem::mr::MemError,
    mem::odp,
    mem::{LocalSource, SgeList},
    proto::{
        comp::{on_ack_timeout, on_response, AckFacts, CompAction, Outstanding},
        cqe::WcStatus,
        mtt::Access,
        packet::{NakCode, Packet, Syndrome},
        qp_state::QpType,
        req::ReqConfig,
        wqe::{send_layout, Payload},
    },
    qp::{Completions, RoxeQp, SqState},
    req,
};
use kernel::sync::atomic::Relaxed;

/// Counts what the completer decided: retransmissions and retry exhaustion.
fn count(dev: &Device<Roxe>, action: &CompAction) {
    let c = match action {
        CompAction::Retry { .. } => Counter::CompleterRetryErr,
        CompAction::Error {
            status: WcStatus::RetryExcErr,
        } => Counter::RetryExceededErr,
        CompAction::Error {
            status: WcStatus::RnrRetryExcErr,
        } => Counter::RetryRnrExceededErr,
        _ => return,
    };
    dev.data().counters.inc(c);
}

/// The oldest started WQE that has not completed, as the completer sees it.
fn oldest(sq: &SqState, cfg: &ReqConfig) -> Option<Outstanding> {
    let e = sq.entries.first()?;
    Some(Outstanding::of(&e.wqe, &e.progress?, cfg))
}

/// How placing a response's data went.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placed {
    Done,
    /// The response counts as lost, and the ACK timer asks again: ODP buffers not faulted in
    /// (invalidated since the requester faulted them in before asking; the fault of the rest
    /// of them is queued), or no memory to read a payload left in the responder's MR into
    /// (`RoxeDevice::with_source_bytes`).
    Lost,
    /// The buffers are not usable: the WQE fails with `IB_WC_LOC_PROT_ERR`.
    Failed,
}

/// The local buffers of the oldest WQE; `None` if there is none or its data is inline.
fn oldest_sges(sq: &SqState) -> Option<SgeList<'_>> {
    let e = sq.entries.first()?;
    match e.wqe.payload {
        Payload::Sges { num } => Some(SgeList {
            slot: &e.slot,
            base: send_layout::DMA_DATA,
            num,
        }),
        Payload::Inline { .. } => None,
    }
}

/// Copies READ data left in the responder's MR (`s`, a loopback response's payload:
/// `recv::loopback`) to byte `offset` of the oldest WQE's local buffers: page to page when they
/// are pinned user memory sharing no page with the source, else read whole first as a
/// packet's payload is (`RoxeDevice::with_source_bytes`).
fn place_from(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    sq: &SqState,
    offset: u32,
    s: &LocalSource,
) -> Placed {
    let Some(list) = oldest_sges(sq) else {
        return Placed::Failed;
    };
    match list.scatter_from(dev, qp.pd_id, u64::from(offset), s) {
        Ok(true) => Placed::Done,
        Ok(false) => dev
            .data()
            .with_source_bytes(s, |b| place(dev, qp, sq, offset, b))
            .unwrap_or(Placed::Lost),
        Err(_) => Placed::Failed,
    }
}

/// Copies `data` to byte `offset` of the oldest WQE's local buffers (READ data, an atomic's
/// original value).
fn place(dev: &Device<Roxe>, qp: &RoxeQp, sq: &SqState, offset: u32, data: &[u8]) -> Placed {
    let (Some(list), Some(e)) = (oldest_sges(sq), sq.entries.first()) else {
        return Placed::Failed;
    };
    match list.scatter(dev, qp.pd_id, u64::from(offset), data) {
        Ok(()) => Placed::Done,
        Err(MemError::NotPresent) => {
            let rest = e.wqe.length.saturating_sub(offset) as usize;
            let _ = odp::fault_sges(
                dev,
                qp.pd_id,
                &list,
                u64::from(offset),
                rest,
                Access::LOCAL_WRITE,
            );
            Placed::Lost
        }
        Err(_) => Placed::Failed,
    }
}

/// Places the `len` bytes of READ data of the response `r` at byte `offset` of the oldest WQE's
/// buffers: from the responder's MR when the loopback drainer left them there (the device's
/// `local_source` slot, filled only while it delivers this response), else from the packet.
fn place_read_data(r: &Response<'_>, sq: &SqState, offset: u32, len: u32) -> Placed {
    if !r.payload_in_slot {
        let data = r.pkt.payload().get(..len as usize).unwrap_or(&[]);
        return place(r.dev, r.qp, sq, offset, data);
    }
    // The packet's payload bytes are not its own: they are never placed. A slot found empty
    // (taken by an earlier look at the packet) loses the response; the ACK timer asks again.
    match r.dev.data().local_source.lock().take() {
        Some(s) if len as usize <= s.len => {
            let s = LocalSource {
                len: len as usize,
                ..s
            };
            place_from(r.dev, r.qp, sq, offset, &s)
        }
        Some(_) => Placed::Failed,
        None => Placed::Lost,
    }
}

/// Completes the oldest WQE with `status`. The caller checks for room in `out` first.
fn complete_oldest(sq: &mut SqState, status: WcStatus, out: &mut Completions) {
    if out.is_full() {
        return;
    }
    if let Some(d) = sq.take_entry(0, status) {
        let _ = out.push(d);
    }
}

/// What [`complete_finished`] left at the head of the list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    /// No WQE finished by the requester is at the head: the oldest awaits its response.
    None,
    /// One of them failed and has completed: the QP goes to the error state.
    Failed,
    /// `out` is full and more are at the head.
    Full,
}

/// Completes the WQEs at the head of the list that the requester finished itself and held until
/// every WQE before them had completed (`req::finish`, IBA 10.8.3.1): local operations, in
/// posting order, with the status they ended with. A failed one ends the walk.
fn complete_finished(sq: &mut SqState, out: &mut Completions) -> Held {
    while let Some(status) = sq.entries.first().and_then(|e| e.finished) {
        if out.is_full() {
            return Held::Full;
        }
        complete_oldest(sq, status, out);
        if status != WcStatus::Success {
            return Held::Failed;
        }
    }
    Held::None
}

/// Where [`receive`] goes after one look at a response.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Look again: the response may complete the next oldest WQE too (ACKs are cumulative).
    Again,
    /// The response has done what it can.
    Done,
    /// The batch of completions is full: post it, then look at the response again.
    Full,
    /// A WQE failed and has completed in error: the QP goes to the error state.
    Error,
}

/// A response and the QP it is for.
struct Response<'a> {
    dev: &'a Device<Roxe>,
    qp: &'a RoxeQp,
    pkt: &'a Packet<&'a [u8]>,
    /// The payload is in the device's `local_source` slot, not in the packet
    /// (`Source::payload_in_slot`).
    payload_in_slot: bool,
    cfg: ReqConfig,
    /// The slot of the QP's peer, for its part in the peer's send window.
    peer: Option<u8>,
    ack: AckFacts,
}

/// Handles a response (ACK, NAK, read response, atomic acknowledge) for `qp`;
/// `payload_in_slot`: the loopback drainer left its payload in the responder's MR
/// (`Source::payload_in_slot`).
pub(crate) fn receive(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, payload_in_slot: bool) {
    if qp.qp_type != QpType::Rc {
        return;
    }
    let (path, cfg) = crate::qp::req_config(dev, qp);
    let ack = AckFacts::from_packet(pkt);
    match ack.aeth.map(|a| a.syndrome) {
        Some(Syndrome::RnrNak { .. }) => dev.data().counters.inc(Counter::RcvdRnrErr),
        Some(Syndrome::Nak(NakCode::PsnSequenceError)) => {
            dev.data().counters.inc(Counter::RcvdSeqErr)
        }
        _ => {}
    }
    let r = Response {
        dev,
        qp,
        pkt,
        payload_in_slot,
        cfg,
        peer: path.peer,
        ack,
    };
    // The completions are posted after the send lock is released, a batch at a time: a full
    // batch posts and the packet is looked at again.
    let error = loop {
        let mut completions = Completions::new();
        let flow = batch(&r, &mut completions);
        for done in completions.iter() {
            crate::qp::complete_send(dev, qp, done);
        }
        match flow {
            Flow::Full => continue,
            Flow::Error => break true,
            Flow::Again | Flow::Done => break false,
        }
    };
    if error {
        crate::qp::move_to_error(qp);
    }
    // A completion may have returned a credit or opened the window, a NAK asked for a resend,
    // or the QP is now in error and its remaining WQEs must flush.
    resume(dev, qp);
}

/// Runs the requester of `qp` after a response or a timer. A QP connected to the device's own
/// GID whose requester is idle is left to the kick work: a run from here could not hand its
/// packets to the responder (`req::Loopback::Queued`), and would copy each into a socket buffer,
/// and every packet after it too while the ACKs its packets bring keep running it from here (a
/// stream resent after an RNR NAK, or waiting for its window). A run going on is asked to go
/// round again (`req::run`).
fn resume(dev: &Device<Roxe>, qp: &RoxeQp) {
    if qp.local_path.load(Relaxed) && qp.req_running.load(Relaxed) == 0 {
        crate::qp::ask_kick(dev, qp);
        dev.kick();
        // An ACK deadline the response armed, as `req::run` would.
        crate::qp::timers_touched(dev, qp);
        return;
    }
    req::run(dev, qp);
}

/// One batch of [`receive`] under the send lock: the response applied to the oldest WQEs until
/// it has done what it can or `out` is full, the WQEs the requester finished behind them, and
/// the ACK timer.
fn batch(r: &Response<'_>, out: &mut Completions) -> Flow {
    let mut sq = r.qp.sq_state.lock();
    sq.comp.mtu = r.cfg.mtu;
    let before = sq.comp.expected_psn;
    let mut flow = Flow::Again;
    while flow == Flow::Again {
        flow = apply(r, &mut sq, out);
    }
    // The WQEs the requester finished behind the ones this packet completed complete now.
    if flow == Flow::Done {
        flow = match complete_finished(&mut sq, out) {
            Held::None => Flow::Done,
            Held::Failed => Flow::Error,
            Held::Full => Flow::Full,
        };
    }
    // The ACK timer runs while something sent is unacknowledged, from the last progress.
    if sq.comp.expected_psn == sq.psn_limit || sq.ack_timeout_ms == 0 {
        sq.ack_deadline_ms = 0;
    } else if sq.rnr_until_ns == 0 && (sq.comp.expected_psn != before || sq.ack_deadline_ms == 0) {
        sq.ack_deadline_ms = now_ms() + sq.ack_timeout_ms;
    }
    sq.settle_peer(r.dev, r.peer);
    flow
}

/// Applies the response to the oldest WQE still waiting for one (`proto::comp::on_response`).
fn apply(r: &Response<'_>, sq: &mut SqState, out: &mut Completions) -> Flow {
    if out.is_full() {
        return Flow::Full;
    }
    match complete_finished(sq, out) {
        Held::None => {}
        Held::Failed => return Flow::Error,
        Held::Full => return Flow::Full,
    }
    let oldest = oldest(sq, &r.cfg);
    let psn_limit = sq.psn_limit;
    // What the completer knew before this response: an ODP miss placing its data makes it a
    // lost response, as if it never came.
    let before_response = sq.comp;
    let action = on_response(&mut sq.comp, oldest.as_ref(), &r.ack, psn_limit);
    count(r.dev, &action);
    match action {
        CompAction::Ignore | CompAction::Progress => Flow::Done,
        CompAction::Complete => {
            complete_oldest(sq, WcStatus::Success, out);
            Flow::Done
        }
        CompAction::CompleteAndRecheck => {
            complete_oldest(sq, WcStatus::Success, out);
            Flow::Again
        }
        CompAction::ReadData {
            offset,
            len,
            completes,
        } => {
            match place_read_data(r, sq, offset, len) {
                Placed::Done => {}
                Placed::Lost => {
                    // The ACK timer asks again from here (the requester faults the buffers in
                    // before it does).
                    sq.comp = before_response;
                    return Flow::Done;
                }
                Placed::Failed => {
                    complete_oldest(sq, WcStatus::LocProtErr, out);
                    return Flow::Error;
                }
            }
            if let Some(e) = sq.entries.first_mut() {
                e.read_done = offset.saturating_add(len);
            }
            if completes {
                complete_oldest(sq, WcStatus::Success, out);
            }
            Flow::Done
        }
        CompAction::AtomicResult { orig } => match place(r.dev, r.qp, sq, 0, &orig.to_ne_bytes()) {
            Placed::Done => {
                complete_oldest(sq, WcStatus::Success, out);
                Flow::Done
            }
            // As for READ data; the responder answers the resent atomic from its responder
            // resources, without running it again.
            Placed::Lost => {
                sq.comp = before_response;
                Flow::Done
            }
            Placed::Failed => {
                complete_oldest(sq, WcStatus::LocProtErr, out);
                Flow::Error
            }
        },
        CompAction::Retry { from_psn } => {
            // A sequence NAK: a packet to the peer was lost (`peer`).
            sq.peer.lost();
            sq.rewind(from_psn, &r.cfg);
            Flow::Done
        }
        CompAction::RnrWait { delay_us, from_psn } => {
            // The wake timer releases the requester once the delay the responder asked for is
            // over (IBA 9.7.5.2.8: no sooner); the ACK timer waits meanwhile and restarts with
            // the retransmission.
            sq.rnr_until_ns = now_ns().saturating_add(u64::from(delay_us) * 1000).max(1);
            sq.ack_deadline_ms = 0;
            sq.rewind(from_psn, &r.cfg);
            // On the timers' list first, where the wake timer looks for the QPs it wakes.
            crate::qp::timers_touched(r.dev, r.qp);
            rnr_wake_at(r.dev, sq.rnr_until_ns);
            Flow::Done
        }
        CompAction::Error { status } => {
            complete_oldest(sq, status, out);
            Flow::Error
        }
    }
}

/// How late the wake timer may expire after the end of the RNR wait it is armed for: an RNR
/// NAK's delay is 10 us to 655 ms (IBA table 45), perftest's 640 us; a scheduler tick of slack,
/// as the short timer has, would add up to several times that to each wait.
const RNR_WAKE_SLACK_US: u32 = 50;

/// Arms the device's wake timer for `until` (`now_ns`), the end of an RC requester's RNR wait,
/// unless it is armed to expire sooner: then its callback (`task::rnr_timer`) arms it again for the
/// waits that are not over. The caller put the QP on the timers' list (`qp::timers_touched`)
/// first, so that a callback running meanwhile finds it. Any context; takes the leaf lock
/// `rnr_wake_ns`.
fn rnr_wake_at(dev: &Device<Roxe>, until: u64) {
    let mut armed = dev.data().rnr_wake_ns.lock();
    if *armed != 0 && *armed <= until {
        return;
    }
    *armed = until;
    let us = until.saturating_sub(now_ns()).div_ceil(1000);
    dev.start_wake_timer(u32::try_from(us).unwrap_or(u32::MAX), RNR_WAKE_SLACK_US);
}

/// The wake timer's look at an RC QP (softirq): if its RNR wait is over, the requester sends
/// again (from the PSN the RNR NAK named); if it still runs, the timer is armed for its end.
pub(crate) fn rnr_wake(dev: &Device<Roxe>, qp: &RoxeQp, now: u64) {
    if qp.qp_type != QpType::Rc {
        return;
    }
    let until = {
        let mut sq = qp.sq_state.lock();
        let until = sq.rnr_until_ns;
        if until != 0 && now >= until {
            sq.rnr_until_ns = 0;
        }
        until
    };
    match until {
        0 => {}
        t if now >= t => resume(dev, qp),
        t => rnr_wake_at(dev, t),
    }
}

/// The periodic check of a QP's timers (softirq, from the device tick every 10 ms): an expired
/// local ACK timer resends from the oldest unacknowledged PSN or, with no retry left, fails the
/// oldest WQE with `IB_WC_RETRY_EXC_ERR`; an expired RNR wait lets the requester go again.
pub(crate) fn tick(dev: &Device<Roxe>, qp: &RoxeQp, now: u64) {
    if qp.qp_type != QpType::Rc {
        return;
    }
    let (path, cfg) = crate::qp::req_config(dev, qp);
    let mut completions = Completions::new();
    let mut kick = false;
    let mut error = false;
    {
        let mut sq = qp.sq_state.lock();
        // The wake timer ends RNR waits; this is its fallback.
        if sq.rnr_until_ns != 0 && now_ns() >= sq.rnr_until_ns {
            sq.rnr_until_ns = 0;
            kick = true;
        }
        // Waiting for the peer's window too long: one packet past it (`peer`). Waiting for a
        // turn that came (should its wake-up have been missed) or too long: the requester goes.
        kick |= sq.peer.probe_due(now) || dev.data().peers.turn_due(&mut sq.peer, now);
        if sq.ack_deadline_ms != 0 && now >= sq.ack_deadline_ms {
            let oldest = oldest(&sq, &cfg);
            let psn_limit = sq.psn_limit;
            let action = on_ack_timeout(&mut sq.comp, oldest.as_ref(), psn_limit);
            count(dev, &action);
            match action {
                CompAction::Retry { from_psn } => {
                    sq.peer.lost();
                    sq.rewind(from_psn, &cfg);
                    sq.ack_deadline_ms = now + sq.ack_timeout_ms;
                    kick = true;
                }
                CompAction::Error { status } => {
                    sq.ack_deadline_ms = 0;
                    complete_oldest(&mut sq, status, &mut completions);
                    error = true;
                }
                _ => sq.ack_deadline_ms = 0,
            }
        }
        sq.settle_peer(dev, path.peer);
    }
    for done in completions.iter() {
        crate::qp::complete_send(dev, qp, done);
    }
    if error {
        crate::qp::move_to_error(qp);
    }
    if kick || error {
        resume(dev, qp);
    }
}
