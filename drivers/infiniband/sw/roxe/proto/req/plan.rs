// SPDX-License-Identifier: GPL-2.0

//! Planning a WQE's next packet ([`next_packet`]): segmentation by MTU, the opcode, PSN,
//! payload, pad, AckReq and solicited bit of each packet ([`PacketDesc`]), and the RDMA READ
//! requests a long READ is asked for in.

use super::*;

/// QP numbers are 24 bits (IBA 9.2: the BTH's DestQP field).
const QPN_MASK: u32 = 0x00ff_ffff;

/// Within a long RC message, AckReq is set on every packet whose index in the message is one
/// less than a multiple of this (besides the last packet). The responder may coalesce
/// acknowledgements until a request asks for one, so without these the requester could sit on
/// a full [`MAX_UNACKED_PSNS`] window waiting for the end of the message; at half the window an
/// ACK is always on its way before the window closes. (rxe asks every 65 or 66 packets.) Units
/// of 1 KiB at MTUs above 1024 ([`ack_req_interval`]).
pub const ACK_REQ_INTERVAL: u32 = 64;

/// [`ACK_REQ_INTERVAL`] on a path with segment `mtu`, in units ([`Pmtu::wire_units`]): from
/// MTU 1024 up every 64 KiB, so every 16 packets at 4096, where the PSN window is 32
/// ([`psn_window`]). A power of two.
pub const fn ack_req_interval(mtu: Pmtu) -> u32 {
    ACK_REQ_INTERVAL >> mtu.wire_shift()
}

const _: () = assert!(ACK_REQ_INTERVAL.is_power_of_two() && READ_REQUEST_PSNS.is_power_of_two());

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

/// [`READ_REQUEST_PSNS`] on a path with segment `mtu`, in units ([`read_response_window`]): from
/// MTU 1024 up 64 KiB of responses per request, 16 PSNs at MTU 4096. A power of two. The
/// requester's plan and its completer, which checks each response against the request it answers,
/// both size requests by it.
pub const fn read_request_size(mtu: Pmtu) -> u32 {
    read_response_window(mtu)
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

/// The PSNs (response packets) of the RDMA READ request that starts at index `index` of a READ
/// taking `total` PSNs: up to the next multiple of `size` ([`read_request_size`], never 0).
const fn read_request_psns(index: u32, total: u32, size: u32) -> u32 {
    let size = if size == 0 { 1 } else { size };
    let boundary = (index / size).saturating_add(1).saturating_mul(size);
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
/// acknowledged without waiting for a timeout) and every [`ack_req_interval`] packets within a
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
    // read_request_size; every other packet is one PSN. `index < total` here, so none of these
    // overflows; saturation keeps that obvious.
    let psn_count = if is_read {
        read_request_psns(index, total, read_request_size(cfg.mtu))
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
        && (last_of_wqe || index.wrapping_add(1) & ack_req_interval(cfg.mtu).wrapping_sub(1) == 0);
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
