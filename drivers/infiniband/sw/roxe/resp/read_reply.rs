// SPDX-License-Identifier: GPL-2.0

//! RDMA READ replies: the responses to a READ leave in bursts of at most [`READ_REPLY_BURST`],
//! the first at once, the rest (and replays asked for by duplicates) from the device tick as
//! `proto::resp::ReadStream` paces them; each burst is built and sent outside the responder's
//! lock. A reply to a requester on this device is delivered by the loopback drainer straight
//! from one buffer ([`LocalReply`]), a payload of a page or more left in the MR for the
//! completer to copy once ([`LocalPackets::next`]). Requests held behind a reply run once its
//! last burst is out (`resp::held`).

#![deny(unsafe_code)]

use crate::rdma::{
    device::{now_ms, Device},
    netdev::NetDevice,
    pool::PoolRef,
};
use crate::soft::skb::TxSkBuff;
use crate::{
    device::LocalReply,
    hca::Roxe,
    mem::mr::MemError,
    mem::mr::RoxeMr,
    mem::odp,
    mem::{remote_target, LocalSource, LOCAL_SOURCE_MIN},
    net,
    proto::{
        mtu::Pmtu,
        packet::{pad_count_for, Aeth},
        qp_state::{QpState, QpType},
        resp::{ack_syndrome, check_rkey, ReadReply, ReadResponses, RespHeader, READ_REPLY_BURST},
    },
    qp::{PathInfo, RoxeQp},
    resp::response::{local_source, response, response_len, write_response},
};
use kernel::prelude::*;

/// Where a READ reply's responses go and what they carry: the QP's path, its MTU, and the AETH
/// of those that have one.
#[derive(Clone, Copy)]
pub(crate) struct ReplyPath<'a> {
    pub(crate) path: &'a PathInfo,
    pub(crate) mtu: Pmtu,
    pub(crate) ack: Aeth,
}

/// The reply to a READ as a [`LocalReply`], if the drainer can deliver it: it can deliver a
/// response there (`response::local_source`), and the memory is pinned user memory. Otherwise
/// gives `mr` back for [`read_responses`].
pub(crate) fn local_reply(
    dev: &Device<Roxe>,
    to: ReplyPath<'_>,
    mr: Option<PoolRef<RoxeMr>>,
    reply: &ReadReply,
    local: bool,
) -> Result<LocalReply, Option<PoolRef<RoxeMr>>> {
    let Some(m) = mr.as_ref() else {
        return Err(mr);
    };
    if !m.is_pinned_user() {
        return Err(mr);
    }
    let Some(src) = local_source(dev, to.path, local) else {
        return Err(mr);
    };
    let Some(mr) = mr else { return Err(None) };
    Ok(LocalReply {
        mr,
        reply: *reply,
        mtu: to.mtu,
        ack: to.ack,
        dest_qpn: to.path.dest_qpn,
        src,
    })
}

/// The responses of the first burst of a [`LocalReply`], built one at a time into the loopback
/// drainer's buffer, which hands each to the completer (`recv::loopback`).
pub(crate) struct LocalPackets<'a> {
    r: &'a LocalReply,
    segments: core::iter::Take<ReadResponses>,
}

impl<'a> LocalPackets<'a> {
    /// The responses of `r` (at most [`READ_REPLY_BURST`]).
    pub(crate) fn new(r: &'a LocalReply) -> Self {
        Self {
            r,
            segments: r.reply.packets(r.mtu).take(READ_REPLY_BURST as usize),
        }
    }

    /// Builds the next response in `buf` (which holds the last one: every byte but the
    /// payload is cleared); `None` once the burst is built or a response cannot be. A payload
    /// under [`LOCAL_SOURCE_MIN`] bytes is read into `buf`, over what was there; a longer one is
    /// left in the MR, returned as a [`LocalSource`] for the completer to copy straight into
    /// the READ's buffers, and its bytes in `buf` are whatever they were, never read.
    pub(crate) fn next<'b>(
        &mut self,
        buf: &'b mut [u8],
    ) -> Option<(&'b [u8], Option<LocalSource>)> {
        let r = self.r;
        let seg = self.segments.next()?;
        let len = seg.len as usize;
        let bytes = response_len(seg.opcode, len).and_then(|total| buf.get_mut(..total))?;
        net::clear_around_payload(bytes, len, pad_count_for(len));
        let aeth = if seg.has_aeth { Some(r.ack) } else { None };
        let at = r.reply.va.wrapping_add(u64::from(seg.offset));
        let source = (len >= LOCAL_SOURCE_MIN).then(|| LocalSource {
            mr: r.mr.clone(),
            va: at,
            len,
        });
        // Pinned memory: a failed read is a range the key check let through, which cannot
        // happen; the requester would time out and ask again (a payload left in the MR that
        // cannot be read fails the READ with a local protection error: `comp::place_from`).
        let fill = |out: &mut [u8]| source.is_some() || r.mr.read_at(at, out).is_ok();
        let hdr = RespHeader::new(seg.opcode, seg.psn, aeth);
        write_response(bytes, r.dest_qpn, hdr, len, fill)?;
        Some((bytes, source))
    }
}

/// Sends the next burst of a READ reply when it is due (from the device tick, softirq): the
/// rest of a long reply, or a replay a duplicate READ asked for; then the requests held behind
/// the reply, if it is out, and otherwise any held requests a budget left waiting.
pub(crate) fn tick(dev: &Device<Roxe>, qp: &RoxeQp, now: u64) {
    if qp.qp_type != QpType::Rc {
        return;
    }
    let (due, held) = {
        let rs = qp.resp_state.lock();
        (rs.read.due(now), !rs.held.idle())
    };
    if !due {
        if held {
            super::held::run_held(dev, qp);
        }
        return;
    }
    let path = crate::qp::path_info(qp);
    if !matches!(
        path.state,
        QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Rtr
    ) {
        return;
    }
    let mtu = qp.state.lock().segment();
    send_read_burst(dev, qp, &path, mtu, None);
    super::held::run_held(dev, qp);
}

/// Builds and sends the next burst of the QP's READ reply (at most [`READ_REPLY_BURST`]
/// responses), if one is pending and no other context is at it. The responder's lock is held
/// only to claim the burst and to record what follows it: the payload copies, the
/// allocations and the sending happen outside it. The data is read through `mr` when the
/// caller looked the key up for this reply (a new READ); otherwise the key is checked again,
/// since the MR may have gone since the READ arrived (rxe: `rxe_recheck_mr`). Context:
/// softirq, or bottom halves off.
pub(crate) fn send_read_burst(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    path: &PathInfo,
    mtu: Pmtu,
    mr: Option<PoolRef<RoxeMr>>,
) {
    let (burst, ack) = {
        let mut rs = qp.resp_state.lock();
        let Some(burst) = rs.read.take_burst() else {
            return;
        };
        (burst, rs.proto.aeth(ack_syndrome()))
    };
    let reply = burst.reply;
    let mr = match (mr, reply.access()) {
        (Some(mr), _) => Some(mr),
        (None, None) => None,
        (None, Some(access)) => {
            let found = remote_target(dev, reply.rkey, qp.pd_id, qp.qpn);
            if check_rkey(found.as_ref().map(|(t, _)| t), &access).is_ok() {
                found.map(|(_, mr)| mr)
            } else {
                // The key went: nothing to send; the requester's retries end in an error.
                let mut rs = qp.resp_state.lock();
                rs.read.finish_burst(burst.generation, None, now_ms(), 0);
                rs.read.sent();
                return;
            }
        }
    };
    let netdev = dev.data().netdev.clone();
    let mut packets = KVec::new();
    let started = now_ms();
    let to = ReplyPath { path, mtu, ack };
    let rest = read_responses(
        dev,
        &netdev,
        to,
        mr.as_ref().map(|m| &***m),
        &reply,
        &mut packets,
    );
    let now = now_ms();
    qp.resp_state.lock().read.finish_burst(
        burst.generation,
        rest,
        now,
        now.saturating_sub(started),
    );
    if let Some(av) = path.av {
        crate::net::ack::send_responses(dev, qp, &av, None, packets, false);
    }
    // Once the burst is on its way, answers to later requests may follow it.
    qp.resp_state.lock().read.sent();
}

/// Queues into `packets` the first [`READ_REPLY_BURST`] RDMA READ RESPONSE packets of `reply`,
/// and returns the rest of it, if any. An ODP page missing (invalidated since the READ was
/// accepted, or a replay of a READ whose pages went) ends the reply where it is, with a fault of
/// the rest queued: the requester times out and asks again for what it misses.
fn read_responses(
    dev: &Device<Roxe>,
    netdev: &NetDevice,
    to: ReplyPath<'_>,
    mr: Option<&RoxeMr>,
    reply: &ReadReply,
    packets: &mut KVec<TxSkBuff>,
) -> Option<ReadReply> {
    for seg in reply.packets(to.mtu).take(READ_REPLY_BURST as usize) {
        let at = reply.va.wrapping_add(u64::from(seg.offset));
        let aeth = if seg.has_aeth { Some(to.ack) } else { None };
        let mut missing = false;
        let skb = response(
            netdev,
            to.path,
            RespHeader::new(seg.opcode, seg.psn, aeth),
            seg.len as usize,
            |out| match mr.map(|mr| mr.read_at(at, out)) {
                Some(Ok(())) => true,
                Some(Err(MemError::NotPresent)) => {
                    missing = true;
                    false
                }
                _ => false,
            },
        );
        if let (true, Some(mr)) = (missing, mr) {
            let _ = odp::fault_mr(dev, mr, at, u64::from(reply.len.saturating_sub(seg.offset)));
        }
        let Some(skb) = skb else {
            // Out of memory or the data vanished: the requester times out and asks again.
            return None;
        };
        if packets.push(skb, GFP_ATOMIC).is_err() {
            return None;
        }
    }
    reply.rest_after(to.mtu, READ_REPLY_BURST)
}
