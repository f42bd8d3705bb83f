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

use super::cqe::WcStatus;
use super::icrc::ICRC_LEN;
use super::mtu::Pmtu;
use super::opcode::{ExtHeader, Opcode, OpcodeInfo, Transport};
use super::packet::{
    pad_count_for, AtomicEth, Deth, Feth, Ieth, ImmDt, NoSuchHeader, Packet, Reth,
};
use super::psn::Psn;
use super::wqe::{send_flags, QpType, SendOpcode, SendWqe};

/// The Q_Key of the GSI QP (IBA 13.4.6.1: QP1 uses the well-known Q_Key 0x80010000). Every
/// datagram QP1 sends carries it, whatever the work request says.
pub const GSI_QKEY: u32 = 0x8001_0000;

/// A UD work request whose Q_Key has this bit set asks for the QP's own Q_Key instead. The
/// hardware drivers of the kernel (mlx4, mthca, hns, pvrdma, erdma) all implement this rule;
/// rxe does not.
pub const QKEY_FROM_QP: u32 = 1 << 31;

/// QP numbers are 24 bits (IBA 9.2: the BTH's DestQP field).
const QPN_MASK: u32 = 0x00ff_ffff;

/// How far (in PSNs) an RC requester may run ahead of the oldest unacknowledged PSN before it
/// waits for acknowledgements (rxe's `RXE_MAX_UNACKED_PSNS`). It bounds the retransmission work a
/// single loss causes and keeps PSN comparisons far inside the half-space IBA 9.7.1 allows. A
/// WQE that has started may overshoot it: an RDMA READ request reserves all its response PSNs
/// at once.
pub const MAX_UNACKED_PSNS: u32 = 128;

/// Within a long RC message, AckReq is set on every packet whose index in the message is one
/// less than a multiple of this (besides the last packet). The responder may coalesce
/// acknowledgements until a request asks for one, so without these the requester could sit on
/// a full [`MAX_UNACKED_PSNS`] window waiting for the end of the message; at half the window an
/// ACK is always on its way before the window closes. (rxe asks every 65 or 66 packets.)
pub const ACK_REQ_INTERVAL: u32 = 64;

/// The most response packets one RDMA READ request asks for. A longer READ WQE is asked for in
/// requests of this many PSNs, aligned on multiples of it from the WQE's first PSN, and each
/// request waits until every response before it has arrived ([`may_continue`]).
///
/// A responder answers a READ request with all its response packets at once. A 4 MiB READ is
/// 4096 packets at MTU 1024, far more than an egress queue holds (Linux's default is 1000):
/// most of the burst is tail-dropped, and every re-request replays another burst into a queue
/// still full of the last one, until the retries run out. Requests of at most the PSN window
/// keep the bursts as small as the window keeps the requester's own. Each request is an
/// ordinary RDMA READ request (IBA 9.4.3) for its part of the buffer, and only one is
/// outstanding per WQE, so the WQE still uses one responder resource; the fixed alignment makes
/// a re-request after a loss name a part of the request the responder has in its cache.
///
/// As small as [`READ_RESPONSE_WINDOW`]: the responses to one request are one unpaced burst,
/// and bursts of 128 (the PSN window) lost packets in the receiving host socket between two
/// VMs so often that a 256 KiB `ib_read_bw` made no progress in 120 s (250 re-requests); with
/// 64 the same run is loss-free.
pub const READ_REQUEST_PSNS: u32 = READ_RESPONSE_WINDOW;

/// The most RDMA READ response PSNs the requester lets be outstanding when it starts a READ
/// that takes several requests: such a READ starts only if its first request
/// ([`READ_REQUEST_PSNS`]) fits beside what is outstanding, or nothing is (a READ that one
/// request covers has [`SINGLE_REQUEST_READ_WINDOW`]). The responder answers each request with a burst of
/// responses that nothing paces, and bursts of several READs add up. Measured between two VMs
/// on QEMU's `dgram` netdev, `ib_read_bw` of 200 x 64 KiB: with up to 192 response PSNs
/// outstanding (the PSN window alone) a fifth of the responses were lost in the receiving
/// host socket (`RcvbufErrors`), 2.35 MiB/s; with a window of 128, 63 to 80 re-requests and
/// 4 to 6 MiB/s; with 64, no loss and 19.6 MiB/s. A WRITE's packets are paced by the
/// sender's own CPU and lost none with the PSN window of 128.
pub const READ_RESPONSE_WINDOW: u32 = 64;

/// The most RDMA READ response PSNs outstanding beside which a READ that one request asks for
/// whole (at most [`READ_REQUEST_PSNS`]) may start: the next request goes out once half of the
/// last one's responses have arrived, so that the responder answers it while the requester
/// takes in the rest, instead of the wire's round trip passing idle between READs, and at most
/// one and a half requests' responses are on the wire at once. Between two VMs, `ib_read_bw` of
/// 64 KiB: one READ in flight at a time 9.3-13.4 MiB/s (on a slower host); two whole
/// READs in flight (a window of 128) 20.8-36.8 MiB/s with 75 to 82 re-requests per 400 READs
/// (bursts of two READs' responses overflowing the receiving host socket); this window (96)
/// 41.1-42.3 MiB/s with 1 or 2; 80, 36.9-38.7 with none (in one boot). Longer READs
/// keep to [`READ_RESPONSE_WINDOW`]: their later requests go out alone, a loss at the end of
/// one is found only by the ACK timer, and 1 MiB READs in a window of 128 fell from 10-12 to
/// 4.7 MiB/s.
pub const SINGLE_REQUEST_READ_WINDOW: u32 = READ_REQUEST_PSNS + READ_REQUEST_PSNS / 2;

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

/// log2 of the segment in bytes: every segment is a power of two, so segmenting is shifting and
/// no division (and no division by zero) is involved.
const fn mtu_shift(mtu: Pmtu) -> u32 {
    mtu.shift()
}

/// Number of MTU-sized packets a message of `len` bytes needs; an empty message still travels
/// in one packet.
const fn packets_for(len: u32, mtu: Pmtu) -> u32 {
    (len.saturating_sub(1) >> mtu_shift(mtu)).saturating_add(1)
}

const fn min_u32(a: u32, b: u32) -> u32 {
    if a < b {
        a
    } else {
        b
    }
}

/// Whether the operation runs on the local HCA only and sends nothing.
pub const fn is_local_op(op: SendOpcode) -> bool {
    matches!(
        op,
        SendOpcode::LocalInv | SendOpcode::BindMw | SendOpcode::RegMr
    )
}

/// Whether the operation occupies one of the initiator depth's slots until its response
/// arrives. RDMA READ and the atomics do by IBA definition; rxe also counts ATOMIC WRITE.
/// FLUSH is counted too because the responder keeps a READ/atomic resource for it (rxe's
/// `rxe_prepare_res` takes one for READ, atomics, ATOMIC WRITE and FLUSH) so that it can
/// replay the response; staying within the peer's resources is what the depth is for.
pub const fn needs_rd_atomic_credit(op: SendOpcode) -> bool {
    matches!(
        op,
        SendOpcode::RdmaRead
            | SendOpcode::CmpAndSwp
            | SendOpcode::FetchAndAdd
            | SendOpcode::AtomicWrite
            | SendOpcode::Flush
    )
}

/// The number of PSNs a WQE consumes on a QP with `cfg`.
///
/// An RDMA READ request takes one PSN per packet of its response (IBA 9.7.4.1.3: the responder
/// numbers the response packets from the request's PSN); a SEND or RDMA WRITE one per packet;
/// an atomic, FLUSH or ATOMIC WRITE one; a datagram always one; local operations none.
pub const fn psns_of(wqe: &SendWqe, cfg: &ReqConfig) -> u32 {
    match wqe.opcode {
        SendOpcode::LocalInv | SendOpcode::BindMw | SendOpcode::RegMr => 0,
        SendOpcode::CmpAndSwp
        | SendOpcode::FetchAndAdd
        | SendOpcode::Flush
        | SendOpcode::AtomicWrite => 1,
        _ if cfg.is_datagram() => 1,
        _ => packets_for(wqe.length, cfg.mtu),
    }
}

/// How far the requester got with one WQE; the kernel keeps one per started WQE.
///
/// Every packet of a message but the last carries exactly one MTU of payload, so the PSNs used
/// so far determine the bytes sent so far ([`WqeProgress::offset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WqeProgress {
    /// PSN of the WQE's first packet.
    pub first_psn: Psn,
    /// PSNs consumed so far: the index of the next packet in the message.
    pub psns_used: u32,
}

impl WqeProgress {
    /// A WQE about to send its first packet with PSN `first_psn` (the QP's next PSN).
    pub const fn start(first_psn: Psn) -> WqeProgress {
        WqeProgress {
            first_psn,
            psns_used: 0,
        }
    }

    /// The PSN of the next packet; once the WQE is fully sent, the PSN of the next WQE.
    pub const fn next_psn(&self) -> Psn {
        self.first_psn.add(self.psns_used)
    }

    /// The PSN of the WQE's last packet (for an RDMA READ, of its last response packet). For a
    /// local operation, which uses none, the PSN before `first_psn`.
    pub const fn last_psn(&self, wqe: &SendWqe, cfg: &ReqConfig) -> Psn {
        self.first_psn.add(psns_of(wqe, cfg).wrapping_sub(1))
    }

    /// Bytes of the message covered by the packets sent so far (for a resumed RDMA READ: the
    /// bytes already received).
    pub const fn offset(&self, wqe: &SendWqe, cfg: &ReqConfig) -> u32 {
        let covered = (self.psns_used as u64) << mtu_shift(cfg.mtu);
        if covered < wqe.length as u64 {
            covered as u32
        } else {
            wqe.length
        }
    }

    /// Whether every packet of the WQE has been sent.
    pub const fn is_done(&self, wqe: &SendWqe, cfg: &ReqConfig) -> bool {
        self.psns_used >= psns_of(wqe, cfg)
    }

    /// The progress of a WQE whose packets start at `first_psn` when the requester goes back to
    /// `from_psn` (a retry after a NAK, an implicit NAK or a timeout). `None` if `from_psn` is
    /// not one of the WQE's PSNs. PSNs are told apart within half the sequence space (IBA
    /// 9.7.1), so a WQE must use fewer than 2^23 PSNs; the maximum message size keeps it far
    /// below (8 MiB at MTU 256 is 32768).
    pub const fn resume_at(
        wqe: &SendWqe,
        first_psn: Psn,
        from_psn: Psn,
        cfg: &ReqConfig,
    ) -> Option<WqeProgress> {
        let index = from_psn.diff(first_psn);
        if index < 0 || index as u32 >= psns_of(wqe, cfg) {
            return None;
        }
        Some(WqeProgress {
            first_psn,
            psns_used: index as u32,
        })
    }
}

/// Reads `N` bytes of the work request union at `off`; the union copy is 32 bytes and every
/// field read below lies inside it, the zeros stand in for what cannot happen.
fn union_bytes<const N: usize>(wr: &[u8; 32], off: usize) -> [u8; N] {
    match wr.get(off..).and_then(<[u8]>::first_chunk::<N>) {
        Some(b) => *b,
        None => [0; N],
    }
}

// The union is in host order: user space wrote it on this CPU.
fn union_u16(wr: &[u8; 32], off: usize) -> u16 {
    u16::from_ne_bytes(union_bytes(wr, off))
}

fn union_u32(wr: &[u8; 32], off: usize) -> u32 {
    u32::from_ne_bytes(union_bytes(wr, off))
}

fn union_u64(wr: &[u8; 32], off: usize) -> u64 {
    u64::from_ne_bytes(union_bytes(wr, off))
}

/// `wr.rdma` of `struct rxe_send_wr`: RDMA WRITE, RDMA READ, and (in rdma-core's rxe provider)
/// ATOMIC WRITE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RdmaWr {
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
}

impl RdmaWr {
    /// Decodes the union bytes (`remote_addr` at 0, `rkey` at 8).
    pub fn decode(wr: &[u8; 32]) -> RdmaWr {
        RdmaWr {
            remote_addr: union_u64(wr, 0),
            rkey: union_u32(wr, 8),
        }
    }
}

/// `wr.atomic` of `struct rxe_send_wr`: compare and swap, fetch and add.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AtomicWr {
    /// Remote virtual address.
    pub remote_addr: u64,
    /// Compare operand (compare and swap) or addend (fetch and add).
    pub compare_add: u64,
    /// Swap operand (compare and swap).
    pub swap: u64,
    /// Remote key.
    pub rkey: u32,
}

impl AtomicWr {
    /// Decodes the union bytes (`remote_addr` at 0, `compare_add` at 8, `swap` at 16, `rkey` at
    /// 24).
    pub fn decode(wr: &[u8; 32]) -> AtomicWr {
        AtomicWr {
            remote_addr: union_u64(wr, 0),
            compare_add: union_u64(wr, 8),
            swap: union_u64(wr, 16),
            rkey: union_u32(wr, 24),
        }
    }
}

/// `wr.ud` of `struct rxe_send_wr`: the destination of a datagram. The address vector is found
/// through `ah_num` (the embedded `av` lies beyond the 32 bytes kept in [`SendWqe::wr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct UdWr {
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Q_Key for the DETH (see [`QKEY_FROM_QP`]).
    pub remote_qkey: u32,
    /// P_Key index to send with (GSI).
    pub pkey_index: u16,
    /// Index of the address handle, as returned by create AH.
    pub ah_num: u32,
}

impl UdWr {
    /// Decodes the union bytes (`remote_qpn` at 0, `remote_qkey` at 4, `pkey_index` at 8,
    /// `ah_num` at 12).
    pub fn decode(wr: &[u8; 32]) -> UdWr {
        UdWr {
            remote_qpn: union_u32(wr, 0),
            remote_qkey: union_u32(wr, 4),
            pkey_index: union_u16(wr, 8),
            ah_num: union_u32(wr, 12),
        }
    }
}

/// `wr.flush` of `struct rxe_send_wr`. rdma-core's rxe provider leaves `length` zero and puts the
/// flush length in `dma.length` ([`SendWqe::length`]), which is what the RETH carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct FlushWr {
    /// Remote virtual address.
    pub remote_addr: u64,
    /// The union's length field (unused, see above).
    pub length: u32,
    /// Remote key.
    pub rkey: u32,
    /// Placement type bits (`IB_FLUSH_GLOBAL`, `IB_FLUSH_PERSISTENT`).
    pub placement_type: u8,
    /// Selectivity level (`IB_FLUSH_RANGE`, `IB_FLUSH_MR`).
    pub selectivity_level: u8,
}

impl FlushWr {
    /// Decodes the union bytes (`remote_addr` at 0, `length` at 8, `rkey` at 12, `type` at 16,
    /// `level` at 17).
    pub fn decode(wr: &[u8; 32]) -> FlushWr {
        let [placement_type, selectivity_level] = union_bytes::<2>(wr, 16);
        FlushWr {
            remote_addr: union_u64(wr, 0),
            length: union_u32(wr, 8),
            rkey: union_u32(wr, 12),
            placement_type,
            selectivity_level,
        }
    }
}

/// `wr.mw` of `struct rxe_send_wr`: a memory window bind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct MwWr {
    /// Start of the window.
    pub addr: u64,
    /// Length of the window.
    pub length: u64,
    /// L_Key of the MR the window is bound to.
    pub mr_lkey: u32,
    /// R_Key of the window before the bind.
    pub mw_rkey: u32,
    /// R_Key the window gets.
    pub rkey: u32,
    /// Access flags of the window.
    pub access: u32,
}

impl MwWr {
    /// Decodes the union bytes (`addr` at 0, `length` at 8, `mr_lkey` at 16, `mw_rkey` at 20,
    /// `rkey` at 24, `access` at 28).
    pub fn decode(wr: &[u8; 32]) -> MwWr {
        MwWr {
            addr: union_u64(wr, 0),
            length: union_u64(wr, 8),
            mr_lkey: union_u32(wr, 16),
            mw_rkey: union_u32(wr, 20),
            rkey: union_u32(wr, 24),
            access: union_u32(wr, 28),
        }
    }
}

/// `wr.reg` of `struct rxe_send_wr`: a fast registration. Only kernel QPs post it, and roxe's
/// kernel post path writes the MR's key index where rxe keeps the `struct ib_mr` pointer, so
/// the WQE carries no kernel address. After rxe's fields it carries what IBA's Fast Register
/// work request carries (IBA 10.7.2.2): the virtual address and the length the MR gets, read
/// from the `ib_mr` when the consumer posted it. A consumer may set the MR's IOVA anew between
/// `ib_map_mr_sg` and posting (NFS's client does), so the page list's mapping is not its last
/// word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RegMrWr {
    /// The MR's key index (its L_Key without the key byte).
    pub mr_index: u32,
    /// The key the MR gets: its index bits must be the MR's, the key byte is the consumer's.
    pub key: u32,
    /// `IB_ACCESS_*` rights the MR gets.
    pub access: u32,
    /// The virtual address of the MR's first byte.
    pub iova: u64,
    /// The MR's length in bytes.
    pub length: u64,
}

impl RegMrWr {
    /// Decodes the union bytes (MR index in the low half of the 64-bit `mr` slot at 0, `key`
    /// at 8, `access` at 12, `iova` at 16, `length` at 24).
    pub fn decode(wr: &[u8; 32]) -> RegMrWr {
        RegMrWr {
            mr_index: union_u32(wr, 0),
            key: union_u32(wr, 8),
            access: union_u32(wr, 12),
            iova: union_u64(wr, 16),
            length: union_u64(wr, 24),
        }
    }
}

/// A work request the HCA executes locally, without a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocalOp {
    /// Invalidate the MR or MW with this key.
    Invalidate {
        /// The L_Key or R_Key to invalidate (the WQE's `ex.invalidate_rkey`).
        rkey: u32,
    },
    /// Bind a memory window.
    BindMw(MwWr),
    /// Fast-register an MR.
    RegMr(RegMrWr),
}

impl LocalOp {
    /// The completion status when the operation fails (as rxe reports them).
    pub const fn failure_status(&self) -> WcStatus {
        match self {
            LocalOp::Invalidate { .. } | LocalOp::RegMr(_) => WcStatus::LocQpOpErr,
            LocalOp::BindMw(_) => WcStatus::MwBindErr,
        }
    }
}

/// The values of the extension headers of one request packet; exactly the headers its opcode
/// has are `Some`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ExtValues {
    /// Datagram ETH (UD).
    pub deth: Option<Deth>,
    /// FLUSH ETH.
    pub feth: Option<Feth>,
    /// RDMA ETH (first packet of an RDMA WRITE, RDMA READ request, FLUSH, ATOMIC WRITE).
    pub reth: Option<Reth>,
    /// Atomic ETH.
    pub atomic_eth: Option<AtomicEth>,
    /// Immediate data (last packet of a "with immediate" message).
    pub imm: Option<ImmDt>,
    /// Invalidate ETH (last packet of a SEND with invalidate).
    pub ieth: Option<Ieth>,
}

/// One request packet to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketDesc {
    /// The BTH opcode.
    pub opcode: Opcode,
    /// The BTH PSN.
    pub psn: Psn,
    /// PSNs the packet consumes: the response packet count for an RDMA READ request, else 1.
    pub psn_count: u32,
    /// Offset in the message of the first payload byte (where to start copying from the SGEs or
    /// the inline data). For an RDMA READ request, the offset of the first byte it asks for
    /// (where the response data starts landing).
    pub payload_offset: u32,
    /// Payload bytes the packet carries.
    pub payload_len: u32,
    /// Pad bytes after the payload (IBA 9.2: the payload is padded to a multiple of 4).
    pub pad: u8,
    /// The BTH AckReq bit.
    pub ack_req: bool,
    /// The BTH solicited event bit.
    pub solicited: bool,
    /// The BTH destination QP.
    pub dest_qpn: u32,
    /// The BTH P_Key.
    pub pkey: u16,
    /// The extension header values.
    pub headers: ExtValues,
    /// Whether this is the WQE's last packet.
    pub last_of_wqe: bool,
    /// The WQE's progress once this packet is sent; its `next_psn()` is the QP's next PSN.
    pub after: WqeProgress,
}

impl PacketDesc {
    /// Length of the packet from the BTH to the end of the ICRC: the UDP payload.
    pub fn packet_len(&self) -> usize {
        let headers = match self.opcode.info() {
            Some(info) => info.header_len(),
            None => 0,
        };
        headers
            .saturating_add(self.payload_len as usize)
            .saturating_add(usize::from(self.pad) + ICRC_LEN)
    }

    /// Writes the BTH fields and the extension headers into a packet that `Packet::build` made
    /// for [`PacketDesc::opcode`] and [`PacketDesc::pad`]. The payload and the ICRC are the
    /// caller's.
    ///
    /// MigReq is set: a QP without automatic path migration stays in the Migrated state of the
    /// APM state machine, in which every packet it sends carries MigReq = 1 (rxe sends 0;
    /// receivers ignore the bit outside APM). Fails only if the packet was built for another
    /// opcode.
    pub fn write_headers<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Packet<T>,
    ) -> Result<(), NoSuchHeader> {
        if p.opcode() != self.opcode {
            return Err(NoSuchHeader);
        }
        p.set_solicited_event(self.solicited);
        p.set_mig_req(true);
        p.set_pkey(self.pkey);
        p.set_dest_qpn(self.dest_qpn);
        p.set_ack_req(self.ack_req);
        p.set_psn(self.psn);
        let h = &self.headers;
        if let Some(deth) = &h.deth {
            p.set_deth(deth)?;
        }
        if let Some(feth) = &h.feth {
            p.set_feth(feth)?;
        }
        if let Some(reth) = &h.reth {
            p.set_reth(reth)?;
        }
        if let Some(atomic) = &h.atomic_eth {
            p.set_atomic_eth(atomic)?;
        }
        if let Some(imm) = h.imm {
            p.set_imm_data(imm)?;
        }
        if let Some(ieth) = &h.ieth {
            p.set_ieth(ieth)?;
        }
        Ok(())
    }
}

/// What the requester does next for a WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketPlan {
    /// Send this packet.
    Packet(PacketDesc),
    /// Execute this local operation, then complete the WQE (with
    /// [`LocalOp::failure_status`] if it fails). No PSN is used.
    Local(LocalOp),
    /// A datagram longer than the MTU: send nothing and complete the WQE successfully, as rxe
    /// does (the IBA lets a UD requester silently drop such a message). The WQE's one PSN is
    /// consumed: `after` is its progress.
    DiscardDatagram {
        /// The WQE's progress after the discard.
        after: WqeProgress,
    },
    /// Every packet of the WQE has been sent.
    Done,
    /// The WQE cannot be sent on this QP (an opcode the transport lacks): complete it with this
    /// status and move the QP to the error state.
    Error(WcStatus),
}

/// The RC opcode of a SEND or RDMA WRITE packet. `starts` and `ends` give the packet's place:
/// both for ONLY, neither for MIDDLE. `None` for the operations without SEND/WRITE opcodes.
const fn send_write_opcode(op: SendOpcode, starts: bool, ends: bool) -> Option<Opcode> {
    use Opcode as O;
    use SendOpcode as S;
    Some(match (op, starts, ends) {
        (S::Send | S::SendWithImm | S::SendWithInv, true, false) => O::RC_SEND_FIRST,
        (S::Send | S::SendWithImm | S::SendWithInv, false, false) => O::RC_SEND_MIDDLE,
        (S::Send, false, true) => O::RC_SEND_LAST,
        (S::Send, true, true) => O::RC_SEND_ONLY,
        (S::SendWithImm, false, true) => O::RC_SEND_LAST_WITH_IMMEDIATE,
        (S::SendWithImm, true, true) => O::RC_SEND_ONLY_WITH_IMMEDIATE,
        (S::SendWithInv, false, true) => O::RC_SEND_LAST_WITH_INVALIDATE,
        (S::SendWithInv, true, true) => O::RC_SEND_ONLY_WITH_INVALIDATE,
        (S::RdmaWrite | S::RdmaWriteWithImm, true, false) => O::RC_RDMA_WRITE_FIRST,
        (S::RdmaWrite | S::RdmaWriteWithImm, false, false) => O::RC_RDMA_WRITE_MIDDLE,
        (S::RdmaWrite, false, true) => O::RC_RDMA_WRITE_LAST,
        (S::RdmaWrite, true, true) => O::RC_RDMA_WRITE_ONLY,
        (S::RdmaWriteWithImm, false, true) => O::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (S::RdmaWriteWithImm, true, true) => O::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        _ => return None,
    })
}

/// The opcode of a packet of `op` on a QP of type `qp`, or `None` if that transport has none
/// (IBA 9.2, table 35: UC lacks READ, atomics and SEND with invalidate; UD has only SEND Only
/// with or without immediate).
fn request_opcode(
    qp: QpType,
    op: SendOpcode,
    starts: bool,
    ends: bool,
) -> Option<&'static OpcodeInfo> {
    let opcode = match (qp, op) {
        (QpType::Ud | QpType::Gsi, SendOpcode::Send) => Opcode::UD_SEND_ONLY,
        (QpType::Ud | QpType::Gsi, SendOpcode::SendWithImm) => Opcode::UD_SEND_ONLY_WITH_IMMEDIATE,
        (QpType::Ud | QpType::Gsi, _) => return None,
        (QpType::Rc, SendOpcode::RdmaRead) => Opcode::RC_RDMA_READ_REQUEST,
        (QpType::Rc, SendOpcode::CmpAndSwp) => Opcode::RC_COMPARE_SWAP,
        (QpType::Rc, SendOpcode::FetchAndAdd) => Opcode::RC_FETCH_ADD,
        (QpType::Rc, SendOpcode::Flush) => Opcode::RC_FLUSH,
        (QpType::Rc, SendOpcode::AtomicWrite) => Opcode::RC_ATOMIC_WRITE,
        (QpType::Rc, _) => send_write_opcode(op, starts, ends)?,
        // UC shares the SEND/WRITE operation codes with RC under its own transport bits; the
        // table answers `None` for the combinations UC lacks (e.g. SEND with invalidate).
        (QpType::Uc, _) => {
            Opcode::new(send_write_opcode(op, starts, ends)?.get() | Transport::Uc.bits())
        }
    };
    opcode.info()
}

/// The extension header values for a packet of `wqe` with table entry `info`, carrying the
/// message from byte `offset` on.
fn header_values(
    info: &OpcodeInfo,
    wqe: &SendWqe,
    offset: u32,
    read_len: u32,
    cfg: &ReqConfig,
) -> ExtValues {
    let mut h = ExtValues::default();
    if info.has(ExtHeader::Deth) {
        let ud = UdWr::decode(&wqe.wr);
        let qkey = if matches!(cfg.qp_type, QpType::Gsi) {
            GSI_QKEY
        } else if ud.remote_qkey & QKEY_FROM_QP != 0 {
            cfg.qkey
        } else {
            ud.remote_qkey
        };
        h.deth = Some(Deth {
            qkey,
            src_qpn: cfg.qp_num,
        });
    }
    if info.has(ExtHeader::Feth) {
        let f = FlushWr::decode(&wqe.wr);
        h.feth = Some(Feth {
            selectivity_level: f.selectivity_level,
            placement_type: f.placement_type,
        });
    }
    if info.has(ExtHeader::Reth) {
        // The RETH names the rest of the transfer from `offset`: the whole message for a first
        // WRITE packet; for an RDMA READ request, the `read_len` bytes it asks for.
        let remaining = wqe.length.saturating_sub(offset);
        h.reth = Some(match wqe.opcode {
            SendOpcode::Flush => {
                let f = FlushWr::decode(&wqe.wr);
                Reth {
                    va: f.remote_addr,
                    rkey: f.rkey,
                    dma_len: wqe.length,
                }
            }
            SendOpcode::RdmaRead => {
                let r = RdmaWr::decode(&wqe.wr);
                Reth {
                    va: r.remote_addr.wrapping_add(u64::from(offset)),
                    rkey: r.rkey,
                    dma_len: read_len,
                }
            }
            _ => {
                let r = RdmaWr::decode(&wqe.wr);
                Reth {
                    va: r.remote_addr.wrapping_add(u64::from(offset)),
                    rkey: r.rkey,
                    dma_len: remaining,
                }
            }
        });
    }
    if info.has(ExtHeader::AtomicEth) {
        let a = AtomicWr::decode(&wqe.wr);
        // Compare and swap carries both operands; fetch and add puts its addend in the
        // swap/add field and leaves the compare field zero (IBA 9.3, AtomicETH).
        h.atomic_eth = Some(match wqe.opcode {
            SendOpcode::CmpAndSwp => AtomicEth {
                va: a.remote_addr,
                rkey: a.rkey,
                swap_add: a.swap,
                compare: a.compare_add,
            },
            _ => AtomicEth {
                va: a.remote_addr,
                rkey: a.rkey,
                swap_add: a.compare_add,
                compare: 0,
            },
        });
    }
    if info.has(ExtHeader::ImmDt) {
        // `ex` holds the __be32 as user space stored it; its bytes go out unchanged.
        h.imm = Some(wqe.ex.to_ne_bytes());
    }
    if info.has(ExtHeader::Ieth) {
        h.ieth = Some(Ieth { rkey: wqe.ex });
    }
    h
}

/// The PSNs (response packets) of the RDMA READ request that starts at index `index` of a READ
/// taking `total` PSNs: up to the next multiple of [`READ_REQUEST_PSNS`].
const fn read_request_psns(index: u32, total: u32) -> u32 {
    let boundary = (index / READ_REQUEST_PSNS)
        .saturating_add(1)
        .saturating_mul(READ_REQUEST_PSNS);
    let end = if boundary < total { boundary } else { total };
    end.saturating_sub(index)
}

/// The bytes an RDMA READ request of `psn_count` PSNs from byte `offset` asks for: whole MTUs,
/// but no further than the end of the WQE.
const fn read_len(wqe: &SendWqe, offset: u32, psn_count: u32, cfg: &ReqConfig) -> u32 {
    let remaining = wqe.length.saturating_sub(offset);
    let covered = (psn_count as u64) << mtu_shift(cfg.mtu);
    if covered < remaining as u64 {
        covered as u32
    } else {
        remaining
    }
}

/// Plans the next packet of `wqe` given its `progress`.
///
/// Segmentation (IBA 9.2 and 9.7): a SEND or RDMA WRITE of `n` bytes travels in
/// `max(1, ceil(n / mtu))` packets, all but the last carrying exactly one MTU; one packet is
/// ONLY, otherwise FIRST, MIDDLE..., LAST. Immediate data and invalidation ride on the last (or
/// only) packet, the RETH of an RDMA WRITE on the first (or only). A resumed message continues
/// with MIDDLE/LAST, as the responder still holds the state of the message it started. An RDMA
/// READ request asks for the bytes from the current offset on and reserves a PSN for each
/// response packet. Atomics, FLUSH and ATOMIC WRITE are a single request each.
///
/// AckReq is set on RC only: on the last packet of every message (so that every message gets
/// acknowledged without waiting for a timeout) and every [`ACK_REQ_INTERVAL`] packets within a
/// long one. The solicited event bit follows `IBV_SEND_SOLICITED` on the last packet of a SEND
/// or of an RDMA WRITE with immediate, the messages that complete a receive WQE.
pub fn next_packet(wqe: &SendWqe, progress: &WqeProgress, cfg: &ReqConfig) -> PacketPlan {
    if !wqe.opcode.allowed_on(cfg.qp_type) {
        return PacketPlan::Error(WcStatus::LocQpOpErr);
    }
    match wqe.opcode {
        SendOpcode::LocalInv => return PacketPlan::Local(LocalOp::Invalidate { rkey: wqe.ex }),
        SendOpcode::BindMw => return PacketPlan::Local(LocalOp::BindMw(MwWr::decode(&wqe.wr))),
        SendOpcode::RegMr => return PacketPlan::Local(LocalOp::RegMr(RegMrWr::decode(&wqe.wr))),
        _ => {}
    }
    // The parser guarantees it; the packet layout depends on it (an 8-byte payload).
    if matches!(wqe.opcode, SendOpcode::AtomicWrite) && wqe.length != 8 {
        return PacketPlan::Error(WcStatus::LocLenErr);
    }
    let total = psns_of(wqe, cfg);
    let index = progress.psns_used;
    if index >= total {
        return PacketPlan::Done;
    }
    if cfg.is_datagram() && wqe.length > cfg.mtu.bytes() {
        return PacketPlan::DiscardDatagram {
            after: WqeProgress {
                first_psn: progress.first_psn,
                psns_used: total,
            },
        };
    }

    let offset = progress.offset(wqe, cfg);
    // `offset` never exceeds the length.
    let remaining = wqe.length.saturating_sub(offset);
    let is_read = matches!(wqe.opcode, SendOpcode::RdmaRead);
    // A READ request takes one PSN per response packet, up to the next multiple of
    // READ_REQUEST_PSNS; every other packet is one PSN. `index < total` here, so none of these
    // overflows; saturation keeps that obvious.
    let psn_count = if is_read {
        read_request_psns(index, total)
    } else {
        1
    };
    let psns_after = index.saturating_add(psn_count);
    let last_of_wqe = psns_after >= total;
    let starts = index == 0;
    let info = match request_opcode(cfg.qp_type, wqe.opcode, starts, last_of_wqe) {
        Some(info) => info,
        None => return PacketPlan::Error(WcStatus::LocQpOpErr),
    };
    let payload_len = if !info.has_payload() {
        0
    } else if last_of_wqe {
        remaining
    } else {
        cfg.mtu.bytes()
    };
    let ack_req = matches!(cfg.qp_type, QpType::Rc)
        && (last_of_wqe || index.saturating_add(1) % ACK_REQ_INTERVAL == 0);
    let completes_recv = info.is_send() || (info.is_write() && info.has_immediate());
    let solicited = wqe.flags & send_flags::SOLICITED != 0 && info.ends_message() && completes_recv;
    let dest_qpn = if cfg.is_datagram() {
        UdWr::decode(&wqe.wr).remote_qpn & QPN_MASK
    } else {
        cfg.dest_qp_num
    };
    PacketPlan::Packet(PacketDesc {
        opcode: info.opcode(),
        psn: progress.next_psn(),
        psn_count,
        payload_offset: offset,
        payload_len,
        pad: pad_count_for(payload_len as usize),
        ack_req,
        solicited,
        dest_qpn,
        pkey: cfg.pkey,
        headers: header_values(
            info,
            wqe,
            offset,
            read_len(wqe, offset, psn_count, cfg),
            cfg,
        ),
        last_of_wqe,
        after: WqeProgress {
            first_psn: progress.first_psn,
            psns_used: psns_after,
        },
    })
}

/// The requester's view of what is in flight on the QP, for [`may_start`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    /// The oldest PSN not yet acknowledged (the completer's expected PSN).
    pub oldest_unacked_psn: Psn,
    /// The PSN the next packet gets.
    pub next_psn: Psn,
    /// Started WQEs that hold an initiator-depth credit ([`needs_rd_atomic_credit`]) and have
    /// not completed. The kernel adds one when [`StartVerdict::Go`] says so and subtracts one
    /// when such a WQE completes, whatever its status.
    pub rd_atomic_in_flight: u32,
    /// Whether any WQE posted before this one has not completed yet.
    pub earlier_wqes_pending: bool,
}

/// Whether the next WQE may start, and why not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StartVerdict {
    /// Start it. `takes_credit`: the WQE now holds an initiator-depth credit.
    Go {
        /// Whether to count the WQE in [`InFlight::rd_atomic_in_flight`].
        takes_credit: bool,
    },
    /// The WQE is fenced and an RDMA READ or atomic before it has not completed.
    WaitFence,
    /// A local invalidate waits for every earlier WQE to complete.
    WaitEarlierWqes,
    /// Every initiator-depth credit is taken.
    WaitRdAtomicCredit,
    /// The RC PSN window is full ([`MAX_UNACKED_PSNS`]).
    WaitPsnWindow,
    /// The WQE can never start (an RDMA READ or atomic with an initiator depth of 0): complete
    /// it with this status.
    Refuse(WcStatus),
}

/// Whether the RC requester may send a packet with PSN `next` while `oldest_unacked` is the
/// oldest PSN without an acknowledgement.
pub const fn psn_window_open(next: Psn, oldest_unacked: Psn) -> bool {
    next.diff(oldest_unacked) < MAX_UNACKED_PSNS as i32
}

/// Whether `wqe` may send its first packet (or run, if local) now.
///
/// `already_started` is set when the WQE is sent again after a retry: it passed its fence and
/// took its credit the first time, so only the PSN window applies.
///
/// - Fence (`IBV_SEND_FENCE`, IBA 10.8.3.3): wait until no RDMA READ or atomic (nor FLUSH or
///   ATOMIC WRITE, which hold the same credits) started before it is outstanding.
/// - Local invalidate: like rxe, waits for every earlier WQE, so that nothing still in flight
///   uses the key it invalidates.
/// - Initiator depth: at most `max_rd_atomic` credit-holding WQEs in flight. With a depth of 0
///   such a WQE could never start; rxe leaves it hanging, roxe completes it with
///   `IB_WC_LOC_QP_OP_ERR`.
/// - PSN window (RC): the first packet must fit [`MAX_UNACKED_PSNS`].
/// - RDMA READ response window (RC): the READ's first request must fit beside the PSNs
///   outstanding within [`SINGLE_REQUEST_READ_WINDOW`] (one request asks for the whole READ)
///   or [`READ_RESPONSE_WINDOW`] (several do), unless nothing is outstanding.
pub const fn may_start(
    wqe: &SendWqe,
    already_started: bool,
    state: &InFlight,
    cfg: &ReqConfig,
) -> StartVerdict {
    if matches!(wqe.opcode, SendOpcode::LocalInv) && state.earlier_wqes_pending {
        return StartVerdict::WaitEarlierWqes;
    }
    if !already_started && wqe.flags & send_flags::FENCE != 0 && state.rd_atomic_in_flight > 0 {
        return StartVerdict::WaitFence;
    }
    if is_local_op(wqe.opcode) {
        return StartVerdict::Go {
            takes_credit: false,
        };
    }
    if matches!(cfg.qp_type, QpType::Rc)
        && !psn_window_open(state.next_psn, state.oldest_unacked_psn)
    {
        return StartVerdict::WaitPsnWindow;
    }
    if matches!(wqe.opcode, SendOpcode::RdmaRead) && matches!(cfg.qp_type, QpType::Rc) {
        let outstanding = state.next_psn.diff(state.oldest_unacked_psn);
        let psns = psns_of(wqe, cfg);
        let first_request = min_u32(psns, READ_REQUEST_PSNS);
        let window = if psns <= READ_REQUEST_PSNS {
            SINGLE_REQUEST_READ_WINDOW
        } else {
            READ_RESPONSE_WINDOW
        };
        if outstanding > 0 && (outstanding as u32).saturating_add(first_request) > window {
            return StartVerdict::WaitPsnWindow;
        }
    }
    let takes_credit = needs_rd_atomic_credit(wqe.opcode) && !already_started;
    if takes_credit {
        if cfg.max_rd_atomic == 0 {
            return StartVerdict::Refuse(WcStatus::LocQpOpErr);
        }
        if state.rd_atomic_in_flight >= cfg.max_rd_atomic {
            return StartVerdict::WaitRdAtomicCredit;
        }
    }
    StartVerdict::Go { takes_credit }
}

/// Whether a started WQE may send its next packet: the RC PSN window applies, and the next
/// request of a long RDMA READ ([`READ_REQUEST_PSNS`]) waits until every PSN before it is
/// acknowledged, so that one request per WQE is outstanding.
pub const fn may_continue(wqe: &SendWqe, state: &InFlight, cfg: &ReqConfig) -> StartVerdict {
    if matches!(cfg.qp_type, QpType::Rc)
        && !psn_window_open(state.next_psn, state.oldest_unacked_psn)
    {
        return StartVerdict::WaitPsnWindow;
    }
    if matches!(wqe.opcode, SendOpcode::RdmaRead)
        && state.next_psn.diff(state.oldest_unacked_psn) > 0
    {
        return StartVerdict::WaitPsnWindow;
    }
    StartVerdict::Go {
        takes_credit: false,
    }
}

/// What the requester does with a WQE it has finished itself, with no response to wait for: a
/// local operation it executed (BIND_MW, REG_MR, LOCAL_INV), or a WQE that failed before or
/// while it was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Finished {
    /// Complete it now: every WQE posted before it has completed.
    CompleteNow,
    /// Keep it, with its status, until every WQE before it has completed; the completer then
    /// completes it (IBA 10.8.3.1: a send queue's completions are returned in the order its
    /// WQEs were posted, local operations included). The requester goes on with the next WQE:
    /// the operation succeeded and has taken effect (a bind when it executes, IBA 10.6.7.2).
    HoldAndGoOn,
    /// Keep it as [`Finished::HoldAndGoOn`] does, but start nothing after it: it failed, and
    /// once its error completion is out the QP goes to the error state and the later WQEs
    /// flush (IBA 10.8.3.1, 10.3.1). The WQEs before it still complete with their own status.
    HoldAndStop,
}

/// What to do with a WQE the requester finished with `status` ([`Finished`]);
/// `earlier_wqes_pending` as in [`InFlight`]. rdma_rxe does the same for local operations:
/// `rxe_do_local_ops` marks the WQE done and its completer retires it from the head of the
/// send queue, in order.
pub const fn finished(earlier_wqes_pending: bool, status: WcStatus) -> Finished {
    if !earlier_wqes_pending {
        Finished::CompleteNow
    } else if matches!(status, WcStatus::Success) {
        Finished::HoldAndGoOn
    } else {
        Finished::HoldAndStop
    }
}

#[cfg(test)]
mod tests {
    use super::super::mtu::IbMtu;
    use super::super::opcode::{check_op_sequence, SeqCheck};
    use super::super::wqe::Payload;
    use super::*;
    use std::vec::Vec;

    fn cfg(qp_type: QpType, mtu: IbMtu) -> ReqConfig {
        ReqConfig {
            qp_type,
            mtu: Pmtu::of(mtu),
            qp_num: 0x11,
            dest_qp_num: 0x22,
            qkey: 0x1234,
            pkey: 0xffff,
            max_rd_atomic: 2,
        }
    }

    #[test]
    fn reg_mr_wr_carries_the_iova_and_length_at_posting() {
        // The kernel post path's layout (`kpost::post_send`): index, key, access, then the
        // MR's IOVA and length, which a consumer may have set anew after mapping.
        let mut wr = [0u8; 32];
        wr[0..8].copy_from_slice(&7u64.to_ne_bytes());
        wr[8..12].copy_from_slice(&0x0700_0042u32.to_ne_bytes());
        wr[12..16].copy_from_slice(&6u32.to_ne_bytes());
        wr[16..24].copy_from_slice(&0x5eed_0001_8401_a000u64.to_ne_bytes());
        wr[24..32].copy_from_slice(&8192u64.to_ne_bytes());
        assert_eq!(
            RegMrWr::decode(&wr),
            RegMrWr {
                mr_index: 7,
                key: 0x0700_0042,
                access: 6,
                iova: 0x5eed_0001_8401_a000,
                length: 8192,
            }
        );
    }

    fn wqe(opcode: SendOpcode, length: u32) -> SendWqe {
        SendWqe {
            wr_id: 1,
            opcode,
            flags: 0,
            ex: 0,
            wr: [0; 32],
            length,
            payload: Payload::Sges { num: 1 },
        }
    }

    fn union(fields: &[(usize, &[u8])]) -> [u8; 32] {
        let mut wr = [0u8; 32];
        for (off, bytes) in fields {
            wr[*off..*off + bytes.len()].copy_from_slice(bytes);
        }
        wr
    }

    /// Every packet of `w` from `first`, in order.
    fn packets(w: &SendWqe, c: &ReqConfig, first: Psn) -> Vec<PacketDesc> {
        let mut p = WqeProgress::start(first);
        let mut out = Vec::new();
        loop {
            match next_packet(w, &p, c) {
                PacketPlan::Packet(d) => {
                    p = d.after;
                    out.push(d);
                }
                PacketPlan::Done => return out,
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn send_10000_bytes_at_4096() {
        let c = cfg(QpType::Rc, IbMtu::Mtu4096);
        let w = wqe(SendOpcode::Send, 10_000);
        let p = packets(&w, &c, Psn::new(100));
        let ops: Vec<_> = p.iter().map(|d| d.opcode).collect();
        assert_eq!(
            ops,
            [
                Opcode::RC_SEND_FIRST,
                Opcode::RC_SEND_MIDDLE,
                Opcode::RC_SEND_LAST
            ]
        );
        assert_eq!(
            p.iter().map(|d| d.payload_len).collect::<Vec<_>>(),
            [4096, 4096, 1808]
        );
        assert_eq!(
            p.iter().map(|d| d.payload_offset).collect::<Vec<_>>(),
            [0, 4096, 8192]
        );
        assert_eq!(p.iter().map(|d| d.pad).collect::<Vec<_>>(), [0, 0, 0]);
        assert_eq!(
            p.iter().map(|d| d.psn.get()).collect::<Vec<_>>(),
            [100, 101, 102]
        );
        assert_eq!(
            p.iter().map(|d| d.ack_req).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert_eq!(
            p.iter().map(|d| d.last_of_wqe).collect::<Vec<_>>(),
            [false, false, true]
        );
        assert!(p
            .iter()
            .all(|d| d.dest_qpn == 0x22 && d.headers == ExtValues::default()));
        assert_eq!(psns_of(&w, &c), 3);
        assert_eq!(p[2].after.next_psn(), Psn::new(103));
        assert_eq!(
            WqeProgress::start(Psn::new(100)).last_psn(&w, &c),
            Psn::new(102)
        );
        // The packet length: BTH + payload + pad + ICRC.
        assert_eq!(p[2].packet_len(), 12 + 1808 + 4);
    }

    #[test]
    fn five_byte_send_only_pads_to_eight() {
        let c = cfg(QpType::Uc, IbMtu::Mtu1024);
        let mut w = wqe(SendOpcode::SendWithImm, 5);
        w.ex = u32::from_ne_bytes([0xca, 0xfe, 0xba, 0xbe]);
        w.flags = send_flags::SOLICITED;
        let p = packets(&w, &c, Psn::new(7));
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].opcode, Opcode::UC_SEND_ONLY_WITH_IMMEDIATE);
        assert_eq!(
            (p[0].payload_len, p[0].pad, p[0].ack_req, p[0].solicited),
            (5, 3, false, true)
        );
        assert_eq!(p[0].headers.imm, Some([0xca, 0xfe, 0xba, 0xbe]));
        assert_eq!(p[0].packet_len(), 12 + 4 + 5 + 3 + 4);
    }

    #[test]
    fn empty_send_is_one_packet() {
        let c = cfg(QpType::Rc, IbMtu::Mtu256);
        let p = packets(&wqe(SendOpcode::Send, 0), &c, Psn::new(0));
        assert_eq!(p.len(), 1);
        assert_eq!(
            (p[0].opcode, p[0].payload_len, p[0].pad),
            (Opcode::RC_SEND_ONLY, 0, 0)
        );
    }

    #[test]
    fn write_with_imm_puts_reth_first_and_imm_last() {
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let mut w = wqe(SendOpcode::RdmaWriteWithImm, 2048);
        w.wr = union(&[
            (0, &0x1000_0000u64.to_ne_bytes()),
            (8, &0x77u32.to_ne_bytes()),
        ]);
        w.ex = 0x0102_0304;
        w.flags = send_flags::SOLICITED;
        let p = packets(&w, &c, Psn::new(1));
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].opcode, Opcode::RC_RDMA_WRITE_FIRST);
        assert_eq!(
            p[0].headers.reth,
            Some(Reth {
                va: 0x1000_0000,
                rkey: 0x77,
                dma_len: 2048
            })
        );
        assert_eq!(p[0].headers.imm, None);
        assert!(!p[0].solicited);
        assert_eq!(p[1].opcode, Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE);
        assert_eq!(p[1].headers.reth, None);
        assert_eq!(p[1].headers.imm, Some(0x0102_0304u32.to_ne_bytes()));
        assert!(p[1].solicited);
    }

    #[test]
    fn read_of_9000_bytes_at_1024_takes_9_psns() {
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let mut w = wqe(SendOpcode::RdmaRead, 9000);
        w.wr = union(&[(0, &0xaaaa_0000u64.to_ne_bytes()), (8, &5u32.to_ne_bytes())]);
        assert_eq!(psns_of(&w, &c), 9);
        let p = packets(&w, &c, Psn::new(0xff_fffe));
        assert_eq!(p.len(), 1);
        let r = p[0];
        assert_eq!(
            (r.opcode, r.psn, r.psn_count, r.payload_len),
            (Opcode::RC_RDMA_READ_REQUEST, Psn::new(0xff_fffe), 9, 0)
        );
        assert!(r.ack_req && r.last_of_wqe);
        assert_eq!(
            r.headers.reth,
            Some(Reth {
                va: 0xaaaa_0000,
                rkey: 5,
                dma_len: 9000
            })
        );
        // The PSNs wrap: 0xfffffe + 9 = 7.
        assert_eq!(r.after.next_psn(), Psn::new(7));
        assert_eq!(
            WqeProgress::start(Psn::new(0xff_fffe)).last_psn(&w, &c),
            Psn::new(6)
        );
        // A read of 0 or of exactly one MTU still takes one PSN.
        assert_eq!(psns_of(&wqe(SendOpcode::RdmaRead, 0), &c), 1);
        assert_eq!(psns_of(&wqe(SendOpcode::RdmaRead, 1024), &c), 1);
        assert_eq!(psns_of(&wqe(SendOpcode::RdmaRead, 1025), &c), 2);
    }

    #[test]
    fn resumed_read_asks_for_the_rest() {
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let mut w = wqe(SendOpcode::RdmaRead, 9000);
        w.wr = union(&[(0, &0xaaaa_0000u64.to_ne_bytes()), (8, &5u32.to_ne_bytes())]);
        let first = Psn::new(0xff_fffe);
        // Three response packets arrived (PSNs 0xfffffe, 0xffffff, 0); retry from PSN 1.
        let p = WqeProgress::resume_at(&w, first, Psn::new(1), &c).unwrap();
        assert_eq!((p.psns_used, p.offset(&w, &c)), (3, 3072));
        let PacketPlan::Packet(r) = next_packet(&w, &p, &c) else {
            panic!()
        };
        assert_eq!(
            (r.psn, r.psn_count, r.payload_offset),
            (Psn::new(1), 6, 3072)
        );
        assert_eq!(
            r.headers.reth,
            Some(Reth {
                va: 0xaaaa_0000 + 3072,
                rkey: 5,
                dma_len: 9000 - 3072
            })
        );
        assert_eq!(r.after.next_psn(), Psn::new(7));
        assert_eq!(WqeProgress::resume_at(&w, first, Psn::new(7), &c), None);
        assert_eq!(
            WqeProgress::resume_at(&w, first, Psn::new(0xff_fffd), &c),
            None
        );
    }

    #[test]
    fn resumed_send_continues_with_middle_and_last() {
        let c = cfg(QpType::Rc, IbMtu::Mtu256);
        let w = wqe(SendOpcode::SendWithInv, 1000);
        let p = WqeProgress::resume_at(&w, Psn::new(10), Psn::new(12), &c).unwrap();
        let PacketPlan::Packet(d) = next_packet(&w, &p, &c) else {
            panic!()
        };
        assert_eq!(
            (d.opcode, d.payload_offset, d.payload_len),
            (Opcode::RC_SEND_MIDDLE, 512, 256)
        );
        let PacketPlan::Packet(d) = next_packet(&w, &d.after, &c) else {
            panic!()
        };
        assert_eq!(
            (d.opcode, d.payload_offset, d.payload_len, d.pad),
            (Opcode::RC_SEND_LAST_WITH_INVALIDATE, 768, 232, 0)
        );
        assert_eq!(next_packet(&w, &d.after, &c), PacketPlan::Done);
    }

    #[test]
    fn atomics() {
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let wr = union(&[
            (0, &0x8000u64.to_ne_bytes()),
            (8, &3u64.to_ne_bytes()),
            (16, &9u64.to_ne_bytes()),
            (24, &0x42u32.to_ne_bytes()),
        ]);
        let mut cas = wqe(SendOpcode::CmpAndSwp, 8);
        cas.wr = wr;
        let p = packets(&cas, &c, Psn::new(3));
        assert_eq!(
            (p.len(), p[0].opcode, p[0].payload_len, p[0].ack_req),
            (1, Opcode::RC_COMPARE_SWAP, 0, true)
        );
        assert_eq!(
            p[0].headers.atomic_eth,
            Some(AtomicEth {
                va: 0x8000,
                rkey: 0x42,
                swap_add: 9,
                compare: 3
            })
        );
        let mut faa = wqe(SendOpcode::FetchAndAdd, 8);
        faa.wr = wr;
        let p = packets(&faa, &c, Psn::new(3));
        assert_eq!(
            p[0].headers.atomic_eth,
            Some(AtomicEth {
                va: 0x8000,
                rkey: 0x42,
                swap_add: 3,
                compare: 0
            })
        );
    }

    #[test]
    fn flush_and_atomic_write() {
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let mut f = wqe(SendOpcode::Flush, 4096);
        f.wr = union(&[
            (0, &0x2000u64.to_ne_bytes()),
            (12, &0x9u32.to_ne_bytes()),
            (16, &[2, 1]),
        ]);
        let p = packets(&f, &c, Psn::new(0));
        assert_eq!(
            (p.len(), p[0].opcode, p[0].payload_len),
            (1, Opcode::RC_FLUSH, 0)
        );
        assert_eq!(
            p[0].headers.feth,
            Some(Feth {
                selectivity_level: 1,
                placement_type: 2
            })
        );
        assert_eq!(
            p[0].headers.reth,
            Some(Reth {
                va: 0x2000,
                rkey: 9,
                dma_len: 4096
            })
        );

        let mut a = wqe(SendOpcode::AtomicWrite, 8);
        a.payload = Payload::Inline { len: 8 };
        a.wr = union(&[(0, &0x3000u64.to_ne_bytes()), (8, &0x8u32.to_ne_bytes())]);
        let p = packets(&a, &c, Psn::new(0));
        assert_eq!(
            (p.len(), p[0].opcode, p[0].payload_len, p[0].pad),
            (1, Opcode::RC_ATOMIC_WRITE, 8, 0)
        );
        assert_eq!(
            p[0].headers.reth,
            Some(Reth {
                va: 0x3000,
                rkey: 8,
                dma_len: 8
            })
        );
    }

    #[test]
    fn datagrams() {
        let mut c = cfg(QpType::Ud, IbMtu::Mtu1024);
        let mut w = wqe(SendOpcode::Send, 1024);
        w.wr = union(&[
            (0, &0x0100_0005u32.to_ne_bytes()),
            (4, &0x55u32.to_ne_bytes()),
            (12, &3u32.to_ne_bytes()),
        ]);
        assert_eq!(
            UdWr::decode(&w.wr),
            UdWr {
                remote_qpn: 0x0100_0005,
                remote_qkey: 0x55,
                pkey_index: 0,
                ah_num: 3
            }
        );
        let p = packets(&w, &c, Psn::new(0));
        assert_eq!(
            (p.len(), p[0].opcode, p[0].ack_req),
            (1, Opcode::UD_SEND_ONLY, false)
        );
        // The destination QP is cut to 24 bits.
        assert_eq!(p[0].dest_qpn, 5);
        assert_eq!(
            p[0].headers.deth,
            Some(Deth {
                qkey: 0x55,
                src_qpn: 0x11
            })
        );
        // A Q_Key with bit 31 set means the QP's own.
        w.wr = union(&[(4, &0x8000_0055u32.to_ne_bytes())]);
        let p = packets(&w, &c, Psn::new(0));
        assert_eq!(
            p[0].headers.deth,
            Some(Deth {
                qkey: 0x1234,
                src_qpn: 0x11
            })
        );
        // GSI always sends the well-known Q_Key.
        c.qp_type = QpType::Gsi;
        let p = packets(&w, &c, Psn::new(0));
        assert_eq!(p[0].headers.deth.map(|d| d.qkey), Some(GSI_QKEY));
        // Over the MTU: nothing is sent, one PSN is used.
        let big = wqe(SendOpcode::SendWithImm, 1025);
        let plan = next_packet(&big, &WqeProgress::start(Psn::new(9)), &c);
        assert_eq!(
            plan,
            PacketPlan::DiscardDatagram {
                after: WqeProgress {
                    first_psn: Psn::new(9),
                    psns_used: 1
                }
            }
        );
        // UD cannot read.
        assert_eq!(
            next_packet(
                &wqe(SendOpcode::RdmaRead, 8),
                &WqeProgress::start(Psn::new(0)),
                &c
            ),
            PacketPlan::Error(WcStatus::LocQpOpErr)
        );
    }

    #[test]
    fn uc_has_no_send_with_invalidate() {
        let c = cfg(QpType::Uc, IbMtu::Mtu1024);
        let plan = next_packet(
            &wqe(SendOpcode::SendWithInv, 8),
            &WqeProgress::start(Psn::new(0)),
            &c,
        );
        assert_eq!(plan, PacketPlan::Error(WcStatus::LocQpOpErr));
        let p = packets(&wqe(SendOpcode::RdmaWrite, 3000), &c, Psn::new(0));
        let ops: Vec<_> = p.iter().map(|d| d.opcode).collect();
        assert_eq!(
            ops,
            [
                Opcode::UC_RDMA_WRITE_FIRST,
                Opcode::UC_RDMA_WRITE_MIDDLE,
                Opcode::UC_RDMA_WRITE_LAST
            ]
        );
        assert!(p.iter().all(|d| !d.ack_req));
    }

    #[test]
    fn finished_wqes_complete_in_posting_order() {
        // Nothing before it: out at once, whatever its status.
        assert_eq!(finished(false, WcStatus::Success), Finished::CompleteNow);
        assert_eq!(finished(false, WcStatus::MwBindErr), Finished::CompleteNow);
        // Behind an unacknowledged WQE: held until it is the oldest; a failure also stops the
        // requester, so that nothing posted after it starts before the QP goes to error.
        assert_eq!(finished(true, WcStatus::Success), Finished::HoldAndGoOn);
        assert_eq!(finished(true, WcStatus::MwBindErr), Finished::HoldAndStop);
        assert_eq!(finished(true, WcStatus::LocQpOpErr), Finished::HoldAndStop);
        assert_eq!(finished(true, WcStatus::LocProtErr), Finished::HoldAndStop);
    }

    #[test]
    fn local_ops() {
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let mut inv = wqe(SendOpcode::LocalInv, 0);
        inv.ex = 0xabcd;
        assert_eq!(
            next_packet(&inv, &WqeProgress::start(Psn::new(0)), &c),
            PacketPlan::Local(LocalOp::Invalidate { rkey: 0xabcd })
        );
        assert_eq!(psns_of(&inv, &c), 0);
        let mut bind = wqe(SendOpcode::BindMw, 0);
        bind.wr = union(&[
            (0, &0x1000u64.to_ne_bytes()),
            (8, &0x2000u64.to_ne_bytes()),
            (16, &1u32.to_ne_bytes()),
            (20, &2u32.to_ne_bytes()),
            (24, &3u32.to_ne_bytes()),
            (28, &4u32.to_ne_bytes()),
        ]);
        let PacketPlan::Local(op) = next_packet(&bind, &WqeProgress::start(Psn::new(0)), &c) else {
            panic!()
        };
        assert_eq!(
            op,
            LocalOp::BindMw(MwWr {
                addr: 0x1000,
                length: 0x2000,
                mr_lkey: 1,
                mw_rkey: 2,
                rkey: 3,
                access: 4
            })
        );
        assert_eq!(op.failure_status(), WcStatus::MwBindErr);
    }

    #[test]
    fn ack_req_every_64_packets() {
        let c = cfg(QpType::Rc, IbMtu::Mtu256);
        let w = wqe(SendOpcode::RdmaWrite, 256 * 200);
        let p = packets(&w, &c, Psn::new(0));
        assert_eq!(p.len(), 200);
        let asked: Vec<usize> = p
            .iter()
            .enumerate()
            .filter(|(_, d)| d.ack_req)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(asked, [63, 127, 191, 199]);
        let mut prev = None;
        for d in &p {
            assert_eq!(check_op_sequence(prev, d.opcode), SeqCheck::Ok);
            prev = Some(d.opcode);
        }
    }

    #[test]
    fn headers_land_in_the_packet() {
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let mut w = wqe(SendOpcode::RdmaWriteWithImm, 5);
        w.wr = union(&[
            (0, &0x0102_0304_0506_0708u64.to_ne_bytes()),
            (8, &0x1122_3344u32.to_ne_bytes()),
        ]);
        w.ex = u32::from_ne_bytes([9, 8, 7, 6]);
        let PacketPlan::Packet(d) = next_packet(&w, &WqeProgress::start(Psn::new(0xabcdef)), &c)
        else {
            panic!()
        };
        let mut buf = std::vec![0u8; d.packet_len()];
        let mut p = Packet::build(&mut buf[..], d.opcode, d.pad).unwrap();
        d.write_headers(&mut p).unwrap();
        p.payload_mut().copy_from_slice(b"hello");
        let bth_reth_imm = [
            0x0b, 0x70, 0xff, 0xff, 0x00, 0x00, 0x00, 0x22, 0x80, 0xab, 0xcd,
            0xef, // BTH: MigReq, pad 3
            1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 5, // RETH
            9, 8, 7, 6, // ImmDt
        ];
        assert_eq!(&buf[..32], &bth_reth_imm);
        assert_eq!(&buf[32..40], b"hello\0\0\0");
        // A packet built for another opcode is refused.
        let mut other = std::vec![0u8; 12 + 4 + 8];
        let mut q = Packet::build(&mut other[..], Opcode::RC_SEND_ONLY, 0).unwrap();
        assert_eq!(d.write_headers(&mut q), Err(NoSuchHeader));
    }

    #[test]
    fn start_rules() {
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let idle = InFlight {
            oldest_unacked_psn: Psn::new(0),
            next_psn: Psn::new(0),
            rd_atomic_in_flight: 0,
            earlier_wqes_pending: false,
        };
        let read = wqe(SendOpcode::RdmaRead, 8);
        assert_eq!(
            may_start(&read, false, &idle, &c),
            StartVerdict::Go { takes_credit: true }
        );
        assert_eq!(
            may_start(&read, true, &idle, &c),
            StartVerdict::Go {
                takes_credit: false
            }
        );
        let busy = InFlight {
            rd_atomic_in_flight: 2,
            earlier_wqes_pending: true,
            ..idle
        };
        assert_eq!(
            may_start(&read, false, &busy, &c),
            StartVerdict::WaitRdAtomicCredit
        );
        let mut fenced = wqe(SendOpcode::Send, 8);
        fenced.flags = send_flags::FENCE;
        assert_eq!(
            may_start(&fenced, false, &busy, &c),
            StartVerdict::WaitFence
        );
        assert_eq!(
            may_start(&fenced, true, &busy, &c),
            StartVerdict::Go {
                takes_credit: false
            }
        );
        assert_eq!(
            may_start(&fenced, false, &idle, &c),
            StartVerdict::Go {
                takes_credit: false
            }
        );
        assert_eq!(
            may_start(&wqe(SendOpcode::LocalInv, 0), false, &busy, &c),
            StartVerdict::WaitEarlierWqes
        );
        assert_eq!(
            may_start(&wqe(SendOpcode::BindMw, 0), false, &busy, &c),
            StartVerdict::Go {
                takes_credit: false
            }
        );
        let no_depth = ReqConfig {
            max_rd_atomic: 0,
            ..c
        };
        assert_eq!(
            may_start(&wqe(SendOpcode::FetchAndAdd, 8), false, &idle, &no_depth),
            StartVerdict::Refuse(WcStatus::LocQpOpErr)
        );
        // The window: 127 PSNs ahead is open, 128 is not, across the wrap too.
        let at = |next: u32| InFlight {
            oldest_unacked_psn: Psn::new(0xff_ffc0),
            next_psn: Psn::new(next),
            ..idle
        };
        let send = wqe(SendOpcode::Send, 8);
        assert_eq!(
            may_start(&send, false, &at(0x3f), &c),
            StartVerdict::Go {
                takes_credit: false
            }
        );
        assert_eq!(
            may_start(&send, false, &at(0x40), &c),
            StartVerdict::WaitPsnWindow
        );
        assert_eq!(
            may_start(&read, false, &at(0x40), &c),
            StartVerdict::WaitPsnWindow
        );
        assert_eq!(
            may_continue(&send, &at(0x40), &c),
            StartVerdict::WaitPsnWindow
        );
        assert_eq!(
            may_continue(&send, &at(0x3f), &c),
            StartVerdict::Go {
                takes_credit: false
            }
        );
        assert_eq!(
            may_continue(&send, &at(0x40), &cfg(QpType::Uc, IbMtu::Mtu1024)),
            StartVerdict::Go {
                takes_credit: false
            }
        );
        // A READ's next request waits for every response before it.
        assert_eq!(
            may_continue(&read, &at(0x3f), &c),
            StartVerdict::WaitPsnWindow
        );
        assert_eq!(
            may_continue(&read, &at(0xff_ffc0), &c),
            StartVerdict::Go {
                takes_credit: false
            }
        );
        assert_eq!(
            may_continue(&read, &at(0xff_ffbf), &c),
            StartVerdict::Go {
                takes_credit: false
            }
        );
    }

    #[test]
    fn reads_start_within_the_read_response_window() {
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let outstanding = |n: u32| InFlight {
            oldest_unacked_psn: Psn::new(0xff_fff0),
            next_psn: Psn::new(0xff_fff0).add(n),
            rd_atomic_in_flight: 0,
            earlier_wqes_pending: n > 0,
        };
        // 64 KiB: 64 response PSNs, one request; the next may start once half of the last
        // one's responses have arrived.
        let read64k = wqe(SendOpcode::RdmaRead, 64 * 1024);
        assert_eq!(
            may_start(&read64k, false, &outstanding(0), &c),
            StartVerdict::Go { takes_credit: true }
        );
        assert_eq!(
            may_start(&read64k, false, &outstanding(32), &c),
            StartVerdict::Go { takes_credit: true }
        );
        assert_eq!(
            may_start(&read64k, false, &outstanding(33), &c),
            StartVerdict::WaitPsnWindow
        );
        assert_eq!(
            may_start(&read64k, false, &outstanding(64), &c),
            StartVerdict::WaitPsnWindow
        );
        // Small READs fill the window up to SINGLE_REQUEST_READ_WINDOW PSNs.
        let small = wqe(SendOpcode::RdmaRead, 8);
        let full = SINGLE_REQUEST_READ_WINDOW;
        assert_eq!(
            may_start(&small, false, &outstanding(full - 1), &c),
            StartVerdict::Go { takes_credit: true }
        );
        assert_eq!(
            may_start(&small, false, &outstanding(full), &c),
            StartVerdict::WaitPsnWindow
        );
        // A READ of several requests starts only if its first fits within READ_RESPONSE_WINDOW,
        // or when nothing is outstanding.
        let long = wqe(SendOpcode::RdmaRead, 300 * 1024);
        assert_eq!(
            may_start(&long, false, &outstanding(0), &c),
            StartVerdict::Go { takes_credit: true }
        );
        assert_eq!(
            may_start(&long, false, &outstanding(1), &c),
            StartVerdict::WaitPsnWindow
        );
        let two_requests = wqe(SendOpcode::RdmaRead, 65 * 1024);
        assert_eq!(
            may_start(&two_requests, false, &outstanding(1), &c),
            StartVerdict::WaitPsnWindow
        );
        // Other requests and other transports are not held by it.
        assert_eq!(
            may_start(&wqe(SendOpcode::RdmaWrite, 8), false, &outstanding(100), &c),
            StartVerdict::Go {
                takes_credit: false
            }
        );
    }

    #[test]
    fn long_read_is_asked_for_in_window_sized_requests() {
        // 300 KiB at MTU 1024: 300 PSNs, asked for as 64 + 64 + 64 + 64 + 44.
        let c = cfg(QpType::Rc, IbMtu::Mtu1024);
        let mut w = wqe(SendOpcode::RdmaRead, 300 * 1024);
        w.wr = union(&[(0, &0x10_0000u64.to_ne_bytes()), (8, &7u32.to_ne_bytes())]);
        let mut p = WqeProgress::start(Psn::new(1000));
        let mut seen = Vec::new();
        while let PacketPlan::Packet(d) = next_packet(&w, &p, &c) {
            let reth = d.headers.reth.unwrap();
            seen.push((
                d.psn.get(),
                d.psn_count,
                reth.va,
                reth.dma_len,
                d.payload_offset,
                d.last_of_wqe,
            ));
            p = d.after;
        }
        assert_eq!(
            seen,
            [
                (1000, 64, 0x10_0000, 64 * 1024, 0, false),
                (1064, 64, 0x10_0000 + 64 * 1024, 64 * 1024, 64 * 1024, false),
                (
                    1128,
                    64,
                    0x10_0000 + 128 * 1024,
                    64 * 1024,
                    128 * 1024,
                    false
                ),
                (
                    1192,
                    64,
                    0x10_0000 + 192 * 1024,
                    64 * 1024,
                    192 * 1024,
                    false
                ),
                (
                    1256,
                    44,
                    0x10_0000 + 256 * 1024,
                    44 * 1024,
                    256 * 1024,
                    true
                ),
            ]
        );
        // A retry from PSN 1130 asks for the rest of the third request only (its part of the
        // responder's cached request), then the fourth.
        let r = WqeProgress::resume_at(&w, Psn::new(1000), Psn::new(1130), &c).unwrap();
        let PacketPlan::Packet(d) = next_packet(&w, &r, &c) else {
            panic!()
        };
        assert_eq!(
            (d.psn.get(), d.psn_count, d.headers.reth.unwrap().dma_len),
            (1130, 62, 62 * 1024)
        );
        // A short last part is not rounded up to the MTU.
        let mut odd = w;
        odd.length = 128 * 1024 + 5;
        let PacketPlan::Packet(d) = next_packet(
            &odd,
            &WqeProgress {
                first_psn: Psn::new(0),
                psns_used: 128,
            },
            &c,
        ) else {
            panic!()
        };
        assert_eq!(
            (d.psn_count, d.headers.reth.unwrap().dma_len, d.last_of_wqe),
            (1, 5, true)
        );
    }
}
