// SPDX-License-Identifier: GPL-2.0

//! The responder's checks of a request, in the order the kernel calls them (IBA 9.7.5.1,
//! 9.7.5.2, 9.7.4.1.8): PSN ([`check_psn`]), opcode sequence, operation, resources, length and
//! placement, and the R_Key of remote memory.

use super::*;

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
        Operation::Send => send_placement(state, cfg, req, recv_len),
        Operation::RdmaWrite => write_placement(state, req),
        Operation::RdmaReadRequest => read_placement(req),
        Operation::CompareSwap | Operation::FetchAdd => atomic_placement(req),
        Operation::AtomicWrite => atomic_write_placement(req),
        Operation::Flush => flush_placement(req),
        Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge => {
            Err(RespError::WrongTransport)
        }
    }
}

/// [`check_length`] of a SEND packet: it goes into the receive WQE after what the message's
/// earlier packets placed (a UD SEND after the GRH), and must fit `recv_len`.
fn send_placement(
    state: &RespState,
    cfg: &RespConfig,
    req: &Request,
    recv_len: u32,
) -> Result<Placement, RespError> {
    let info = req.info;
    let payload = req.payload_len;
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

/// [`check_length`] of an RDMA WRITE packet: the FIRST or ONLY names the remote memory in its
/// RETH, later packets continue where the message got to; the packets carry exactly the DMA
/// length.
fn write_placement(state: &RespState, req: &Request) -> Result<Placement, RespError> {
    let info = req.info;
    let payload = req.payload_len;
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

/// [`check_length`] of an RDMA READ request: the remote memory its RETH names.
fn read_placement(req: &Request) -> Result<Placement, RespError> {
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

/// [`check_length`] of a compare and swap or fetch and add: the [`ATOMIC_LEN`] bytes its
/// AtomicETH names.
fn atomic_placement(req: &Request) -> Result<Placement, RespError> {
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

/// [`check_length`] of an ATOMIC WRITE: the [`ATOMIC_LEN`] bytes its RETH names.
fn atomic_write_placement(req: &Request) -> Result<Placement, RespError> {
    let payload = req.payload_len;
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

/// [`check_length`] of a FLUSH: the range its RETH names (or the whole region, by its FETH),
/// with the rights its placement type needs.
fn flush_placement(req: &Request) -> Result<Placement, RespError> {
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
