// SPDX-License-Identifier: GPL-2.0

//! The completer: acknowledgements and responses to this QP's requests, and completions.
//! Counterpart of rxe's `rxe_comp.c`.
//!
//! Context: [`receive`] runs in the receive pipeline (softirq, or the loopback drainer). It
//! updates the send state under the QP's send lock, posts completions after releasing it, then
//! runs the requester, which an ACK may have unblocked.

#![deny(unsafe_code)]

use crate::{
    device::Roxe,
    mem::{MemError, SgeList},
    odp,
    proto::{
        mtt::Access,
        cqe::{wc_opcode_for_send, Cqe, WcStatus},
        opcode::Opcode,
        packet::{NakCode, Packet, Syndrome},
        comp::{RnrVerdict, TimeoutVerdict},
        psn::Psn,
        qp_state::{rnr_timer_us, QpState, QpType},
        wqe::{send_flags, send_layout, Payload, SendOpcode},
    },
    qp::RoxeQp,
    req,
};
use crate::rdma::{
    device::{now_ms, Device},
    qp::QpEvent,
};
use kernel::prelude::*;

/// Posts the completion of a send WQE, if it asked for one (or all do, or it failed: IBA 10.8.6
/// reports every error).
pub(crate) fn complete_send(qp: &RoxeQp, wr_id: u64, op: SendOpcode, flags: u32, status: WcStatus, byte_len: u32) {
    let signalled = qp.sq_sig_all || flags & send_flags::SIGNALED != 0 || status != WcStatus::Success;
    if !signalled {
        return;
    }
    let mut cqe = Cqe::new(wr_id, status, wc_opcode_for_send(op), qp.qpn);
    if status == WcStatus::Success {
        cqe.byte_len = byte_len;
    }
    // A full CQ is an overrun: the CQ reports it to its consumer (IBA 11.4.2.1).
    let _ = qp.send_cq.post(&cqe.to_bytes(), false);
}

/// Moves the QP to the error state after a failed WQE (IBA 10.3.1: completion errors on RC put
/// the QP in error), and tells the consumer.
pub(crate) fn move_to_error(qp: &RoxeQp) {
    let mut st = qp.state.lock();
    if st.state != QpState::Err {
        st.state = QpState::Err;
        st.attr.qp_state = QpState::Err.as_raw();
        drop(st);
        qp.notifier.event(QpEvent::Fatal);
        crate::qp::last_wqe_reached(qp);
    }
}

/// What an incoming response does to the oldest outstanding WQEs.
enum Done {
    /// Complete the WQEs at the front of the list with this status.
    Front { count: usize, status: WcStatus },
    /// Nothing completes.
    Nothing,
}

/// Handles a response (ACK, NAK, read response, atomic acknowledge) for `qp`.
pub(crate) fn receive(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>) {
    if qp.qp_type != QpType::Rc {
        return;
    }
    let info = pkt.info();
    let psn = pkt.psn();
    let mtu = req::path_info(dev, qp).mtu;
    let mut completions: KVec<(u64, SendOpcode, u32, WcStatus, u32)> = KVec::new();
    let mut error = false;
    let mut read_progress = false;
    {
        let mut sq = qp.sq_state.lock();
        let mut done = Done::Nothing;
        if let Some(aeth) = pkt.aeth() {
            match aeth.syndrome {
                Syndrome::Ack { .. } => {
                    if psn.diff(sq.acked_psn) > 0 {
                        // Progress (IBA 9.7.6.1.3): the retry count starts over and the timer
                        // restarts for what is still unacknowledged.
                        sq.acked_psn = psn;
                        sq.retry.reset();
                        sq.ack_deadline_ms = if sq.ack_timeout_ms != 0 { now_ms() + sq.ack_timeout_ms } else { 0 };
                    }
                    // ACKs are cumulative (IBA 9.7.5.1.2): every sent WQE whose last PSN is at or
                    // before the acknowledged one is done, except READs and atomics, which
                    // complete only with their data.
                    let carries_data = info.is_read_response() || info.opcode() == Opcode::RC_ATOMIC_ACKNOWLEDGE;
                    let mut n = 0;
                    let mut restart = None;
                    for e in sq.entries.iter() {
                        if !e.sent || e.last_psn.diff(psn) > 0 {
                            break;
                        }
                        if matches!(e.wqe.opcode, SendOpcode::RdmaRead | SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd) {
                            if !carries_data {
                                // A plain ACK past an unanswered READ/atomic: its response was
                                // lost. Resend from it (an implicit NAK).
                                restart = Some(e.first_psn);
                            }
                            break;
                        }
                        n += 1;
                    }
                    take_front(&mut sq, n, WcStatus::Success, &mut completions);
                    if let Some(p) = restart {
                        restart_at(&mut sq, p, mtu);
                    }
                }
                Syndrome::RnrNak { timer } => {
                    // The responder had no receive WQE: wait for its RNR timer, then resend from
                    // the NAK'd PSN (IBA 9.7.5.2.8), unless the RNR retries ran out.
                    dev.data().counters.inc(crate::counters::Counter::RcvdRnrErr);
                    match sq.retry.on_rnr_nak() {
                        RnrVerdict::Wait => {
                            let delay_ms = u64::from(rnr_timer_us(timer)).div_ceil(1000).max(1);
                            sq.rnr_until_ms = now_ms() + delay_ms;
                            sq.ack_deadline_ms = 0;
                            restart_at(&mut sq, psn, mtu);
                        }
                        RnrVerdict::Exhausted => {
                            dev.data().counters.inc(crate::counters::Counter::RnrNakRetryErr);
                            done = Done::Front { count: 1, status: WcStatus::RnrRetryExcErr };
                            error = true;
                        }
                    }
                }
                Syndrome::Nak(code) => {
                    let status = match code {
                        NakCode::PsnSequenceError => None,
                        NakCode::InvalidRequest => Some(WcStatus::RemInvReqErr),
                        NakCode::RemoteAccessError => Some(WcStatus::RemAccessErr),
                        _ => Some(WcStatus::RemOpErr),
                    };
                    match status {
                        // IBA 9.7.5.2.1: resend everything from the NAK'd PSN.
                        None => {
                            dev.data().counters.inc(crate::counters::Counter::RcvdSeqErr);
                            dev.data().counters.inc(crate::counters::Counter::CompleterRetryErr);
                            // The responder executed every request before the PSN it expects:
                            // the NAK acknowledges them implicitly (as in rxe's completer), which
                            // is progress. Without this, under steady loss progress came only from
                            // ACKs of every 64th packet, each timeout went back to the last ACK,
                            // and the retries ran out while data still moved (RETRY_EXC_ERR under
                            // netem).
                            let before = psn.add(0xff_ffff);
                            if before.diff(sq.acked_psn) > 0 {
                                sq.acked_psn = before;
                                sq.retry.reset();
                                sq.ack_deadline_ms = if sq.ack_timeout_ms != 0 { now_ms() + sq.ack_timeout_ms } else { 0 };
                                let mut n = 0;
                                for e in sq.entries.iter() {
                                    if !e.sent
                                        || e.last_psn.diff(before) > 0
                                        || matches!(e.wqe.opcode, SendOpcode::RdmaRead | SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd)
                                    {
                                        break;
                                    }
                                    n += 1;
                                }
                                take_front(&mut sq, n, WcStatus::Success, &mut completions);
                            }
                            restart_at(&mut sq, psn, mtu)
                        }
                        Some(status) => {
                            // The WQE holding the PSN fails; the QP goes to error.
                            let idx = sq.entries.iter().position(|e| e.first_psn.diff(psn) <= 0 && e.last_psn.diff(psn) >= 0);
                            let count = idx.map_or(1, |i| i + 1);
                            // Earlier WQEs were implicitly acknowledged.
                            if count > 1 {
                                take_front(&mut sq, count - 1, WcStatus::Success, &mut completions);
                            }
                            done = Done::Front { count: 1, status };
                            error = true;
                        }
                    }
                }
                Syndrome::Reserved(_) => {}
            }
        }
        if info.is_read_response() || info.opcode() == Opcode::RC_ATOMIC_ACKNOWLEDGE {
            // The response belongs to the oldest WQE (responses come in order).
            if let Some(e) = sq.entries.first_mut() {
                let is_read = e.wqe.opcode == SendOpcode::RdmaRead;
                let in_range = psn.diff(e.first_psn) >= 0 && psn.diff(e.last_psn) <= 0;
                if is_read && info.is_read_response() && in_range {
                    let offset = (psn.diff(e.first_psn) as u32).saturating_mul(mtu);
                    if offset > e.read_done && e.sent && e.reissued_at != Some(e.read_done) {
                        // Responses were lost (IBA 9.7.5.1.2: a later response implies the
                        // missing ones will not come): ask again for the rest, once per gap.
                        e.reissued_at = Some(e.read_done);
                        let resume = e.first_psn.add(e.read_done.checked_div(mtu).unwrap_or(0));
                        restart_at(&mut sq, resume, mtu);
                    } else if offset == e.read_done {
                        let payload = pkt.payload();
                        let num = match e.wqe.payload {
                            Payload::Sges { num } => num,
                            Payload::Inline { .. } => 0,
                        };
                        let list = SgeList { slot: &e.slot, base: send_layout::DMA_DATA, num };
                        match list.scatter(dev.data(), qp.pd_id, u64::from(offset), payload) {
                            Ok(()) => {
                                e.read_done = offset + payload.len() as u32;
                                // Response data is progress too (IBA 9.7.6.1.3).
                                read_progress = true;
                                if info.ends_message() {
                                    done = Done::Front { count: 1, status: WcStatus::Success };
                                }
                            }
                            Err(MemError::NotPresent) => {
                                // ODP: invalidated since the requester faulted it in. A lost
                                // response: fault it in; the retry asks again.
                                let rest = e.wqe.length.saturating_sub(offset) as usize;
                                let _ = odp::fault_sges(dev, qp.pd_id, &list, u64::from(offset), rest, Access::LOCAL_WRITE);
                            }
                            Err(_) => {
                                done = Done::Front { count: 1, status: WcStatus::LocProtErr };
                                error = true;
                            }
                        }
                    }
                } else if !is_read && info.opcode() == Opcode::RC_ATOMIC_ACKNOWLEDGE && in_range {
                    if let Some(ack) = pkt.atomic_ack_eth() {
                        let list = SgeList { slot: &e.slot, base: send_layout::DMA_DATA, num: 1 };
                        match list.scatter(dev.data(), qp.pd_id, 0, &ack.orig.to_ne_bytes()) {
                            Ok(()) => done = Done::Front { count: 1, status: WcStatus::Success },
                            // ODP: as for a READ response above; the responder answers the
                            // retried atomic from its cache.
                            Err(MemError::NotPresent) => {
                                let _ = odp::fault_sges(dev, qp.pd_id, &list, 0, 8, Access::LOCAL_WRITE);
                            }
                            Err(_) => {
                                done = Done::Front { count: 1, status: WcStatus::LocProtErr };
                                error = true;
                            }
                        }
                    }
                }
            }
        }
        if let Done::Front { count, status } = done {
            take_front(&mut sq, count, status, &mut completions);
        }
        if read_progress {
            sq.retry.reset();
            sq.ack_deadline_ms = if sq.ack_timeout_ms != 0 { now_ms() + sq.ack_timeout_ms } else { 0 };
        }
        if !completions.is_empty() {
            // Progress: the retry count starts over (IBA 9.7.6.1.3) and the timer restarts for
            // what is still unacknowledged.
            sq.retry.reset();
            sq.ack_deadline_ms = if sq.entries.iter().any(|e| e.sent) && sq.ack_timeout_ms != 0 {
                now_ms() + sq.ack_timeout_ms
            } else {
                0
            };
        }
    }
    for (wr_id, op, flags, status, len) in completions {
        complete_send(qp, wr_id, op, flags, status, len);
    }
    if error {
        move_to_error(qp);
    }
    // An ACK may have opened the window, a NAK asked for a resend, or the QP is now in error
    // and its remaining WQEs must flush.
    req::run(dev, qp);
}

/// The periodic check of a QP's timers (softirq, from the device tick): an expired local ACK
/// timer resends from the oldest unacknowledged request or, with no retry left, fails it with
/// `IB_WC_RETRY_EXC_ERR`; an expired RNR wait lets the requester go again.
pub(crate) fn tick(dev: &Device<Roxe>, qp: &RoxeQp, now: u64) {
    if qp.qp_type != QpType::Rc {
        return;
    }
    let mtu = req::path_info(dev, qp).mtu;
    let mut completions: KVec<(u64, SendOpcode, u32, WcStatus, u32)> = KVec::new();
    let mut kick = false;
    let mut error = false;
    {
        let mut sq = qp.sq_state.lock();
        if sq.rnr_until_ms != 0 && now >= sq.rnr_until_ms {
            sq.rnr_until_ms = 0;
            kick = true;
        }
        if sq.ack_deadline_ms != 0 && now >= sq.ack_deadline_ms {
            let resume = sq.entries.first().map(|e| {
                // The first PSN not yet acknowledged, if it lies in the oldest WQE.
                let next = sq.acked_psn.next();
                if next.diff(e.first_psn) > 0 && next.diff(e.last_psn) <= 0 { next } else { e.first_psn }
            });
            match resume {
                None => sq.ack_deadline_ms = 0,
                Some(first) => match sq.retry.on_timeout() {
                    TimeoutVerdict::Retry => {
                        dev.data().counters.inc(crate::counters::Counter::CompleterRetryErr);
                        restart_at(&mut sq, first, mtu);
                        sq.ack_deadline_ms = now + sq.ack_timeout_ms;
                        kick = true;
                    }
                    TimeoutVerdict::Exhausted => {
                        dev.data().counters.inc(crate::counters::Counter::RetryExceededErr);
                        sq.ack_deadline_ms = 0;
                        take_front(&mut sq, 1, WcStatus::RetryExcErr, &mut completions);
                        error = true;
                    }
                },
            }
        }
    }
    for (wr_id, op, flags, status, len) in completions {
        complete_send(qp, wr_id, op, flags, status, len);
    }
    if error {
        move_to_error(qp);
    }
    if kick || error {
        req::run(dev, qp);
    }
}

/// Removes the first `count` entries and queues their completions.
fn take_front(
    sq: &mut crate::qp::SqState,
    count: usize,
    status: WcStatus,
    out: &mut KVec<(u64, SendOpcode, u32, WcStatus, u32)>,
) {
    for _ in 0..count {
        if sq.entries.is_empty() {
            break;
        }
        if let Ok(e) = sq.entries.remove(0) {
            if sq.cur == 0 {
                // The WQE was current: rewound for resending (go-back-N) and completed by a
                // response already on its way. Its PSNs must not be reused, or the next WQE
                // would go out with PSNs the responder has executed: a duplicate, ACKed and
                // never delivered (a SEND completing with no receive).
                if e.last_psn.diff(sq.next_psn) >= 0 {
                    sq.next_psn = e.last_psn.next();
                }
                sq.cur_offset = 0;
            }
            let len = match e.wqe.opcode {
                SendOpcode::RdmaRead => e.read_done,
                _ => e.wqe.length,
            };
            let _ = out.push((e.wqe.wr_id, e.wqe.opcode, e.wqe.flags, status, len), GFP_ATOMIC);
            sq.cur = sq.cur.saturating_sub(1);
        }
    }
}

/// Go-back-N (IBA 9.7.5.2.1): the requester resends from `psn`. A SEND or WRITE resumes in the
/// middle of its message at that PSN (the responder expects exactly it); a READ or atomic is
/// asked again from its start (a duplicate READ is served again, a duplicate atomic answered
/// from the responder's cache).
fn restart_at(sq: &mut crate::qp::SqState, psn: Psn, mtu: u32) {
    let Some(idx) = sq.entries.iter().position(|e| e.last_psn.diff(psn) >= 0) else {
        return;
    };
    if idx >= sq.cur && sq.cur_offset == 0 {
        return;
    }
    let mut resume_offset = 0u32;
    if let Some(e) = sq.entries.get_mut(idx) {
        let into = psn.diff(e.first_psn);
        let resumable = !matches!(e.wqe.opcode, SendOpcode::RdmaRead | SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd);
        let at = (into.max(0) as u32).saturating_mul(mtu);
        if resumable && into > 0 && at < e.wqe.length {
            resume_offset = at;
            sq.next_psn = psn;
        } else if e.wqe.opcode == SendOpcode::RdmaRead && e.read_done > 0 && e.read_done < e.wqe.length {
            // Ask only for the responses still missing.
            resume_offset = e.read_done;
            sq.next_psn = e.first_psn.add(e.read_done.checked_div(mtu).unwrap_or(0));
        } else {
            e.read_done = 0;
            sq.next_psn = e.first_psn;
        }
        e.sent = false;
    }
    for e in sq.entries.iter_mut().skip(idx) {
        e.sent = false;
    }
    sq.cur = idx;
    sq.cur_offset = resume_offset;
}
