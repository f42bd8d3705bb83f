// SPDX-License-Identifier: GPL-2.0

//! Loopback delivery: packets a device sends to its own GIDs never touch the wire.
//!
//! Transmission (`net::loopback`) only queues them; the receive side drains the queue here,
//! one drainer at a time per device, so a response sent while a packet is being delivered
//! waits in the queue instead of recursing into the handler, and packets are delivered in the
//! order they were sent. The driver's entries that run the stages (the send doorbell, the
//! device's tick, short timer, kick and process works) drain once the stages have returned.
//! A requester run started by an entry ([`run_requester`]) hands its packets for the device's
//! own GID to the responder straight from the buffer they were built in when no delivery is
//! under way, and the responder leaves its answer (an ACK, or the first burst of a READ reply)
//! in the device's `local_response` slot, which the drainer delivers right after the request
//! ([`deliver_local_responses`]).
//!
//! Contexts: process or softirq, interrupts enabled; a drainer keeps bottom halves off while it
//! holds the claim.

#![deny(unsafe_code)]

use crate::rdma::{bh, device::Device};
use crate::{
    counters::Counter,
    device::{LocalReply, LocalResponse},
    hca::Roxe,
    mem::LocalSource,
    net::{self, source::Source},
    proto::packet::Packet,
    qp::RoxeQp,
    req::{self, LocalPacket},
    resp::{read_reply::LocalPackets, response},
};
use kernel::sync::atomic::Full;

/// Packets one caller delivers from the loopback queue before it leaves the rest to the
/// device's kick work. Whoever drains also holds up its own context: a requester draining for
/// the whole device (its QP's requester claimed meanwhile) could go on for as long as other
/// CPUs keep the queue filled, and its own QP's retransmissions would wait behind that until
/// their retries ran out.
pub(crate) const LOOPBACK_BUDGET: u32 = 64;

/// Delivers up to `budget` queued loopback packets, unless someone else is at it: one drainer
/// at a time per device, so a response sent while a packet is being delivered waits in the
/// queue instead of recursing, and packets are delivered in the order they were sent. What the
/// budget leaves goes to the kick work (softirq), which drains with a fresh budget and goes
/// again until the queue is empty. Context: process or softirq, interrupts enabled.
pub(crate) fn drain_loopback(dev: &Device<Roxe>, mut budget: u32) {
    let data = dev.data();
    while !data.loopback.is_empty() {
        if budget == 0 {
            dev.kick();
            return;
        }
        if data.loopback_draining.cmpxchg(false, true, Full).is_err() {
            // The drainer at work delivers it (it looks again after giving up its claim).
            return;
        }
        budget = drain_claimed(dev, budget);
    }
}

/// Delivers up to `budget` packets of the loopback queue while holding the drainer's claim,
/// then gives the claim up; returns the budget left. Bottom halves are off meanwhile, so that
/// a drainer in process context cannot be preempted while the whole device waits for it.
fn drain_claimed(dev: &Device<Roxe>, budget: u32) -> u32 {
    let budget = deliver_queued(dev, budget);
    release_claim(dev);
    budget
}

/// Delivers up to `budget` packets of the loopback queue; returns the budget left. Context: the
/// holder of the drainer claim, which it keeps.
fn deliver_queued(dev: &Device<Roxe>, mut budget: u32) -> u32 {
    let data = dev.data();
    let _bh = bh::disable();
    while budget > 0 {
        let Some(skb) = data.loopback.pop() else {
            break;
        };
        // Our own packets: nothing can have corrupted them, and they carry no ICRC.
        super::rx::receive(skb, false);
        // A response it asked for is delivered before the next packet (the queue's order).
        budget = budget.saturating_sub(1 + deliver_local_responses(dev));
    }
    budget
}

/// Gives the drainer claim up.
fn release_claim(dev: &Device<Roxe>) {
    let data = dev.data();
    // A full barrier, not a release store: the caller's emptiness check that follows must not
    // be ordered before the flag is seen clear, or a packet queued meanwhile by a CPU that
    // found the flag still set would sit in the queue until the next loopback packet.
    let _ = data.loopback_draining.xchg(false, Full);
}

/// Delivers a packet the requester built in its local buffer for the device's own GID
/// straight to the responder: no socket buffer, no headers, no queue. An RDMA WRITE's or a
/// SEND's payload left in the sender's MR ([`req::LocalPacket::take_source`]) waits in the
/// device's `local_source` slot meanwhile ([`with_payload_in_slot`]), and the responder copies
/// it from there into the target. Packets queued before it are delivered first (the queue keeps
/// the order). The packet is copied into a socket buffer (its payload filled in first) and
/// queued only when a delivery is already under way (nothing recurses), or when the queue holds
/// more than the budget. Context: the requester's (process or softirq, interrupts enabled).
fn deliver_local(dev: &Device<Roxe>, p: &mut LocalPacket) {
    let data = dev.data();
    if data.loopback_draining.cmpxchg(false, true, Full).is_err() {
        return queue_copy(dev, p, LOOPBACK_BUDGET);
    }
    // The claim is ours. Had the queue the last word, one packet queued while a delivery was
    // under way would send every later one of every QP through a socket buffer, for as long as
    // the requesters kept the queue from emptying.
    let mut budget = LOOPBACK_BUDGET;
    if !data.loopback.is_empty() {
        budget = deliver_queued(dev, budget);
        if !data.loopback.is_empty() {
            release_claim(dev);
            return queue_copy(dev, p, budget);
        }
    }
    let source = p.take_source();
    let (av, roce) = (&p.av, p.bytes());
    let bytes = net::ip_bytes(av.network, roce.len());
    data.counters.sent(1, bytes);
    with_payload_in_slot(dev, source, |payload_in_slot| {
        // As in `drain_claimed`: no preemption while the device's drainer claim is ours.
        let _bh = bh::disable();
        match Packet::new_checked(roce) {
            Ok(pkt) => {
                data.counters.received(bytes);
                let src = Source {
                    sgid: av.sgid,
                    dgid: av.dgid,
                    network: av.network,
                    local: true,
                    payload_in_slot,
                    redeliveries: 0,
                };
                super::dispatch(dev, &pkt, &src);
            }
            Err(_) => data.counters.inc(Counter::RcvdDrops),
        }
    });
    let delivered = deliver_local_responses(dev);
    // The responses this delivery queued (and whatever other CPUs queued meanwhile).
    let budget = drain_claimed(dev, budget.saturating_sub(delivered));
    drain_loopback(dev, budget);
}

/// Copies `p` into a socket buffer, its payload filled in, and queues it; then drains up to
/// `budget` packets, unless a drainer at work holds the claim (it delivers them).
fn queue_copy(dev: &Device<Roxe>, p: &mut LocalPacket, budget: u32) {
    // A payload that cannot be read is a packet lost, as on a wire: RC resends it.
    if p.fill_payload() {
        net::xmit_copy(dev, &p.av, p.sport, p.bytes());
    }
    drain_loopback(dev, budget);
}

/// Runs `f(payload_in_slot)` with `source`, a payload left in the MR it is read from, in the
/// device's `local_source` slot (`payload_in_slot`: there is one), and takes the slot back
/// after: only the holder of the drainer claim fills it, and it is empty whenever the claim is
/// free. Whoever places the payload during `f` takes it; one left unused (a duplicate, a NAK,
/// an RNR NAK) has its MR reference dropped here, with bottom halves off (the requester's run
/// and the drainer keep them off), so never the last: `dereg_mr` releases a user MR only after
/// an RCU grace period.
fn with_payload_in_slot<R>(
    dev: &Device<Roxe>,
    source: Option<LocalSource>,
    f: impl FnOnce(bool) -> R,
) -> R {
    let slot = &dev.data().local_source;
    let in_slot = source.is_some();
    if in_slot {
        *slot.lock() = source;
    }
    let r = f(in_slot);
    if in_slot {
        let unused = slot.lock().take();
        drop(unused);
    }
    r
}

/// Hands a response the drainer built for a requester of this device (`roce`: BTH to ICRC,
/// from `src`) to the completer, counted as sent and received; false if its headers do not
/// parse. Context: the loopback drainer, holding the drainer claim, bottom halves off.
fn dispatch_local_response(dev: &Device<Roxe>, roce: &[u8], src: &Source) -> bool {
    let Ok(pkt) = Packet::new_checked(roce) else {
        return false;
    };
    let data = dev.data();
    let bytes = net::ip_bytes(src.network, roce.len());
    data.counters.sent(1, bytes);
    data.counters.received(bytes);
    super::dispatch(dev, &pkt, src);
    true
}

/// Runs the requester of `qp` for one of the driver's entries (the send doorbell, the kick and
/// process works): its packets for the device's own GID go to the responder straight from the
/// QP's local buffer when no delivery is under way ([`deliver_local`]), and what the run queued
/// is delivered before it returns. Process or softirq context, interrupts enabled.
pub(crate) fn run_requester(dev: &Device<Roxe>, qp: &RoxeQp) {
    if let Some(mut run) = req::Run::start(dev, qp, req::Loopback::Direct) {
        while let Some(mut p) = run.next() {
            deliver_local(dev, &mut p);
            run.sent_local(p);
        }
    }
    crate::qp::timers_touched(dev, qp);
    drain(dev);
}

/// Delivers what the stages an entry ran queued for the device's own GIDs, up to
/// [`LOOPBACK_BUDGET`] packets (the kick work delivers the rest). Called by the driver's entries
/// once their stages have returned. Process or softirq context, interrupts enabled.
pub(crate) fn drain(dev: &Device<Roxe>) {
    drain_loopback(dev, LOOPBACK_BUDGET);
}

/// Delivers the response the last loopback delivery left for the drainer, if any
/// ([`LocalResponse`]); returns how many responses it delivered. Context: the loopback drainer,
/// holding the drainer claim, bottom halves off ([`deliver_local`], [`drain_claimed`]), right
/// after the delivery of the request.
// Out of line, as `super::dispatch` is: it builds and dispatches a response.
#[inline(never)]
fn deliver_local_responses(dev: &Device<Roxe>) -> u32 {
    let Some(r) = dev.data().local_response.lock().take() else {
        return 0;
    };
    match &r {
        LocalResponse::Ack(a) => {
            let mut buf = [0u8; response::LOCAL_ACK_MAX];
            match response::local_ack(a, &mut buf) {
                Some(bytes) => u32::from(dispatch_local_response(dev, bytes, &a.src)),
                None => 0,
            }
        }
        LocalResponse::Read(reply) => deliver_local_reply(dev, reply),
    }
}

/// Builds the first burst of `r`'s responses one at a time in the device's reply buffer and
/// hands each to the completer, a payload of a page or more left in the responder's MR
/// (`LocalPackets::next`) and put in the device's `local_source` slot meanwhile
/// ([`with_payload_in_slot`]); returns how many it delivered. What the completer sends
/// meanwhile (the next READ request) joins the loopback queue, since the claim is taken.
fn deliver_local_reply(dev: &Device<Roxe>, r: &LocalReply) -> u32 {
    let data = dev.data();
    // The claim is ours: nobody else takes the buffer meanwhile.
    let mut buf = core::mem::take(&mut *data.local_reply_buf.lock());
    let mut delivered = 0;
    let mut packets = LocalPackets::new(r);
    // The buffer holds a whole segment's response (allocated with the device).
    while let Some((bytes, source)) = packets.next(&mut buf) {
        let ok = with_payload_in_slot(dev, source, |payload_in_slot| {
            let src = Source {
                payload_in_slot,
                ..r.src
            };
            dispatch_local_response(dev, bytes, &src)
        });
        if !ok {
            break;
        }
        delivered += 1;
    }
    *data.local_reply_buf.lock() = buf;
    delivered
}
