// SPDX-License-Identifier: GPL-2.0

//! Dispatch of a checked packet to its QP: requests to the responder, responses and
//! acknowledgements to the completer. Counterpart of rxe's `rxe_recv.c`.

#![deny(unsafe_code)]

use crate::{
    comp,
    counters::Counter,
    device::{Roxe, RoxeDevice},
    net::{count_drop, RxDrop, Source},
    proto::{mcast::MULTICAST_QPN, packet::Packet},
    resp,
};
use crate::rdma::device::Device;

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
    let info = pkt.info();
    if info.is_request() {
        resp::receive(dev, &qp, pkt, src);
    } else {
        comp::receive(dev, &qp, pkt);
    }
}
