// SPDX-License-Identifier: GPL-2.0

//! How a QP asks the device's works for stage work: the [`TIMED`] mark, which puts it on the
//! tick's list while a timer may be armed, and the [`KICKED`] mark, which the kick work serves
//! (`task.rs`). The flags beside the marks live in [`RoxeQp`].

#![deny(unsafe_code)]

use super::RoxeQp;
use crate::rdma::{device::Device, pool::PoolMark};
use crate::{hca::Roxe, proto::qp_state::QpType};
use kernel::sync::atomic::{Acquire, Relaxed, Release};

/// The QPs that may have a timer armed (retransmission, RNR wait, a READ reply to pace,
/// requests held behind it): the tick visits only them, so its cost follows the QPs with
/// something due, not the QPs there are.
pub(crate) const TIMED: PoolMark = PoolMark::One;

/// The QPs that asked the kick work to run their queues ([`ask_kick`]) or to send the ACK they
/// hold at the end of a receive pass (`ack::send_at_pass_end`).
pub(crate) const KICKED: PoolMark = PoolMark::Two;

/// Whether any of the QP's timers is armed.
fn timers_armed(qp: &RoxeQp) -> bool {
    let sq_armed = {
        let sq = qp.sq_state.lock();
        sq.ack_deadline_ms != 0 || sq.rnr_until_ns != 0 || sq.peer.queued()
    };
    if sq_armed {
        return true;
    }
    let rs = qp.resp_state.lock();
    rs.read.has_pending() || !rs.held.idle()
}

/// Puts an RC QP on the tick's list, unless [`RoxeQp::on_tick`] says it is there, after a stage
/// that may have armed one of its timers ran (the requester, the responder, the completer); the
/// tick takes it off once none is armed ([`left_tick`]). Any context; the caller armed any
/// timer before the call, under its lock.
///
/// A timer is armed under the lock the tick looks at it under (`sq_state`, `resp_state`), and
/// the tick clears the flag before it takes that lock: either the tick sees the timer armed and
/// keeps the QP on the list, or its look came first, and then the lock orders the clearing
/// before this load, which sees the flag clear.
pub(crate) fn timers_touched(dev: &Device<Roxe>, qp: &RoxeQp) {
    if qp.qp_type == QpType::Rc && !qp.on_tick.load(Acquire) {
        qp.on_tick.store(true, Relaxed);
        dev.data().qps.set_mark(qp.qpn, TIMED);
    }
}

/// The tick takes `qp` off its list, and puts it back if a timer is still armed. Called by the
/// tick, for a QP on its list.
pub(crate) fn left_tick(dev: &Device<Roxe>, qp: &RoxeQp) {
    let qps = &dev.data().qps;
    qps.clear_mark(qp.qpn, TIMED);
    // After the mark: a stage that reads the flag clear sets the mark after this cleared it.
    qp.on_tick.store(false, Release);
    if timers_armed(qp) {
        qp.on_tick.store(true, Relaxed);
        qps.set_mark(qp.qpn, TIMED);
    }
}

/// Asks the kick work to run the QP's queues; the caller kicks the device. Any context.
pub(crate) fn ask_kick(dev: &Device<Roxe>, qp: &RoxeQp) {
    qp.kick_pending.store(true, Release);
    // After the flag: the kick work takes the mark off before it looks at the flag.
    dev.data().qps.set_mark(qp.qpn, KICKED);
}
