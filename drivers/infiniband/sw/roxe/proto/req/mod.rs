// SPDX-License-Identifier: GPL-2.0

//! Requester logic (IBA 9.7 and rxe's rxe_req.c, as pure decisions): segmenting a send WQE into packets by path MTU, choosing each packet's opcode, PSN and headers, and the in-flight limits (fence, RDMA READ/atomic credits).
//!
//! The kernel keeps one [`WqeProgress`] per send WQE that has started, and drives each WQE one
//! packet at a time:
//!
//! 1. Before the first packet, [`may_start`] says whether the WQE may start now (fence, local
//!    invalidate ordering, RDMA READ/atomic credits, the RC PSN window); before each later packet
//!    [`may_continue`] checks the PSN window alone.
//! 2. [`next_packet`] plans the packet: opcode, PSN, which bytes of the message it carries, pad,
//!    AckReq and the extension header values ([`PacketDesc`]). The kernel allocates
//!    [`PacketDesc::packet_len`] bytes, builds the packet with `Packet::build`, writes the headers
//!    with [`PacketDesc::write_headers`], copies the payload, adds the ICRC and transmits.
//! 3. Once the packet is out, the kernel stores [`PacketDesc::after`] as the WQE's progress and
//!    the QP's next PSN; when [`PacketDesc::last_of_wqe`] is set the WQE is fully sent.
//!
//! On a retry from PSN `p` (see `comp`), the WQE holding `p` resumes with
//! [`WqeProgress::resume_at`] and every later started WQE restarts from its own first PSN: PSNs are
//! a function of the WQE sequence, so a retransmission reuses exactly the PSNs of the first
//! transmission.

mod headers;
mod local;
mod plan;
mod progress;
mod start;
mod wr;

pub use headers::*;
pub use local::*;
pub use plan::*;
pub use progress::*;
pub use start::*;
pub use wr::*;

use super::cqe::WcStatus;
use super::icrc::ICRC_LEN;
use super::mtu::Pmtu;
use super::opcode::{ExtHeader, Opcode, OpcodeInfo, Transport};
use super::packet::{
    pad_count_for, AtomicEth, Deth, Feth, Ieth, ImmDt, NoSuchHeader, Packet, Reth,
};
use super::psn::Psn;
use super::wqe::{send_flags, QpType, SendOpcode, SendWqe};

/// The QP facts the requester needs, copied from its attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReqConfig {
    /// Transport service of the QP.
    pub qp_type: QpType,
    /// Payload bytes per packet: the path MTU for RC and UC ([`Pmtu::LOCAL`] on a path to the
    /// device's own GID); for UD and GSI, the port's active MTU (rxe's `get_mtu`), since
    /// datagrams have no path attribute.
    pub mtu: Pmtu,
    /// This QP's number: the source QP of a DETH.
    pub qp_num: u32,
    /// The connected peer's QP number (RC, UC); datagrams take theirs from the work request.
    pub dest_qp_num: u32,
    /// The QP's own Q_Key, sent by UD requests that carry [`QKEY_FROM_QP`].
    pub qkey: u32,
    /// The P_Key to put in every BTH.
    pub pkey: u16,
    /// Initiator depth (`max_rd_atomic`): how many RDMA READ, atomic, FLUSH and ATOMIC WRITE
    /// requests may await their responses at once.
    pub max_rd_atomic: u32,
}

impl ReqConfig {
    /// Whether the QP sends datagrams (one packet per message, a DETH in each).
    const fn is_datagram(&self) -> bool {
        matches!(self.qp_type, QpType::Ud | QpType::Gsi)
    }
}

// Last: tools/deps.py reads a file only up to its test module, and must see the imports above.
#[cfg(test)]
mod tests;
