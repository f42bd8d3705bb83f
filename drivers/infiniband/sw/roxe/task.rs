// SPDX-License-Identifier: GPL-2.0

//! The device's deferred work and what it runs: the tick (retransmission, RNR and READ-reply
//! pacing timers), the kick work (requesters and receive flushes asked for from contexts that
//! may not send, loopback packets a drainer left, ACKs held to the end of a receive pass), and
//! the process work (ODP faults and the stage work queued behind them, flushes too long for
//! softirq). Counterpart of rxe's `rxe_task.c`: the stages run from here, and the objects only
//! ask for it (`kick_pending`, `ack_at_pass_end`, `flush_pending`, `odp`'s queue).
//!
//! Contexts: the tick runs in the timer's softirq, the kick work in a BH workqueue (softirq),
//! the process work in process context; each takes a QP's locks only through the stages it runs.

#![deny(unsafe_code)]

use crate::rdma::device::{now_ms, Device};
use crate::{
    hca::Roxe,
    mem::odp::{self, StageJob},
    proto::{packet::Packet, qp_state::QpState},
    qp::{self, RoxeQp},
    recv::loopback,
};
use kernel::sync::atomic::Acquire;

/// The device tick (every `Deferred::TICK_MS`): the completer timers (retransmission, RNR wait)
/// and the paced READ reply of each QP on the tick's list; a QP whose timers are all off leaves
/// the list.
pub(crate) fn tick(dev: &Device<Roxe>) {
    let now = now_ms();
    let qps = &dev.data().qps;
    qps.for_each_marked(qp::TIMED, |_, qp| {
        crate::comp::tick(dev, qp, now);
        crate::resp::read_reply::tick(dev, qp, now);
        // Off the list first, then looked at: a stage that arms a timer after the look puts
        // the QP back (`timers_touched` runs after the stage's lock is released).
        qp::left_tick(dev, qp);
    });
    // The retransmissions and READ bursts sent to the device's own GID.
    loopback::drain(dev);
}

/// The device's short timer: the held ACKs that waited long enough leave.
pub(crate) fn short_timer(dev: &Device<Roxe>) {
    crate::net::ack::hold_timer_expired(dev);
    loopback::drain(dev);
}

/// The kick work: loopback packets a drainer left over when its budget ran out, then the QPs
/// that asked for their queues to run or hold an ACK until the end of a receive pass. Queued
/// from a receive pass in softirq while it is idle, it runs on that CPU once the pass is over.
pub(crate) fn kicked(dev: &Device<Roxe>) {
    loopback::drain(dev);
    let qps = &dev.data().qps;
    // The QPs whose turn at their peer's send window came (`peer`).
    dev.data().peers.take_served(|qpn| {
        if let Some(qp) = qps.get(qpn) {
            loopback::run_requester(dev, &qp);
        }
    });
    qps.for_each_marked(qp::KICKED, |qpn, qp| {
        qps.clear_mark(qpn, qp::KICKED);
        if qp.kick_pending.xchg(false, Acquire) {
            run_queues(dev, qp);
        }
        // After the requester, whose batch takes the held ACK if it sends.
        if qp.ack_at_pass_end.xchg(false, Acquire) {
            crate::net::ack::pass_ended(dev, qp);
        }
    });
}

/// Jobs (faults, requester runs, redeliveries) one pass of the process work runs before the
/// deferred flushes get their turn; the rest wait for the next pass. A job that re-queues itself
/// (a requester waiting on a page) then cannot keep every other QP's flush from running.
const PROCESS_BUDGET: u32 = 64;

/// The process work: ODP faults, and behind them the requester runs and redeliveries that
/// waited for them; then the flushes `qp::continue_flush` left, one budget each per pass (a QP
/// whose ring is still not empty asks for another pass). At most [`PROCESS_BUDGET`] jobs a pass.
pub(crate) fn process_work(dev: &Device<Roxe>) {
    let mut budget = PROCESS_BUDGET;
    while let Some(job) = odp::next_stage_job(dev, &mut budget) {
        match job {
            StageJob::Kick { qpn } => {
                if let Some(qp) = dev.data().qps.get(qpn) {
                    loopback::run_requester(dev, &qp);
                }
            }
            StageJob::Redeliver { qpn, bytes, src } => {
                if let Ok(pkt) = Packet::new_checked(&bytes[..]) {
                    // The responder's lock is a bottom-half lock (`RoxeQp::resp_state`). The
                    // QP is looked up with bottom halves off, as a packet handler does: a
                    // destroy's grace period then covers this delivery, and the ACK it may
                    // hold is sent by the destroy (`qp::destroy`'s caller), not stranded.
                    let _bh = crate::rdma::bh::disable();
                    if let Some(qp) = dev.data().qps.get(qpn) {
                        crate::resp::receive(dev, &qp, &pkt, &src);
                    }
                }
                // Its answer, when the requester is on this device.
                loopback::drain(dev);
            }
        }
    }
    dev.data().qps.for_each(|_, qp| {
        if qp.flush_pending.xchg(false, Acquire) {
            run_queues(dev, qp);
        }
    });
    if budget == 0 {
        // Jobs are left: another pass, after whatever else the workqueue has.
        dev.queue_process_work();
    }
}

/// Runs a QP's requester (which sends, or in the error state flushes, its send queue) and, in
/// the error state, flushes its receive queue: a receive posted to a QP in error flushes (IBA
/// 10.3.1), and `ib_drain_rq` waits for exactly that completion.
pub(crate) fn run_queues(dev: &Device<Roxe>, qp: &RoxeQp) {
    loopback::run_requester(dev, qp);
    if qp.state.lock().state == QpState::Err {
        qp::flush_recv(dev, qp);
    }
}
