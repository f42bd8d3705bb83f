// SPDX-License-Identifier: GPL-2.0

//! Response packets of the responder: ACKNOWLEDGE (ACK and NAK), ATOMIC ACKNOWLEDGE and RDMA READ
//! RESPONSE, built into a socket buffer or into a buffer of the caller's (IBA 9.7.5.1,
//! 9.7.5.2.9, 9.7.5.2.12), and the headers-only ones the loopback drainer delivers from its
//! stack (`device::LocalAck`).

#![deny(unsafe_code)]

use crate::rdma::{device::Device, netdev::NetDevice};
use crate::soft::skb::TxSkBuff;
use crate::{
    device::LocalAck,
    hca::Roxe,
    net,
    net::source::Source,
    proto::{
        opcode::Opcode,
        packet::{pad_count_for, Aeth, AtomicAckEth, Packet},
        psn::Psn,
        resp::RespHeader,
    },
    qp::PathInfo,
};

/// Builds a response packet to the requester `path` leads to, its `payload_len` bytes of
/// payload written by `fill` (which says whether it could).
pub(crate) fn response(
    netdev: &NetDevice,
    path: &PathInfo,
    hdr: RespHeader,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> bool,
) -> Option<TxSkBuff> {
    let mut skb = TxSkBuff::alloc(netdev, response_len(hdr.opcode, payload_len)?).ok()?;
    write_response(skb.data_mut(), path.dest_qpn, hdr, payload_len, fill)?;
    Some(skb)
}

/// The length of a response packet, BTH to ICRC, with `payload_len` bytes of payload.
pub(crate) fn response_len(opcode: Opcode, payload_len: usize) -> Option<usize> {
    let pad = pad_count_for(payload_len);
    Some(opcode.info()?.header_len() + payload_len + usize::from(pad) + net::ICRC_LEN)
}

/// Writes a response packet to QP `dest_qpn` into `data` ([`response_len`] bytes), its payload
/// by `fill`.
pub(crate) fn write_response(
    data: &mut [u8],
    dest_qpn: u32,
    hdr: RespHeader,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> bool,
) -> Option<()> {
    let mut pkt = Packet::build(data, hdr.opcode, pad_count_for(payload_len)).ok()?;
    pkt.set_pkey(0xffff);
    pkt.set_dest_qpn(dest_qpn);
    pkt.set_psn(hdr.psn);
    if let Some(a) = hdr.aeth {
        let _ = pkt.set_aeth(&a);
    }
    if let Some(orig) = hdr.orig {
        let _ = pkt.set_atomic_ack_eth(&AtomicAckEth { orig });
    }
    if payload_len > 0 {
        let out = pkt.payload_mut().get_mut(..payload_len)?;
        if !fill(out) {
            return None;
        }
    }
    Some(())
}

/// Builds an ACKNOWLEDGE (ACK or NAK) with BTH PSN `psn`.
pub(crate) fn ack_packet(
    netdev: &NetDevice,
    path: &PathInfo,
    psn: Psn,
    aeth: Aeth,
) -> Option<TxSkBuff> {
    let hdr = RespHeader::new(Opcode::RC_ACKNOWLEDGE, psn, Some(aeth));
    response(netdev, path, hdr, 0, |_| true)
}

/// Where a response to a request the loopback drainer delivered goes when the drainer may hand
/// it to the completer itself, right after the request: the request came through the drainer
/// (`local`), the responder's path leads back to this device, nothing waits in the loopback
/// queue that the response would overtake (responses leave in the order they are sent), and no
/// other response of this delivery waits for the drainer. `None`: it leaves as a packet.
pub(crate) fn local_source(dev: &Device<Roxe>, path: &PathInfo, local: bool) -> Option<Source> {
    let av = path.av?;
    if !local || !av.leads_to_own_gid() {
        return None;
    }
    let data = dev.data();
    if !data.loopback.is_empty() || data.local_response.lock().is_some() {
        return None;
    }
    Some(Source {
        sgid: av.sgid,
        dgid: av.dgid,
        network: av.network,
        local: true,
        payload_in_slot: false,
        redeliveries: 0,
    })
}

/// The longest headers-only response: an ATOMIC ACKNOWLEDGE (BTH, AETH, AtomicAckETH, ICRC).
pub(crate) const LOCAL_ACK_MAX: usize = 28;

/// Builds `ack` ([`LocalAck`]) into `buf` for the loopback drainer to hand to the completer
/// (`recv::loopback`); `None` if it cannot be built.
pub(crate) fn local_ack<'b>(ack: &LocalAck, buf: &'b mut [u8; LOCAL_ACK_MAX]) -> Option<&'b [u8]> {
    let bytes = response_len(ack.hdr.opcode, 0).and_then(|n| buf.get_mut(..n))?;
    write_response(bytes, ack.dest_qpn, ack.hdr, 0, |_| true)?;
    Some(bytes)
}
