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

use super::mtt::{permits, Access};
use super::mtu::IbMtu;
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
    /// The path MTU: the payload of every FIRST and MIDDLE packet.
    pub mtu: IbMtu,
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

/// The verdict of [`check_psn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnVerdict {
    /// The PSN is the expected one (or the QP is UD, which does not check): go on.
    Expected,
    /// UC: a FIRST or ONLY after a gap (or while dropping). The partial message, if any, was
    /// abandoned and the expected PSN moved to this packet's: go on as for
    /// [`PsnVerdict::Expected`]. On UC a gap is no error, only lost packets (IBA 9.8).
    Resync,
    /// RC: the PSN is behind the expected one, a retransmission of a request already executed.
    /// Never execute it again: [`handle_duplicate`] says what to resend.
    Duplicate,
    /// RC: the PSN is ahead of the expected one and no NAK went out for this gap yet: send a
    /// NAK with [`NakCode::PsnSequenceError`], BTH PSN `expected`, and drop the packet.
    SequenceNak {
        /// The PSN the responder expects, which the requester resends from.
        expected: Psn,
    },
    /// Drop the packet silently: RC, ahead of the expected PSN in a gap already NAKed; UC, a
    /// MIDDLE or LAST after a gap or of a dropped message; any type, an opcode the QP does not
    /// receive.
    Drop,
}

impl PsnVerdict {
    /// Whether the packet goes on to [`check_opcode`].
    pub const fn proceeds(self) -> bool {
        matches!(self, PsnVerdict::Expected | PsnVerdict::Resync)
    }
}

/// Checks the PSN of a request against the expected one (rxe: `check_psn`).
///
/// RC (IBA 9.7): equal goes on; behind is a duplicate; ahead is a sequence error, NAKed once
/// per gap (a NAK or RNR NAK already sent for the gap silences the rest). UC (IBA 9.8): any
/// mismatch loses the partial message; a FIRST or ONLY starts over from its own PSN, anything
/// else is dropped until one comes. UD checks no PSN.
///
/// Only the NAK bookkeeping and the UC resynchronization change the state here; the expected
/// PSN of RC moves in [`commit`] alone.
pub fn check_psn(state: &mut RespState, cfg: &RespConfig, req: &Request) -> PsnVerdict {
    if !request_fits_qp(cfg.qp_type, req.info) {
        return PsnVerdict::Drop;
    }
    match cfg.qp_type {
        QpType::Rc => {
            match req.psn.diff(state.expected_psn).cmp(&0) {
                Ordering::Greater => {
                    if !matches!(state.gap, Gap::None) {
                        return PsnVerdict::Drop;
                    }
                    state.gap = Gap::SequenceNakSent;
                    PsnVerdict::SequenceNak {
                        expected: state.expected_psn,
                    }
                }
                Ordering::Less => PsnVerdict::Duplicate,
                Ordering::Equal => {
                    // The gap, if any, is filled.
                    state.gap = Gap::None;
                    PsnVerdict::Expected
                }
            }
        }
        QpType::Uc => {
            if !state.uc_dropping && req.psn == state.expected_psn {
                return PsnVerdict::Expected;
            }
            state.abandon_message();
            if req.info.starts_message() {
                state.uc_dropping = false;
                state.expected_psn = req.psn;
                PsnVerdict::Resync
            } else {
                state.uc_dropping = true;
                PsnVerdict::Drop
            }
        }
        QpType::Ud | QpType::Gsi | QpType::Smi => PsnVerdict::Expected,
    }
}

/// Checks that the opcode is a request of the QP's transport and may follow the packet accepted
/// before it (IBA 9.8.3; rxe: `check_op_seq`).
///
/// On UC, a FIRST or ONLY that cuts into a message in progress abandons that message and is
/// accepted: its LAST was lost, which UC tolerates (rxe drops the new packet too, and with it the
/// whole next message).
pub fn check_opcode(
    state: &mut RespState,
    cfg: &RespConfig,
    req: &Request,
) -> Result<(), RespError> {
    if !request_fits_qp(cfg.qp_type, req.info) {
        return Err(RespError::WrongTransport);
    }
    match check_op_sequence(state.last_opcode, req.info.opcode()) {
        SeqCheck::Ok => Ok(()),
        SeqCheck::MissingFirst => Err(RespError::MissingFirst),
        SeqCheck::MissingLast => {
            if matches!(cfg.qp_type, QpType::Uc) && req.info.starts_message() {
                state.abandon_message();
                Ok(())
            } else {
                Err(RespError::MissingLast)
            }
        }
    }
}

/// Checks that the QP's `qp_access_flags` allow the operation (rxe: `check_op_valid` and
/// `check_qp_attr_access`).
///
/// RDMA WRITE and ATOMIC WRITE need [`qp_access::REMOTE_WRITE`], RDMA READ
/// [`qp_access::REMOTE_READ`], the atomics [`qp_access::REMOTE_ATOMIC`], and FLUSH the right of
/// each placement type its FETH asks for. UC checks RDMA WRITE only (it has nothing else that
/// touches memory); UD has no RDMA.
pub fn check_op_allowed(cfg: &RespConfig, req: &Request) -> Result<(), RespError> {
    let flags = cfg.access_flags;
    let has = |bit: u32| flags & bit != 0;
    let allowed = match req.info.operation() {
        Operation::RdmaWrite | Operation::AtomicWrite => has(qp_access::REMOTE_WRITE),
        Operation::RdmaReadRequest => has(qp_access::REMOTE_READ),
        Operation::CompareSwap | Operation::FetchAdd => has(qp_access::REMOTE_ATOMIC),
        Operation::Flush => {
            let placement = req.feth.map_or(0, |f| f.placement_type);
            (placement & Feth::PLACEMENT_GLOBAL == 0 || has(qp_access::FLUSH_GLOBAL))
                && (placement & Feth::PLACEMENT_PERSISTENT == 0 || has(qp_access::FLUSH_PERSISTENT))
        }
        Operation::Send
        | Operation::RdmaReadResponse
        | Operation::Acknowledge
        | Operation::AtomicAcknowledge => true,
    };
    if allowed {
        Ok(())
    } else {
        Err(RespError::OperationNotAllowed)
    }
}

/// Checks the resources the request needs (rxe: `check_resource`): a READ, atomic, ATOMIC WRITE
/// or FLUSH needs responder resources (`max_dest_rd_atomic` above 0); a packet that
/// [`OpcodeInfo::needs_recv_wqe`] needs a receive WQE, held already for this message or
/// posted (`recv_wqe_ready`), else the receiver is not ready (IBA 9.7.5.2.8).
///
/// Outstanding READ and atomic requests are not counted: keeping within `max_dest_rd_atomic` is
/// the requester's job, and the cache recycles its oldest entry (as rxe does).
pub fn check_resource(
    cfg: &RespConfig,
    req: &Request,
    recv_wqe_ready: bool,
) -> Result<(), RespError> {
    let info = req.info;
    if (info.is_read() || info.is_atomic() || info.is_atomic_write() || info.is_flush())
        && cfg.max_dest_rd_atomic == 0
    {
        return Err(RespError::NoRdAtomicResources);
    }
    if info.needs_recv_wqe() && !recv_wqe_ready {
        return Err(RespError::ReceiverNotReady);
    }
    Ok(())
}

/// An access to remote memory through an R_Key, for [`check_rkey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAccess {
    /// The R_Key the request names.
    pub rkey: u32,
    /// The first byte this packet touches.
    pub va: u64,
    /// Bytes from `va` that must lie in the key's range: the rest of the message (for a WRITE,
    /// the whole remaining DMA length, so that no byte lands before an out-of-range tail is
    /// refused), or the operand size.
    pub len: u64,
    /// The rights the key must grant.
    pub needed: Access,
    /// FLUSH of a whole region (selectivity level MR): no range to check (annex A19).
    pub whole_region: bool,
    /// An atomic or ATOMIC WRITE: `va` must be 8-byte aligned.
    pub atomic: bool,
}

/// Where a request's data goes, from [`check_length`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Nothing to place and no key to check: a zero-length RDMA READ or WRITE, whose R_Key and
    /// address mean nothing (IBA C9-88; rxe does not look the key up either).
    Nothing,
    /// SEND data: copy the payload to byte `offset` of the receive WQE's scatter list. For UD
    /// the kernel writes the GRH at offset 0 and `offset` is [`UD_GRH_LEN`].
    Recv {
        /// Byte offset into the receive WQE's buffers.
        offset: u32,
    },
    /// Remote memory: look up the R_Key, [`check_rkey`], then write the payload to `va`, read
    /// from it, or run the atomic on it.
    Remote(RemoteAccess),
}

/// Checks the packet's payload length against its place in the message, the path MTU, the RDMA
/// length and the receive buffer, and says where the data goes (rxe: `check_length` and the
/// length part of `check_rkey`).
///
/// RC and UC: FIRST and MIDDLE carry exactly one MTU, LAST 1 to MTU bytes, ONLY up to MTU. A
/// RETH's DMA length is at most [`MAX_DMA_LEN`]. An RDMA WRITE must carry exactly its DMA length: FIRST and MIDDLE must leave
/// bytes for a LAST, the LAST or ONLY must carry all that remains, with the pad that aligns it.
/// Atomics move [`ATOMIC_LEN`] bytes; an ATOMIC WRITE carries exactly that as payload, unpadded.
/// A SEND must fit `recv_len`, the total length of the receive WQE's buffers (0 when there is
/// none), after what its earlier packets placed; a UD SEND after the GRH.
pub fn check_length(
    state: &RespState,
    cfg: &RespConfig,
    req: &Request,
    recv_len: u32,
) -> Result<Placement, RespError> {
    let info = req.info;
    let mtu = cfg.mtu.bytes();
    let payload = req.payload_len;
    if cfg.is_connected() && info.has_payload() {
        let fits = match info.position() {
            Position::Only => payload <= mtu,
            Position::First | Position::Middle => payload == mtu,
            Position::Last => payload > 0 && payload <= mtu,
        };
        if !fits {
            return Err(RespError::Length);
        }
    }
    if req.reth.is_some_and(|r| r.dma_len > MAX_DMA_LEN) {
        return Err(RespError::DmaLengthTooLong);
    }
    match info.operation() {
        Operation::Send => {
            let offset = if !cfg.is_connected() {
                UD_GRH_LEN
            } else if info.starts_message() {
                0
            } else {
                match state.message {
                    Message::Send { placed } => placed,
                    _ => return Err(RespError::MissingFirst),
                }
            };
            match offset.checked_add(payload) {
                Some(end) if end <= recv_len => Ok(Placement::Recv { offset }),
                _ => Err(RespError::RecvBufferTooSmall),
            }
        }
        Operation::RdmaWrite => {
            let (va, rkey, remaining) = if info.starts_message() {
                let reth = req.reth.ok_or(RespError::Length)?;
                (reth.va, reth.rkey, reth.dma_len)
            } else {
                match state.message {
                    Message::Write {
                        va,
                        rkey,
                        remaining,
                        ..
                    } => (va, rkey, remaining),
                    _ => return Err(RespError::MissingFirst),
                }
            };
            let exact = if info.ends_message() {
                payload == remaining && req.pad == pad_count_for(payload as usize)
            } else {
                remaining > payload && req.pad == 0
            };
            if !exact {
                return Err(RespError::Length);
            }
            if remaining == 0 {
                return Ok(Placement::Nothing);
            }
            Ok(Placement::Remote(RemoteAccess {
                rkey,
                va,
                len: u64::from(remaining),
                needed: Access::REMOTE_WRITE,
                whole_region: false,
                atomic: false,
            }))
        }
        Operation::RdmaReadRequest => {
            let reth = req.reth.ok_or(RespError::Length)?;
            if reth.dma_len == 0 {
                return Ok(Placement::Nothing);
            }
            Ok(Placement::Remote(RemoteAccess {
                rkey: reth.rkey,
                va: reth.va,
                len: u64::from(reth.dma_len),
                needed: Access::REMOTE_READ,
                whole_region: false,
                atomic: false,
            }))
        }
        Operation::CompareSwap | Operation::FetchAdd => {
            let atomic = req.atomic.ok_or(RespError::Length)?;
            Ok(Placement::Remote(RemoteAccess {
                rkey: atomic.rkey,
                va: atomic.va,
                len: u64::from(ATOMIC_LEN),
                needed: Access::REMOTE_ATOMIC,
                whole_region: false,
                atomic: true,
            }))
        }
        Operation::AtomicWrite => {
            let reth = req.reth.ok_or(RespError::Length)?;
            // Annex A19 (rxe cites oA19-28): exactly 8 bytes, in the RETH and on the wire.
            if reth.dma_len != ATOMIC_LEN || payload != ATOMIC_LEN || req.pad != 0 {
                return Err(RespError::Length);
            }
            Ok(Placement::Remote(RemoteAccess {
                rkey: reth.rkey,
                va: reth.va,
                len: u64::from(ATOMIC_LEN),
                needed: Access::REMOTE_WRITE,
                whole_region: false,
                atomic: true,
            }))
        }
        Operation::Flush => {
            let reth = req.reth.ok_or(RespError::Length)?;
            let feth = req.feth.unwrap_or_default();
            let mut needed = Access::NONE;
            if feth.placement_type & Feth::PLACEMENT_GLOBAL != 0 {
                needed = needed.union(Access::FLUSH_GLOBAL);
            }
            if feth.placement_type & Feth::PLACEMENT_PERSISTENT != 0 {
                needed = needed.union(Access::FLUSH_PERSISTENT);
            }
            Ok(Placement::Remote(RemoteAccess {
                rkey: reth.rkey,
                va: reth.va,
                len: u64::from(reth.dma_len),
                needed,
                whole_region: feth.selectivity_level == Feth::LEVEL_MR,
                atomic: false,
            }))
        }
        Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge => {
            Err(RespError::WrongTransport)
        }
    }
}

/// The address range a memory key covers, in the key's own address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyBounds {
    /// `[start, start + length)`. A zero-based MW starts at 0.
    Range {
        /// First address.
        start: u64,
        /// Length in bytes.
        length: u64,
    },
    /// Everything: a DMA MR, which maps all memory (rxe's `mr_check_range` skips it).
    All,
}

/// What the kernel found under an R_Key's index: an MR or a bound MW, for [`check_rkey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyTarget {
    /// The full key of the MR or MW (index and key byte): a stale key byte fails to match.
    pub key: u32,
    /// The MR or MW belongs to the QP's protection domain.
    pub same_pd: bool,
    /// The MR is valid (registered, not invalidated), or the MW is bound, valid and not
    /// zero-length.
    pub valid: bool,
    /// For a type 2 MW: bound to this QP (rxe `rxe_lookup_mw`). True otherwise.
    pub qp_matches: bool,
    /// The rights the MR or MW grants.
    pub access: Access,
    /// The range the key covers.
    pub bounds: KeyBounds,
}

/// Checks an access through an R_Key against what the kernel found under its index (`None`:
/// nothing) (IBA 9.7.5.2.4 R_Key violations; rxe `check_rkey`, `lookup_mr`, `rxe_lookup_mw`).
///
/// The key must match in full, belong to the QP's PD, be valid and usable by this QP, grant every
/// needed right and cover `[va, va + len)` (unless the access names the whole region). Then an
/// atomic's address must be 8-byte aligned: a misaligned atomic is an invalid request, not an
/// access error (rxe checks alignment after the key, as here).
pub fn check_rkey(found: Option<&KeyTarget>, access: &RemoteAccess) -> Result<(), RespError> {
    let Some(target) = found else {
        return Err(RespError::RemoteAccess);
    };
    if target.key != access.rkey
        || !target.same_pd
        || !target.valid
        || !target.qp_matches
        || !permits(target.access, access.needed)
    {
        return Err(RespError::RemoteAccess);
    }
    if !access.whole_region {
        if let KeyBounds::Range { start, length } = target.bounds {
            // Nothing overflows: `va + len` is never formed.
            let inside = access.va >= start && {
                let offset = access.va - start;
                offset <= length && access.len <= length - offset
            };
            if !inside {
                return Err(RespError::RemoteAccess);
            }
        }
    }
    if access.atomic && access.va & u64::from(ATOMIC_LEN - 1) != 0 {
        return Err(RespError::MisalignedAtomic);
    }
    Ok(())
}

/// The number of PSNs, and so of response packets, an RDMA READ of `len` bytes takes: one per
/// MTU, and one for a zero-length READ (IBA 9.7.1: a READ request consumes a PSN per response
/// packet).
pub const fn read_response_count(len: u32, mtu: IbMtu) -> u32 {
    if len == 0 {
        1
    } else {
        len.div_ceil(mtu.bytes())
    }
}

/// An RDMA READ request kept for replay (rxe: `struct resp_res`), or another request that must
/// execute at most once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// An RDMA READ: its PSN range and the original RETH.
    Read {
        /// PSN of the request, and of its first response.
        first_psn: Psn,
        /// PSN of its last response.
        last_psn: Psn,
        /// The RETH's virtual address.
        va: u64,
        /// The RETH's R_Key.
        rkey: u32,
        /// The RETH's DMA length.
        len: u32,
    },
    /// A compare and swap or fetch and add that executed, with the value it returned. A
    /// duplicate gets this value again and never runs the atomic twice (IBA 9.4.5).
    Atomic {
        /// PSN of the request.
        psn: Psn,
        /// The remote value before the atomic.
        original: u64,
    },
    /// An ATOMIC WRITE that executed (annex A19: replayed without executing again).
    AtomicWrite {
        /// PSN of the request.
        psn: Psn,
    },
    /// A FLUSH that executed (annex A19: replayed without flushing again).
    Flush {
        /// PSN of the request.
        psn: Psn,
    },
}

impl Resource {
    /// The first PSN the request took.
    pub const fn first_psn(&self) -> Psn {
        match *self {
            Resource::Read { first_psn, .. } => first_psn,
            Resource::Atomic { psn, .. }
            | Resource::AtomicWrite { psn }
            | Resource::Flush { psn } => psn,
        }
    }

    /// The last PSN the request took.
    pub const fn last_psn(&self) -> Psn {
        match *self {
            Resource::Read { last_psn, .. } => last_psn,
            Resource::Atomic { psn, .. }
            | Resource::AtomicWrite { psn }
            | Resource::Flush { psn } => psn,
        }
    }

    /// Whether `psn` is one of the request's PSNs.
    pub const fn contains(&self, psn: Psn) -> bool {
        psn.diff(self.first_psn()) >= 0 && self.last_psn().diff(psn) >= 0
    }
}

/// The responder resources (`max_dest_rd_atomic` of them; rxe: `qp->resp.resources`): a
/// ring of the last RDMA READ, atomic, ATOMIC WRITE and FLUSH requests, in which duplicates are
/// looked up. `N` is the most it can hold; the QP's `max_dest_rd_atomic`, clamped to `N`, is how
/// many it does hold. The kernel should pick `N` no smaller than the device's
/// `max_qp_rd_atom`: a READ the requester may still retry and the ring forgot can only be
/// dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponderResources<const N: usize> {
    slots: [Option<Resource>; N],
    /// The slot the next record takes (the oldest one once the ring is full).
    next: usize,
    capacity: usize,
}

impl<const N: usize> ResponderResources<N> {
    /// An empty ring holding up to `max_dest_rd_atomic` entries (at most `N`).
    pub const fn new(max_dest_rd_atomic: u32) -> Self {
        ResponderResources {
            slots: [None; N],
            next: 0,
            capacity: Self::clamp(max_dest_rd_atomic),
        }
    }

    const fn clamp(max_dest_rd_atomic: u32) -> usize {
        let wanted = max_dest_rd_atomic as usize;
        if wanted < N {
            wanted
        } else {
            N
        }
    }

    /// Empties the ring and sets its capacity, when modify QP changes `max_dest_rd_atomic` or
    /// the QP is reset (rxe frees and reallocates the resources then).
    pub fn reset(&mut self, max_dest_rd_atomic: u32) {
        *self = Self::new(max_dest_rd_atomic);
    }

    /// How many entries the ring holds at most.
    pub const fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records a request, overwriting the oldest entry when the ring is full. With a capacity of
    /// 0 nothing is kept ([`check_resource`] refuses such requests anyway).
    pub fn record(&mut self, resource: Resource) {
        if self.capacity == 0 {
            return;
        }
        if let Some(slot) = self.slots.get_mut(self.next) {
            *slot = Some(resource);
        }
        self.next = (self.next + 1) % self.capacity;
    }

    /// The most recent entry whose PSNs include `psn` (the newest wins: after the 24-bit PSN
    /// space wraps, an old entry can alias a new one).
    pub fn find(&self, psn: Psn) -> Option<Resource> {
        let cap = self.capacity;
        (1..=cap)
            .map(|back| (self.next + cap - back) % cap)
            .filter_map(|i| self.slots.get(i).copied().flatten())
            .find(|r| r.contains(psn))
    }
}

/// The most RDMA READ responses the responder sends in one go; the rest of a longer reply
/// follows in further bursts ([`ReadReply::rest_after`]). A requester may ask for a whole READ
/// in one request (rxe asks for 4096 responses for 4 MiB at MTU 1024): sent at once, such a
/// reply overflows the egress queue (a tail-dropped burst only makes the requester ask again for
/// another) and keeps the CPU in one softirq for as long as it takes to build and checksum every
/// packet. Four times roxe's own request size ([`super::req::READ_REQUEST_PSNS`]), so that
/// roxe's requests are answered in one go.
pub const READ_REPLY_BURST: u32 = 256;

/// How long the responder waits before sending the next burst of a long READ reply, in ms.
/// rdma_rxe's requester ignores every response after a gap until its retransmission timer
/// (67 ms for the usual `timeout` of 14) asks again from the gap; what the responder sends
/// meanwhile is wasted, and on a slow host building it delays the replay that matters. A
/// burst every 50 ms keeps the waste to about one burst per loss, and a loss-free reply still
/// flows (5 MiB/s at MTU 1024 for the parts past the first burst).
pub const READ_REPLY_INTERVAL_MS: u64 = 50;

/// The READ reply a responder QP is sending, and when it may send the next burst of it: the
/// pacing of READ responses, so that what one received packet costs is bounded.
///
/// A new READ is answered at once, a burst of at most [`READ_REPLY_BURST`] responses (the data
/// it asked for); what is left of a longer reply follows a burst per interval. A duplicate READ
/// (IBA 9.7.5.1.3) restarts the reply from where it asks. Replays share a budget of
/// [`READ_REPLAY_BUDGET`] responses per interval: within it a replay is answered at once, so a
/// requester that lost responses and asks again for every READ it has outstanding gets them
/// without delay; past it the replay waits for the next interval, and further duplicates
/// neither displace it nor add to it. A peer replaying one small request at full speed thus
/// gets at most the budget and one burst per interval, however many requests it sends. The
/// interval is [`READ_REPLY_INTERVAL_MS`], or [`READ_REPLY_DUTY`] times what the last burst
/// took to build if that is longer, so that a stream never keeps a slow CPU (a debug kernel, an
/// emulated one) busy for more than a fraction of its time.
/// Bursts are built outside the responder's lock ([`ReadStream::take_burst`], then
/// [`ReadStream::finish_burst`]); a reply replaced meanwhile (a replay, a reset) makes the
/// built burst's rest stale, which the generation number detects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStream {
    /// What is left to send.
    pending: Option<ReadReply>,
    /// When the next burst may go (ms since boot); 0: at once.
    next_ms: u64,
    /// A burst of `pending` is being built and sent; nobody else starts one.
    busy: bool,
    /// Bumped on every change of `pending` that is not the end of a burst.
    generation: u32,
    /// `pending` is a replay held back for want of budget: later duplicates leave it be.
    held_replay: bool,
    /// Start of the current replay window (ms since boot).
    window_ms: u64,
    /// Length of the current window: the interval as of its start.
    window_len_ms: u64,
    /// Responses replays may still send at once in the current window.
    replay_left: u32,
    /// The interval the last burst asks for ([`READ_REPLY_INTERVAL_MS`] at least).
    interval_ms: u64,
}

/// A burst to build: the reply to send from, and the stream's generation when it was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadBurst {
    /// The reply, from its next response on.
    pub reply: ReadReply,
    /// [`ReadStream`]'s generation, for [`ReadStream::finish_burst`].
    pub generation: u32,
}

impl ReadStream {
    /// Whether responses are still to go out (or going out): a later request's response would
    /// overtake them (IBA 9.5: responses in request order).
    pub const fn active(&self) -> bool {
        self.pending.is_some() || self.busy
    }

    /// Forgets the reply (modify QP `rq_psn`, RESET).
    pub fn clear(&mut self) {
        self.pending = None;
        self.held_replay = false;
        self.generation = self.generation.wrapping_add(1);
    }

    /// A new READ's reply: due at once.
    pub fn start(&mut self, reply: ReadReply) {
        self.pending = Some(reply);
        self.held_replay = false;
        self.next_ms = 0;
        self.generation = self.generation.wrapping_add(1);
    }

    /// A reply whose first burst went out another way (the loopback drainer delivers it): the
    /// rest follows an interval after `now_ms`.
    pub fn start_later(&mut self, rest: ReadReply, now_ms: u64) {
        self.pending = Some(rest);
        self.held_replay = false;
        self.next_ms = now_ms.saturating_add(self.interval_ms.max(READ_REPLY_INTERVAL_MS));
        self.generation = self.generation.wrapping_add(1);
    }

    /// A duplicate READ's replay at `now_ms`, whose first burst is `responses` long: it
    /// replaces what is left of the reply, unless a replay is held back already. Returns
    /// whether its burst goes now (the stream is idle and the window's budget covers it);
    /// otherwise the device tick sends it when it is due.
    pub fn replay(&mut self, reply: ReadReply, responses: u32, now_ms: u64) -> bool {
        if now_ms >= self.window_ms.saturating_add(self.window_len_ms) {
            self.window_ms = now_ms;
            self.window_len_ms = self.interval_ms.max(READ_REPLY_INTERVAL_MS);
            self.replay_left = READ_REPLAY_BUDGET;
        }
        if self.held_replay && self.pending.is_some() {
            // The earliest held replay keeps its place: the requester asks again for the rest.
            return false;
        }
        self.pending = Some(reply);
        self.generation = self.generation.wrapping_add(1);
        let cost = responses.clamp(1, READ_REPLY_BURST);
        if !self.busy && self.replay_left >= cost {
            self.replay_left -= cost;
            self.held_replay = false;
            self.next_ms = 0;
            true
        } else {
            self.held_replay = true;
            self.next_ms = self
                .next_ms
                .max(self.window_ms.saturating_add(self.window_len_ms));
            false
        }
    }

    /// Whether a burst is due at `now_ms` (the device tick asks).
    pub const fn due(&self, now_ms: u64) -> bool {
        self.pending.is_some() && !self.busy && now_ms >= self.next_ms
    }

    /// Claims the next burst to build, if one is pending and nobody builds one.
    pub fn take_burst(&mut self) -> Option<ReadBurst> {
        if self.busy {
            return None;
        }
        let reply = self.pending?;
        self.busy = true;
        self.held_replay = false;
        Some(ReadBurst {
            reply,
            generation: self.generation,
        })
    }

    /// The burst claimed as `generation` was built, which took `took_ms`: `rest` is what
    /// follows it (`None`: the reply is complete, or it failed and the requester asks again).
    /// What is left may go an interval after `now_ms`. A reply replaced since the claim keeps
    /// its place. The stream stays busy until [`ReadStream::sent`], so that nothing overtakes
    /// the burst on its way out.
    pub fn finish_burst(
        &mut self,
        generation: u32,
        rest: Option<ReadReply>,
        now_ms: u64,
        took_ms: u64,
    ) {
        self.interval_ms = READ_REPLY_INTERVAL_MS.max(took_ms.saturating_mul(READ_REPLY_DUTY));
        if self.generation == generation {
            self.pending = rest;
            self.next_ms = now_ms.saturating_add(self.interval_ms);
        } else {
            // A replay replaced the reply meanwhile: held, it goes when its window allows.
            self.next_ms = self.next_ms.max(now_ms.saturating_add(self.interval_ms));
        }
    }

    /// The burst has been handed to the network.
    pub fn sent(&mut self) {
        self.busy = false;
    }
}

/// Responses that replays of duplicate READs may send at once per interval, on one QP: one
/// burst, more than roxe's requester ever has outstanding
/// ([`super::req::SINGLE_REQUEST_READ_WINDOW`]).
pub const READ_REPLAY_BUDGET: u32 = READ_REPLY_BURST;

/// The least time between two bursts of a READ reply, as a multiple of the time the first of
/// them took to build: at most a fifth of a CPU goes to one reply stream.
pub const READ_REPLY_DUTY: u64 = 4;

/// A stream of RDMA READ responses to send: new, or replayed for a duplicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadReply {
    /// PSN of the first response.
    pub first_psn: Psn,
    /// Address of the first byte to send.
    pub va: u64,
    /// The R_Key to read through.
    pub rkey: u32,
    /// Bytes to send.
    pub len: u32,
    /// A replay that starts inside the original response stream: it continues with MIDDLE and
    /// LAST responses, as the requester's read in progress expects (rxe `read_reply` does the
    /// same; a requester accepts a restart at FIRST only at the READ's first PSN).
    pub resumes: bool,
}

impl ReadReply {
    /// The responses, with their opcodes, PSNs, offsets from [`ReadReply::va`] and lengths.
    pub fn packets(&self, mtu: IbMtu) -> ReadResponses {
        ReadResponses {
            next_psn: self.first_psn,
            offset: 0,
            remaining: self.len,
            mtu: mtu.bytes(),
            continuing: self.resumes,
            done: self.resumes && self.len == 0,
        }
    }

    /// How many responses the reply takes (one for an empty READ).
    pub const fn responses(&self, mtu: IbMtu) -> u32 {
        let mtu = mtu.bytes();
        if self.len == 0 {
            1
        } else {
            self.len.div_ceil(mtu)
        }
    }

    /// The part of the reply after its first `sent` responses, which continues with MIDDLE and
    /// LAST responses; `None` when the reply has no more than `sent` responses.
    pub fn rest_after(&self, mtu: IbMtu, sent: u32) -> Option<ReadReply> {
        let seg = self.packets(mtu).nth(sent as usize)?;
        Some(ReadReply {
            first_psn: seg.psn,
            va: self.va.wrapping_add(u64::from(seg.offset)),
            rkey: self.rkey,
            len: self.len.saturating_sub(seg.offset),
            resumes: true,
        })
    }

    /// The key check the data needs. A replay checks the key again, since the MR may have been
    /// invalidated or deregistered since the original READ (rxe: `rxe_recheck_mr`). `None` for
    /// a zero-length READ, which reads nothing.
    pub const fn access(&self) -> Option<RemoteAccess> {
        if self.len == 0 {
            return None;
        }
        Some(RemoteAccess {
            rkey: self.rkey,
            va: self.va,
            len: self.len as u64,
            needed: Access::REMOTE_READ,
            whole_region: false,
            atomic: false,
        })
    }
}

/// One RDMA READ response packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadResponseSegment {
    /// RDMA READ RESPONSE FIRST, MIDDLE, LAST or ONLY.
    pub opcode: Opcode,
    /// The BTH PSN.
    pub psn: Psn,
    /// Offset of the payload from the reply's first byte.
    pub offset: u32,
    /// Payload bytes: the MTU, except in a LAST or ONLY.
    pub len: u32,
    /// Whether it carries an AETH: FIRST, LAST and ONLY do, MIDDLE does not (IBA 9.2, the
    /// opcode table).
    pub has_aeth: bool,
}

/// Iterator over the packets of a [`ReadReply`], from [`ReadReply::packets`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadResponses {
    next_psn: Psn,
    offset: u32,
    remaining: u32,
    mtu: u32,
    /// A response was already sent (or the reply resumes a stream): the next is a MIDDLE or LAST.
    continuing: bool,
    done: bool,
}

impl Iterator for ReadResponses {
    type Item = ReadResponseSegment;

    fn next(&mut self) -> Option<ReadResponseSegment> {
        if self.done {
            return None;
        }
        let last = self.remaining <= self.mtu;
        let len = if last { self.remaining } else { self.mtu };
        let opcode = match (self.continuing, last) {
            (false, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
            (false, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            (true, false) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            (true, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
        };
        let segment = ReadResponseSegment {
            opcode,
            psn: self.next_psn,
            offset: self.offset,
            len,
            has_aeth: opcode.info().is_some_and(|i| i.has(ExtHeader::Aeth)),
        };
        self.next_psn = self.next_psn.next();
        self.offset = self.offset.wrapping_add(len);
        self.remaining -= len;
        self.continuing = true;
        self.done = last;
        Some(segment)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = if self.done {
            0
        } else {
            self.remaining.div_ceil(self.mtu).max(1) as usize
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for ReadResponses {}

impl core::iter::FusedIterator for ReadResponses {}

/// What the responder sends back for a request (RC only; UC and UD never answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    /// Nothing: the ACK is coalesced into a later one, or the duplicate is dropped.
    None,
    /// An ACKNOWLEDGE with [`ack_syndrome`] and [`RespState::aeth`], BTH PSN `psn`.
    Ack {
        /// The PSN acknowledged (and all before it).
        psn: Psn,
    },
    /// An ATOMIC ACKNOWLEDGE carrying `original`, with [`ack_syndrome`], BTH PSN `psn`.
    AtomicAck {
        /// The atomic's PSN.
        psn: Psn,
        /// The remote value before the atomic.
        original: u64,
    },
    /// RDMA READ responses; those with an AETH carry [`ack_syndrome`].
    Read(ReadReply),
    /// A zero-length RDMA READ RESPONSE ONLY with [`ack_syndrome`], BTH PSN `psn`: how an
    /// ATOMIC WRITE or a FLUSH is acknowledged (annex A19; rxe `send_read_response_ack`).
    EmptyRead {
        /// The request's PSN.
        psn: Psn,
    },
}

/// The syndrome of a positive acknowledgement. roxe has no end-to-end credits to advertise and
/// sends the "invalid" credit code, as rxe does (`AETH_ACK_UNLIMITED`); requesters then go by
/// their own limits.
pub const fn ack_syndrome() -> Syndrome {
    Syndrome::Ack {
        credits: AETH_CREDITS_INVALID,
    }
}

/// What the responder makes of a retransmitted RC request (rxe `duplicate_request`).
///
/// A SEND or WRITE is not executed again: it gets an ACK of the last SEND, WRITE, atomic, ATOMIC
/// WRITE or FLUSH executed, which covers the duplicate and everything up to the latest request
/// (rxe cites C9-105). A READ is replayed from the cache when it names a part of the original
/// (same R_Key, range inside it, responses within the original PSNs); an atomic gets its saved
/// original value; an ATOMIC WRITE or FLUSH its empty read response. A request the cache no
/// longer holds, or that does not match what it holds, is dropped (class D): the
/// requester times out and retries.
pub fn handle_duplicate<const N: usize>(
    state: &RespState,
    cache: &ResponderResources<N>,
    cfg: &RespConfig,
    req: &Request,
) -> Response {
    if !cfg.is_rc() || !request_fits_qp(cfg.qp_type, req.info) {
        return Response::None;
    }
    let found = cache.find(req.psn);
    match req.info.operation() {
        Operation::Send | Operation::RdmaWrite => Response::Ack {
            psn: Psn::new(state.ack_psn.get().wrapping_sub(1)),
        },
        Operation::RdmaReadRequest => match (found, req.reth) {
            (
                Some(Resource::Read {
                    first_psn,
                    last_psn,
                    va,
                    rkey,
                    len,
                }),
                Some(reth),
            ) => {
                let resumes = req.psn != first_psn;
                let count = i64::from(read_response_count(reth.dma_len, cfg.mtu));
                let inside_psns = i64::from(last_psn.diff(req.psn)) >= count - 1;
                let inside_range = reth.va >= va && {
                    let offset = reth.va - va;
                    offset <= u64::from(len) && u64::from(reth.dma_len) <= u64::from(len) - offset
                };
                // A zero-length restart reads nothing, so nothing about it needs to match.
                let empty_restart = reth.dma_len == 0 && !resumes;
                let matches =
                    empty_restart || (reth.rkey == rkey && inside_range && reth.dma_len > 0);
                if matches && inside_psns {
                    Response::Read(ReadReply {
                        first_psn: req.psn,
                        va: reth.va,
                        rkey: reth.rkey,
                        len: reth.dma_len,
                        resumes,
                    })
                } else {
                    Response::None
                }
            }
            _ => Response::None,
        },
        Operation::CompareSwap | Operation::FetchAdd => match found {
            Some(Resource::Atomic { psn, original }) if psn == req.psn => {
                Response::AtomicAck { psn, original }
            }
            _ => Response::None,
        },
        Operation::AtomicWrite => match found {
            Some(Resource::AtomicWrite { psn }) if psn == req.psn => Response::EmptyRead { psn },
            _ => Response::None,
        },
        Operation::Flush => match found {
            Some(Resource::Flush { psn }) if psn == req.psn => Response::EmptyRead { psn },
            _ => Response::None,
        },
        Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge => {
            Response::None
        }
    }
}

/// A successful receive completion owed after [`commit`] (the kernel adds the WQE id, immediate
/// data, invalidated key and source QP from the packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvSuccess {
    /// `byte_len`: the SEND's bytes (a UD SEND's include the GRH), or an RDMA WRITE with
    /// immediate's DMA length.
    pub byte_len: u32,
    /// An RDMA WRITE with immediate (`IB_WC_RECV_RDMA_WITH_IMM`) rather than a SEND
    /// (`IB_WC_RECV`).
    pub rdma_with_imm: bool,
}

/// What [`commit`] asks of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    /// Complete the held receive WQE successfully, when the packet ends a SEND or is an RDMA
    /// WRITE with immediate.
    pub recv: Option<RecvSuccess>,
    /// What to send back.
    pub response: Response,
}

/// Records a request the kernel executed: the packet passed every check and its data was placed,
/// its atomic ran (returning `atomic_original`, ignored for other operations), its R_Key was
/// invalidated. Advances the expected PSN by the PSNs the request took (one, or one per READ
/// response), counts a completed message in the MSN, moves the message cursor, and keeps READ,
/// atomic, ATOMIC WRITE and FLUSH requests in `cache` for replay.
///
/// RC answers an atomic with an atomic ACK, a READ with its responses, an ATOMIC WRITE or FLUSH
/// with an empty read response (rxe `acknowledge`), and a SEND or WRITE packet with an ACK when
/// it asks for one (AckReq) or ends its message. rxe answers only AckReq; the requester sets it on
/// every last packet (rxe `rxe_req`), and an ACK at the end of each message keeps a requester
/// that does not from waiting for its timeout.
pub fn commit<const N: usize>(
    state: &mut RespState,
    cache: &mut ResponderResources<N>,
    cfg: &RespConfig,
    req: &Request,
    atomic_original: u64,
) -> Commit {
    let info = req.info;
    let payload = req.payload_len;
    let reth = req.reth.unwrap_or_default();
    let psn_count = if info.is_read() {
        read_response_count(reth.dma_len, cfg.mtu)
    } else {
        1
    };
    state.expected_psn = req.psn.add(psn_count);
    if !info.is_read() {
        state.ack_psn = state.expected_psn;
    }
    state.gap = Gap::None;
    state.uc_dropping = false;
    if cfg.is_connected() {
        state.last_opcode = Some(info.opcode());
    }
    if info.ends_message() {
        state.msn = state.msn.next();
    }

    let mut recv = None;
    match info.operation() {
        Operation::Send => {
            let before = if !cfg.is_connected() {
                UD_GRH_LEN
            } else {
                match state.message {
                    Message::Send { placed } if !info.starts_message() => placed,
                    _ => 0,
                }
            };
            let placed = before.saturating_add(payload);
            if info.ends_message() {
                state.message = Message::Idle;
                recv = Some(RecvSuccess {
                    byte_len: placed,
                    rdma_with_imm: false,
                });
            } else {
                state.message = Message::Send { placed };
            }
        }
        Operation::RdmaWrite => {
            let (va, rkey, remaining, length) = match state.message {
                Message::Write {
                    va,
                    rkey,
                    remaining,
                    length,
                } if !info.starts_message() => (va, rkey, remaining, length),
                _ => (reth.va, reth.rkey, reth.dma_len, reth.dma_len),
            };
            if info.ends_message() {
                state.message = Message::Idle;
                if info.has_immediate() {
                    recv = Some(RecvSuccess {
                        byte_len: length,
                        rdma_with_imm: true,
                    });
                }
            } else {
                state.message = Message::Write {
                    va: va.wrapping_add(u64::from(payload)),
                    rkey,
                    remaining: remaining.saturating_sub(payload),
                    length,
                };
            }
        }
        Operation::RdmaReadRequest => cache.record(Resource::Read {
            first_psn: req.psn,
            last_psn: req.psn.add(psn_count - 1),
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
        }),
        Operation::CompareSwap | Operation::FetchAdd => cache.record(Resource::Atomic {
            psn: req.psn,
            original: atomic_original,
        }),
        Operation::AtomicWrite => cache.record(Resource::AtomicWrite { psn: req.psn }),
        Operation::Flush => cache.record(Resource::Flush { psn: req.psn }),
        Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge => {}
    }

    let response = if !cfg.is_rc() {
        Response::None
    } else {
        match info.operation() {
            Operation::RdmaReadRequest => Response::Read(ReadReply {
                first_psn: req.psn,
                va: reth.va,
                rkey: reth.rkey,
                len: reth.dma_len,
                resumes: false,
            }),
            Operation::CompareSwap | Operation::FetchAdd => Response::AtomicAck {
                psn: req.psn,
                original: atomic_original,
            },
            Operation::AtomicWrite | Operation::Flush => Response::EmptyRead { psn: req.psn },
            _ if req.ack_req || info.ends_message() => Response::Ack { psn: req.psn },
            _ => Response::None,
        }
    };
    Commit { recv, response }
}

/// Why the responder refused a request. [`error_action`] maps each to what happens; the error
/// classes (A to J) are the IBA's, as rxe's responder names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RespError {
    /// Not a request of the QP's transport. Dropped on every type (rxe drops these before the
    /// responder, in `check_type_state`).
    WrongTransport,
    /// A MIDDLE or LAST without its FIRST. RC: class C, NAK Invalid Request; UC: the message is
    /// dropped.
    MissingFirst,
    /// A packet that does not continue the message in progress. RC: class C, NAK Invalid
    /// Request; UC: the partial message is abandoned (class D1).
    MissingLast,
    /// The QP's access flags do not allow the operation. RC: NAK Invalid Request (rxe
    /// `check_op_valid`); UC: the WRITE is dropped.
    OperationNotAllowed,
    /// A READ, atomic, ATOMIC WRITE or FLUSH while `max_dest_rd_atomic` is 0: NAK Invalid
    /// Request.
    NoRdAtomicResources,
    /// No receive WQE posted. RC: RNR NAK (class B); UC, UD: dropped (class D).
    ReceiverNotReady,
    /// The kernel could not use the receive WQE it took (too many SGEs, ...). Class A: NAK
    /// Remote Operational Error, `IB_WC_LOC_QP_OP_ERR`, QP to error.
    MalformedRecvWqe,
    /// Placing SEND data hit an L_Key of the receive WQE that is invalid or lacks local write.
    /// Class A: NAK Remote Operational Error, `IB_WC_LOC_PROT_ERR` (rxe reports
    /// `IB_WC_LOC_QP_OP_ERR` for every such copy failure), QP to error.
    RecvProtection,
    /// The payload does not fit the packet's place in the message, the MTU or the RDMA length.
    /// RC: class C, NAK Invalid Request; UC: dropped.
    Length,
    /// A RETH DMA length above [`MAX_DMA_LEN`]. As [`RespError::Length`].
    DmaLengthTooLong,
    /// The SEND is longer than the receive WQE's buffers. RC: NAK Invalid Request and the
    /// receive completes with `IB_WC_LOC_LEN_ERR` (what verbs define for a receive buffer too
    /// small; rxe reports `IB_WC_REM_INV_REQ_ERR`); UC, UD: dropped.
    RecvBufferTooSmall,
    /// R_Key violation: unknown or stale key, other PD, invalid, missing right, out of range
    /// (IBA 9.7.5.2.4). RC: class C, NAK Remote Access Error, QP to error; UC: dropped.
    RemoteAccess,
    /// An atomic or ATOMIC WRITE address that is not 8-byte aligned: NAK Invalid Request.
    MisalignedAtomic,
    /// A SEND with invalidate whose R_Key could not be invalidated. rxe's class J: the message
    /// is acknowledged, the receive completes with `IB_WC_REM_INV_REQ_ERR`, QP to error.
    InvalidateFailed,
    /// The receive CQ overflowed (class G): QP to error, nothing sent.
    CqOverflow,
}

impl RespError {
    /// A short name for logs and counter labels.
    pub const fn name(self) -> &'static str {
        match self {
            RespError::WrongTransport => "wrong_transport",
            RespError::MissingFirst => "missing_first",
            RespError::MissingLast => "missing_last",
            RespError::OperationNotAllowed => "operation_not_allowed",
            RespError::NoRdAtomicResources => "no_rd_atomic_resources",
            RespError::ReceiverNotReady => "receiver_not_ready",
            RespError::MalformedRecvWqe => "malformed_recv_wqe",
            RespError::RecvProtection => "recv_protection",
            RespError::Length => "length",
            RespError::DmaLengthTooLong => "dma_length_too_long",
            RespError::RecvBufferTooSmall => "recv_buffer_too_small",
            RespError::RemoteAccess => "remote_access",
            RespError::MisalignedAtomic => "misaligned_atomic",
            RespError::InvalidateFailed => "invalidate_failed",
            RespError::CqOverflow => "cq_overflow",
        }
    }
}

/// A completion status of a receive WQE ended by an error: the values of `enum ib_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(clippy::enum_variant_names)] // The names of `enum ib_wc_status`.
pub enum RecvStatus {
    /// `IB_WC_LOC_LEN_ERR`: the message was longer than the receive buffers.
    LocLenErr = 1,
    /// `IB_WC_LOC_QP_OP_ERR`: the receive WQE could not be used.
    LocQpOpErr = 2,
    /// `IB_WC_LOC_PROT_ERR`: the receive buffers failed their L_Key check.
    LocProtErr = 4,
    /// `IB_WC_REM_INV_REQ_ERR`: the request that consumed the WQE was invalid.
    RemInvReqErr = 9,
    /// `IB_WC_REM_ACCESS_ERR`: the request that consumed the WQE violated an R_Key.
    RemAccessErr = 10,
}

impl RecvStatus {
    /// The `enum ib_wc_status` value.
    pub const fn wc_status(self) -> u32 {
        self as u32
    }
}

/// What becomes of a receive WQE the kernel holds for the failed message (nothing, when it holds
/// none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvWqeFate {
    /// Keep it for the next message: a dropped UC or UD message consumes no receive WQE.
    Keep,
    /// Complete it with this status.
    Complete(RecvStatus),
}

/// What the kernel does about a [`RespError`], from [`error_action`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorAction {
    /// RC: the syndrome of the ACKNOWLEDGE to send, with [`RespState::aeth`] and the failed
    /// packet's PSN. `None`: send nothing.
    pub reply: Option<Syndrome>,
    /// What to do with a held receive WQE.
    pub recv_wqe: RecvWqeFate,
    /// Move the QP to the error state (after the reply and the completion), which flushes the
    /// rest of the receive queue.
    pub qp_error: bool,
    /// Raise `IB_EVENT_QP_ACCESS_ERR`, unless a receive WQE is held and completed with the error
    /// instead (rxe cites C9-222.1: the event is for errors no receive completion reports).
    pub qp_access_event: bool,
}

impl ErrorAction {
    /// Drop the packet and carry on.
    const DROP: ErrorAction = ErrorAction {
        reply: None,
        recv_wqe: RecvWqeFate::Keep,
        qp_error: false,
        qp_access_event: false,
    };

    /// An error that moves the QP to the error state: NAK (on RC) and complete a held WQE.
    const fn fatal(rc: bool, nak: NakCode, status: RecvStatus) -> ErrorAction {
        ErrorAction {
            reply: if rc { Some(Syndrome::Nak(nak)) } else { None },
            recv_wqe: RecvWqeFate::Complete(status),
            qp_error: true,
            qp_access_event: false,
        }
    }
}

/// What the kernel does about `err` on a QP configured as `cfg` (rxe: the error states of
/// `rxe_receiver`). A pure mapping; [`RespState::fail`] also updates the state.
///
/// RC reports request errors to the requester with a NAK and moves the QP to the error state
/// (class C: Invalid Request or Remote Access Error), except an RNR, which only asks for a retry
/// (class B). Local errors (class A) move every QP type to the error state. UC and UD drop a bad
/// message and keep the receive WQE for the next one.
pub const fn error_action(cfg: &RespConfig, err: RespError) -> ErrorAction {
    let rc = cfg.is_rc();
    match err {
        RespError::WrongTransport => ErrorAction::DROP,
        RespError::CqOverflow => ErrorAction {
            reply: None,
            recv_wqe: RecvWqeFate::Keep,
            qp_error: true,
            qp_access_event: false,
        },
        RespError::MalformedRecvWqe => {
            ErrorAction::fatal(rc, NakCode::RemoteOperationalError, RecvStatus::LocQpOpErr)
        }
        RespError::RecvProtection => {
            ErrorAction::fatal(rc, NakCode::RemoteOperationalError, RecvStatus::LocProtErr)
        }
        RespError::ReceiverNotReady if rc => ErrorAction {
            reply: Some(Syndrome::RnrNak {
                timer: cfg.min_rnr_timer & 0x1f,
            }),
            recv_wqe: RecvWqeFate::Keep,
            qp_error: false,
            qp_access_event: false,
        },
        RespError::InvalidateFailed => ErrorAction {
            reply: if rc { Some(ack_syndrome()) } else { None },
            recv_wqe: RecvWqeFate::Complete(RecvStatus::RemInvReqErr),
            qp_error: true,
            qp_access_event: false,
        },
        RespError::RemoteAccess if rc => ErrorAction {
            reply: Some(Syndrome::Nak(NakCode::RemoteAccessError)),
            recv_wqe: RecvWqeFate::Complete(RecvStatus::RemAccessErr),
            qp_error: true,
            qp_access_event: true,
        },
        RespError::RecvBufferTooSmall if rc => {
            ErrorAction::fatal(true, NakCode::InvalidRequest, RecvStatus::LocLenErr)
        }
        RespError::MissingFirst
        | RespError::MissingLast
        | RespError::OperationNotAllowed
        | RespError::NoRdAtomicResources
        | RespError::Length
        | RespError::DmaLengthTooLong
        | RespError::MisalignedAtomic
            if rc =>
        {
            ErrorAction::fatal(true, NakCode::InvalidRequest, RecvStatus::RemInvReqErr)
        }
        _ => ErrorAction::DROP,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn reply(psn: u32, len: u32) -> ReadReply {
        ReadReply {
            first_psn: Psn::new(psn),
            va: 0x1000,
            rkey: 7,
            len,
            resumes: false,
        }
    }

    #[test]
    fn read_stream_new_read_is_due_at_once() {
        let mut s = ReadStream::default();
        assert!(!s.active());
        s.start(reply(10, 1 << 20));
        assert!(s.active() && s.due(0));
        let b = s.take_burst().unwrap();
        assert_eq!(b.reply, reply(10, 1 << 20));
        // Nobody else builds while the burst is out, and later requests wait behind it.
        assert!(s.take_burst().is_none() && !s.due(u64::MAX) && s.active());
        let rest = b.reply.rest_after(IbMtu::Mtu1024, READ_REPLY_BURST);
        s.finish_burst(b.generation, rest, 1000, 0);
        assert!(s.active() && s.take_burst().is_none());
        s.sent();
        assert!(!s.due(1000 + READ_REPLY_INTERVAL_MS - 1));
        assert!(s.due(1000 + READ_REPLY_INTERVAL_MS));
        assert_eq!(s.take_burst().unwrap().reply, rest.unwrap());
    }

    const MIB_RESPONSES: u32 = (1 << 20) / 1024;

    #[test]
    fn read_stream_replays_are_paced_not_multiplied() {
        let mut s = ReadStream::default();
        s.start(reply(10, 1 << 20));
        let b = s.take_burst().unwrap();
        s.finish_burst(
            b.generation,
            b.reply.rest_after(IbMtu::Mtu1024, READ_REPLY_BURST),
            1000,
            0,
        );
        s.sent();
        // The first replay of the window goes at once: the budget covers one burst.
        assert!(s.replay(reply(10, 1 << 20), MIB_RESPONSES, 1000));
        let b = s.take_burst().unwrap();
        s.finish_burst(
            b.generation,
            b.reply.rest_after(IbMtu::Mtu1024, READ_REPLY_BURST),
            1000,
            0,
        );
        s.sent();
        // A flood of duplicates within the window: none goes, and none displaces the first
        // one held back.
        assert!(!s.replay(reply(10, 1 << 20), MIB_RESPONSES, 1001));
        for t in 1001..1000 + READ_REPLY_INTERVAL_MS {
            assert!(!s.replay(reply(20, 4096), 4, t));
            assert!(!s.due(t));
        }
        let end = 1000 + READ_REPLY_INTERVAL_MS;
        assert!(s.due(end));
        assert_eq!(s.take_burst().map(|b| b.reply), Some(reply(10, 1 << 20)));
        s.finish_burst(s.generation, None, end, 0);
        s.sent();
        assert!(!s.active());
        // A new window: a replay of a finished reply goes at once again.
        assert!(s.replay(reply(10, 1 << 20), MIB_RESPONSES, end));
    }

    #[test]
    fn read_stream_replays_of_many_reads_go_at_once() {
        // A requester that lost responses asks again for each READ it has outstanding: 16
        // READs of 16 responses fit in one window's budget and are all answered at once.
        let mut s = ReadStream::default();
        for i in 0..16u32 {
            let r = reply(100 + 16 * i, 16 * 1024);
            assert!(s.replay(r, r.responses(IbMtu::Mtu1024), 5000), "replay {i}");
            let b = s.take_burst().unwrap();
            assert_eq!(b.reply, r);
            s.finish_burst(
                b.generation,
                b.reply.rest_after(IbMtu::Mtu1024, READ_REPLY_BURST),
                5000,
                0,
            );
            s.sent();
            assert!(!s.active());
        }
        // The budget is spent: the next one is held for the next window.
        let r = reply(400, 16 * 1024);
        assert!(!s.replay(r, 16, 5001));
        assert!(s.active() && !s.due(5001) && s.due(5000 + READ_REPLY_INTERVAL_MS));
        // A new READ's first burst does not hold back a replay after it.
        let mut s = ReadStream::default();
        s.start(reply(10, 4096));
        let b = s.take_burst().unwrap();
        s.finish_burst(b.generation, None, 7000, 0);
        s.sent();
        assert!(s.replay(reply(10, 4096), 4, 7001));
    }

    #[test]
    fn read_reply_responses() {
        assert_eq!(reply(0, 0).responses(IbMtu::Mtu1024), 1);
        assert_eq!(reply(0, 1).responses(IbMtu::Mtu1024), 1);
        assert_eq!(reply(0, 1024).responses(IbMtu::Mtu1024), 1);
        assert_eq!(reply(0, 1025).responses(IbMtu::Mtu1024), 2);
        assert_eq!(
            reply(0, u32::MAX).responses(IbMtu::Mtu256),
            u32::MAX.div_ceil(256)
        );
        let r = reply(0, 300_000);
        assert_eq!(
            r.responses(IbMtu::Mtu4096) as usize,
            r.packets(IbMtu::Mtu4096).count()
        );
    }

    #[test]
    fn read_stream_slow_bursts_space_out() {
        let mut s = ReadStream::default();
        s.start(reply(10, 1 << 20));
        let b = s.take_burst().unwrap();
        // A burst that took 100 ms to build: the next one waits four times as long, and so
        // does the replay window that starts after it.
        s.finish_burst(
            b.generation,
            b.reply.rest_after(IbMtu::Mtu1024, READ_REPLY_BURST),
            1000,
            100,
        );
        s.sent();
        assert!(!s.due(1000 + READ_REPLY_INTERVAL_MS));
        assert!(s.due(1400));
        assert!(s.replay(reply(10, 1 << 20), MIB_RESPONSES, 1400));
        let b = s.take_burst().unwrap();
        s.finish_burst(
            b.generation,
            b.reply.rest_after(IbMtu::Mtu1024, READ_REPLY_BURST),
            1400,
            100,
        );
        s.sent();
        assert!(!s.replay(reply(10, 1 << 20), MIB_RESPONSES, 1401));
        assert!(!s.due(1799) && s.due(1800));
    }

    #[test]
    fn read_stream_replay_during_a_burst_keeps_its_place() {
        let mut s = ReadStream::default();
        s.start(reply(10, 1 << 20));
        let b = s.take_burst().unwrap();
        // A replay arrives while the burst is being built: not due (busy), and the burst's
        // rest does not overwrite it.
        assert!(!s.replay(reply(300, 4096), 4, 0));
        s.finish_burst(
            b.generation,
            b.reply.rest_after(IbMtu::Mtu1024, READ_REPLY_BURST),
            5,
            0,
        );
        s.sent();
        assert_eq!(s.take_burst().map(|b| b.reply), Some(reply(300, 4096)));
        // A clear (RESET) while a burst is out: nothing is left afterwards.
        let mut s = ReadStream::default();
        s.start(reply(10, 1 << 20));
        let b = s.take_burst().unwrap();
        s.clear();
        s.finish_burst(
            b.generation,
            b.reply.rest_after(IbMtu::Mtu1024, READ_REPLY_BURST),
            5,
            0,
        );
        s.sent();
        assert!(!s.active());
    }

    fn odp_cfg(qp_type: QpType) -> RespConfig {
        RespConfig {
            qp_type,
            access_flags: 0,
            mtu: IbMtu::Mtu1024,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 0x2c,
        }
    }

    #[test]
    fn page_fault_on_rc_rnr_naks_and_keeps_the_message() {
        let cfg = odp_cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(7));
        let before = st;
        // The timer is the five-bit code.
        assert_eq!(
            st.page_fault(&cfg),
            PageFaultAction::Reply(Syndrome::RnrNak { timer: 0x0c })
        );
        // Nothing consumed: same expected PSN, MSN, message and opcode sequence.
        assert_eq!(st.expected_psn(), before.expected_psn());
        assert_eq!(st.msn(), before.msn());
        assert_eq!(st.message(), before.message());
        assert_eq!(st.last_opcode, before.last_opcode);
        // Packets behind it are dropped, not sequence-NAKed again.
        let info = Opcode::RC_SEND_MIDDLE.info().unwrap();
        assert_eq!(
            check_psn(&mut st, &cfg, &Request::new(info, Psn::new(8), 1024)),
            PsnVerdict::Drop
        );
        // The resend of the missed PSN goes on.
        let info = Opcode::RC_SEND_ONLY.info().unwrap();
        assert_eq!(
            check_psn(&mut st, &cfg, &Request::new(info, Psn::new(7), 8)),
            PsnVerdict::Expected
        );
    }

    #[test]
    fn page_fault_on_datagrams_redelivers_and_uc_drops() {
        for t in [QpType::Ud, QpType::Gsi] {
            let mut st = RespState::new(Psn::new(0));
            let before = st;
            assert_eq!(st.page_fault(&odp_cfg(t)), PageFaultAction::Redeliver);
            assert_eq!(st, before);
        }
        let mut st = RespState::new(Psn::new(3));
        let before = st;
        assert_eq!(st.page_fault(&odp_cfg(QpType::Uc)), PageFaultAction::Drop);
        assert_eq!(st, before);
    }

    #[test]
    fn read_reply_continues_after_a_burst() {
        let reply = ReadReply {
            first_psn: Psn::new(0xff_fffe),
            va: 0x1000,
            rkey: 9,
            len: 5 * 256 + 3,
            resumes: false,
        };
        let all: Vec<_> = reply.packets(IbMtu::Mtu256).collect();
        assert_eq!(all.len(), 6);
        // The rest after 2 responses is the same stream from the third on.
        let rest = reply.rest_after(IbMtu::Mtu256, 2).unwrap();
        assert_eq!(
            rest,
            ReadReply {
                first_psn: Psn::new(0),
                va: 0x1200,
                rkey: 9,
                len: 3 * 256 + 3,
                resumes: true
            }
        );
        let tail: Vec<_> = rest.packets(IbMtu::Mtu256).collect();
        for (a, b) in all[2..].iter().zip(&tail) {
            assert_eq!(
                (a.opcode, a.psn, a.len, a.has_aeth),
                (b.opcode, b.psn, b.len, b.has_aeth)
            );
            assert_eq!(a.offset, b.offset + 0x200);
        }
        assert_eq!(tail.len(), 4);
        assert_eq!(reply.rest_after(IbMtu::Mtu256, 6), None);
        assert_eq!(
            ReadReply { len: 0, ..reply }.rest_after(IbMtu::Mtu256, 1),
            None
        );
        // A last response alone.
        let last = reply.rest_after(IbMtu::Mtu256, 5).unwrap();
        let only: Vec<_> = last.packets(IbMtu::Mtu256).collect();
        assert_eq!(
            (only.len(), only[0].opcode, only[0].len),
            (1, Opcode::RC_RDMA_READ_RESPONSE_LAST, 3)
        );
    }

    const ALL_ACCESS: u32 = qp_access::REMOTE_WRITE
        | qp_access::REMOTE_READ
        | qp_access::REMOTE_ATOMIC
        | qp_access::FLUSH_GLOBAL
        | qp_access::FLUSH_PERSISTENT;

    fn cfg(qp_type: QpType) -> RespConfig {
        RespConfig {
            qp_type,
            access_flags: ALL_ACCESS,
            mtu: IbMtu::Mtu256,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 12,
        }
    }

    fn req(op: Opcode, psn: u32, len: u32) -> Request {
        Request::new(op.info().unwrap(), Psn::new(psn), len)
    }

    fn with_reth(mut r: Request, va: u64, rkey: u32, dma_len: u32) -> Request {
        r.reth = Some(Reth { va, rkey, dma_len });
        r
    }

    type Cache = ResponderResources<4>;

    /// Runs the whole chain as the kernel would, with a receive WQE of `recv_len` bytes always
    /// available and every key valid; returns the commit or the error.
    fn run(
        st: &mut RespState,
        cache: &mut Cache,
        c: &RespConfig,
        r: &Request,
    ) -> Result<Commit, RespError> {
        assert!(check_psn(st, c, r).proceeds());
        check_opcode(st, c, r)?;
        check_op_allowed(c, r)?;
        check_resource(c, r, true)?;
        check_length(st, c, r, 4096)?;
        Ok(commit(st, cache, c, r, 0))
    }

    #[test]
    fn rc_psn_verdicts_and_one_nak_per_gap() {
        let c = cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(100));
        let send = |psn| req(Opcode::RC_SEND_ONLY, psn, 8);
        assert_eq!(check_psn(&mut st, &c, &send(99)), PsnVerdict::Duplicate);
        assert_eq!(
            check_psn(&mut st, &c, &send(102)),
            PsnVerdict::SequenceNak {
                expected: Psn::new(100)
            }
        );
        assert_eq!(check_psn(&mut st, &c, &send(103)), PsnVerdict::Drop);
        assert_eq!(check_psn(&mut st, &c, &send(99)), PsnVerdict::Duplicate);
        assert_eq!(check_psn(&mut st, &c, &send(100)), PsnVerdict::Expected);
        // The gap is filled: a new one is NAKed again.
        assert_eq!(
            check_psn(&mut st, &c, &send(105)),
            PsnVerdict::SequenceNak {
                expected: Psn::new(100)
            }
        );
        // The expected PSN moves in commit only.
        assert_eq!(st.expected_psn(), Psn::new(100));
    }

    #[test]
    fn psn_compare_wraps() {
        let c = cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(Psn::MASK));
        assert_eq!(
            check_psn(&mut st, &c, &req(Opcode::RC_SEND_ONLY, 1, 0)),
            PsnVerdict::SequenceNak {
                expected: Psn::new(Psn::MASK)
            }
        );
        assert_eq!(
            check_psn(&mut st, &c, &req(Opcode::RC_SEND_ONLY, Psn::MASK - 1, 0)),
            PsnVerdict::Duplicate
        );
        let mut cache = Cache::new(4);
        run(
            &mut st,
            &mut cache,
            &c,
            &req(Opcode::RC_SEND_ONLY, Psn::MASK, 0),
        )
        .unwrap();
        assert_eq!(st.expected_psn(), Psn::new(0));
    }

    #[test]
    fn rnr_nak_silences_the_gap_and_keeps_the_write_cursor() {
        let c = cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(0));
        let mut cache = Cache::new(4);
        let first = with_reth(req(Opcode::RC_RDMA_WRITE_FIRST, 0, 256), 0x1000, 7, 300);
        run(&mut st, &mut cache, &c, &first).unwrap();
        let last = req(Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 1, 44);
        assert_eq!(check_psn(&mut st, &c, &last), PsnVerdict::Expected);
        check_opcode(&mut st, &c, &last).unwrap();
        let e = check_resource(&c, &last, false).unwrap_err();
        assert_eq!(e, RespError::ReceiverNotReady);
        let a = st.fail(&c, e);
        assert_eq!(a.reply, Some(Syndrome::RnrNak { timer: 12 }));
        assert!(!a.qp_error);
        // Packets behind the refused one: no sequence NAK.
        assert_eq!(
            check_psn(&mut st, &c, &req(Opcode::RC_SEND_ONLY, 2, 0)),
            PsnVerdict::Drop
        );
        // The retry continues the write where it was.
        let done = run(&mut st, &mut cache, &c, &last).unwrap();
        assert_eq!(
            done.recv,
            Some(RecvSuccess {
                byte_len: 300,
                rdma_with_imm: true
            })
        );
        assert_eq!(done.response, Response::Ack { psn: Psn::new(1) });
        assert_eq!(st.msn(), Msn::new(1));
    }

    #[test]
    fn uc_resyncs_on_a_gap() {
        let c = cfg(QpType::Uc);
        let mut st = RespState::new(Psn::new(10));
        let mut cache = Cache::new(0);
        run(
            &mut st,
            &mut cache,
            &c,
            &req(Opcode::UC_SEND_FIRST, 10, 256),
        )
        .unwrap();
        assert_eq!(st.message(), Message::Send { placed: 256 });
        // PSN 11 lost: the MIDDLE at 12 is dropped with the partial message.
        assert_eq!(
            check_psn(&mut st, &c, &req(Opcode::UC_SEND_MIDDLE, 12, 256)),
            PsnVerdict::Drop
        );
        assert_eq!(st.message(), Message::Idle);
        assert_eq!(
            check_psn(&mut st, &c, &req(Opcode::UC_SEND_LAST, 13, 1)),
            PsnVerdict::Drop
        );
        // A new message starts from its own PSN.
        let only = req(Opcode::UC_SEND_ONLY, 20, 5);
        assert_eq!(check_psn(&mut st, &c, &only), PsnVerdict::Resync);
        check_opcode(&mut st, &c, &only).unwrap();
        let done = commit(&mut st, &mut cache, &c, &only, 0);
        assert_eq!(
            done.recv,
            Some(RecvSuccess {
                byte_len: 5,
                rdma_with_imm: false
            })
        );
        assert_eq!(done.response, Response::None);
        assert_eq!(st.expected_psn(), Psn::new(21));
        // Same PSN, but the sequence lost its LAST: the new FIRST is accepted, the old message
        // abandoned.
        run(
            &mut st,
            &mut cache,
            &c,
            &req(Opcode::UC_SEND_FIRST, 21, 256),
        )
        .unwrap();
        run(
            &mut st,
            &mut cache,
            &c,
            &req(Opcode::UC_SEND_FIRST, 22, 256),
        )
        .unwrap();
        assert_eq!(st.message(), Message::Send { placed: 256 });
    }

    #[test]
    fn uc_errors_drop_the_rest_of_the_message() {
        let mut c = cfg(QpType::Uc);
        c.access_flags = 0;
        let mut st = RespState::new(Psn::new(0));
        let first = with_reth(req(Opcode::UC_RDMA_WRITE_FIRST, 0, 256), 0, 1, 600);
        assert!(check_psn(&mut st, &c, &first).proceeds());
        check_opcode(&mut st, &c, &first).unwrap();
        let e = check_op_allowed(&c, &first).unwrap_err();
        assert_eq!(st.fail(&c, e), ErrorAction::DROP);
        // The expected PSN did not move and the MIDDLE is dropped; the next SEND is fine.
        assert_eq!(
            check_psn(&mut st, &c, &req(Opcode::UC_RDMA_WRITE_MIDDLE, 1, 256)),
            PsnVerdict::Drop
        );
        assert_eq!(
            check_psn(&mut st, &c, &req(Opcode::UC_SEND_ONLY, 3, 1)),
            PsnVerdict::Resync
        );
    }

    #[test]
    fn opcode_must_fit_the_qp() {
        let mut st = RespState::new(Psn::new(0));
        let rc_send = req(Opcode::RC_SEND_ONLY, 0, 0);
        assert_eq!(
            check_opcode(&mut st, &cfg(QpType::Uc), &rc_send),
            Err(RespError::WrongTransport)
        );
        assert_eq!(
            check_psn(&mut st, &cfg(QpType::Uc), &rc_send),
            PsnVerdict::Drop
        );
        let ud = cfg(QpType::Gsi);
        assert_eq!(
            check_opcode(&mut st, &ud, &req(Opcode::UD_SEND_ONLY, 0, 0)),
            Ok(())
        );
        assert_eq!(
            check_opcode(&mut st, &ud, &req(Opcode::UC_SEND_ONLY, 0, 0)),
            Err(RespError::WrongTransport)
        );
        let ack = req(Opcode::RC_ACKNOWLEDGE, 0, 0);
        assert_eq!(
            check_opcode(&mut st, &cfg(QpType::Rc), &ack),
            Err(RespError::WrongTransport)
        );
        assert_eq!(
            check_opcode(
                &mut st,
                &cfg(QpType::Rc),
                &req(Opcode::RC_SEND_MIDDLE, 0, 256)
            ),
            Err(RespError::MissingFirst)
        );
        let a = st.fail(&cfg(QpType::Rc), RespError::MissingFirst);
        assert_eq!(a.reply, Some(Syndrome::Nak(NakCode::InvalidRequest)));
        assert_eq!(a.recv_wqe, RecvWqeFate::Complete(RecvStatus::RemInvReqErr));
        assert!(a.qp_error);
    }

    #[test]
    fn access_flags_gate_rdma() {
        let mut c = cfg(QpType::Rc);
        c.access_flags = qp_access::REMOTE_READ;
        let read = req(Opcode::RC_RDMA_READ_REQUEST, 0, 0);
        assert_eq!(check_op_allowed(&c, &read), Ok(()));
        let write = req(Opcode::RC_RDMA_WRITE_ONLY, 0, 0);
        assert_eq!(
            check_op_allowed(&c, &write),
            Err(RespError::OperationNotAllowed)
        );
        assert_eq!(
            check_op_allowed(&c, &req(Opcode::RC_ATOMIC_WRITE, 0, 8)),
            Err(RespError::OperationNotAllowed)
        );
        assert_eq!(
            check_op_allowed(&c, &req(Opcode::RC_FETCH_ADD, 0, 0)),
            Err(RespError::OperationNotAllowed)
        );
        assert_eq!(
            check_op_allowed(&c, &req(Opcode::RC_SEND_ONLY, 0, 0)),
            Ok(())
        );
        let mut flush = req(Opcode::RC_FLUSH, 0, 0);
        flush.feth = Some(Feth {
            selectivity_level: 0,
            placement_type: Feth::PLACEMENT_PERSISTENT,
        });
        assert_eq!(
            check_op_allowed(&c, &flush),
            Err(RespError::OperationNotAllowed)
        );
        c.access_flags |= qp_access::FLUSH_PERSISTENT;
        assert_eq!(check_op_allowed(&c, &flush), Ok(()));
        let a = error_action(&c, RespError::OperationNotAllowed);
        assert_eq!(a.reply, Some(Syndrome::Nak(NakCode::InvalidRequest)));
    }

    #[test]
    fn resources() {
        let mut c = cfg(QpType::Rc);
        c.max_dest_rd_atomic = 0;
        let read = req(Opcode::RC_RDMA_READ_REQUEST, 0, 0);
        assert_eq!(
            check_resource(&c, &read, true),
            Err(RespError::NoRdAtomicResources)
        );
        assert_eq!(
            check_resource(&c, &req(Opcode::RC_SEND_MIDDLE, 0, 256), false),
            Ok(())
        );
        assert_eq!(
            check_resource(&c, &req(Opcode::RC_SEND_FIRST, 0, 256), false),
            Err(RespError::ReceiverNotReady)
        );
        let ud = cfg(QpType::Ud);
        assert_eq!(
            check_resource(&ud, &req(Opcode::UD_SEND_ONLY, 0, 1), false),
            Err(RespError::ReceiverNotReady)
        );
        let mut st = RespState::new(Psn::new(0));
        assert_eq!(st.fail(&ud, RespError::ReceiverNotReady), ErrorAction::DROP);
    }

    #[test]
    fn packet_lengths_follow_the_mtu() {
        let c = cfg(QpType::Rc);
        let st = RespState::new(Psn::new(0));
        let len = |op: Opcode, n| check_length(&st, &c, &req(op, 0, n), 1 << 20);
        assert_eq!(
            len(Opcode::RC_SEND_ONLY, 256),
            Ok(Placement::Recv { offset: 0 })
        );
        assert_eq!(
            len(Opcode::RC_SEND_ONLY, 0),
            Ok(Placement::Recv { offset: 0 })
        );
        assert_eq!(len(Opcode::RC_SEND_ONLY, 257), Err(RespError::Length));
        assert_eq!(len(Opcode::RC_SEND_FIRST, 255), Err(RespError::Length));
        assert_eq!(
            len(Opcode::RC_SEND_FIRST, 256),
            Ok(Placement::Recv { offset: 0 })
        );
        let mut sending = st;
        sending.message = Message::Send { placed: 512 };
        let mid = check_length(&sending, &c, &req(Opcode::RC_SEND_MIDDLE, 0, 256), 1 << 20);
        assert_eq!(mid, Ok(Placement::Recv { offset: 512 }));
        let last = |n| check_length(&sending, &c, &req(Opcode::RC_SEND_LAST, 0, n), 600);
        assert_eq!(last(0), Err(RespError::Length));
        assert_eq!(last(88), Ok(Placement::Recv { offset: 512 }));
        assert_eq!(last(89), Err(RespError::RecvBufferTooSmall));
        let a = error_action(&c, RespError::RecvBufferTooSmall);
        assert_eq!(a.reply, Some(Syndrome::Nak(NakCode::InvalidRequest)));
        assert_eq!(a.recv_wqe, RecvWqeFate::Complete(RecvStatus::LocLenErr));
        assert_eq!(RecvStatus::LocLenErr.wc_status(), 1);
        // UD: the GRH comes first; no MTU rule.
        let ud = cfg(QpType::Ud);
        let u = req(Opcode::UD_SEND_ONLY, 0, 100);
        assert_eq!(
            check_length(&st, &ud, &u, 140),
            Ok(Placement::Recv { offset: UD_GRH_LEN })
        );
        assert_eq!(
            check_length(&st, &ud, &u, 139),
            Err(RespError::RecvBufferTooSmall)
        );
        assert_eq!(
            error_action(&ud, RespError::RecvBufferTooSmall),
            ErrorAction::DROP
        );
    }

    #[test]
    fn write_lengths_must_add_up() {
        let c = cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(0));
        let mut cache = Cache::new(4);
        let first = with_reth(req(Opcode::RC_RDMA_WRITE_FIRST, 0, 256), 0x1000, 9, 512);
        assert_eq!(
            check_length(&st, &c, &first, 0),
            Ok(Placement::Remote(RemoteAccess {
                rkey: 9,
                va: 0x1000,
                len: 512,
                needed: Access::REMOTE_WRITE,
                whole_region: false,
                atomic: false
            }))
        );
        run(&mut st, &mut cache, &c, &first).unwrap();
        // 256 bytes remain: a MIDDLE would leave nothing for the LAST.
        assert_eq!(
            check_length(&st, &c, &req(Opcode::RC_RDMA_WRITE_MIDDLE, 1, 256), 0),
            Err(RespError::Length)
        );
        assert_eq!(
            check_length(&st, &c, &req(Opcode::RC_RDMA_WRITE_LAST, 1, 200), 0),
            Err(RespError::Length)
        );
        let last = req(Opcode::RC_RDMA_WRITE_LAST, 1, 256);
        match check_length(&st, &c, &last, 0) {
            Ok(Placement::Remote(a)) => assert_eq!((a.va, a.len, a.rkey), (0x1100, 256, 9)),
            other => panic!("{other:?}"),
        }
        let mut badpad = last;
        badpad.pad = 1;
        assert_eq!(check_length(&st, &c, &badpad, 0), Err(RespError::Length));
        let done = run(&mut st, &mut cache, &c, &last).unwrap();
        assert_eq!(
            done,
            Commit {
                recv: None,
                response: Response::Ack { psn: Psn::new(1) }
            }
        );
        // Zero-length writes name no memory (C9-88).
        let empty = with_reth(req(Opcode::RC_RDMA_WRITE_ONLY, 2, 0), 0xdead, 0, 0);
        assert_eq!(check_length(&st, &c, &empty, 0), Ok(Placement::Nothing));
        let huge = with_reth(
            req(Opcode::RC_RDMA_WRITE_FIRST, 2, 256),
            0,
            0,
            MAX_DMA_LEN + 1,
        );
        assert_eq!(
            check_length(&st, &c, &huge, 0),
            Err(RespError::DmaLengthTooLong)
        );
    }

    #[test]
    fn atomic_write_is_exactly_eight_bytes() {
        let c = cfg(QpType::Rc);
        let st = RespState::new(Psn::new(0));
        let aw = with_reth(req(Opcode::RC_ATOMIC_WRITE, 0, 8), 0x40, 1, 8);
        assert!(matches!(
            check_length(&st, &c, &aw, 0),
            Ok(Placement::Remote(RemoteAccess { atomic: true, .. }))
        ));
        let short = with_reth(req(Opcode::RC_ATOMIC_WRITE, 0, 4), 0x40, 1, 8);
        assert_eq!(check_length(&st, &c, &short, 0), Err(RespError::Length));
        let long = with_reth(req(Opcode::RC_ATOMIC_WRITE, 0, 8), 0x40, 1, 16);
        assert_eq!(check_length(&st, &c, &long, 0), Err(RespError::Length));
    }

    fn mr(key: u32, start: u64, length: u64, access: Access) -> KeyTarget {
        KeyTarget {
            key,
            same_pd: true,
            valid: true,
            qp_matches: true,
            access,
            bounds: KeyBounds::Range { start, length },
        }
    }

    #[test]
    fn rkey_checks() {
        let acc = RemoteAccess {
            rkey: 0x105,
            va: 0x1000,
            len: 0x100,
            needed: Access::REMOTE_WRITE,
            whole_region: false,
            atomic: false,
        };
        let good = mr(
            0x105,
            0x1000,
            0x100,
            Access::REMOTE_WRITE.union(Access::LOCAL_WRITE),
        );
        assert_eq!(check_rkey(Some(&good), &acc), Ok(()));
        assert_eq!(check_rkey(None, &acc), Err(RespError::RemoteAccess));
        for bad in [
            KeyTarget { key: 0x106, ..good },
            KeyTarget {
                same_pd: false,
                ..good
            },
            KeyTarget {
                valid: false,
                ..good
            },
            KeyTarget {
                qp_matches: false,
                ..good
            },
            KeyTarget {
                access: Access::REMOTE_READ,
                ..good
            },
            mr(0x105, 0x1001, 0x100, Access::REMOTE_WRITE),
            mr(0x105, 0x1000, 0xff, Access::REMOTE_WRITE),
        ] {
            assert_eq!(
                check_rkey(Some(&bad), &acc),
                Err(RespError::RemoteAccess),
                "{bad:?}"
            );
        }
        assert_eq!(
            check_rkey(
                Some(&KeyTarget {
                    bounds: KeyBounds::All,
                    ..good
                }),
                &acc
            ),
            Ok(())
        );
        // No overflow at the top of the address space.
        let top = RemoteAccess {
            va: u64::MAX - 7,
            len: 8,
            ..acc
        };
        assert_eq!(
            check_rkey(
                Some(&mr(0x105, u64::MAX - 15, 16, Access::REMOTE_WRITE)),
                &top
            ),
            Ok(())
        );
        assert_eq!(
            check_rkey(
                Some(&mr(0x105, u64::MAX - 15, 15, Access::REMOTE_WRITE)),
                &top
            ),
            Err(RespError::RemoteAccess)
        );
        // Atomics: the key first, then the alignment.
        let atomic = RemoteAccess {
            va: 0x1004,
            len: 8,
            needed: Access::REMOTE_ATOMIC,
            atomic: true,
            ..acc
        };
        let amr = mr(0x105, 0x1000, 0x100, Access::REMOTE_ATOMIC);
        assert_eq!(
            check_rkey(Some(&amr), &atomic),
            Err(RespError::MisalignedAtomic)
        );
        assert_eq!(
            check_rkey(
                Some(&amr),
                &RemoteAccess {
                    va: 0x1008,
                    ..atomic
                }
            ),
            Ok(())
        );
        assert_eq!(
            check_rkey(Some(&good), &atomic),
            Err(RespError::RemoteAccess)
        );
        // FLUSH of a whole MR ignores the range.
        let flush = RemoteAccess {
            va: 0,
            len: 0,
            needed: Access::NONE,
            whole_region: true,
            ..acc
        };
        assert_eq!(check_rkey(Some(&good), &flush), Ok(()));
    }

    #[test]
    fn remote_access_errors() {
        let rc = error_action(&cfg(QpType::Rc), RespError::RemoteAccess);
        assert_eq!(rc.reply, Some(Syndrome::Nak(NakCode::RemoteAccessError)));
        assert_eq!(rc.recv_wqe, RecvWqeFate::Complete(RecvStatus::RemAccessErr));
        assert!(rc.qp_error && rc.qp_access_event);
        assert_eq!(
            error_action(&cfg(QpType::Uc), RespError::RemoteAccess),
            ErrorAction::DROP
        );
        let misaligned = error_action(&cfg(QpType::Rc), RespError::MisalignedAtomic);
        assert_eq!(
            misaligned.reply,
            Some(Syndrome::Nak(NakCode::InvalidRequest))
        );
        let wqe = error_action(&cfg(QpType::Ud), RespError::MalformedRecvWqe);
        assert_eq!(wqe.reply, None);
        assert_eq!(wqe.recv_wqe, RecvWqeFate::Complete(RecvStatus::LocQpOpErr));
        assert!(wqe.qp_error);
        let inv = error_action(&cfg(QpType::Rc), RespError::InvalidateFailed);
        assert_eq!(inv.reply, Some(ack_syndrome()));
        assert!(inv.qp_error);
        assert_eq!(RespError::CqOverflow.name(), "cq_overflow");
    }

    fn segments(reply: ReadReply, mtu: IbMtu) -> Vec<(Opcode, u32, u32, u32, bool)> {
        reply
            .packets(mtu)
            .map(|s| (s.opcode, s.psn.get(), s.offset, s.len, s.has_aeth))
            .collect()
    }

    #[test]
    fn read_response_segmentation() {
        use Opcode as O;
        let reply = |len, resumes| ReadReply {
            first_psn: Psn::new(Psn::MASK),
            va: 0,
            rkey: 1,
            len,
            resumes,
        };
        assert_eq!(
            segments(reply(0, false), IbMtu::Mtu256),
            [(O::RC_RDMA_READ_RESPONSE_ONLY, Psn::MASK, 0, 0, true)]
        );
        assert_eq!(
            segments(reply(256, false), IbMtu::Mtu256),
            [(O::RC_RDMA_READ_RESPONSE_ONLY, Psn::MASK, 0, 256, true)]
        );
        assert_eq!(
            segments(reply(600, false), IbMtu::Mtu256),
            [
                (O::RC_RDMA_READ_RESPONSE_FIRST, Psn::MASK, 0, 256, true),
                (O::RC_RDMA_READ_RESPONSE_MIDDLE, 0, 256, 256, false),
                (O::RC_RDMA_READ_RESPONSE_LAST, 1, 512, 88, true),
            ]
        );
        assert_eq!(
            segments(reply(300, true), IbMtu::Mtu256),
            [
                (O::RC_RDMA_READ_RESPONSE_MIDDLE, Psn::MASK, 0, 256, false),
                (O::RC_RDMA_READ_RESPONSE_LAST, 0, 256, 44, true),
            ]
        );
        assert_eq!(segments(reply(0, true), IbMtu::Mtu256), []);
        assert_eq!(reply(600, false).packets(IbMtu::Mtu256).len(), 3);
        assert_eq!(read_response_count(600, IbMtu::Mtu256), 3);
        assert_eq!(read_response_count(0, IbMtu::Mtu4096), 1);
        assert_eq!(read_response_count(MAX_DMA_LEN, IbMtu::Mtu256), 1 << 23);
    }

    #[test]
    fn read_is_served_and_replayed() {
        let c = cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(50));
        let mut cache = Cache::new(4);
        let mut read = with_reth(req(Opcode::RC_RDMA_READ_REQUEST, 50, 0), 0x2000, 3, 700);
        read.ack_req = true;
        let done = run(&mut st, &mut cache, &c, &read).unwrap();
        let original = ReadReply {
            first_psn: Psn::new(50),
            va: 0x2000,
            rkey: 3,
            len: 700,
            resumes: false,
        };
        assert_eq!(done.response, Response::Read(original));
        assert_eq!(st.expected_psn(), Psn::new(53));
        assert_eq!(st.msn(), Msn::new(1));
        assert_eq!(
            cache.find(Psn::new(52)),
            Some(Resource::Read {
                first_psn: Psn::new(50),
                last_psn: Psn::new(52),
                va: 0x2000,
                rkey: 3,
                len: 700
            })
        );
        assert_eq!(original.access().map(|a| a.len), Some(700));
        // The whole request again.
        let dup = |r: &Request| {
            let mut s = st;
            assert_eq!(check_psn(&mut s, &c, r), PsnVerdict::Duplicate);
            handle_duplicate(&s, &cache, &c, r)
        };
        assert_eq!(dup(&read), Response::Read(original));
        // A retry from the second response, as a requester builds it.
        let mid = with_reth(req(Opcode::RC_RDMA_READ_REQUEST, 51, 0), 0x2100, 3, 444);
        let replay = ReadReply {
            first_psn: Psn::new(51),
            va: 0x2100,
            rkey: 3,
            len: 444,
            resumes: true,
        };
        assert_eq!(dup(&mid), Response::Read(replay));
        assert_eq!(
            segments(replay, IbMtu::Mtu256)[0].0,
            Opcode::RC_RDMA_READ_RESPONSE_MIDDLE
        );
        // Mismatches are dropped: other key, outside the range, past the original PSNs.
        assert_eq!(dup(&with_reth(read, 0x2000, 4, 700)), Response::None);
        assert_eq!(dup(&with_reth(read, 0x1fff, 3, 700)), Response::None);
        assert_eq!(dup(&with_reth(read, 0x2000, 3, 701)), Response::None);
        assert_eq!(dup(&with_reth(mid, 0x2000, 3, 700)), Response::None);
        // A PSN the cache never saw.
        assert_eq!(
            dup(&with_reth(
                req(Opcode::RC_RDMA_READ_REQUEST, 40, 0),
                0x2000,
                3,
                700
            )),
            Response::None
        );
    }

    #[test]
    fn atomics_execute_once() {
        let c = cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(7));
        let mut cache = Cache::new(4);
        let mut fa = req(Opcode::RC_FETCH_ADD, 7, 0);
        fa.atomic = Some(AtomicEth {
            va: 0x10,
            rkey: 1,
            swap_add: 1,
            compare: 0,
        });
        assert!(check_psn(&mut st, &c, &fa).proceeds());
        check_opcode(&mut st, &c, &fa).unwrap();
        check_op_allowed(&c, &fa).unwrap();
        check_resource(&c, &fa, false).unwrap();
        assert!(matches!(
            check_length(&st, &c, &fa, 0),
            Ok(Placement::Remote(RemoteAccess {
                len: 8,
                atomic: true,
                ..
            }))
        ));
        let done = commit(&mut st, &mut cache, &c, &fa, 41);
        assert_eq!(
            done.response,
            Response::AtomicAck {
                psn: Psn::new(7),
                original: 41
            }
        );
        assert_eq!(check_psn(&mut st, &c, &fa), PsnVerdict::Duplicate);
        assert_eq!(
            handle_duplicate(&st, &cache, &c, &fa),
            Response::AtomicAck {
                psn: Psn::new(7),
                original: 41
            }
        );
        // A READ at an atomic's PSN does not match it.
        let read = with_reth(req(Opcode::RC_RDMA_READ_REQUEST, 7, 0), 0, 1, 8);
        assert_eq!(handle_duplicate(&st, &cache, &c, &read), Response::None);
        // Duplicate SEND: ACK of the latest executed PSN.
        assert_eq!(
            handle_duplicate(&st, &cache, &c, &req(Opcode::RC_SEND_ONLY, 3, 0)),
            Response::Ack { psn: Psn::new(7) }
        );
    }

    #[test]
    fn atomic_write_and_flush_replay_empty_responses() {
        let c = cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(0));
        let mut cache = Cache::new(4);
        let aw = with_reth(req(Opcode::RC_ATOMIC_WRITE, 0, 8), 0x40, 1, 8);
        assert_eq!(
            run(&mut st, &mut cache, &c, &aw).unwrap().response,
            Response::EmptyRead { psn: Psn::new(0) }
        );
        let mut flush = with_reth(req(Opcode::RC_FLUSH, 1, 0), 0, 1, 0);
        flush.feth = Some(Feth {
            selectivity_level: Feth::LEVEL_MR,
            placement_type: Feth::PLACEMENT_GLOBAL,
        });
        assert_eq!(
            run(&mut st, &mut cache, &c, &flush).unwrap().response,
            Response::EmptyRead { psn: Psn::new(1) }
        );
        assert_eq!(
            handle_duplicate(&st, &cache, &c, &aw),
            Response::EmptyRead { psn: Psn::new(0) }
        );
        assert_eq!(
            handle_duplicate(&st, &cache, &c, &flush),
            Response::EmptyRead { psn: Psn::new(1) }
        );
        // A duplicate SEND after them still gets the last PSN.
        assert_eq!(
            handle_duplicate(&st, &cache, &c, &req(Opcode::RC_SEND_ONLY, 0, 0)),
            Response::Ack { psn: Psn::new(1) }
        );
    }

    #[test]
    fn duplicate_send_after_a_read_does_not_ack_the_read() {
        let c = cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(0));
        let mut cache = Cache::new(4);
        run(&mut st, &mut cache, &c, &req(Opcode::RC_SEND_ONLY, 0, 1)).unwrap();
        run(
            &mut st,
            &mut cache,
            &c,
            &with_reth(req(Opcode::RC_RDMA_READ_REQUEST, 1, 0), 0, 1, 1000),
        )
        .unwrap();
        assert_eq!(st.expected_psn(), Psn::new(5));
        assert_eq!(
            handle_duplicate(&st, &cache, &c, &req(Opcode::RC_SEND_ONLY, 0, 1)),
            Response::Ack { psn: Psn::new(0) }
        );
    }

    #[test]
    fn ack_coalescing() {
        let c = cfg(QpType::Rc);
        let mut st = RespState::new(Psn::new(0));
        let mut cache = Cache::new(4);
        let first = run(&mut st, &mut cache, &c, &req(Opcode::RC_SEND_FIRST, 0, 256)).unwrap();
        assert_eq!(
            first,
            Commit {
                recv: None,
                response: Response::None
            }
        );
        let mut middle = req(Opcode::RC_SEND_MIDDLE, 1, 256);
        middle.ack_req = true;
        assert_eq!(
            run(&mut st, &mut cache, &c, &middle).unwrap().response,
            Response::Ack { psn: Psn::new(1) }
        );
        let last = run(&mut st, &mut cache, &c, &req(Opcode::RC_SEND_LAST, 2, 10)).unwrap();
        assert_eq!(last.response, Response::Ack { psn: Psn::new(2) });
        assert_eq!(
            last.recv,
            Some(RecvSuccess {
                byte_len: 522,
                rdma_with_imm: false
            })
        );
        assert_eq!(st.msn(), Msn::new(1));
        assert_eq!(st.aeth(ack_syndrome()).encode(), [0x1f, 0, 0, 1]);
        // UD completes with the GRH counted and never answers.
        let ud = cfg(QpType::Ud);
        let mut ust = RespState::new(Psn::new(0));
        let done = run(
            &mut ust,
            &mut cache,
            &ud,
            &req(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, 77, 60),
        )
        .unwrap();
        assert_eq!(
            done,
            Commit {
                recv: Some(RecvSuccess {
                    byte_len: 100,
                    rdma_with_imm: false
                }),
                response: Response::None
            }
        );
    }

    #[test]
    fn cache_is_a_bounded_ring() {
        let mut cache = ResponderResources::<3>::new(8);
        assert_eq!(cache.capacity(), 3);
        assert!(cache.is_empty());
        for psn in 0..5 {
            cache.record(Resource::Atomic {
                psn: Psn::new(psn),
                original: u64::from(psn),
            });
            assert!(cache.len() <= 3);
        }
        assert_eq!(cache.find(Psn::new(1)), None);
        assert_eq!(
            cache.find(Psn::new(4)),
            Some(Resource::Atomic {
                psn: Psn::new(4),
                original: 4
            })
        );
        // The newest of two aliasing entries wins.
        cache.record(Resource::Atomic {
            psn: Psn::new(4),
            original: 99,
        });
        assert_eq!(
            cache.find(Psn::new(4)),
            Some(Resource::Atomic {
                psn: Psn::new(4),
                original: 99
            })
        );
        cache.reset(0);
        cache.record(Resource::Flush { psn: Psn::new(0) });
        assert!(cache.is_empty() && cache.capacity() == 0);
        assert_eq!(cache.find(Psn::new(0)), None);
        let wrap = Resource::Read {
            first_psn: Psn::new(Psn::MASK),
            last_psn: Psn::new(1),
            va: 0,
            rkey: 0,
            len: 0,
        };
        assert!(
            wrap.contains(Psn::new(0))
                && wrap.contains(Psn::new(Psn::MASK))
                && !wrap.contains(Psn::new(2))
        );
    }

    #[test]
    fn request_from_a_packet() {
        let reth = Reth {
            va: 0x10,
            rkey: 5,
            dma_len: 3,
        };
        let mut buf = [0u8; 12 + 16 + 4 + 4];
        let mut p = Packet::build(&mut buf[..], Opcode::RC_RDMA_WRITE_ONLY, 1).unwrap();
        p.set_reth(&reth).unwrap();
        p.set_psn(Psn::new(9));
        p.set_ack_req(true);
        let r = Request::from_packet(&Packet::new_checked(&buf[..]).unwrap());
        assert_eq!(
            (r.psn, r.ack_req, r.payload_len, r.pad, r.reth),
            (Psn::new(9), true, 3, 1, Some(reth))
        );
        assert_eq!(r.info.opcode(), Opcode::RC_RDMA_WRITE_ONLY);
    }
}
