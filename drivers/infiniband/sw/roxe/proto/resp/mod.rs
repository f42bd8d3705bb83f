// SPDX-License-Identifier: GPL-2.0

//! Responder logic (IBA 9.7 and 9.8, rxe's rxe_resp.c, as pure decisions): PSN and opcode-sequence checks, access checks of RDMA requests, duplicate detection with the responder resources cache, and the ACK or NAK each request gets.
//!
//! The kernel keeps one [`RespState`] and one [`ResponderResources`] per QP and, for each request
//! packet that reaches the responder, builds a [`Request`] and calls, in this order:
//!
//! 1. [`check_psn`]. [`PsnVerdict::Expected`] and [`PsnVerdict::Resync`] go on to step 2;
//!    [`PsnVerdict::Duplicate`] goes to [`handle_duplicate`], whose [`Response`] is sent as is
//!    (for a replayed READ, after [`check_rkey`] of [`ReadReply::access`]); a
//!    [`PsnVerdict::SequenceNak`] is sent as an ACKNOWLEDGE with [`RespState::aeth`] of
//!    [`NakCode::PsnSequenceError`] and the expected PSN; [`PsnVerdict::Drop`] ends there.
//! 2. [`check_opcode`], then [`check_op_allowed`], then [`check_resource`]. After the last, when
//!    [`OpcodeInfo::needs_recv_wqe`] holds and no receive WQE is held for the message yet, the
//!    kernel takes one (failing to parse it is [`RespError::MalformedRecvWqe`]).
//! 3. [`check_length`], which says where the data goes: into the receive WQE at an offset, or to
//!    remote memory named by an R_Key. For the latter the kernel looks the key up and calls
//!    [`check_rkey`] with what it found.
//! 4. The kernel executes: copies the payload, runs the atomic, invalidates an R_Key.
//! 5. [`commit`], which advances the state, records READ and atomic requests in the cache, and
//!    says which receive WQE completion and which response (ACK, atomic ACK, READ responses, to
//!    segment with [`ReadReply::packets`]) to send.
//!
//! Any `Err(e)` along the way goes to [`RespState::fail`], whose [`ErrorAction`] lists the NAK
//! to send, what becomes of a held receive WQE, and whether the QP moves to the error state.
//! The kernel keeps a receive WQE it holds across a dropped UC message and uses it for the next
//! message (rxe does the same for class D1 errors): the byte offset into it lives here, in
//! [`RespState::message`], and restarts at zero.

mod check;
mod commit;
mod error;
mod held;
mod order;
mod read;
mod resources;

pub use check::*;
pub use commit::*;
pub use error::*;
pub use held::*;
pub use order::*;
pub use read::*;
pub use resources::*;

use super::mtt::{permits, Access};
use super::mtu::Pmtu;
use super::opcode::{
    check_op_sequence, ExtHeader, Opcode, OpcodeInfo, Operation, Position, SeqCheck, Transport,
};
use super::packet::{
    pad_count_for, Aeth, AtomicEth, Feth, Msn, NakCode, Packet, Reth, Syndrome,
    AETH_CREDITS_INVALID,
};
use super::psn::Psn;
use super::qp_state::{qp_access, QpType};
use core::cmp::Ordering;

/// The header fields of a response that vary: its opcode, BTH PSN, AETH (responses without one:
/// the middle READ responses) and the original value an ATOMIC ACKNOWLEDGE returns.
#[derive(Clone, Copy, Debug)]
pub struct RespHeader {
    pub opcode: Opcode,
    pub psn: Psn,
    pub aeth: Option<Aeth>,
    pub orig: Option<u64>,
}

impl RespHeader {
    /// A response of `opcode` with `psn` and `aeth`, no atomic value.
    pub const fn new(opcode: Opcode, psn: Psn, aeth: Option<Aeth>) -> Self {
        RespHeader {
            opcode,
            psn,
            aeth,
            orig: None,
        }
    }
}

/// Bytes a UD (and GSI) receive buffer reserves for the GRH ahead of the payload: the verbs
/// place the 40-byte IPv6 header, or an IPv4 header padded to the same size, first (rxe:
/// `sizeof(union rdma_network_hdr)`). The receive completion's byte count includes them.
pub const UD_GRH_LEN: u32 = 40;

/// The largest DMA length a RETH may carry: 2^31 bytes (rxe cites IBA C9-94 for this limit).
pub const MAX_DMA_LEN: u32 = 1 << 31;

/// The bytes an atomic operation reads and writes (IBA 9.4.5: atomics act on 64 bits, naturally
/// aligned); also the payload of an ATOMIC WRITE (annex A19).
pub const ATOMIC_LEN: u32 = 8;

/// The responder-side attributes of the QP that the checks depend on. The kernel fills it from
/// the QP's attributes; it changes only through modify QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RespConfig {
    /// The QP type. GSI and SMI QPs are datagram QPs and behave as UD.
    pub qp_type: QpType,
    /// `qp_access_flags` (see [`qp_access`]): the remote operations the QP accepts.
    pub access_flags: u32,
    /// The segment: the payload of every FIRST and MIDDLE packet (the path MTU, or
    /// `Pmtu::LOCAL` on a path to the device's own GID).
    pub mtu: Pmtu,
    /// `max_dest_rd_atomic`: how many RDMA READ and atomic requests the responder keeps for
    /// replay; 0 refuses them all.
    pub max_dest_rd_atomic: u8,
    /// `min_rnr_timer`: the five-bit timer code an RNR NAK carries.
    pub min_rnr_timer: u8,
}

impl RespConfig {
    /// The transport whose opcodes this QP receives.
    pub const fn transport(&self) -> Transport {
        transport_of(self.qp_type)
    }

    const fn is_rc(&self) -> bool {
        matches!(self.qp_type, QpType::Rc)
    }

    const fn is_connected(&self) -> bool {
        matches!(self.qp_type, QpType::Rc | QpType::Uc)
    }
}

/// The transport of the opcodes a QP of type `qp_type` receives.
pub const fn transport_of(qp_type: QpType) -> Transport {
    match qp_type {
        QpType::Rc => Transport::Rc,
        QpType::Uc => Transport::Uc,
        QpType::Ud | QpType::Gsi | QpType::Smi => Transport::Ud,
    }
}

/// Whether `info` is a request a QP of type `qp_type` may receive: a request opcode of the QP's
/// own transport. RC takes every RC request, UC only its SEND and RDMA WRITE families, UD only
/// the two UD SENDs; the opcode table holds nothing else for those transports. The receive path
/// uses this to drop strays before the responder (rxe: `check_type_state`).
pub const fn request_fits_qp(qp_type: QpType, info: &OpcodeInfo) -> bool {
    let same_transport = matches!(
        (transport_of(qp_type), info.transport()),
        (Transport::Rc, Transport::Rc)
            | (Transport::Uc, Transport::Uc)
            | (Transport::Ud, Transport::Ud)
    );
    info.is_request() && same_transport
}

/// What the responder needs to know about one received request packet: its opcode, BTH fields
/// and decoded extension headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The opcode's table entry.
    pub info: &'static OpcodeInfo,
    /// The BTH PSN.
    pub psn: Psn,
    /// The BTH AckReq bit.
    pub ack_req: bool,
    /// Payload bytes, pad excluded.
    pub payload_len: u32,
    /// The BTH pad count.
    pub pad: u8,
    /// The RETH, when the opcode has one.
    pub reth: Option<Reth>,
    /// The AtomicETH, when the opcode has one.
    pub atomic: Option<AtomicEth>,
    /// The FETH, when the opcode has one.
    pub feth: Option<Feth>,
}

impl Request {
    /// A request of opcode `info` at `psn` with `payload_len` bytes of payload, the pad that
    /// aligns them, no AckReq and no extension header; the fields are public to add those.
    pub fn new(info: &'static OpcodeInfo, psn: Psn, payload_len: u32) -> Request {
        Request {
            info,
            psn,
            ack_req: false,
            payload_len,
            pad: pad_count_for(payload_len as usize),
            reth: None,
            atomic: None,
            feth: None,
        }
    }

    /// The request a validated packet carries.
    pub fn from_packet<T: AsRef<[u8]>>(pkt: &Packet<T>) -> Request {
        Request {
            info: pkt.info(),
            psn: pkt.psn(),
            ack_req: pkt.ack_req(),
            // A packet fits in a UDP datagram, so this never saturates.
            payload_len: u32::try_from(pkt.payload_len()).unwrap_or(u32::MAX),
            pad: pkt.pad_count(),
            reth: pkt.reth(),
            atomic: pkt.atomic_eth(),
            feth: pkt.feth(),
        }
    }
}

/// The message the responder is in the middle of, with the progress the next packet continues
/// from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Message {
    /// No multi-packet message in progress.
    #[default]
    Idle,
    /// A SEND whose FIRST (and maybe MIDDLEs) were placed.
    Send {
        /// Bytes already placed into the receive WQE: where the next packet's payload goes.
        placed: u32,
    },
    /// An RDMA WRITE whose FIRST (and maybe MIDDLEs) were written. Only the FIRST carries the
    /// RETH (IBA 9.3), so the cursor lives here.
    Write {
        /// Where the next packet's payload goes.
        va: u64,
        /// The R_Key of the FIRST packet's RETH.
        rkey: u32,
        /// Bytes of the RETH's DMA length not yet written.
        remaining: u32,
        /// The RETH's DMA length: the byte count of a WRITE with immediate's receive completion.
        length: u32,
    },
}

/// NAKs already sent for the current gap in the PSN sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gap {
    /// None: the next packet ahead of the expected PSN gets a PSN sequence error NAK.
    None,
    /// A PSN sequence error NAK went out. The IBA asks for one NAK per sequence error; later
    /// packets of the gap are dropped silently until the expected PSN arrives (rxe:
    /// `sent_psn_nak`).
    SequenceNakSent,
    /// An RNR NAK went out. The packets the requester sent behind the refused one arrive ahead
    /// of the expected PSN; a PSN sequence NAK for them would make the requester retry at once
    /// and defeat the RNR timer, so they are dropped silently too.
    RnrNakSent,
}

/// The responder's per-QP state (rxe: `struct rxe_resp_info`, minus what the kernel holds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RespState {
    expected_psn: Psn,
    /// One past the PSN of the last SEND, WRITE, atomic, ATOMIC WRITE or FLUSH executed: a
    /// duplicate SEND or WRITE is acknowledged with the PSN before it. READs leave it alone, so
    /// that such an ACK never implies READ responses the requester may not have received.
    ack_psn: Psn,
    msn: Msn,
    /// The opcode of the last packet accepted in sequence, for [`check_op_sequence`].
    last_opcode: Option<Opcode>,
    gap: Gap,
    /// UC: the current message is being dropped; packets up to the next FIRST or ONLY go too.
    uc_dropping: bool,
    message: Message,
}

impl RespState {
    /// A responder that expects `rq_psn` next (the `rq_psn` attribute of modify QP) and has
    /// completed no message.
    pub const fn new(rq_psn: Psn) -> RespState {
        RespState {
            expected_psn: rq_psn,
            ack_psn: rq_psn,
            msn: Msn::new(0),
            last_opcode: None,
            gap: Gap::None,
            uc_dropping: false,
            message: Message::Idle,
        }
    }

    /// Sets the next expected PSN, when modify QP gives a new `rq_psn`.
    pub fn set_expected_psn(&mut self, rq_psn: Psn) {
        self.expected_psn = rq_psn;
        self.ack_psn = rq_psn;
        self.gap = Gap::None;
    }

    /// The PSN the responder expects next.
    pub const fn expected_psn(&self) -> Psn {
        self.expected_psn
    }

    /// The message sequence number: messages completed so far, modulo 2^24.
    pub const fn msn(&self) -> Msn {
        self.msn
    }

    /// The message in progress.
    pub const fn message(&self) -> Message {
        self.message
    }

    /// The AETH of a response sent now: `syndrome` and the current MSN (every AETH carries the
    /// MSN of the last completed message).
    pub const fn aeth(&self, syndrome: Syndrome) -> Aeth {
        Aeth {
            syndrome,
            msn: self.msn,
        }
    }

    /// Forgets the message in progress (UC: its remaining packets will not come, or will be
    /// dropped). The kernel's receive WQE, if it holds one, starts over at offset zero.
    pub fn abandon_message(&mut self) {
        self.message = Message::Idle;
        self.last_opcode = None;
    }

    /// Handles a rejection: applies what it means to the state and returns what the kernel must
    /// do (see [`error_action`]).
    ///
    /// An RNR NAK on RC leaves the message in progress alone (the requester resends the same
    /// packet after the timer); every other error abandons it, and on UC drops the rest of it.
    pub fn fail(&mut self, cfg: &RespConfig, err: RespError) -> ErrorAction {
        match err {
            // A stray packet belongs to no message.
            RespError::WrongTransport => {}
            RespError::ReceiverNotReady if cfg.is_rc() => self.gap = Gap::RnrNakSent,
            _ => {
                self.abandon_message();
                if matches!(cfg.qp_type, QpType::Uc) {
                    self.uc_dropping = true;
                }
            }
        }
        error_action(cfg, err)
    }

    /// Handles a request that needs ODP memory not faulted in yet (the kernel has queued the
    /// fault). Nothing of the request is consumed: call it before [`commit`], in place of
    /// [`RespState::fail`], which would abandon the message.
    ///
    /// RC answers with an RNR NAK (IBA 9.7.5.2.8; what ConnectX HCAs do on an ODP page fault):
    /// the requester sends again from this PSN after the timer. Packets of the same message
    /// behind it are dropped silently, as after any RNR NAK, rather than NAKed for the gap. The
    /// message in progress stays, so the resend continues it where it stopped. UD has no NAK:
    /// the kernel hands the packet to the responder again after the fault. UC (no ODP offered)
    /// loses it: the next packet's PSN no longer matches and abandons the message.
    pub fn page_fault(&mut self, cfg: &RespConfig) -> PageFaultAction {
        match cfg.qp_type {
            QpType::Rc => {
                self.gap = Gap::RnrNakSent;
                PageFaultAction::Reply(Syndrome::RnrNak {
                    timer: cfg.min_rnr_timer & 0x1f,
                })
            }
            QpType::Ud | QpType::Gsi | QpType::Smi => PageFaultAction::Redeliver,
            QpType::Uc => PageFaultAction::Drop,
        }
    }
}

/// What the kernel does about a request that found ODP memory missing, from
/// [`RespState::page_fault`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageFaultAction {
    /// RC: send this ACKNOWLEDGE syndrome (an RNR NAK) with [`RespState::aeth`] and the
    /// packet's PSN; counted as an RNR NAK sent.
    Reply(Syndrome),
    /// UD: queue a copy of the packet to run again after the fault; a receive WQE already held
    /// stays held for it.
    Redeliver,
    /// Drop the packet, as a lost one.
    Drop,
}

// Last: tools/deps.py reads a file only up to its test module, and must see the imports above.
#[cfg(test)]
mod tests;
