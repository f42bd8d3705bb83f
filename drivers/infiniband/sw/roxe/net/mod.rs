// SPDX-License-Identifier: GPL-2.0

//! The network side: roxe's UDP sockets on the RoCEv2 port, the receive pipeline up to the
//! packet's QP, and transmission (over IPv4, or looped back to the device's own GID).
//!
//! Rust counterpart of rxe's `rxe_net.c`, `rxe_ns.c` and `rxe_recv.c`. Each device holds the
//! RoCEv2 port's sockets of its netdev's network namespace ([`port_ref`]): bound with the first
//! device there, released with the last, or when the namespace goes.
//!
//! Contexts: [`Rx::recv`] runs in softirq. Loopback packets are delivered by whoever sends them
//! (process context or softirq): they go through a per-device queue that one caller at a time
//! drains, so a reply sent while handling a packet never recurses into the handler. The
//! requester's packets skip the queue when no delivery is under way ([`deliver_local`]): they
//! are handed to the responder straight from the buffer they were built in.

#![deny(unsafe_code)]

pub(crate) mod ack;
pub(crate) mod source;

use crate::compat::errno;
use crate::rdma::{
    ah::{AddressVector, Network},
    bh,
    copy::{copy, zero},
    device::Device,
    netdev::NetDevice,
    skb::{crc32_le, SkBuff, TxSkBuff, MAX_BATCH},
    udp_tunnel::{EncapRecv, PortRef},
};
use crate::{
    counters::Counter,
    hca::Roxe,
    net::source::Source,
    proto::{
        icrc::{self, Crc32, IpHeader},
        packet::{Packet, PacketError},
    },
};
use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Full, Relaxed}, //
};

/// Where the receive entry hands a checked packet: the stages above this file, installed by
/// the device's creator (`verbs/`), so that the network layer depends on nothing above it.
pub(crate) struct RxPath {
    /// Hands a packet to the QP it is addressed to (`recv::dispatch`).
    pub(crate) dispatch: fn(&Device<Roxe>, &Packet<&[u8]>, &Source),
    /// Delivers the response a loopback delivery left for the drainer, if any; returns how
    /// many responses it delivered (`resp::deliver_local_responses`).
    pub(crate) local_responses: fn(&Device<Roxe>) -> u32,
}

/// The RoCEv2 UDP destination port (IBA A17.2.1, assigned by IANA).
pub(crate) const ROCE_V2_UDP_PORT: u16 = 4791;

/// Size of a UDP header.
const UDP_HDR_LEN: usize = 8;

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

/// Why received packets were dropped before reaching a QP. Counted per reason, as a NIC's
/// error counters are.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RxDrop {
    /// Not linearisable, or shorter than UDP + BTH.
    Malformed,
    /// The headers do not parse ([`PacketError`]).
    BadHeaders,
    /// The invariant CRC does not match: corrupted in flight (IBA 9.8.2.2 says drop silently).
    BadIcrc,
    /// No roxe device on the netdev it arrived by.
    NoDevice,
    /// No QP with the destination number.
    NoQp,
    /// IPv6, from the wire, with one of the host's own addresses as its source: forged, since
    /// the device's packets to its own GIDs never leave memory (the loopback path).
    OwnSource,
}

static RX_DROPS: [Atomic<u64>; 6] = [
    Atomic::new(0),
    Atomic::new(0),
    Atomic::new(0),
    Atomic::new(0),
    Atomic::new(0),
    Atomic::new(0),
];

/// Counts a dropped packet.
pub(crate) fn count_drop(why: RxDrop) {
    if let Some(c) = RX_DROPS.get(why as usize) {
        c.add(1u64, Relaxed);
    }
}

/// The kernel's CRC32 library, for the ICRC.
struct KernelCrc;

impl Crc32 for KernelCrc {
    fn crc32_le(&self, seed: u32, data: &[u8]) -> u32 {
        crc32_le(seed, data)
    }
}

fn v4_mapped(addr: &[u8]) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    if let (Some(dst), Some(src)) = (gid.get_mut(12..16), addr.get(..4)) {
        dst.copy_from_slice(src);
    }
    gid
}

/// Parses the IP header of a received packet: (source, ICRC view of the header).
fn parse_ip(ip: &[u8]) -> Option<(Source, IpHeader<'_>)> {
    let version = ip.first()? >> 4;
    match version {
        4 => {
            let ihl = usize::from(ip.first()? & 0xf) * 4;
            let hdr = ip.get(..ihl)?;
            let src = v4_mapped(hdr.get(12..16)?);
            let dst = v4_mapped(hdr.get(16..20)?);
            Some((
                Source {
                    sgid: src,
                    dgid: dst,
                    network: Network::Ipv4,
                    local: false,
                    redeliveries: 0,
                },
                IpHeader::V4(hdr),
            ))
        }
        6 => {
            let hdr = ip.get(..40)?;
            let sgid: [u8; 16] = hdr.get(8..24)?.try_into().ok()?;
            let dgid: [u8; 16] = hdr.get(24..40)?.try_into().ok()?;
            Some((
                Source {
                    sgid,
                    dgid,
                    network: Network::Ipv6,
                    local: false,
                    redeliveries: 0,
                },
                IpHeader::V6(hdr),
            ))
        }
        _ => None,
    }
}

/// Receives RoCEv2 datagrams (softirq context).
pub(crate) struct Rx;

impl EncapRecv for Rx {
    fn recv(skb: SkBuff) {
        receive(skb, true);
    }
}

/// The receive pipeline: checks, then hands the packet to its device's QP.
fn receive(mut skb: SkBuff, check_icrc: bool) {
    if skb.linearize().is_err() || (skb.len() as usize) < UDP_HDR_LEN {
        return count_drop(RxDrop::Malformed);
    }
    let Some(netdev) = skb.netdev() else {
        return count_drop(RxDrop::NoDevice);
    };
    let Some(dev) = Device::<Roxe>::get_by_netdev(netdev) else {
        return count_drop(RxDrop::NoDevice);
    };
    let counters = &dev.data().counters;
    let drop = |why: RxDrop| {
        count_drop(why);
        counters.inc(match why {
            RxDrop::BadIcrc => Counter::RcvdIcrcErr,
            RxDrop::OwnSource => Counter::RcvdPeerMismatch,
            _ => Counter::RcvdDrops,
        });
    };
    // The IP packet's length: its header (the network header up to the UDP header) and the rest.
    let bytes = skb.network_header().len() as u64 + u64::from(skb.len());
    let data = skb.data();
    let (Some(udp), Some(transport)) = (data.get(..UDP_HDR_LEN), data.get(UDP_HDR_LEN..)) else {
        return drop(RxDrop::Malformed);
    };
    let pkt = match Packet::new_checked(transport) {
        Ok(p) => p,
        Err(e) => {
            let _: PacketError = e;
            return drop(RxDrop::BadHeaders);
        }
    };
    let Some((mut source, ip)) = parse_ip(skb.network_header()) else {
        return drop(RxDrop::Malformed);
    };
    // Only the loopback drainer passes packets without an ICRC to check.
    source.local = !check_icrc;
    if check_icrc {
        match pkt.icrc_matches(&KernelCrc, ip, udp) {
            Ok(true) => {}
            _ => return drop(RxDrop::BadIcrc),
        }
        // IPv4 drops a packet whose source is a local address before it reaches the UDP
        // tunnel (`fib_validate_source`, unless the admin sets `accept_local`); IPv6 has no
        // such check, so a host on the link could pose as one of the device's own GIDs, and so
        // as any QP connected through it.
        if source.network == Network::Ipv6 && netdev.ipv6_addr_is_local(&source.sgid) {
            return drop(RxDrop::OwnSource);
        }
    }
    counters.received(bytes);
    (dev.data().rx.dispatch)(&dev, &pkt, &source);
}

/// Packets one caller delivers from the loopback queue before it leaves the rest to the
/// device's kick work. Whoever drains also holds up its own context: a requester draining for
/// the whole device (its QP's requester claimed meanwhile) could go on for as long as other
/// CPUs keep the queue filled, and its own QP's retransmissions would wait behind that until
/// their retries ran out.
pub(crate) const LOOPBACK_BUDGET: u32 = 64;

/// Loopback delivery: packets for the device's own GIDs never touch the wire.
pub(crate) fn loopback(dev: &Device<Roxe>, skb: SkBuff) {
    dev.data().loopback.push(skb);
    drain_loopback(dev, LOOPBACK_BUDGET);
}

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
fn drain_claimed(dev: &Device<Roxe>, mut budget: u32) -> u32 {
    let data = dev.data();
    {
        let _bh = bh::disable();
        while budget > 0 {
            let Some(skb) = data.loopback.pop() else {
                break;
            };
            // Our own packets: nothing can have corrupted them, and they carry no ICRC.
            receive(skb, false);
            // A response it asked for is delivered before the next packet (the queue's order).
            budget = budget.saturating_sub(1 + (data.rx.local_responses)(dev));
        }
    }
    // A full barrier, not a release store: the caller's emptiness check that follows must not
    // be ordered before the flag is seen clear, or a packet queued meanwhile by a CPU that
    // found the flag still set would sit in the queue until the next loopback packet.
    let _ = data.loopback_draining.xchg(false, Full);
    budget
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

/// Delivers a packet the requester built in its local buffer (`roce`: BTH to ICRC) for the
/// device's own GID straight to the responder: no socket buffer, no headers, no queue. The
/// packet is copied into a socket buffer and queued only when a delivery is already under
/// way (the queue keeps the order, and nothing recurses). Context: the requester's (process
/// or softirq, interrupts enabled).
pub(crate) fn deliver_local(dev: &Device<Roxe>, av: &AddressVector, sport: u16, roce: &[u8]) {
    let data = dev.data();
    if !data.loopback.is_empty() || data.loopback_draining.cmpxchg(false, true, Full).is_err() {
        if let Ok(mut skb) = TxSkBuff::alloc(&data.netdev, roce.len()) {
            copy(skb.data_mut(), roce);
            let _ = xmit(dev, av, sport, skb);
        }
        return;
    }
    let bytes = ip_bytes(av.network, roce.len());
    data.counters.sent(1, bytes);
    {
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
                    redeliveries: 0,
                };
                (data.rx.dispatch)(dev, &pkt, &src);
            }
            Err(_) => count_drop(RxDrop::BadHeaders),
        }
    }
    let delivered = (data.rx.local_responses)(dev);
    // The responses this delivery queued (and whatever other CPUs queued meanwhile).
    let budget = drain_claimed(dev, LOOPBACK_BUDGET.saturating_sub(delivered));
    drain_loopback(dev, budget);
}

/// Hands a response the drainer built for a requester of this device (`roce`: BTH to ICRC,
/// from `src`) to the completer, counted as sent and received; false if its headers do not
/// parse. Context: the loopback drainer, holding the drainer claim, bottom halves off.
pub(crate) fn dispatch_local_response(dev: &Device<Roxe>, roce: &[u8], src: &Source) -> bool {
    let Ok(pkt) = Packet::new_checked(roce) else {
        return false;
    };
    let data = dev.data();
    let bytes = ip_bytes(src.network, roce.len());
    data.counters.sent(1, bytes);
    data.counters.received(bytes);
    (data.rx.dispatch)(dev, &pkt, src);
    true
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

/// A device's hold on the RoCEv2 port's sockets of its netdev's network namespace.
pub(crate) type RoceSockets = PortRef<Rx>;

/// Takes a hold on the RoCEv2 port's sockets (IPv4, and IPv6 when the kernel has it) in
/// `netdev`'s namespace, binding them if no device there holds them yet. Process context.
pub(crate) fn port_ref(netdev: &NetDevice) -> Result<RoceSockets> {
    PortRef::get(netdev, ROCE_V2_UDP_PORT).inspect_err(|e| {
        if *e == errno::eaddrinuse() {
            pr_err!(
                "UDP port {} is in use in this namespace: another RoCEv2 stack owns it\n",
                ROCE_V2_UDP_PORT
            );
        } else {
            pr_err!("cannot bind UDP port {}: {:?}\n", ROCE_V2_UDP_PORT, e);
        }
    })
}
