// SPDX-License-Identifier: GPL-2.0

//! Requests held behind a READ reply: a READ or atomic request that arrives in sequence while
//! an earlier READ's responses are still going out waits in the QP
//! (`proto::resp::HeldRequests`) and runs, in order, once they are out, instead of being
//! dropped for the requester to send again (IBA 9.5: responses in request order; rxe keeps such
//! requests in its `resp_pkts` queue).
//!
//! Context: as the responder's, softirq or bottom halves off. Held requests run in whichever
//! context sends the READ reply's last burst: the receive path ([`super::receive`]) or the
//! device tick ([`super::read_reply::tick`]), which also runs those a budget left waiting, on
//! every tick while any are held.

#![deny(unsafe_code)]

use super::{finish, handle, qp_view, Ctx, Effects};
use crate::rdma::device::Device;
use crate::{
    hca::Roxe,
    net::source::Source,
    proto::{
        packet::Packet,
        resp::{HoldVerdict, Request, HELD_SLOTS, READ_REPLY_BURST},
    },
    qp::{
        resp_state::{HeldFrom, RespState},
        RoxeQp,
    },
};

/// Decides about `req`, which arrived while the READ reply is active or requests are held or
/// running: holds it, or drops it. Returns whether it is dealt with; `false`: the PSN check
/// decides (a duplicate of an executed request, no held request running).
pub(super) fn hold(cx: &Ctx<'_>, req: &Request, rs: &mut RespState) -> bool {
    match rs.held.verdict(rs.proto.expected_psn(), cx.cfg, req) {
        HoldVerdict::Hold => {
            let from = HeldFrom {
                sgid: cx.src.sgid,
                dgid: cx.src.dgid,
                network: cx.src.network,
            };
            // A packet longer than a READ or atomic request can be holds nothing and is
            // dropped; the requester sends it again. (Neither carries a payload, so none has
            // its payload left in the sender's MR: `req::local_source`.)
            let _ = rs.held.push(cx.cfg, req, cx.pkt.as_bytes(), from);
            true
        }
        // An answer now (an ACK, a NAK, a duplicate's answer) would overtake the responses
        // still to come, the READ's or a running held request's: the requester sends it again.
        HoldVerdict::Drop => true,
        // It waits already.
        HoldVerdict::AlreadyHeld => true,
        HoldVerdict::Check => false,
    }
}

/// Runs the requests held behind the QP's READ reply once that reply is out, oldest first,
/// until one starts a reply that is still going out (the rest wait for its end), none is left,
/// or the budget is spent: [`HELD_SLOTS`] requests and [`READ_REPLY_BURST`] responses (a READ
/// counts the responses of its first burst), so that one packet or tick builds no more than a
/// burst on their behalf (the tick runs the rest).
/// Each request is taken from the hold and handled under one hold of the responder's lock, and
/// the next is taken only once its answer is on its way
/// ([`HeldRequests`](crate::proto::resp::HeldRequests)`::take_next`): a request arriving
/// meanwhile, on any CPU, is held or dropped rather than answered ahead of it.
pub(super) fn run_held(dev: &Device<Roxe>, qp: &RoxeQp) {
    let mut responses = 0;
    for _ in 0..HELD_SLOTS {
        let Some((path, cfg, qkey)) = qp_view(qp) else {
            // The QP no longer receives: what it held is lost, as its requests would be.
            qp.resp_state.lock().held.clear();
            return;
        };
        let mut rs = qp.resp_state.lock();
        let cost = rs.held.next_psns().map(|n| n.clamp(1, READ_REPLY_BURST));
        if rs.read.active()
            || cost.is_some_and(|c| responses > 0 && responses + c > READ_REPLY_BURST)
        {
            return;
        }
        let Some((h, run)) = rs.held.take_next() else {
            return;
        };
        responses += cost.unwrap_or(1);
        let Ok(pkt) = Packet::new_checked(h.bytes()) else {
            // It parsed when it was held.
            rs.held.done_running(run);
            continue;
        };
        let src = Source {
            sgid: h.src.sgid,
            dgid: h.src.dgid,
            network: h.src.network,
            local: false,
            payload_in_slot: false,
            redeliveries: 0,
        };
        let mut fx = Effects::new(dev, false);
        let cx = Ctx {
            dev,
            qp,
            pkt: &pkt,
            src: &src,
            path: &path,
            cfg: &cfg,
            held: true,
        };
        handle(&cx, qkey, &mut rs, &mut fx);
        drop(rs);
        finish(&cx, fx);
        qp.resp_state.lock().held.done_running(run);
    }
}
