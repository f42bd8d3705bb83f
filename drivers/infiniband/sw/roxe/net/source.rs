// SPDX-License-Identifier: GPL-2.0

//! Where a received packet came from: what the receive entry (`net/`) learns from the IP
//! header, and the stages after it need for UD completions, responses and the peer check.

#![deny(unsafe_code)]

use crate::rdma::ah::Network;

/// Where a received packet came from (for UD completions and responses).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Source {
    /// The sender's GID (IPv4-mapped for IPv4).
    pub(crate) sgid: [u8; 16],
    /// The GID the packet was sent to.
    pub(crate) dgid: [u8; 16],
    /// IPv4 or IPv6.
    pub(crate) network: Network,
    /// Sent to the device's own GID and delivered by the loopback drainer, which holds the
    /// device's drainer claim meanwhile (`deliver_local`, `drain_claimed`); never set for a
    /// packet from the wire, whatever its addresses say.
    pub(crate) local: bool,
    /// The packet's payload is not in its bytes but in the device's `local_source` slot: the
    /// drainer left it in the MR it is read from (`mem::LocalSource`) and holds the claim while
    /// the packet is handled. Whoever places the payload takes it from there; a packet so
    /// marked whose slot is empty has lost its payload, and its own payload bytes are never
    /// used. Set only with `local`.
    pub(crate) payload_in_slot: bool,
    /// Times the ODP path handed this packet back to the responder after a fault
    /// (`odp::redeliver_after`, at most `odp::MAX_REDELIVERIES`).
    pub(crate) redeliveries: u8,
}
