// SPDX-License-Identifier: GPL-2.0

//! The network side: roxe's UDP sockets on the RoCEv2 port.
//!
//! Rust counterpart of rxe's `rxe_net.c`. Holding port 4791 from module load is also what keeps
//! roxe and another RoCEv2 stack (the in-tree `rdma_rxe`) from both claiming it.

#![deny(unsafe_code)]

use crate::rdma::udp_tunnel::{EncapRecv, Family, SkBuff, UdpTunnelSocket};
use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed}, //
};

/// The RoCEv2 UDP destination port (IBA A17.2.1, assigned by IANA).
pub(crate) const ROCE_V2_UDP_PORT: u16 = 4791;

/// Packets received before the data path handles them: counted and dropped.
static RX_DROPPED: Atomic<u64> = Atomic::new(0);

/// Receives RoCEv2 datagrams (softirq context).
struct Rx;

impl EncapRecv for Rx {
    fn recv(skb: SkBuff) {
        // The receive pipeline (issue: RoCEv2 data path) parses, checks the ICRC and queues the
        // packet to its QP. Until then every packet is a counted drop.
        RX_DROPPED.add(1u64, Relaxed);
        drop(skb);
    }
}

/// The IPv4 and IPv6 sockets bound to the RoCEv2 port of the initial namespace.
pub(crate) struct Sockets {
    _v4: UdpTunnelSocket<Rx>,
    _v6: Option<UdpTunnelSocket<Rx>>,
}

impl Sockets {
    /// Binds port 4791 for IPv4 and, when the kernel has IPv6, for IPv6.
    pub(crate) fn bind() -> Result<Self> {
        let v4 = UdpTunnelSocket::bind(Family::Ipv4, ROCE_V2_UDP_PORT).inspect_err(|e| {
            if *e == EADDRINUSE {
                pr_err!("UDP port {} is in use: another RoCEv2 stack (rdma_rxe?) owns it\n", ROCE_V2_UDP_PORT);
            } else {
                pr_err!("cannot bind UDP port {}: {:?}\n", ROCE_V2_UDP_PORT, e);
            }
        })?;
        let v6 = match UdpTunnelSocket::bind(Family::Ipv6, ROCE_V2_UDP_PORT) {
            Ok(s) => Some(s),
            // No IPv6 in this kernel (or disabled): run IPv4-only, as rxe does.
            Err(e) if e == EAFNOSUPPORT => None,
            Err(e) => {
                pr_err!("cannot bind UDP port {} for IPv6: {:?}\n", ROCE_V2_UDP_PORT, e);
                return Err(e);
            }
        };
        Ok(Self { _v4: v4, _v6: v6 })
    }
}
