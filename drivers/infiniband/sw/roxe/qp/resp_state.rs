// SPDX-License-Identifier: GPL-2.0

//! The responder's state of one QP, which the QP owns (under its `resp_state` lock) and the
//! responder stage (`resp/`) updates: the protocol state, the responder resources cache, the
//! receive WQE the current message fills, the paced READ reply and the requests held behind it.
//! Modify QP sets it up here; every packet-driven change is the responder's. Beside it, the
//! types of the QP's outgoing responses (`RespTx`: the held ACK, the groups waiting their turn),
//! which `net::ack` sends.

#![deny(unsafe_code)]

use crate::proto::{
    psn::Psn,
    resp::{
        self as presp, HeldRequests, ReadStream, ResponderResources, ResponseTx, QUEUED_GROUPS,
    },
    wqe::RecvWqe,
};
use crate::rdma::ah::{AddressVector, Network};
use crate::soft::skb::TxSkBuff;
use kernel::prelude::*;

/// Slots of the responder resources cache: the device's `max_qp_rd_atom`, so that every READ or
/// atomic a requester may still retry can be found again.
pub(crate) const RD_ATOMIC_SLOTS: usize = 128;

const _: () = assert!(RD_ATOMIC_SLOTS >= crate::param::MAX_QP_RD_ATOM as usize);

/// The responder resources of one QP.
pub(crate) type Resources = ResponderResources<RD_ATOMIC_SLOTS>;

/// A receive WQE held for the message in progress: a validated copy of its slot.
pub(crate) struct RecvEntry {
    pub(crate) wqe: RecvWqe,
    pub(crate) slot: KVec<u8>,
}

/// Where a request held behind a READ reply came from: what the responder may need of the
/// packet's addresses once it runs (`net::Source`, less what only a packet in hand has: it is
/// no longer in the loopback drainer's hands, and it was never handed back by ODP).
#[derive(Clone, Copy)]
pub(crate) struct HeldFrom {
    pub(crate) sgid: [u8; 16],
    pub(crate) dgid: [u8; 16],
    pub(crate) network: Network,
}

/// The responder's state of one QP: the protocol state, the resources cache (boxed: it is a few
/// kilobytes) and the receive WQE the current message fills.
pub(crate) struct RespState {
    pub(crate) proto: presp::RespState,
    pub(crate) cache: KBox<Resources>,
    pub(crate) recv: Option<RecvEntry>,
    /// The slot of the last receive WQE the responder completed, kept for the next one: a SEND
    /// then costs no allocation and no zero fill of a fresh slot.
    pub(crate) spare_slot: Option<KVec<u8>>,
    /// The RDMA READ reply being sent, a burst of at most [`presp::READ_REPLY_BURST`] responses at a
    /// time, paced ([`presp::ReadStream`]): the first burst of a new READ at once, the rest
    /// and every replay from the device tick, at most one burst per interval.
    pub(crate) read: ReadStream,
    /// READ and atomic requests that arrived in sequence while [`RespState::read`] was active
    /// or other requests were held, in order: they run once its responses are out, one at a
    /// time (`resp::held`).
    pub(crate) held: HeldRequests<HeldFrom>,
}

impl RespState {
    /// A responder expecting PSN 0 with no responder resources (QP creation: process context).
    pub(crate) fn new() -> Result<RespState> {
        // Copied from a constant straight into the allocation: built first, the ring (a few
        // kilobytes) would sit on the stack of QP creation, which the RDMA core reaches deep in
        // device registration (its MAD QPs).
        const EMPTY: Resources = Resources::new(0);
        let cache = KBox::write(KBox::new_uninit(GFP_KERNEL)?, EMPTY);
        Ok(RespState {
            proto: presp::RespState::new(Psn::new(0)),
            cache,
            recv: None,
            spare_slot: None,
            read: ReadStream::default(),
            held: HeldRequests::default(),
        })
    }

    /// Modify QP set `rq_psn`.
    pub(crate) fn set_rq_psn(&mut self, psn: Psn) {
        self.proto.set_expected_psn(psn);
        self.read.clear();
        self.held.clear();
    }

    /// Modify QP set `max_dest_rd_atomic`: the cache starts over with that many slots.
    pub(crate) fn set_max_dest_rd_atomic(&mut self, n: u8) {
        self.cache.reset(u32::from(n));
    }

    /// The QP went to RESET: forget everything but the cache's size. A held receive WQE was
    /// already consumed from the ring, which RESET empties anyway.
    pub(crate) fn reset(&mut self, max_dest_rd_atomic: u8) {
        self.proto = presp::RespState::new(Psn::new(0));
        self.cache.reset(u32::from(max_dest_rd_atomic));
        self.recv = None;
        self.read.clear();
        self.held.clear();
    }
}

/// The QP's outgoing responses (see [`super::RoxeQp::resp_tx`]): whose turn it is to send them,
/// the held ACK, and the groups of responses that wait for the turn.
pub(crate) type RespTx = ResponseTx<HeldAck, Queued, QUEUED_GROUPS>;

/// Responses of one request, or one burst of a READ reply, waiting for their turn
/// (`RespTx::offer`).
pub(crate) struct Queued {
    pub(crate) av: AddressVector,
    pub(crate) ack: Option<TxSkBuff>,
    pub(crate) packets: KVec<TxSkBuff>,
}

/// An acknowledgement waiting to leave (`RespTx::hold`).
pub(crate) struct HeldAck {
    pub(crate) skb: TxSkBuff,
    pub(crate) av: AddressVector,
    /// Held for the requester's next batch, and so counted for the device's short timer
    /// (`HeldAcks::count`); otherwise held until the end of the receive pass, which the kick
    /// work ends (`RoxeQp::ack_at_pass_end`).
    pub(crate) for_requester: bool,
}
