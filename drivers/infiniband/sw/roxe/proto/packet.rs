// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 packet headers (BTH, RETH, AETH, AtomicETH, AtomicAckETH, DETH, ImmDt, IETH, FETH): zero-copy views over received bytes and in-place builders.
//!
//! A [`Packet`] wraps the UDP payload of a RoCEv2 datagram: the BTH, the extension headers its
//! opcode calls for, the payload, 0 to 3 pad bytes and the 4-byte ICRC. [`Packet::new_checked`]
//! validates the layout once; afterwards every getter reads inside the checked bounds, so none
//! can fail or panic. The BTH fields are read in place; an extension header is decoded on demand
//! into a small value type ([`Reth`], [`Aeth`], ...), which its setter encodes back.
//!
//! All multi-byte fields are big-endian (IBA 9.2: network order), except the ICRC trailer,
//! which is little-endian (see [`super::icrc`]).

use super::icrc::{self, Crc32, IcrcError, IpHeader, ICRC_LEN};
use super::opcode::{
    ExtHeader, Opcode, OpcodeInfo, AETH_LEN, ATOMIC_ACK_ETH_LEN, ATOMIC_ETH_LEN, BTH_LEN, DETH_LEN,
    FETH_LEN, IETH_LEN, IMMDT_LEN, RETH_LEN,
};
use super::psn::Psn;

/// Why a received packet was refused. Each variant is a reason the receive path drops a packet
/// and counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PacketError {
    /// Shorter than a BTH followed by an ICRC.
    TooShort,
    /// The BTH's transport header version is not 0, the only one defined (IBA 9.2).
    BadVersion,
    /// The opcode is not one roxe implements (RD, XRC, CNP, reserved and vendor opcodes).
    UnknownOpcode,
    /// The extension headers the opcode calls for, followed by the ICRC, do not fit.
    Truncated,
    /// The opcode carries no payload, yet bytes sit between its headers and the ICRC.
    UnexpectedPayload,
    /// The pad count is larger than the bytes between the headers and the ICRC, or (when
    /// building) larger than 3.
    BadPad,
}

impl PacketError {
    /// A short name for logs and counter labels.
    pub const fn name(self) -> &'static str {
        match self {
            PacketError::TooShort => "too_short",
            PacketError::BadVersion => "bad_version",
            PacketError::UnknownOpcode => "unknown_opcode",
            PacketError::Truncated => "truncated",
            PacketError::UnexpectedPayload => "unexpected_payload",
            PacketError::BadPad => "bad_pad",
        }
    }
}

/// A setter was asked for an extension header the packet's opcode does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NoSuchHeader;

/// BTH layout (IBA 9.2): byte offsets and bit masks.
mod bth {
    pub(super) const OPCODE: usize = 0;
    /// Solicited event, migration request, pad count, transport header version.
    pub(super) const FLAGS: usize = 1;
    pub(super) const SE: u8 = 0x80;
    pub(super) const MIG_REQ: u8 = 0x40;
    pub(super) const PAD_MASK: u8 = 0x30;
    pub(super) const PAD_SHIFT: u32 = 4;
    pub(super) const TVER_MASK: u8 = 0x0f;
    pub(super) const PKEY: usize = 2;
    /// FECN, BECN and six reserved bits ("resv8a"); then the 24-bit destination QP.
    pub(super) const ECN_QPN: usize = 4;
    pub(super) const FECN: u8 = 0x80;
    pub(super) const BECN: u8 = 0x40;
    /// AckReq and seven reserved bits; then the 24-bit PSN.
    pub(super) const ACK_PSN: usize = 8;
    pub(super) const ACK_REQ: u8 = 0x80;
}

/// Mask of a 24-bit field (QPN, PSN, MSN) in its 32-bit word.
const LOW_24: u32 = 0x00ff_ffff;

// Every offset this module reads or writes was bounds-checked when the packet was validated;
// `bytes::read`'s zeros stand in for a short read those checks rule out.
use super::bytes::{read, write};

fn read_u8(buf: &[u8], off: usize) -> u8 {
    let [byte] = read::<1>(buf, off);
    byte
}

fn read_u32(buf: &[u8], off: usize) -> u32 {
    u32::from_be_bytes(read(buf, off))
}

fn read_u64(buf: &[u8], off: usize) -> u64 {
    u64::from_be_bytes(read(buf, off))
}

/// Replaces the bits of `mask` in the byte at `off` with those of `value`.
fn update_bits(buf: &mut [u8], off: usize, mask: u8, value: u8) {
    let old = read_u8(buf, off);
    write(buf, off, [(old & !mask) | (value & mask)]);
}

/// Sets or clears the bits of `mask` in the byte at `off`.
fn set_flag(buf: &mut [u8], off: usize, mask: u8, on: bool) {
    update_bits(buf, off, mask, if on { mask } else { 0 });
}

/// Replaces the low 24 bits of the big-endian word at `off`, keeping its top byte.
fn write_low24(buf: &mut [u8], off: usize, value: u32) {
    let word = (read_u32(buf, off) & !LOW_24) | (value & LOW_24);
    write(buf, off, word.to_be_bytes());
}

/// A 24-bit message sequence number, as the AETH carries it (IBA 9.7: the responder counts
/// completed messages modulo 2^24).
///
/// # Invariants
///
/// The value is always below `1 << 24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Msn(u32);

impl Msn {
    /// Number of bits in an MSN.
    pub const BITS: u32 = 24;
    /// Mask of the valid bits.
    pub const MASK: u32 = (1 << Self::BITS) - 1;

    /// Creates an MSN from the low 24 bits of `raw`.
    pub const fn new(raw: u32) -> Msn {
        // INVARIANT: masked to 24 bits.
        Msn(raw & Self::MASK)
    }

    /// The raw 24-bit value.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The next MSN, wrapping at 2^24.
    pub const fn next(self) -> Msn {
        Msn::new(self.0.wrapping_add(1))
    }
}

/// RDMA extended transport header (IBA 9.3): the remote buffer of an RDMA WRITE or READ, a
/// FLUSH or an ATOMIC WRITE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole transfer in bytes (not of this packet's payload).
    pub dma_len: u32,
}

impl Reth {
    /// Decodes the header bytes.
    pub fn decode(b: &[u8; RETH_LEN]) -> Reth {
        Reth {
            va: read_u64(b, 0),
            rkey: read_u32(b, 8),
            dma_len: read_u32(b, 12),
        }
    }

    /// Encodes the header bytes.
    pub fn encode(&self) -> [u8; RETH_LEN] {
        let mut b = [0; RETH_LEN];
        write(&mut b, 0, self.va.to_be_bytes());
        write(&mut b, 8, self.rkey.to_be_bytes());
        write(&mut b, 12, self.dma_len.to_be_bytes());
        b
    }
}

/// The NAK codes of an AETH syndrome (IBA 9.3, AETH syndrome encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// The request's PSN was ahead of the expected one: the requester must resend from it.
    PsnSequenceError,
    /// Unsupported or malformed request, or an opcode out of sequence.
    InvalidRequest,
    /// Protection error on the responder's memory (R_Key, bounds, access rights).
    RemoteAccessError,
    /// The responder could not complete the request for a local reason.
    RemoteOperationalError,
    /// An RD request the responder refused (RD only, so never sent by roxe).
    InvalidRdRequest,
    /// A reserved code (5 to 31), kept so that decoding and encoding round-trip.
    Reserved(u8),
}

impl NakCode {
    /// Decodes the low five bits of a NAK syndrome.
    pub const fn from_code(code: u8) -> NakCode {
        match code & 0x1f {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            other => NakCode::Reserved(other),
        }
    }

    /// The five-bit code.
    pub const fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(code) => code & 0x1f,
        }
    }
}

/// The AETH credit count that means "no credit information" (rxe calls it unlimited).
pub const AETH_CREDITS_INVALID: u8 = 0x1f;

/// The syndrome byte of an AETH (IBA 9.3): bit 7 reserved, bits 6-5 the type, bits 4-0 a value
/// whose meaning depends on the type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement, type `00`. `credits` is the five-bit encoded end-to-end credit
    /// count (a logarithmic scale; [`AETH_CREDITS_INVALID`] when the responder gives none).
    Ack {
        /// Encoded credit count.
        credits: u8,
    },
    /// Receiver not ready, type `01`. `timer` is the five-bit encoded minimum delay before the
    /// requester retries.
    RnrNak {
        /// Encoded RNR timer value.
        timer: u8,
    },
    /// Negative acknowledgement, type `11`.
    Nak(NakCode),
    /// A reserved syndrome (type `10`, or bit 7 set), kept whole so that it round-trips.
    Reserved(u8),
}

impl Syndrome {
    const TYPE_MASK: u8 = 0x60;
    const VALUE_MASK: u8 = 0x1f;
    const RESERVED_BIT: u8 = 0x80;
    const ACK: u8 = 0x00;
    const RNR_NAK: u8 = 0x20;
    const NAK: u8 = 0x60;

    /// Decodes a syndrome byte. Total: every byte has a meaning, reserved ones included.
    pub const fn from_byte(byte: u8) -> Syndrome {
        if byte & Self::RESERVED_BIT != 0 {
            return Syndrome::Reserved(byte);
        }
        let value = byte & Self::VALUE_MASK;
        match byte & Self::TYPE_MASK {
            Self::ACK => Syndrome::Ack { credits: value },
            Self::RNR_NAK => Syndrome::RnrNak { timer: value },
            Self::NAK => Syndrome::Nak(NakCode::from_code(value)),
            _ => Syndrome::Reserved(byte),
        }
    }

    /// Encodes the syndrome byte; values are cut to their five bits.
    pub const fn to_byte(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => Self::ACK | (credits & Self::VALUE_MASK),
            Syndrome::RnrNak { timer } => Self::RNR_NAK | (timer & Self::VALUE_MASK),
            Syndrome::Nak(code) => Self::NAK | code.code(),
            Syndrome::Reserved(byte) => byte,
        }
    }
}

/// ACK extended transport header (IBA 9.3): what a responder says about a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Aeth {
    /// ACK, RNR NAK or NAK.
    pub syndrome: Syndrome,
    /// Message sequence number of the last completed message.
    pub msn: Msn,
}

impl Aeth {
    /// Decodes the header bytes.
    pub fn decode(b: &[u8; AETH_LEN]) -> Aeth {
        let word = read_u32(b, 0);
        Aeth {
            syndrome: Syndrome::from_byte(read_u8(b, 0)),
            msn: Msn::new(word),
        }
    }

    /// Encodes the header bytes.
    pub fn encode(&self) -> [u8; AETH_LEN] {
        let word = (u32::from(self.syndrome.to_byte()) << 24) | self.msn.get();
        word.to_be_bytes()
    }
}

/// Atomic extended transport header (IBA 9.3): the target and operands of a compare and swap or
/// fetch and add.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AtomicEth {
    /// Remote virtual address (8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// The value to swap in (compare and swap) or to add (fetch and add).
    pub swap_add: u64,
    /// The value to compare with (compare and swap; unused by fetch and add).
    pub compare: u64,
}

impl AtomicEth {
    /// Decodes the header bytes.
    pub fn decode(b: &[u8; ATOMIC_ETH_LEN]) -> AtomicEth {
        AtomicEth {
            va: read_u64(b, 0),
            rkey: read_u32(b, 8),
            swap_add: read_u64(b, 12),
            compare: read_u64(b, 20),
        }
    }

    /// Encodes the header bytes.
    pub fn encode(&self) -> [u8; ATOMIC_ETH_LEN] {
        let mut b = [0; ATOMIC_ETH_LEN];
        write(&mut b, 0, self.va.to_be_bytes());
        write(&mut b, 8, self.rkey.to_be_bytes());
        write(&mut b, 12, self.swap_add.to_be_bytes());
        write(&mut b, 20, self.compare.to_be_bytes());
        b
    }
}

/// Atomic acknowledge extended transport header (IBA 9.3): the remote value before the atomic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AtomicAckEth {
    /// The original remote value.
    pub orig: u64,
}

impl AtomicAckEth {
    /// Decodes the header bytes.
    pub fn decode(b: &[u8; ATOMIC_ACK_ETH_LEN]) -> AtomicAckEth {
        AtomicAckEth {
            orig: read_u64(b, 0),
        }
    }

    /// Encodes the header bytes.
    pub fn encode(&self) -> [u8; ATOMIC_ACK_ETH_LEN] {
        self.orig.to_be_bytes()
    }
}

/// Datagram extended transport header (IBA 9.3): the Q_Key and the sender's QP of a UD packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Deth {
    /// Queue key, checked against the receiving QP's.
    pub qkey: u32,
    /// Source QP number (24 bits; the byte above it is reserved and sent as zero).
    pub src_qpn: u32,
}

impl Deth {
    /// Decodes the header bytes.
    pub fn decode(b: &[u8; DETH_LEN]) -> Deth {
        Deth {
            qkey: read_u32(b, 0),
            src_qpn: read_u32(b, 4) & LOW_24,
        }
    }

    /// Encodes the header bytes; `src_qpn` is cut to 24 bits.
    pub fn encode(&self) -> [u8; DETH_LEN] {
        let mut b = [0; DETH_LEN];
        write(&mut b, 0, self.qkey.to_be_bytes());
        write(&mut b, 4, (self.src_qpn & LOW_24).to_be_bytes());
        b
    }
}

/// Immediate data (IBA 9.3), kept as the four bytes on the wire.
///
/// The verbs ABI carries immediate data as a `__be32` in network order too, so the bytes pass
/// between a work request, the wire and a completion unchanged; nothing in the driver needs its
/// numeric value. A value read from a WQE with `u32::from_ne_bytes` goes back with `to_ne_bytes`.
pub type ImmDt = [u8; IMMDT_LEN];

/// Invalidate extended transport header (IBA 9.3): the local R_Key a SEND with invalidate asks
/// the responder to invalidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Ieth {
    /// The R_Key to invalidate.
    pub rkey: u32,
}

impl Ieth {
    /// Decodes the header bytes.
    pub fn decode(b: &[u8; IETH_LEN]) -> Ieth {
        Ieth {
            rkey: read_u32(b, 0),
        }
    }

    /// Encodes the header bytes.
    pub fn encode(&self) -> [u8; IETH_LEN] {
        self.rkey.to_be_bytes()
    }
}

/// FLUSH extended transport header (IBA annex A19): what to flush and how far. One big-endian
/// word: placement type in bits 3-0, selectivity level in bits 5-4, the rest reserved (zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Feth {
    /// Selectivity level (2 bits): [`Feth::LEVEL_RANGE`] or [`Feth::LEVEL_MR`].
    pub selectivity_level: u8,
    /// Placement type bits (4 bits): [`Feth::PLACEMENT_GLOBAL`], [`Feth::PLACEMENT_PERSISTENT`].
    pub placement_type: u8,
}

impl Feth {
    /// Selectivity level: flush the range the RETH names.
    pub const LEVEL_RANGE: u8 = 0;
    /// Selectivity level: flush the whole memory region of the RETH's R_Key.
    pub const LEVEL_MR: u8 = 1;
    /// Placement type bit: make the data globally visible.
    pub const PLACEMENT_GLOBAL: u8 = 1 << 0;
    /// Placement type bit: make the data persistent.
    pub const PLACEMENT_PERSISTENT: u8 = 1 << 1;

    const PLACEMENT_MASK: u32 = 0x0f;
    const LEVEL_MASK: u32 = 0x30;
    const LEVEL_SHIFT: u32 = 4;

    /// Decodes the header bytes (reserved bits are ignored).
    pub fn decode(b: &[u8; FETH_LEN]) -> Feth {
        let word = read_u32(b, 0);
        Feth {
            selectivity_level: ((word & Self::LEVEL_MASK) >> Self::LEVEL_SHIFT) as u8,
            placement_type: (word & Self::PLACEMENT_MASK) as u8,
        }
    }

    /// Encodes the header bytes; fields are cut to their widths, reserved bits are zero.
    pub fn encode(&self) -> [u8; FETH_LEN] {
        let word = ((u32::from(self.selectivity_level) << Self::LEVEL_SHIFT) & Self::LEVEL_MASK)
            | (u32::from(self.placement_type) & Self::PLACEMENT_MASK);
        word.to_be_bytes()
    }
}

/// The pad count that brings a payload of `payload_len` bytes to a multiple of 4 (IBA 9.2).
pub const fn pad_count_for(payload_len: usize) -> u8 {
    ((4 - payload_len % 4) % 4) as u8
}

/// Checks the layout of `bytes` and returns the opcode's table entry.
fn check(bytes: &[u8]) -> Result<&'static OpcodeInfo, PacketError> {
    if bytes.len() < BTH_LEN + ICRC_LEN {
        return Err(PacketError::TooShort);
    }
    let flags = read_u8(bytes, bth::FLAGS);
    if flags & bth::TVER_MASK != 0 {
        return Err(PacketError::BadVersion);
    }
    let info = Opcode::new(read_u8(bytes, bth::OPCODE))
        .info()
        .ok_or(PacketError::UnknownOpcode)?;
    // Header lengths are at most a few dozen bytes: no overflow.
    let room = bytes
        .len()
        .checked_sub(info.header_len() + ICRC_LEN)
        .ok_or(PacketError::Truncated)?;
    if !info.has_payload() && room != 0 {
        return Err(PacketError::UnexpectedPayload);
    }
    let pad = usize::from((flags & bth::PAD_MASK) >> bth::PAD_SHIFT);
    if pad > room {
        return Err(PacketError::BadPad);
    }
    Ok(info)
}

/// A RoCEv2 transport packet: BTH, extension headers, payload, pad and ICRC, in a buffer that
/// holds exactly the UDP payload.
///
/// # Invariants
///
/// The buffer passed `check` for `info`'s opcode: it holds the BTH, the extension headers of
/// that opcode, the pad bytes and the ICRC, and the BTH's opcode byte and pad count are the ones
/// checked. The setters below keep it so (none changes the opcode or the pad count).
#[derive(Clone, Debug)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    info: &'static OpcodeInfo,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a received UDP payload after checking that the BTH, the opcode's extension headers,
    /// the pad bytes and the ICRC fit, that the opcode is one roxe implements and that the
    /// header version is 0. The ICRC value itself is checked separately ([`Packet::icrc_matches`]).
    pub fn new_checked(buffer: T) -> Result<Packet<T>, PacketError> {
        let info = check(buffer.as_ref())?;
        // INVARIANT: just checked.
        Ok(Packet { buffer, info })
    }

    /// The table entry of the packet's opcode.
    pub fn info(&self) -> &'static OpcodeInfo {
        self.info
    }

    /// The whole packet.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The opcode.
    pub fn opcode(&self) -> Opcode {
        self.info.opcode()
    }

    fn byte(&self, off: usize) -> u8 {
        read_u8(self.buffer.as_ref(), off)
    }

    /// Solicited event: the sender asks for a completion event at the receiver.
    pub fn solicited_event(&self) -> bool {
        self.byte(bth::FLAGS) & bth::SE != 0
    }

    /// Migration request bit (automatic path migration; always 1 when APM is not in use, IBA
    /// 9.2).
    pub fn mig_req(&self) -> bool {
        self.byte(bth::FLAGS) & bth::MIG_REQ != 0
    }

    /// Number of pad bytes (0 to 3) between the payload and the ICRC.
    pub fn pad_count(&self) -> u8 {
        (self.byte(bth::FLAGS) & bth::PAD_MASK) >> bth::PAD_SHIFT
    }

    /// Transport header version (always 0 in a checked packet).
    pub fn tver(&self) -> u8 {
        self.byte(bth::FLAGS) & bth::TVER_MASK
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        u16::from_be_bytes(read(self.buffer.as_ref(), bth::PKEY))
    }

    /// Forward explicit congestion notification (RoCEv2 leaves it to IP ECN; kept for
    /// completeness).
    pub fn fecn(&self) -> bool {
        self.byte(bth::ECN_QPN) & bth::FECN != 0
    }

    /// Backward explicit congestion notification (set in RoCEv2 CNPs).
    pub fn becn(&self) -> bool {
        self.byte(bth::ECN_QPN) & bth::BECN != 0
    }

    /// Destination QP number (24 bits).
    pub fn dest_qpn(&self) -> u32 {
        read_u32(self.buffer.as_ref(), bth::ECN_QPN) & LOW_24
    }

    /// Acknowledge request: the requester wants an ACK for this packet.
    pub fn ack_req(&self) -> bool {
        self.byte(bth::ACK_PSN) & bth::ACK_REQ != 0
    }

    /// Packet sequence number.
    pub fn psn(&self) -> Psn {
        Psn::new(read_u32(self.buffer.as_ref(), bth::ACK_PSN))
    }

    /// The bytes of extension header `h`, if the opcode has it. `N` is the header's length.
    fn ext<const N: usize>(&self, h: ExtHeader) -> Option<[u8; N]> {
        let off = self.info.offset(h)?;
        Some(read(self.buffer.as_ref(), off))
    }

    /// The RETH, if the opcode has one.
    pub fn reth(&self) -> Option<Reth> {
        self.ext(ExtHeader::Reth).map(|b| Reth::decode(&b))
    }

    /// The AETH, if the opcode has one.
    pub fn aeth(&self) -> Option<Aeth> {
        self.ext(ExtHeader::Aeth).map(|b| Aeth::decode(&b))
    }

    /// The AtomicETH, if the opcode has one.
    pub fn atomic_eth(&self) -> Option<AtomicEth> {
        self.ext(ExtHeader::AtomicEth)
            .map(|b| AtomicEth::decode(&b))
    }

    /// The AtomicAckETH, if the opcode has one.
    pub fn atomic_ack_eth(&self) -> Option<AtomicAckEth> {
        self.ext(ExtHeader::AtomicAckEth)
            .map(|b| AtomicAckEth::decode(&b))
    }

    /// The DETH, if the opcode has one.
    pub fn deth(&self) -> Option<Deth> {
        self.ext(ExtHeader::Deth).map(|b| Deth::decode(&b))
    }

    /// The immediate data, if the opcode carries some.
    pub fn imm_data(&self) -> Option<ImmDt> {
        self.ext(ExtHeader::ImmDt)
    }

    /// The IETH, if the opcode has one.
    pub fn ieth(&self) -> Option<Ieth> {
        self.ext(ExtHeader::Ieth).map(|b| Ieth::decode(&b))
    }

    /// The FETH, if the opcode has one.
    pub fn feth(&self) -> Option<Feth> {
        self.ext(ExtHeader::Feth).map(|b| Feth::decode(&b))
    }

    /// Length of the BTH and extension headers: the payload's offset.
    pub fn header_len(&self) -> usize {
        self.info.header_len()
    }

    /// Where the payload ends: before the pad bytes and the ICRC.
    fn payload_end(&self) -> usize {
        // Cannot underflow for a checked packet; saturating keeps the arithmetic total.
        self.buffer
            .as_ref()
            .len()
            .saturating_sub(ICRC_LEN + usize::from(self.pad_count()))
    }

    /// The payload: the bytes after the headers, without pad and ICRC.
    pub fn payload(&self) -> &[u8] {
        let start = self.header_len();
        let end = self.payload_end();
        self.buffer.as_ref().get(start..end).unwrap_or(&[])
    }

    /// Length of the payload.
    pub fn payload_len(&self) -> usize {
        self.payload_end().saturating_sub(self.header_len())
    }

    /// The bytes the ICRC covers after the IP and UDP headers: everything but the trailer.
    pub fn icrc_covered(&self) -> &[u8] {
        let bytes = self.buffer.as_ref();
        let end = bytes.len().saturating_sub(ICRC_LEN);
        bytes.get(..end).unwrap_or(&[])
    }

    /// The ICRC trailer's value (decoded from wire order, see [`icrc::from_wire`]).
    pub fn icrc(&self) -> u32 {
        let bytes = self.buffer.as_ref();
        icrc::from_wire(read(bytes, bytes.len().saturating_sub(ICRC_LEN)))
    }

    /// Whether the ICRC trailer matches the packet's contents under IP header `ip` and UDP
    /// header `udp_hdr`.
    pub fn icrc_matches<C: Crc32 + ?Sized>(
        &self,
        engine: &C,
        ip: IpHeader<'_>,
        udp_hdr: &[u8],
    ) -> Result<bool, IcrcError> {
        Ok(icrc::icrc(engine, ip, udp_hdr, self.icrc_covered())? == self.icrc())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Starts building a packet of opcode `opcode` in `buffer`, which must be exactly as long as
    /// the packet: headers, payload, `pad_count` pad bytes and the ICRC.
    ///
    /// Zeroes the BTH, the extension headers and the pad bytes (IBA 9.2: reserved fields and pad
    /// are sent as zero), writes the opcode and pad count with header version 0, and leaves the
    /// payload and ICRC to the caller. The result passes [`Packet::new_checked`].
    pub fn build(mut buffer: T, opcode: Opcode, pad_count: u8) -> Result<Packet<T>, PacketError> {
        let info = opcode.info().ok_or(PacketError::UnknownOpcode)?;
        if pad_count > 3 {
            return Err(PacketError::BadPad);
        }
        let bytes = buffer.as_mut();
        if bytes.len() < BTH_LEN + ICRC_LEN {
            return Err(PacketError::TooShort);
        }
        let room = bytes
            .len()
            .checked_sub(info.header_len() + ICRC_LEN)
            .ok_or(PacketError::Truncated)?;
        if !info.has_payload() && room != 0 {
            return Err(PacketError::UnexpectedPayload);
        }
        let pad = usize::from(pad_count);
        if pad > room {
            return Err(PacketError::BadPad);
        }
        if let Some(headers) = bytes.get_mut(..info.header_len()) {
            headers.fill(0);
        }
        let pad_start = bytes.len().saturating_sub(ICRC_LEN + pad);
        if let Some(pad_bytes) = bytes.get_mut(pad_start..pad_start.saturating_add(pad)) {
            pad_bytes.fill(0);
        }
        write(bytes, bth::OPCODE, [opcode.get()]);
        write(bytes, bth::FLAGS, [pad_count << bth::PAD_SHIFT]);
        let info = check(bytes)?;
        // INVARIANT: just checked.
        Ok(Packet { buffer, info })
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the solicited event bit.
    pub fn set_solicited_event(&mut self, on: bool) {
        set_flag(self.bytes_mut(), bth::FLAGS, bth::SE, on);
    }

    /// Sets the migration request bit.
    pub fn set_mig_req(&mut self, on: bool) {
        set_flag(self.bytes_mut(), bth::FLAGS, bth::MIG_REQ, on);
    }

    /// Sets the partition key.
    pub fn set_pkey(&mut self, pkey: u16) {
        write(self.bytes_mut(), bth::PKEY, pkey.to_be_bytes());
    }

    /// Sets the FECN bit.
    pub fn set_fecn(&mut self, on: bool) {
        set_flag(self.bytes_mut(), bth::ECN_QPN, bth::FECN, on);
    }

    /// Sets the BECN bit.
    pub fn set_becn(&mut self, on: bool) {
        set_flag(self.bytes_mut(), bth::ECN_QPN, bth::BECN, on);
    }

    /// Sets the destination QP number (cut to 24 bits).
    pub fn set_dest_qpn(&mut self, qpn: u32) {
        write_low24(self.bytes_mut(), bth::ECN_QPN, qpn);
    }

    /// Sets the acknowledge request bit.
    pub fn set_ack_req(&mut self, on: bool) {
        set_flag(self.bytes_mut(), bth::ACK_PSN, bth::ACK_REQ, on);
    }

    /// Sets the packet sequence number.
    pub fn set_psn(&mut self, psn: Psn) {
        write_low24(self.bytes_mut(), bth::ACK_PSN, psn.get());
    }

    /// Writes extension header `h`, if the opcode has it.
    fn set_ext<const N: usize>(
        &mut self,
        h: ExtHeader,
        bytes: [u8; N],
    ) -> Result<(), NoSuchHeader> {
        let off = self.info.offset(h).ok_or(NoSuchHeader)?;
        write(self.bytes_mut(), off, bytes);
        Ok(())
    }

    /// Writes the RETH.
    pub fn set_reth(&mut self, reth: &Reth) -> Result<(), NoSuchHeader> {
        self.set_ext(ExtHeader::Reth, reth.encode())
    }

    /// Writes the AETH.
    pub fn set_aeth(&mut self, aeth: &Aeth) -> Result<(), NoSuchHeader> {
        self.set_ext(ExtHeader::Aeth, aeth.encode())
    }

    /// Writes the AtomicETH.
    pub fn set_atomic_eth(&mut self, atomic: &AtomicEth) -> Result<(), NoSuchHeader> {
        self.set_ext(ExtHeader::AtomicEth, atomic.encode())
    }

    /// Writes the AtomicAckETH.
    pub fn set_atomic_ack_eth(&mut self, ack: &AtomicAckEth) -> Result<(), NoSuchHeader> {
        self.set_ext(ExtHeader::AtomicAckEth, ack.encode())
    }

    /// Writes the DETH.
    pub fn set_deth(&mut self, deth: &Deth) -> Result<(), NoSuchHeader> {
        self.set_ext(ExtHeader::Deth, deth.encode())
    }

    /// Writes the immediate data.
    pub fn set_imm_data(&mut self, imm: ImmDt) -> Result<(), NoSuchHeader> {
        self.set_ext(ExtHeader::ImmDt, imm)
    }

    /// Writes the IETH.
    pub fn set_ieth(&mut self, ieth: &Ieth) -> Result<(), NoSuchHeader> {
        self.set_ext(ExtHeader::Ieth, ieth.encode())
    }

    /// Writes the FETH.
    pub fn set_feth(&mut self, feth: &Feth) -> Result<(), NoSuchHeader> {
        self.set_ext(ExtHeader::Feth, feth.encode())
    }

    /// The payload, to fill in place.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        let end = self.payload_end();
        self.buffer.as_mut().get_mut(start..end).unwrap_or(&mut [])
    }

    /// Writes the ICRC trailer (in wire order, see [`icrc::to_wire`]).
    pub fn set_icrc(&mut self, value: u32) {
        let bytes = self.bytes_mut();
        let off = bytes.len().saturating_sub(ICRC_LEN);
        write(bytes, off, icrc::to_wire(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn hex(s: &str) -> Vec<u8> {
        let s: std::string::String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RC SEND Only, SE and MigReq set, pad 2, P_Key 0xffff, FECN, dest QP 0x123456, AckReq,
    /// PSN 0xabcdef, payload "hi", 2 pad bytes, ICRC 0x04030201.
    const SEND_ONLY: &str = "04 e0 ffff 80 123456 80 abcdef 6869 0000 01020304";

    #[test]
    fn bth_fixture() {
        let bytes = hex(SEND_ONLY);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.opcode(), Opcode::RC_SEND_ONLY);
        assert!(p.solicited_event() && p.mig_req() && p.fecn() && !p.becn() && p.ack_req());
        assert_eq!((p.pad_count(), p.tver(), p.pkey()), (2, 0, 0xffff));
        assert_eq!(p.dest_qpn(), 0x12_3456);
        assert_eq!(p.psn(), Psn::new(0xab_cdef));
        assert_eq!(p.payload(), b"hi");
        assert_eq!(p.payload_len(), 2);
        assert_eq!(p.header_len(), 12);
        assert_eq!(p.icrc(), 0x0403_0201);
        assert_eq!(p.icrc_covered().len(), bytes.len() - 4);
        assert_eq!(p.reth(), None);
        assert_eq!(p.aeth(), None);

        let mut buf = vec![0xaau8; bytes.len()];
        let mut b = Packet::build(&mut buf[..], Opcode::RC_SEND_ONLY, 2).unwrap();
        b.set_solicited_event(true);
        b.set_mig_req(true);
        b.set_pkey(0xffff);
        b.set_fecn(true);
        b.set_dest_qpn(0xff12_3456); // the top byte is cut off
        b.set_ack_req(true);
        b.set_psn(Psn::new(0xab_cdef));
        b.payload_mut().copy_from_slice(b"hi");
        b.set_icrc(0x0403_0201);
        assert_eq!(buf, bytes);
    }

    #[test]
    fn setters_clear_bits_too() {
        let mut bytes = hex(SEND_ONLY);
        let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
        p.set_solicited_event(false);
        p.set_mig_req(false);
        p.set_fecn(false);
        p.set_becn(true);
        p.set_ack_req(false);
        p.set_dest_qpn(1);
        p.set_psn(Psn::new(2));
        assert!(!p.solicited_event() && !p.mig_req() && !p.fecn() && p.becn() && !p.ack_req());
        assert_eq!((p.pad_count(), p.dest_qpn(), p.psn()), (2, 1, Psn::new(2)));
        assert_eq!(&bytes[..12], &hex("04 20 ffff 40 000001 00 000002")[..]);
    }

    /// Builds `opcode` with `payload`, lets `fill` set the headers, and checks the header bytes.
    fn built(opcode: Opcode, payload: &[u8], fill: impl FnOnce(&mut Packet<&mut [u8]>)) -> Vec<u8> {
        let info = opcode.info().unwrap();
        let pad = pad_count_for(payload.len());
        let mut buf = vec![0x55u8; info.header_len() + payload.len() + usize::from(pad) + ICRC_LEN];
        let mut p = Packet::build(&mut buf[..], opcode, pad).unwrap();
        p.payload_mut().copy_from_slice(payload);
        fill(&mut p);
        buf
    }

    #[test]
    fn reth_fixture() {
        let reth = Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            dma_len: 0x100,
        };
        let buf = built(Opcode::RC_RDMA_WRITE_ONLY, &[9; 4], |p| {
            p.set_reth(&reth).unwrap()
        });
        assert_eq!(&buf[12..28], &hex("0102030405060708 11223344 00000100")[..]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.reth(), Some(reth));
        assert_eq!(p.payload(), &[9; 4]);
        assert_eq!(Reth::decode(&reth.encode()), reth);
    }

    #[test]
    fn aeth_fixture() {
        let aeth = Aeth {
            syndrome: Syndrome::Nak(NakCode::InvalidRequest),
            msn: Msn::new(0x102),
        };
        let buf = built(Opcode::RC_ACKNOWLEDGE, &[], |p| p.set_aeth(&aeth).unwrap());
        assert_eq!(&buf[12..16], &hex("61 000102")[..]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.aeth(), Some(aeth));
        assert_eq!(p.payload(), b"");
        // The other syndrome types.
        let decode = |b: &str| Aeth::decode(&hex(b).try_into().unwrap());
        assert_eq!(
            decode("1f ffffff").syndrome,
            Syndrome::Ack {
                credits: AETH_CREDITS_INVALID
            }
        );
        assert_eq!(decode("1f ffffff").msn, Msn::new(0xff_ffff));
        assert_eq!(
            decode("2e 000000").syndrome,
            Syndrome::RnrNak { timer: 0x0e }
        );
        assert_eq!(
            decode("60 000000").syndrome,
            Syndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            decode("62 000000").syndrome,
            Syndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            decode("63 000000").syndrome,
            Syndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            decode("64 000000").syndrome,
            Syndrome::Nak(NakCode::InvalidRdRequest)
        );
        assert_eq!(
            decode("65 000000").syndrome,
            Syndrome::Nak(NakCode::Reserved(5))
        );
        assert_eq!(decode("40 000000").syndrome, Syndrome::Reserved(0x40));
        assert_eq!(decode("80 000000").syndrome, Syndrome::Reserved(0x80));
    }

    #[test]
    fn syndrome_round_trips_every_byte() {
        for b in 0..=255u8 {
            assert_eq!(Syndrome::from_byte(b).to_byte(), b);
        }
        assert_eq!(Msn::new(Msn::MASK).next(), Msn::new(0));
    }

    #[test]
    fn atomic_fixtures() {
        let atomic = AtomicEth {
            va: 0x1000,
            rkey: 0xdead_beef,
            swap_add: 0x0a0b_0c0d_0e0f_1011,
            compare: 7,
        };
        let buf = built(Opcode::RC_COMPARE_SWAP, &[], |p| {
            p.set_atomic_eth(&atomic).unwrap()
        });
        assert_eq!(
            &buf[12..40],
            &hex("0000000000001000 deadbeef 0a0b0c0d0e0f1011 0000000000000007")[..]
        );
        assert_eq!(
            Packet::new_checked(&buf[..]).unwrap().atomic_eth(),
            Some(atomic)
        );

        let aeth = Aeth {
            syndrome: Syndrome::Ack { credits: 3 },
            msn: Msn::new(9),
        };
        let ack = AtomicAckEth {
            orig: 0x8877_6655_4433_2211,
        };
        let buf = built(Opcode::RC_ATOMIC_ACKNOWLEDGE, &[], |p| {
            p.set_aeth(&aeth).unwrap();
            p.set_atomic_ack_eth(&ack).unwrap();
        });
        assert_eq!(&buf[12..24], &hex("03000009 8877665544332211")[..]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!((p.aeth(), p.atomic_ack_eth()), (Some(aeth), Some(ack)));
    }

    #[test]
    fn deth_and_immdt_fixture() {
        let deth = Deth {
            qkey: 0x8001_0000,
            src_qpn: 0xab00_0001,
        };
        let buf = built(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, b"abc", |p| {
            p.set_deth(&deth).unwrap();
            p.set_imm_data([0xca, 0xfe, 0xba, 0xbe]).unwrap();
        });
        assert_eq!(&buf[12..24], &hex("80010000 00000001 cafebabe")[..]);
        assert_eq!(buf[1] & 0x30, 0x10); // one pad byte
        assert_eq!(buf[24..28], *b"abc\0");
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            p.deth(),
            Some(Deth {
                qkey: 0x8001_0000,
                src_qpn: 1
            })
        );
        assert_eq!(p.imm_data(), Some([0xca, 0xfe, 0xba, 0xbe]));
        assert_eq!(p.payload(), b"abc");
    }

    #[test]
    fn ieth_and_feth_fixtures() {
        let buf = built(Opcode::RC_SEND_ONLY_WITH_INVALIDATE, b"", |p| {
            p.set_ieth(&Ieth { rkey: 0x42 }).unwrap()
        });
        assert_eq!(&buf[12..16], &hex("00000042")[..]);
        assert_eq!(
            Packet::new_checked(&buf[..]).unwrap().ieth(),
            Some(Ieth { rkey: 0x42 })
        );

        let feth = Feth {
            selectivity_level: Feth::LEVEL_MR,
            placement_type: Feth::PLACEMENT_PERSISTENT,
        };
        let reth = Reth {
            va: 0x2000,
            rkey: 5,
            dma_len: 64,
        };
        let buf = built(Opcode::RC_FLUSH, &[], |p| {
            p.set_feth(&feth).unwrap();
            p.set_reth(&reth).unwrap();
        });
        assert_eq!(
            &buf[12..32],
            &hex("00000012 0000000000002000 00000005 00000040")[..]
        );
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!((p.feth(), p.reth()), (Some(feth), Some(reth)));
        // Reserved bits are ignored on receive.
        assert_eq!(
            Feth::decode(&[0xff, 0xff, 0xff, 0xc1]),
            Feth {
                selectivity_level: 0,
                placement_type: 1
            }
        );
    }

    #[test]
    fn setters_refuse_absent_headers() {
        let mut buf = vec![0u8; 16];
        let mut p = Packet::build(&mut buf[..], Opcode::RC_SEND_MIDDLE, 0).unwrap();
        assert_eq!(p.set_reth(&Reth::default()), Err(NoSuchHeader));
        assert_eq!(p.set_imm_data([0; 4]), Err(NoSuchHeader));
        assert_eq!(
            p.set_aeth(&Aeth {
                syndrome: Syndrome::Ack { credits: 0 },
                msn: Msn::new(0)
            }),
            Err(NoSuchHeader)
        );
        assert_eq!(buf, vec![1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn rejects_malformed_packets() {
        let send = hex(SEND_ONLY);
        for n in 0..16 {
            assert_eq!(
                Packet::new_checked(&send[..n]).err(),
                Some(PacketError::TooShort),
                "{n}"
            );
        }
        let mut v = send.clone();
        v[1] |= 0x01;
        assert_eq!(
            Packet::new_checked(&v[..]).err(),
            Some(PacketError::BadVersion)
        );
        for op in [0x15u8, 0x40, 0x81, 0xff] {
            let mut u = send.clone();
            u[0] = op;
            assert_eq!(
                Packet::new_checked(&u[..]).err(),
                Some(PacketError::UnknownOpcode)
            );
        }
        // RDMA WRITE Only needs 16 RETH bytes after the BTH, then the ICRC.
        let mut w = vec![0u8; 12 + 16 + 3];
        w[0] = Opcode::RC_RDMA_WRITE_ONLY.get();
        assert_eq!(
            Packet::new_checked(&w[..]).err(),
            Some(PacketError::Truncated)
        );
        w.push(0);
        assert!(Packet::new_checked(&w[..]).is_ok());
        // An ACK with payload bytes.
        let mut a = vec![0u8; 12 + 4 + 4 + 4];
        a[0] = Opcode::RC_ACKNOWLEDGE.get();
        assert_eq!(
            Packet::new_checked(&a[..]).err(),
            Some(PacketError::UnexpectedPayload)
        );
        a.truncate(20);
        assert!(Packet::new_checked(&a[..]).is_ok());
        a[1] = 0x10;
        assert_eq!(Packet::new_checked(&a[..]).err(), Some(PacketError::BadPad));
        // Pad larger than the payload area.
        let mut s = send.clone();
        s[1] = 0x30;
        s.remove(12);
        s.remove(12);
        assert_eq!(Packet::new_checked(&s[..]).err(), Some(PacketError::BadPad));
        assert_eq!(PacketError::BadPad.name(), "bad_pad");
    }

    #[test]
    fn build_refuses_bad_layouts() {
        let mut buf = [0u8; 20];
        assert_eq!(
            Packet::build(&mut buf[..], Opcode::new(0x15), 0).err(),
            Some(PacketError::UnknownOpcode)
        );
        assert_eq!(
            Packet::build(&mut buf[..], Opcode::RC_SEND_ONLY, 4).err(),
            Some(PacketError::BadPad)
        );
        assert_eq!(
            Packet::build(&mut buf[..12], Opcode::RC_SEND_ONLY, 0).err(),
            Some(PacketError::TooShort)
        );
        assert_eq!(
            Packet::build(&mut buf[..], Opcode::RC_RDMA_WRITE_ONLY, 0).err(),
            Some(PacketError::Truncated)
        );
        let mut ack = [0u8; 24];
        assert_eq!(
            Packet::build(&mut ack[..], Opcode::RC_ACKNOWLEDGE, 0).err(),
            Some(PacketError::UnexpectedPayload)
        );
        assert_eq!(
            Packet::build(&mut buf[..17], Opcode::RC_SEND_ONLY, 2).err(),
            Some(PacketError::BadPad)
        );
        assert_eq!(pad_count_for(0), 0);
        assert_eq!(pad_count_for(5), 3);
        assert_eq!(pad_count_for(8), 0);
    }

    #[test]
    fn icrc_of_a_built_packet_checks() {
        use super::super::icrc::{icrc_ipv4, IpHeader, SoftCrc32};
        let ip = hex("4500 0034 0000 4000 4011 0000 0a00 0001 0a00 0002");
        let udp = hex("c000 12b7 0020 0000");
        let mut buf = built(Opcode::RC_SEND_ONLY_WITH_IMMEDIATE, b"data", |p| {
            p.set_imm_data([1, 2, 3, 4]).unwrap();
            p.set_psn(Psn::new(77));
        });
        let value = {
            let p = Packet::new_checked(&buf[..]).unwrap();
            icrc_ipv4(&SoftCrc32, &ip, &udp, p.icrc_covered()).unwrap()
        };
        Packet::new_checked(&mut buf[..]).unwrap().set_icrc(value);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            p.icrc_matches(&SoftCrc32, IpHeader::V4(&ip), &udp),
            Ok(true)
        );
        buf[16] ^= 1;
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(
            p.icrc_matches(&SoftCrc32, IpHeader::V4(&ip), &udp),
            Ok(false)
        );
    }
}
