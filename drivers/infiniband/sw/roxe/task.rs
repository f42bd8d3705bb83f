// SPDX-License-Identifier: GPL-2.0

//! The device's deferred work and what it runs: the tick (retransmission, RNR and READ-reply
//! pacing timers), the kick work (requesters and receive flushes asked for from contexts that
//! may not send, requesters a send doorbell hands to another CPU, loopback packets a drainer
//! left, ACKs held to the end of a receive pass), the send doorbell's choice between that and
//! running the requester at once, and the process work (ODP faults and the stage work queued
//! behind them, flushes too long for softirq). Counterpart of rxe's `rxe_task.c`: the stages
//! run from here, and the objects only ask for it (`kick_pending`, `ack_at_pass_end`,
//! `flush_pending`, `odp`'s queue).
//!
//! Contexts: the tick runs in the timer's softirq, the kick work in a BH workqueue (softirq),
//! the process work in process context; each takes a QP's locks only through the stages it runs.

#![deny(unsafe_code)]

use crate::rdma::device::{now_ms, now_ns, Device};
use crate::{
    hca::Roxe,
    mem::odp::{self, StageJob},
    proto::{
        packet::Packet,
        qp_state::{QpState, QpType},
    },
    qp::{self, RoxeQp},
    recv::loopback,
};
use kernel::sync::atomic::{Acquire, Full, Relaxed, Release};

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

/// The device's wake timer expired (softirq): the RC requesters whose RNR wait is over send
/// again, and the timer is armed for the next wait that is not (`comp::rnr_wake_at`). The QPs in an
/// RNR wait are on the timers' list, so the tick ends their waits too, should this miss one.
pub(crate) fn rnr_timer(dev: &Device<Roxe>) {
    // Before the look: a wait that starts from now on arms the timer again.
    *dev.data().rnr_wake_ns.lock() = 0;
    let now = now_ns();
    dev.data().qps.for_each_marked(qp::TIMED, |_, qp| {
        crate::comp::rnr_wake(dev, qp, now);
    });
    loopback::drain(dev);
}

/// `RoxeDevice::doorbell_qpn` when no QP's doorbells hand their requester over (QPNs have 24
/// bits).
pub(crate) const NO_QP: u32 = u32::MAX;

/// The send doorbell of a user QP: new WQEs are in its ring. The requester runs at once on the
/// poster's CPU for a UC or UD QP, and for an RC QP whose poster is likely to wait for the
/// completion, the shortest way to it: the last WQE taken asked for one (`RoxeQp::awaited`) and
/// the poster has polled every completion so far (a stream posts on without polling), unless the
/// QP is connected to the device's own GID (`RoxeQp::local_path`) and the kick work has a
/// handed-over requester, or what its runs left, to run (`RoxeDevice::doorbell_pass`): the two
/// would deliver side by
/// side, and one would find the loopback drainer busy and take the slow way, through socket
/// buffers. It runs there too when another QP's doorbells hand theirs over
/// (`RoxeDevice::doorbell_qpn`: the kick work is one work, and one QP riding it leaves every
/// other QP its own poster's CPU), unless the QP is connected to the device's own GID, whose
/// deliveries are one drainer's anyway. Otherwise the kick work runs it on another CPU, and the
/// poster goes on posting while the requester, the responder and the completer of its messages
/// run beside it, as rdma_rxe's tasks do. Process context.
pub(crate) fn doorbell(dev: &Device<Roxe>, qp: &RoxeQp) {
    if !hands_over(dev, qp) {
        loopback::run_requester(dev, qp);
    }
}

/// Whether the send doorbell of `qp` leaves its requester to the kick work on another CPU
/// ([`doorbell`]), which it then asked for.
fn hands_over(dev: &Device<Roxe>, qp: &RoxeQp) -> bool {
    // A UC or UD send completes as it leaves, on a real HCA within microseconds of the
    // doorbell, and software counts on finding it in the CQ soon after (rdma-core's
    // `test_resize_cq` resizes a UD QP's CQ below the completions it just posted for): the
    // requester of such a QP stays on the poster's CPU. An RC send completes with its ACK.
    // Both checks come before the CQ's lock, which they spare these QPs and one-CPU systems.
    if qp.qp_type != QpType::Rc || !dev.other_cpus_online() {
        return false;
    }
    let data = dev.data();
    let local = qp.local_path.load(Relaxed);
    // A QP connected to the device's own GID does not run beside a requester handed over:
    // both would deliver, and one would find the drainer busy.
    let waits = qp.awaited.load(Relaxed)
        && !qp.send_cq.unpolled()
        && !(local && data.doorbell_pass.load(Relaxed));
    if waits {
        return false;
    }
    // The turn: this QP's already, or taken if no QP has it (read first: every poster's
    // doorbell reads the line). A QP connected to the device's own GID needs none.
    let handed = &data.doorbell_qpn;
    let turn = match handed.load(Relaxed) {
        _ if local => true,
        q if q == qp.qpn => true,
        NO_QP => handed
            .cmpxchg(NO_QP, qp.qpn, Full)
            .map_or_else(|cur| cur == qp.qpn, |_| true),
        _ => false,
    };
    if !turn {
        return false;
    }
    qp::ask_kick(dev, qp);
    data.doorbell_pass.store(true, Relaxed);
    if dev.kick_other() {
        return true;
    }
    // No other CPU the poster may use: its run takes the WQEs, and the kick finds none.
    let _ = handed.cmpxchg(qp.qpn, NO_QP, Full);
    false
}

/// The kick work: loopback packets a drainer left over when its budget ran out, then the QPs
/// that asked for their queues to run or hold an ACK until the end of a receive pass. Queued
/// from a receive pass in softirq while it is idle, it runs on that CPU once the pass is over;
/// queued by a send doorbell, on another CPU than the poster's ([`doorbell`]).
pub(crate) fn kicked(dev: &Device<Roxe>) {
    loopback::drain(dev);
    let data = dev.data();
    let qps = &data.qps;
    // The QPs whose turn at their peer's send window came (`peer`).
    data.peers.take_served(|qpn| {
        if let Some(qp) = qps.get(qpn) {
            loopback::run_requester(dev, &qp);
        }
    });
    let mut again = false;
    qps.for_each_marked(qp::KICKED, |qpn, qp| {
        qps.clear_mark(qpn, qp::KICKED);
        if qp.kick_pending.xchg(false, Acquire) {
            run_queues(dev, qp);
            // A run that spent its budget goes on in the next pass (`req::Run`).
            again |= qp.kick_pending.load(Relaxed);
        }
        // After the requester, whose batch takes the held ACK if it sends.
        if qp.ack_at_pass_end.xchg(false, Acquire) {
            crate::net::ack::pass_ended(dev, qp);
        }
    });
    // A pass that left requesters or loopback packets to the next goes on as the doorbell's
    // pass did: until it is over, a waiting QP connected to the device's own GID would find the
    // drainer busy (`doorbell`). The flag is cleared by the first pass that leaves nothing (a
    // handover queues one); the turn ends with every pass, so that a QP gone meanwhile does not
    // keep it.
    if !again && data.loopback.is_empty() {
        data.doorbell_pass.store(false, Relaxed);
    }
    // From now on the first doorbell to hand its requester over has the kick work for itself.
    data.doorbell_qpn.store(NO_QP, Release);
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
