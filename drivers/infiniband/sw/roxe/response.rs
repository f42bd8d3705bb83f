// SPDX-License-Identifier: GPL-2.0

//! Response packets of the responder: ACKNOWLEDGE (ACK and NAK), ATOMIC ACKNOWLEDGE and RDMA READ
//! RESPONSE, built into a socket buffer or into a buffer of the caller's (IBA 9.7.5.1,
//! 9.7.5.2.9, 9.7.5.2.12).

#![deny(unsafe_code)]

use crate::rdma::{netdev::NetDevice, skb::TxSkBuff};
use crate::{
    net,
    proto::{
        opcode::Opcode,
        packet::{pad_count_for, Aeth, AtomicAckEth, Packet},
        psn::Psn,
    },
    qp::PathInfo,
};

/// The header fields of a response that vary: its opcode, BTH PSN, AETH (responses without one:
/// the middle READ responses) and the original value an ATOMIC ACKNOWLEDGE returns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RespHeader {
    pub(crate) opcode: Opcode,
    pub(crate) psn: Psn,
    pub(crate) aeth: Option<Aeth>,
    pub(crate) orig: Option<u64>,
}

impl RespHeader {
    /// A response of `opcode` with `psn` and `aeth`, no atomic value.
    pub(crate) const fn new(opcode: Opcode, psn: Psn, aeth: Option<Aeth>) -> Self {
        RespHeader {
            opcode,
            psn,
            aeth,
            orig: None,
        }
    }
}

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
