// SPDX-License-Identifier: GPL-2.0

//! Dispatch of a checked packet to its QP: requests to the responder, responses and
//! acknowledgements to the completer, multicast to every attached QP. Counterpart of rxe's
//! `rxe_recv.c`.

#![deny(unsafe_code)]

pub(crate) mod loopback;
pub(crate) mod rx;

use crate::rdma::{ah::AddressVector, device::Device};
use crate::{
    comp,
    counters::Counter,
    hca::Roxe,
    mcast::Members,
    net::source::Source,
    param::MAX_MCAST_QP_ATTACH,
    proto::{mcast::MULTICAST_QPN, packet::Packet, qp_state::QpType},
    resp,
};

/// Whether a packet from `src` may reach a connected QP: its IP source is the QP's destination
/// GID and its IP destination the QP's source GID (rdma_rxe: `check_addr`). Without this, any
/// host that guesses a QPN and PSN could inject data into an RC or UC QP, or forge its ACKs and
/// NAKs. A QP without a path is in RESET or INIT (RTR needs one, IBA 11.2.1.2): it receives
/// nothing, and the responder and completer drop the packet as such (`rcvd_drops`).
fn from_peer(av: &Option<AddressVector>, src: &Source) -> bool {
    av.as_ref()
        .is_none_or(|av| av.dgid == src.sgid && av.sgid == src.dgid)
}

/// Hands `pkt` to the QP it is addressed to. Context: the receive pipeline (softirq or the
/// loopback drainer).
///
/// Kept out of line: the receive entry, the drainer's loop and the direct deliveries each call
/// it, and inlined into all of them (the responder and the completer with it) the hot loops grew
/// and small messages slowed down (`Documentation/performance.md`, "Constants").
#[inline(never)]
pub(crate) fn dispatch(dev: &Device<Roxe>, pkt: &Packet<&[u8]>, src: &Source) {
    let data = dev.data();
    if pkt.dest_qpn() == MULTICAST_QPN {
        return deliver_mcast(dev, pkt, src);
    }
    let Some(qp) = data.qps.get(pkt.dest_qpn()) else {
        return data.counters.inc(Counter::RcvdDrops);
    };
    if matches!(qp.qp_type, QpType::Rc | QpType::Uc) && !from_peer(&qp.state.lock().av, src) {
        data.counters.inc(Counter::RcvdPeerMismatch);
        return;
    }
    let info = pkt.info();
    if info.is_request() {
        resp::receive(dev, &qp, pkt, src);
    } else {
        // rxe hands every response to its completer task (`rxe_comp_queue_pkt`) and counts it
        // there as deferred; roxe's completer takes it now, and counts the same packets.
        data.counters.inc(Counter::AckDeferred);
        comp::receive(dev, &qp, pkt, src.payload_in_slot);
    }
    // A READ reply to pace, an RNR wait or a new ACK deadline: the device tick visits the QP.
    crate::qp::timers_touched(dev, &qp);
}

/// Delivers a multicast packet to every UD QP attached to the group it was sent to (the
/// packet's destination GID). Each QP checks the Q_Key itself, as for unicast.
fn deliver_mcast(dev: &Device<Roxe>, pkt: &Packet<&[u8]>, src: &Source) {
    let data = dev.data();
    let mut qpns: Members = [0; MAX_MCAST_QP_ATTACH as usize];
    let Some(n) = data.mcast.members(&src.dgid, &mut qpns) else {
        return data.counters.inc(Counter::RcvdDrops);
    };
    for &qpn in qpns.iter().take(n) {
        if let Some(qp) = data.qps.get(qpn) {
            if qp.qp_type == QpType::Ud && pkt.info().is_request() {
                resp::receive(dev, &qp, pkt, src);
            }
        }
    }
}
