// SPDX-License-Identifier: GPL-2.0

//! Transmission: packets built by the stages leave over IPv4 or IPv6 through the netdev, in
//! batches to one destination ([`TxBatch`]), or, to one of the device's own GIDs, join the
//! loopback queue that the receive side drains (`recv::loopback`). Below every stage: it calls
//! none of them. Counterpart of the transmit half of rxe's `rxe_net.c`.
//!
//! Beside it: the held ACKs ([`ack`]), which leave in the requester's batches, and where a
//! received packet came from ([`source`]).
//!
//! Contexts: process or softirq, interrupts enabled.

#![deny(unsafe_code)]

pub(crate) mod ack;
pub(crate) mod source;

use crate::rdma::{
    ah::{AddressVector, Network},
    device::Device,
};
use crate::soft::{
    copy::zero,
    skb::{crc32_le, SkBuff, TxSkBuff, MAX_BATCH},
};
use crate::{
    counters::Counter,
    hca::Roxe,
    proto::icrc::{self, Crc32, IpHeader},
};
use kernel::{
    prelude::*,
    sync::atomic::Relaxed, //
};

/// The RoCEv2 UDP destination port (IBA A17.2.1, assigned by IANA).
pub(crate) const ROCE_V2_UDP_PORT: u16 = 4791;

/// Size of a UDP header.
pub(crate) const UDP_HDR_LEN: usize = 8;

/// Size of the ICRC trailer.
pub(crate) const ICRC_LEN: usize = 4;

/// The size as an IP packet (what `sent_bytes` and `rcvd_bytes` count, as rxe does) of a RoCE
/// part (BTH to ICRC) of `roce_len` bytes carried over `network` without IP options or
/// extension headers: the packets roxe builds.
pub(crate) fn ip_bytes(network: Network, roce_len: usize) -> u64 {
    let ip = match network {
        Network::Ipv4 => 20,
        Network::Ipv6 => 40,
    };
    (ip + UDP_HDR_LEN + roce_len) as u64
}

/// The UDP source port of a QP's packets: fixed per QP so that a flow stays on one path, and
/// in the range RoCEv2 reserves for it (IBA A17.2.2: 0xC000 and up).
pub(crate) fn udp_sport(qpn: u32) -> u16 {
    0xc000 | (qpn & 0x3fff) as u16
}

/// The kernel's CRC32 library, for the ICRC.
pub(crate) struct KernelCrc;

impl Crc32 for KernelCrc {
    fn crc32_le(&self, seed: u32, data: &[u8]) -> u32 {
        crc32_le(seed, data)
    }
}

/// Loopback: a packet for one of the device's own GIDs never touches the wire. It joins the
/// device's loopback queue, which the receive side drains (`recv::loopback`): the drainer at
/// work, or the driver's entry that ran the stage which sent it, once the stage has returned.
/// When no drainer is at work the kick work is asked too, so that a packet sent from any
/// other context does not wait for the next one.
fn loopback(dev: &Device<Roxe>, skb: SkBuff) {
    let data = dev.data();
    data.counters.inc(Counter::LoopbackQueued);
    data.loopback.push(skb);
    if !data.loopback_draining.load(Relaxed) {
        dev.kick();
    }
}

/// Zeroes `packet` (BTH to ICRC, in a reused buffer) everywhere but its `payload_len` payload
/// bytes, which `pad` pad bytes and the ICRC follow: as in a fresh socket buffer, no byte of an
/// earlier packet survives in the headers, the pad or the ICRC. The payload is the caller's to
/// overwrite whole; a packet whose copy fails is not delivered.
pub(crate) fn clear_around_payload(packet: &mut [u8], payload_len: usize, pad: u8) {
    let trailer = usize::from(pad) + ICRC_LEN;
    let head = packet.len().saturating_sub(payload_len + trailer);
    let (headers, rest) = packet.split_at_mut(head);
    zero(headers);
    match rest.get_mut(payload_len..) {
        Some(tail) => zero(tail),
        None => zero(rest),
    }
}

/// Sends a packet whose RoCE part (BTH to ICRC, ICRC left zero) is already in `skb`, to the
/// destination of `av`, leaving from UDP source port `sport`. Computes the ICRC over the final
/// headers, except for loopback to the device's own GID. Counts the packet as sent, or as a
/// send error if it did not leave.
pub(crate) fn xmit(dev: &Device<Roxe>, av: &AddressVector, sport: u16, skb: TxSkBuff) -> Result {
    let bytes = ip_bytes(av.network, skb.data().len());
    let r = transmit(dev, av, sport, skb);
    let counters = &dev.data().counters;
    if r.is_ok() {
        counters.sent(1, bytes);
    } else {
        counters.inc(Counter::SendErr);
    }
    r
}

/// [`xmit`] of a packet built in a buffer of the caller's (`roce`: BTH to ICRC), copied into a
/// socket buffer first; lost, as on a wire, and counted as a send error, if there is no memory
/// for one (a loopback segment's is an order-4 allocation).
pub(crate) fn xmit_copy(dev: &Device<Roxe>, av: &AddressVector, sport: u16, roce: &[u8]) {
    match TxSkBuff::alloc(&dev.data().netdev, roce.len()) {
        Ok(mut skb) => {
            crate::soft::copy::copy(skb.data_mut(), roce);
            let _ = xmit(dev, av, sport, skb);
        }
        Err(_) => dev.data().counters.inc(Counter::SendErr),
    }
}

/// [`xmit`] without the counting.
fn transmit(dev: &Device<Roxe>, av: &AddressVector, sport: u16, mut skb: TxSkBuff) -> Result {
    let netdev = &dev.data().netdev;
    if av.leads_to_own_gid() {
        // To the device's own GID: the packet never leaves memory, so it needs no route, and
        // nothing can corrupt it, so the receive side skips the check and computing the ICRC
        // would be pure cost.
        let skb = match av.network {
            Network::Ipv4 => {
                let addr: [u8; 4] = av
                    .sgid
                    .get(12..16)
                    .and_then(|a| a.try_into().ok())
                    .ok_or(EINVAL)?;
                skb.into_local_v4(addr, addr, sport, av.traffic_class, av.hop_limit)?
            }
            Network::Ipv6 => {
                skb.into_local_v6(&av.sgid, &av.dgid, sport, av.traffic_class, av.hop_limit)?
            }
        };
        loopback(dev, skb);
        return Ok(());
    }
    let ip_len = match av.network {
        Network::Ipv4 => {
            let (saddr, daddr): ([u8; 4], [u8; 4]) =
                match (av.sgid.get(12..16), av.dgid.get(12..16)) {
                    (Some(s), Some(d)) => (
                        s.try_into().map_err(|_| EINVAL)?,
                        d.try_into().map_err(|_| EINVAL)?,
                    ),
                    _ => return Err(EINVAL),
                };
            skb.prepare_v4(netdev, saddr, daddr, sport, av.traffic_class, av.hop_limit)?;
            20
        }
        Network::Ipv6 => {
            skb.prepare_v6(
                netdev,
                &av.sgid,
                &av.dgid,
                sport,
                av.traffic_class,
                av.hop_limit,
            )?;
            40
        }
    };
    seal(&mut skb, ip_len)?;
    if ip_len == 20 {
        skb.send_v4()
    } else {
        skb.send_v6()
    }
}

/// Computes the ICRC of a packet whose headers are final (data from the IP header, `ip_len`
/// bytes of it) over the IP header, UDP header and RoCE part, and writes it into the trailer.
fn seal(skb: &mut TxSkBuff, ip_len: usize) -> Result {
    let icrc = {
        let data = skb.data();
        let (ip, rest) = data.split_at(core::cmp::min(ip_len, data.len()));
        let (udp, roce) = rest.split_at(core::cmp::min(UDP_HDR_LEN, rest.len()));
        let covered = roce
            .get(..roce.len().saturating_sub(ICRC_LEN))
            .ok_or(EINVAL)?;
        let ip = if ip_len == 20 {
            IpHeader::V4(ip)
        } else {
            IpHeader::V6(ip)
        };
        icrc::icrc(&KernelCrc, ip, udp, covered).map_err(|_| EINVAL)?
    };
    let data = skb.data_mut();
    let n = data.len();
    if let Some(t) = data.get_mut(n.saturating_sub(ICRC_LEN)..) {
        t.copy_from_slice(&icrc::to_wire(icrc));
    }
    Ok(())
}

/// Largest batch in bytes: the batch travels as one IP packet until segmentation, whose
/// length fields are 16 bits.
const BATCH_BYTES: usize = 60_000;

/// The IPv4 source and destination of packets to `av` that may leave in a [`TxBatch`]: IPv4,
/// and not to the device's own GID (those are delivered without a socket buffer).
pub(crate) fn batch_addresses(av: &AddressVector) -> Option<([u8; 4], [u8; 4])> {
    match (av.network, av.sgid.get(12..16), av.dgid.get(12..16)) {
        (Network::Ipv4, Some(s), Some(d)) if !av.leads_to_own_gid() => {
            <[u8; 4]>::try_from(s).ok().zip(<[u8; 4]>::try_from(d).ok())
        }
        _ => None,
    }
}

/// Packets of one requester run, or one request's responses (`ack::send_responses`), to one
/// IPv4 destination, sent through the stack together ([`TxSkBuff::send_v4_batch`]): routed,
/// queued and segmented once, and the device kicked once, instead of once per packet. Packets
/// that cannot join (loopback, IPv6) leave at once. Nothing waits in a batch beyond the run
/// that filled it: the owner flushes before it completes a work request or stops.
pub(crate) struct TxBatch {
    /// Where the queued packets go: the address vector, its IPv4 source and destination, and
    /// the UDP source port.
    dst: Option<(AddressVector, [u8; 4], [u8; 4], u16)>,
    skbs: [Option<TxSkBuff>; MAX_BATCH],
    len: usize,
    bytes: usize,
}

impl TxBatch {
    pub(crate) fn new() -> Self {
        TxBatch {
            dst: None,
            skbs: [const { None }; MAX_BATCH],
            len: 0,
            bytes: 0,
        }
    }

    /// Queues `skb` (RoCE part built, ICRC left zero) for `av`, sending what is queued first
    /// when it goes elsewhere or the batch is full. A packet that cannot join a batch
    /// (loopback to the device's own GID, IPv6) leaves at once.
    pub(crate) fn add(
        &mut self,
        dev: &Device<Roxe>,
        av: &AddressVector,
        sport: u16,
        mut skb: TxSkBuff,
    ) {
        let Some((saddr, daddr)) = batch_addresses(av) else {
            self.flush(dev);
            let _ = xmit(dev, av, sport, skb);
            return;
        };
        let joins = match &self.dst {
            Some((cur, _, _, cur_sport)) => {
                cur.dgid == av.dgid
                    && cur.sgid == av.sgid
                    && cur.traffic_class == av.traffic_class
                    && cur.hop_limit == av.hop_limit
                    && *cur_sport == sport
                    && self.len < MAX_BATCH
                    && self.bytes + skb.data().len() <= BATCH_BYTES
            }
            None => true,
        };
        if !joins {
            self.flush(dev);
        }
        if skb
            .push_headers_v4(saddr, daddr, sport, av.traffic_class, av.hop_limit)
            .is_err()
        {
            // Lost, as on a wire; RC's retransmission recovers it.
            dev.data().counters.inc(Counter::SendErr);
            return;
        }
        let Some(slot) = self.skbs.get_mut(self.len) else {
            return;
        };
        self.bytes += skb.data().len();
        *slot = Some(skb);
        self.len += 1;
        self.dst = Some((*av, saddr, daddr, sport));
    }

    /// Sends whatever is queued.
    pub(crate) fn flush(&mut self, dev: &Device<Roxe>) {
        let n = core::mem::replace(&mut self.len, 0);
        // The packets' IP headers are pushed: these are their lengths as IP packets.
        let bytes = core::mem::replace(&mut self.bytes, 0) as u64;
        let Some((_, saddr, daddr, _)) = self.dst.take() else {
            return;
        };
        let counters = &dev.data().counters;
        let mut skbs = self.skbs.iter_mut().take(n).filter_map(|s| s.take());
        let Some(mut head) = skbs.next() else { return };
        let Ok(first_id) = head.route_v4_batch(&dev.data().netdev, saddr, daddr, n as u32) else {
            // No route: the batch is lost, as a single packet would be.
            skbs.for_each(drop);
            counters.add(Counter::SendErr, n as u64);
            return;
        };
        let mut id = first_id;
        let _ = set_ip_id(&mut head, id).and_then(|()| seal(&mut head, 20));
        // The others carry the IDs segmentation gives them by position; one that cannot be
        // sealed still goes (a bad ICRC, dropped by the receiver) so the numbering holds.
        let rest = skbs.map(|mut skb| {
            id = id.wrapping_add(1);
            let _ = set_ip_id(&mut skb, id).and_then(|()| seal(&mut skb, 20));
            skb
        });
        // The stack takes or refuses the batch as a whole.
        let sent = if n == 1 {
            head.send_v4()
        } else {
            head.send_v4_batch(rest)
        };
        match sent {
            Ok(()) => counters.sent(n as u64, bytes),
            Err(_) => counters.add(Counter::SendErr, n as u64),
        }
    }
}

/// Writes the IPv4 ID of a packet whose data starts at its IPv4 header.
fn set_ip_id(skb: &mut TxSkBuff, id: u16) -> Result {
    skb.data_mut()
        .get_mut(4..6)
        .ok_or(EINVAL)?
        .copy_from_slice(&id.to_be_bytes());
    Ok(())
}
