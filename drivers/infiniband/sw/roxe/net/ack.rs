// SPDX-License-Identifier: GPL-2.0

//! A QP's outgoing responses: they leave in the order the responder made them, one context at a
//! time (`proto::resp::ResponseTx`), and a positive ACK the responder would send alone waits:
//! until the end of the receive pass, so that the requests of one pass get one ACK, or, for a
//! QP whose requester answers quickly, for a short while for the requester of the same QP to
//! send towards the same peer, leaving in that batch. Which QPs hold for their requester, the
//! device's short timer that sends what was not taken, and the account of how many QPs hold
//! one.
//!
//! Context: softirq, the loopback drainer, or the requester (bottom halves off); process
//! context for a QP's state change. The QP's `resp_tx` lock and, under it, the device's
//! `held_acks` lock are IRQ-safe leaves; packets leave after both, and are freed after both.

#![deny(unsafe_code)]

use crate::rdma::{
    ah::AddressVector,
    bh,
    device::{now_ns, Device},
};
use crate::soft::skb::TxSkBuff;
use crate::{
    counters::Counter,
    hca::Roxe,
    net::{self, udp_sport},
    proto::{
        psn::Psn,
        resp::{Hold, Next, Offer},
    },
    qp::{HeldAck, Queued, RoxeQp},
};
use kernel::{
    prelude::*,
    sync::atomic::{Relaxed, Release},
};

/// How long a positive ACK waits at least for the requester's next packets to the same peer, to
/// leave in their batch: one pass through the stack and one doorbell for both, and on a virtual
/// NIC one wake-up of the host's network thread instead of two. In a ping-pong the answer is
/// posted within this: the process polling for the request runs once softirq is over (the
/// values tried: `Documentation/performance.md`, "Constants"). The
/// short timer that sends an ACK no answer took may fire up to one scheduler tick later
/// (`Device::start_short_timer`): far inside the ACK delay the device advertises
/// (`local_ca_ack_delay` 15: 4.096 us * 2^15, 134 ms). It is also the answer time that makes a
/// QP start holding (`requester_sending`).
pub(crate) const ACK_HOLD_US: u32 = 200;

/// Sends a request's responses: `ack`, then `packets`, after any ACK held from before
/// (responses leave in PSN order, IBA 9.5). A positive ACK that travels alone to an IPv4 peer
/// is held instead (`ResponseTx::hold`): while the QP answers its peer quickly
/// (`RoxeQp::hold_acks`), for the requester to send with its next batch ([`batch_held_ack`])
/// or the device's short timer ([`hold_timer_expired`]); otherwise, if it acknowledges a
/// message of one packet (`one_packet`), until the end of the receive pass ([`pass_ended`]),
/// so that of the small messages the pass brings only the last is ACKed (ACKs are cumulative,
/// IBA 9.7.5.1.2: a later held ACK replaces an earlier one). While another context sends this
/// QP's responses, these wait for it to send them (`proto::resp::ResponseTx`).
pub(crate) fn send_responses(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    av: &AddressVector,
    mut ack: Option<(Psn, TxSkBuff)>,
    packets: KVec<TxSkBuff>,
    one_packet: bool,
) {
    let hold_acks = qp.hold_acks.load(Relaxed);
    if packets.is_empty() && ack.is_none() {
        // Nothing to send (a WRITE's middle packets): a held ACK goes, the peer sends on.
        if hold_acks {
            send_held_ack(dev, qp);
        }
        return;
    }
    let lone_ack = packets.is_empty() && ack.is_some() && net::batch_addresses(av).is_some();
    if lone_ack && !hold_acks {
        // Leaves at the end of the pass or at once; should the requester answer soon, the next
        // ones wait for it.
        qp.unheld_ack_ns.store(now_ns(), Relaxed);
    }
    if lone_ack && (hold_acks || one_packet) {
        if let Some((psn, skb)) = ack.take() {
            let held = HeldAck {
                skb,
                av: *av,
                for_requester: hold_acks,
            };
            match hold(dev, qp, psn, held) {
                // Freed outside the locks.
                Ok(free) => {
                    if !hold_acks {
                        send_at_pass_end(dev, qp);
                    }
                    drop(free);
                    return;
                }
                Err(busy) => ack = Some((psn, busy.skb)),
            }
        }
    }
    let group = Queued {
        av: *av,
        ack: ack.map(|(_, skb)| skb),
        packets,
    };
    let n = group.packets.len() + usize::from(group.ack.is_some());
    let offer = {
        let mut tx = qp.resp_tx.lock();
        let offer = tx.offer(group, n);
        if let Offer::Send { held, unparked, .. } = &offer {
            // Each of a held ACK and parked responses was counted for the short timer.
            for _ in 0..u8::from(counted(held.as_ref())) + u8::from(*unparked) {
                waiting_ended(dev);
            }
        }
        offer
    };
    match offer {
        Offer::Queued => {}
        Offer::Full(lost) => {
            dev.data().counters.add(Counter::SendErr, n as u64);
            drop(lost);
        }
        Offer::Send {
            held,
            group,
            dropped,
            ..
        } => {
            if dropped.is_some() {
                dev.data().counters.add(Counter::SendErr, n as u64);
            }
            drop(dropped);
            // The responses leave together (`net::TxBatch`), as the requester's packets do: an
            // RDMA READ's burst of responses pays the stack and the device's doorbell once per
            // batch instead of once per packet.
            let mut batch = net::TxBatch::new();
            let sport = udp_sport(qp.qpn);
            if let Some(h) = held {
                batch.add(dev, &h.av, sport, h.skb);
            }
            if let Some(g) = group {
                add_group(dev, &mut batch, sport, g);
            }
            batch.flush(dev);
            end_turn(dev, qp);
        }
    }
}

/// Asks the device's kick work to send the ACK `qp` holds once the current receive pass is over:
/// queued from softirq, the work runs on this CPU after it (the network receive softirq
/// finishes its pass first), and from a context with bottom halves off, once they are back on;
/// when a send doorbell has the work pending or running on another CPU (`task::doorbell`), it
/// runs there, maybe before the pass is over, and the ACK leaves sooner than it could have.
/// The ACKs the pass makes meanwhile replace the held one, and ask nothing more.
fn send_at_pass_end(dev: &Device<Roxe>, qp: &RoxeQp) {
    if qp.ack_at_pass_end.xchg(true, Release) {
        // Asked already, and the work has not looked at the QP yet: it will send this one.
        return;
    }
    // After the flag: the kick work takes the mark off before it looks at the flag.
    dev.data().qps.set_mark(qp.qpn, crate::qp::KICKED);
    dev.kick();
}

/// The kick work found `qp` asking for its ACK to leave at the end of a pass
/// ([`send_at_pass_end`]): sends it, unless the ACK held now is one held for the requester
/// (the QP started holding for it since), whose next batch or the short timer takes it.
pub(crate) fn pass_ended(dev: &Device<Roxe>, qp: &RoxeQp) {
    let for_requester = counted(qp.resp_tx.lock().held());
    if !for_requester {
        send_held_ack(dev, qp);
    }
}

/// Whether a held ACK (in the QP, or taken from it) is counted for the short timer.
fn counted(held: Option<&HeldAck>) -> bool {
    held.is_some_and(|h| h.for_requester)
}

/// Holds `ack` (see [`send_responses`]): `Ok` with what is to be freed outside the locks (an
/// older held ACK, or this one if a later one is held), or `Err` with the ACK if it must be
/// sent instead (another context sends, or responses wait). An ACK that replaces one held for
/// the requester is held for the requester too: the count and the short timer go on covering
/// it.
fn hold(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    psn: Psn,
    mut ack: HeldAck,
) -> Result<Option<HeldAck>, HeldAck> {
    let mut tx = qp.resp_tx.lock();
    let was_counted = counted(tx.held());
    ack.for_requester |= was_counted;
    let counts = ack.for_requester;
    match tx.hold(psn, ack) {
        Hold::Held { superseded, .. } => {
            if counts && !was_counted {
                waiting_started(dev);
            }
            Ok(superseded)
        }
        // The later ACK held stays as it was held: for the requester (counted), or for the end
        // of the pass, which sends it.
        Hold::Older(ack) => Ok(Some(ack)),
        Hold::Busy(ack) => Err(ack),
    }
}

/// Queues `g`'s packets into `batch`, the ACK first.
fn add_group(dev: &Device<Roxe>, batch: &mut net::TxBatch, sport: u16, mut g: Queued) {
    if let Some(skb) = g.ack.take() {
        batch.add(dev, &g.av, sport, skb);
    }
    for skb in g.packets.drain_all() {
        batch.add(dev, &g.av, sport, skb);
    }
}

/// A QP holds an ACK, or parked responses, for the short timer: counted, and the timer
/// started if it does not run. Under the QP's `resp_tx` lock.
fn waiting_started(dev: &Device<Roxe>) {
    let mut acks = dev.data().held_acks.lock();
    acks.count += 1;
    if !acks.timer_armed {
        acks.timer_armed = true;
        dev.start_short_timer(ACK_HOLD_US);
    }
}

/// A QP's held ACK or parked responses were taken; the timer stops with the last. Under the
/// QP's `resp_tx` lock.
fn waiting_ended(dev: &Device<Roxe>) {
    let mut acks = dev.data().held_acks.lock();
    acks.count = acks.count.saturating_sub(1);
    // A timer whose callback already runs stays marked armed: the callback clears the mark.
    if acks.count == 0 && acks.timer_armed && dev.try_cancel_short_timer() {
        acks.timer_armed = false;
    }
}

/// Ends the caller's turn once it has handed what it took to the network: sends the groups
/// other contexts queued meanwhile, in order, at most `TURN_GROUPS` of them
/// (`ResponseTx::next`); the rest waits for the next context or the short timer.
pub(crate) fn end_turn(dev: &Device<Roxe>, qp: &RoxeQp) {
    let sport = udp_sport(qp.qpn);
    loop {
        let next = {
            let mut tx = qp.resp_tx.lock();
            let next = tx.next();
            if matches!(next, Next::Park) {
                waiting_started(dev);
            }
            next
        };
        let Next::Again(group) = next else { return };
        let mut batch = net::TxBatch::new();
        add_group(dev, &mut batch, sport, group);
        batch.flush(dev);
    }
}

/// Puts the ACK `qp` holds, if any, into `batch`, and with it the turn to send the QP's
/// responses (or takes the turn for responses a parked turn left waiting): the caller flushes
/// `batch`, then calls [`end_turn`]. Returns whether it did.
pub(crate) fn batch_held_ack(dev: &Device<Roxe>, qp: &RoxeQp, batch: &mut net::TxBatch) -> bool {
    let claim = {
        let mut tx = qp.resp_tx.lock();
        let Some(claim) = tx.claim() else {
            return false;
        };
        for _ in 0..u8::from(counted(claim.held.as_ref())) + u8::from(claim.unparked) {
            waiting_ended(dev);
        }
        claim
    };
    if let Some(held) = claim.held {
        batch.add(dev, &held.av, udp_sport(qp.qpn), held.skb);
    }
    true
}

/// Sends the ACK `qp` holds, if any, and what a parked turn left waiting, now. Returns whether
/// there was any. Bottom halves are off for the turn, so that no context that would queue
/// behind it runs meanwhile on this CPU (in process context, a preempted turn would hold every
/// response of the QP back).
pub(crate) fn send_held_ack(dev: &Device<Roxe>, qp: &RoxeQp) -> bool {
    let _bh = bh::disable();
    let mut batch = net::TxBatch::new();
    if !batch_held_ack(dev, qp, &mut batch) {
        return false;
    }
    batch.flush(dev);
    end_turn(dev, qp);
    true
}

/// The QP's requester is sending (`req::run`): if the responder made an ACK to the peer without
/// holding it for the requester within the last [`ACK_HOLD_US`], that ACK could have left with
/// these packets, so the QP holds its ACKs from now on. A QP that is slow to answer, or never
/// does, ACKs at the end of each receive pass: holding would delay its peer's send completions
/// by the short timer's slack.
pub(crate) fn requester_sending(qp: &RoxeQp) {
    if qp.hold_acks.load(Relaxed) {
        return;
    }
    let acked_at = qp.unheld_ack_ns.load(Relaxed);
    if acked_at == 0 {
        return;
    }
    if now_ns().wrapping_sub(acked_at) <= u64::from(ACK_HOLD_US) * 1000 {
        qp.hold_acks.store(true, Relaxed);
    }
    // Decided for this ACK (a later run would only find it older): the next packets of a QP
    // that stays slow read no clock until the responder makes an ACK without holding it for
    // the requester again.
    qp.unheld_ack_ns.store(0, Relaxed);
}

/// The device's short timer expired (softirq): sends the ACKs held for requesters that had
/// nothing to send within [`ACK_HOLD_US`], and stops those QPs holding ACKs until they answer
/// quickly again (`requester_sending`). An ACK held from now on starts the timer again.
pub(crate) fn hold_timer_expired(dev: &Device<Roxe>) {
    dev.data().held_acks.lock().timer_armed = false;
    dev.data().qps.for_each(|_, qp| {
        if send_held_ack(dev, qp) {
            qp.hold_acks.store(false, Relaxed);
        }
    });
}
