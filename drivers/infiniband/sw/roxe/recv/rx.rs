// SPDX-License-Identifier: GPL-2.0

//! The receive entry: RoCEv2 datagrams from the device's UDP sockets (softirq) and from the
//! loopback queue, checked (length, headers, ICRC, a forged own source) and handed to
//! [`super::dispatch`]; and the device's hold on its namespace's sockets ([`port_ref`]).
//! Counterpart of rxe's `rxe_udp_encap_recv` and `rxe_rcv` (`rxe_net.c`, `rxe_recv.c`).

#![deny(unsafe_code)]

use crate::compat::errno;
use crate::rdma::{ah::Network, device::Device, netdev::NetDevice};
use crate::soft::{
    skb::SkBuff,
    udp_tunnel::{EncapRecv, PortRef},
};
use crate::{
    counters::Counter,
    hca::Roxe,
    net::{source::Source, KernelCrc, ROCE_V2_UDP_PORT, UDP_HDR_LEN},
    proto::{
        icrc::IpHeader,
        packet::{Packet, PacketError},
    },
};
use kernel::prelude::*;

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
                    payload_in_slot: false,
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
                    payload_in_slot: false,
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

/// The receive pipeline: checks, then hands the packet to its device's QP. A packet that fails
/// a check is dropped and counted on the device's port, as a NIC counts its receive errors
/// (`rcvd_icrc_err`, `rcvd_peer_mismatch`, else `rcvd_drops`). A datagram that arrived by a
/// netdev with no roxe device is not the HCA's to count: the port shares the UDP socket with
/// the namespace's other netdevs.
pub(super) fn receive(mut skb: SkBuff, check_icrc: bool) {
    let whole = skb.linearize().is_ok() && (skb.len() as usize) >= UDP_HDR_LEN;
    let Some(netdev) = skb.netdev() else {
        return;
    };
    let Some(dev) = Device::<Roxe>::get_by_netdev(netdev) else {
        return;
    };
    let counters = &dev.data().counters;
    if !whole {
        return counters.inc(Counter::RcvdDrops);
    }
    // The IP packet's length: its header (the network header up to the UDP header) and the rest.
    let bytes = skb.network_header().len() as u64 + u64::from(skb.len());
    let data = skb.data();
    let (Some(udp), Some(transport)) = (data.get(..UDP_HDR_LEN), data.get(UDP_HDR_LEN..)) else {
        return counters.inc(Counter::RcvdDrops);
    };
    let pkt = match Packet::new_checked(transport) {
        Ok(p) => p,
        Err(e) => {
            let _: PacketError = e;
            return counters.inc(Counter::RcvdDrops);
        }
    };
    let Some((mut source, ip)) = parse_ip(skb.network_header()) else {
        return counters.inc(Counter::RcvdDrops);
    };
    // Only the loopback drainer passes packets without an ICRC to check.
    source.local = !check_icrc;
    if check_icrc {
        match pkt.icrc_matches(&KernelCrc, ip, udp) {
            Ok(true) => {}
            _ => return counters.inc(Counter::RcvdIcrcErr),
        }
        // IPv4 drops a packet whose source is a local address before it reaches the UDP
        // tunnel (`fib_validate_source`, unless the admin sets `accept_local`); IPv6 has no
        // such check, so a host on the link could pose as one of the device's own GIDs, and so
        // as any QP connected through it.
        if source.network == Network::Ipv6 && netdev.ipv6_addr_is_local(&source.sgid) {
            return counters.inc(Counter::RcvdPeerMismatch);
        }
    }
    counters.received(bytes);
    super::dispatch(&dev, &pkt, &source);
}

/// Takes a hold on the RoCEv2 port's sockets (IPv4, and IPv6 when the kernel has it) in
/// `netdev`'s namespace, binding them if no device there holds them yet. Process context.
pub(crate) fn port_ref(netdev: &NetDevice) -> Result<PortRef> {
    PortRef::get::<Rx>(netdev, ROCE_V2_UDP_PORT).inspect_err(|e| {
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
