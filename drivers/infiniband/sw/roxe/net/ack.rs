// SPDX-License-Identifier: GPL-2.0

//! Held ACKs: a positive ACK the responder would send alone waits, for a short while, for the
//! requester of the same QP to send towards the same peer, and leaves in that batch. Which QPs
//! hold (those whose requester answers quickly), the device's short timer that sends what was
//! not taken, and the account of how many QPs hold one.
//!
//! Context: softirq or the loopback drainer (bottom halves off); the QP's `held_ack` lock and,
//! under it, the device's `held_acks` lock are IRQ-safe leaves; packets leave after both.

#![deny(unsafe_code)]

use crate::rdma::{
    ah::AddressVector,
    device::{now_ns, Device},
};
use crate::soft::skb::TxSkBuff;
use crate::{
    hca::Roxe,
    net::{self, udp_sport},
    proto::psn::Psn,
    qp::{HeldAck, RoxeQp},
};
use kernel::{prelude::*, sync::atomic::Relaxed};

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
            hold_ack(dev, qp, HeldAck { psn, skb, av: *av });
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

/// Holds `ack` in `qp` (see [`send_responses`]); of two, the later is kept.
fn hold_ack(dev: &Device<Roxe>, qp: &RoxeQp, ack: HeldAck) {
    let superseded = {
        let mut held = qp.held_ack.lock();
        match (*held).as_mut() {
            Some(h) if h.psn.cmp_seq(ack.psn) == core::cmp::Ordering::Greater => Some(ack),
            Some(h) => Some(core::mem::replace(h, ack)),
            None => {
                *held = Some(ack);
                let mut acks = dev.data().held_acks.lock();
                acks.count += 1;
                if !acks.timer_armed {
                    acks.timer_armed = true;
                    dev.start_short_timer(ACK_HOLD_US);
                }
                None
            }
        }
    };
    // Freed outside the locks.
    drop(superseded);
}

/// Puts the ACK `qp` holds, if any, into `batch`: it leaves with the packets that follow it.
pub(crate) fn batch_held_ack(dev: &Device<Roxe>, qp: &RoxeQp, batch: &mut net::TxBatch) {
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

/// The QP's requester is sending (`req::run`): if the responder sent an ACK to the peer at once
/// within the last [`ACK_HOLD_US`], that ACK could have left with these packets, so the QP holds
/// its ACKs from now on. A QP that is slow to answer, or never does, ACKs at once: holding would
/// delay its peer's send completions by the short timer's slack.
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
    // that stays slow read no clock until the responder ACKs at once again.
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
