// SPDX-License-Identifier: GPL-2.0

//! Dispatch of a checked packet to its QP: requests to the responder, responses and
//! acknowledgements to the completer. Counterpart of rxe's `rxe_recv.c`.

#![deny(unsafe_code)]

use crate::rdma::{ah::AddressVector, device::Device};
use crate::{
    comp,
    counters::Counter,
    device::{Roxe, RoxeDevice},
    net::{count_drop, RxDrop, Source},
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
pub(crate) fn dispatch(dev: &Device<Roxe>, data: &RoxeDevice, pkt: &Packet<&[u8]>, src: &Source) {
    if pkt.dest_qpn() == MULTICAST_QPN {
        return crate::mcast::deliver(dev, data, pkt, src);
    }
    let Some(qp) = data.qps.get(pkt.dest_qpn()) else {
        data.counters.inc(Counter::RcvdDrops);
        return count_drop(RxDrop::NoQp);
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
        comp::receive(dev, &qp, pkt);
    }
}
