// SPDX-License-Identifier: GPL-2.0

//! Held ACKs: a positive ACK the responder would send alone waits, for a short while, for the
//! requester of the same QP to send towards the same peer, and leaves in that batch. Which QPs
//! hold (those whose requester answers quickly), how long (following the QP's measured answer
//! time, `proto::ack_hold`), the device's short timer that sends what was not taken, and the
//! account of how many QPs hold one.
//!
//! Context: softirq or the loopback drainer (bottom halves off); the QP's `held_ack` lock and,
//! under it, the device's `held_acks` lock are IRQ-safe leaves; packets leave after both.

#![deny(unsafe_code)]

use crate::rdma::{
    ah::AddressVector,
    device::{now_ns, Device},
    skb::TxSkBuff,
};
use crate::{
    hca::Roxe,
    net::{self, udp_sport},
    proto::{ack_hold, psn::Psn},
    qp::{HeldAck, RoxeQp},
};
use kernel::{prelude::*, sync::atomic::Relaxed};

/// Sends a request's responses: an ACK held from before first (responses leave in PSN order),
/// then `ack`, then `packets`. A positive ACK that travels alone to an IPv4 peer is held instead
/// (`RoxeQp::held_ack`) while the QP answers its peer quickly (`RoxeQp::hold_acks`), for the
/// requester to send with its next batch (`req::run`) or the device's short timer
/// (`hold_timer_expired`). Of two held ACKs the later one is kept: an ACK acknowledges every
/// request before its PSN too (ACKs are cumulative, IBA 9.7.5.1.2).
pub(crate) fn send_responses(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    av: &AddressVector,
    mut ack: Option<(Psn, TxSkBuff)>,
    packets: KVec<TxSkBuff>,
) {
    if packets.is_empty() && ack.is_none() && !qp.hold_acks.load(Relaxed) {
        // Nothing to send (a WRITE's middle packets), and no ACK held to send with it.
        return;
    }
    if packets.is_empty() && ack.is_some() && net::batch_addresses(av).is_some() {
        if !qp.hold_acks.load(Relaxed) {
            // Leaves at once; should the requester answer soon, the next ones wait for it.
            qp.unheld_ack_ns.store(now_ns(), Relaxed);
        } else if let Some((psn, skb)) = ack.take() {
            let held = HeldAck {
                psn,
                skb,
                av: *av,
                since_ns: now_ns(),
            };
            hold_ack(dev, qp, held);
            return;
        }
    }
    // The responses leave together (`net::TxBatch`), as the requester's packets do: an RDMA
    // READ's burst of responses pays the stack and the device's doorbell once per batch
    // instead of once per packet.
    let sport = udp_sport(qp.qpn);
    let mut batch = net::TxBatch::new();
    batch_held_ack(dev, qp, &mut batch);
    if let Some((_, skb)) = ack {
        batch.add(dev, av, sport, skb);
    }
    for skb in packets {
        batch.add(dev, av, sport, skb);
    }
    batch.flush(dev);
}

/// Holds `ack` in `qp` (see [`send_responses`]); of two, the later is kept, waiting since the
/// first was held. The short timer is started for the QP's hold (`proto::ack_hold::hold_us`),
/// or moved earlier when it runs for a later expiry held by another QP.
fn hold_ack(dev: &Device<Roxe>, qp: &RoxeQp, mut ack: HeldAck) {
    let superseded = {
        let mut held = qp.held_ack.lock();
        match (*held).as_mut() {
            Some(h) if h.psn.cmp_seq(ack.psn) == core::cmp::Ordering::Greater => Some(ack),
            Some(h) => {
                ack.since_ns = h.since_ns;
                Some(core::mem::replace(h, ack))
            }
            None => {
                let hold_us = ack_hold::hold_us(qp.answer_us.load(Relaxed));
                let expires_ns = ack.since_ns.wrapping_add(u64::from(hold_us) * 1000);
                *held = Some(ack);
                let mut acks = dev.data().held_acks.lock();
                acks.count += 1;
                // Wrapping comparison: `now_ns` counts from boot and does not wrap in practice.
                let earlier = (expires_ns.wrapping_sub(acks.expires_ns) as i64) < 0;
                if !acks.timer_armed || earlier {
                    acks.timer_armed = true;
                    acks.expires_ns = expires_ns;
                    dev.start_short_timer(hold_us);
                }
                None
            }
        }
    };
    // Freed outside the locks.
    drop(superseded);
}

/// Puts the ACK `qp` holds, if any, into `batch`: it leaves with the packets that follow it.
fn batch_held_ack(dev: &Device<Roxe>, qp: &RoxeQp, batch: &mut net::TxBatch) {
    if let Some(held) = take_held_ack(dev, qp) {
        batch.add(dev, &held.av, udp_sport(qp.qpn), held.skb);
    }
}

/// Takes the ACK `qp` holds, if any, to send it or drop it.
fn take_held_ack(dev: &Device<Roxe>, qp: &RoxeQp) -> Option<HeldAck> {
    let mut held = qp.held_ack.lock();
    let ack = held.take()?;
    let mut acks = dev.data().held_acks.lock();
    acks.count = acks.count.saturating_sub(1);
    // A timer whose callback already runs stays marked armed: the callback clears the mark.
    if acks.count == 0 && acks.timer_armed && dev.try_cancel_short_timer() {
        acks.timer_armed = false;
    }
    Some(ack)
}

/// Sends the ACK `qp` holds, if any, now. Returns whether there was one.
pub(crate) fn send_held_ack(dev: &Device<Roxe>, qp: &RoxeQp) -> bool {
    let Some(held) = take_held_ack(dev, qp) else {
        return false;
    };
    let _ = net::xmit(dev, &held.av, udp_sport(qp.qpn), held.skb);
    true
}

/// The QP's requester sends its first packet of a run (`req::run`): an ACK its responder holds
/// leaves at the head of `batch`, and the time it waited is an answer time of the QP. If the
/// responder instead sent an ACK to the peer at once, recently enough that it could have waited
/// for these packets (`proto::ack_hold::answers_quickly`), the QP holds its ACKs from now on,
/// for twice its smoothed answer time. A QP that is slow to answer, or never does, ACKs at once:
/// holding would delay its peer's send completions for nothing.
pub(crate) fn requester_sending(dev: &Device<Roxe>, qp: &RoxeQp, batch: &mut net::TxBatch) {
    if let Some(held) = take_held_ack(dev, qp) {
        note_answer(qp, now_ns().wrapping_sub(held.since_ns));
        batch.add(dev, &held.av, udp_sport(qp.qpn), held.skb);
        return;
    }
    if qp.hold_acks.load(Relaxed) {
        return;
    }
    let acked_at = qp.unheld_ack_ns.load(Relaxed);
    if acked_at == 0 {
        return;
    }
    let gap_ns = now_ns().wrapping_sub(acked_at);
    if ack_hold::answers_quickly(gap_ns) {
        note_answer(qp, gap_ns);
        qp.hold_acks.store(true, Relaxed);
    }
    // Decided for this ACK (a later run would only find it older): the next packets of a QP
    // that stays slow read no clock until the responder ACKs at once again.
    qp.unheld_ack_ns.store(0, Relaxed);
}

/// Adds an answer `gap_ns` after the ACK to the QP's smoothed answer time. Only the QP's
/// requester run writes it (`RoxeQp::req_running`).
fn note_answer(qp: &RoxeQp, gap_ns: u64) {
    let smoothed = ack_hold::smoothed_answer_us(qp.answer_us.load(Relaxed), gap_ns);
    qp.answer_us.store(smoothed, Relaxed);
}

/// The device's short timer expired (softirq): sends every held ACK. A QP whose ACK waited its
/// whole hold had no answer in time and stops holding until it answers quickly again
/// (`requester_sending`); one whose hold had not run out (the timer ran for another QP's
/// earlier expiry) goes on holding. An ACK held from now on starts the timer again.
pub(crate) fn hold_timer_expired(dev: &Device<Roxe>) {
    dev.data().held_acks.lock().timer_armed = false;
    let now = now_ns();
    dev.data().qps.for_each(|_, qp| {
        let Some(held) = take_held_ack(dev, qp) else {
            return;
        };
        let hold_ns = u64::from(ack_hold::hold_us(qp.answer_us.load(Relaxed))) * 1000;
        if now.wrapping_sub(held.since_ns) >= hold_ns {
            qp.hold_acks.store(false, Relaxed);
        }
        let _ = net::xmit(dev, &held.av, udp_sport(qp.qpn), held.skb);
    });
}
