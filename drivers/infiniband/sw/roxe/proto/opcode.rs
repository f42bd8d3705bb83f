// SPDX-License-Identifier: GPL-2.0

//! The IBA opcode table (IBA 9.2, table 35): per opcode, the transport, which extension headers follow the BTH, and the packet's place in a message.
//!
//! The opcode byte of the BTH carries the transport service in its top three bits and the
//! operation in its low five. Only the opcodes roxe implements are in the table: the RC and UC
//! ones, the two UD sends, and the RC FLUSH and ATOMIC WRITE of annex A19. Everything else (RD,
//! XRC, CNP, reserved and vendor codes) has no entry, and [`Opcode::info`] answers `None` for it,
//! which the receive path treats as a packet to drop.

/// Length of the base transport header (IBA 9.2).
pub const BTH_LEN: usize = 12;
/// Length of the datagram extended transport header, DETH (IBA 9.3).
pub const DETH_LEN: usize = 8;
/// Length of the FLUSH extended transport header, FETH (IBA annex A19).
pub const FETH_LEN: usize = 4;
/// Length of the RDMA extended transport header, RETH (IBA 9.3).
pub const RETH_LEN: usize = 16;
/// Length of the atomic extended transport header, AtomicETH (IBA 9.3).
pub const ATOMIC_ETH_LEN: usize = 28;
/// Length of the ACK extended transport header, AETH (IBA 9.3).
pub const AETH_LEN: usize = 4;
/// Length of the atomic acknowledge extended transport header, AtomicAckETH (IBA 9.3).
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// Length of the immediate data extended transport header, ImmDt (IBA 9.3).
pub const IMMDT_LEN: usize = 4;
/// Length of the invalidate extended transport header, IETH (IBA 9.3).
pub const IETH_LEN: usize = 4;

/// The transport service of an opcode: the top three bits of the opcode byte (IBA 9.2, table 35).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable connected, `0x00`.
    Rc,
    /// Unreliable connected, `0x20`.
    Uc,
    /// Reliable datagram, `0x40` (not implemented by roxe).
    Rd,
    /// Unreliable datagram, `0x60`.
    Ud,
    /// Congestion notification packets of RoCEv2, `0x80` (not implemented by roxe).
    Cnp,
    /// Extended reliable connected, `0xA0` (not implemented by roxe).
    Xrc,
}

impl Transport {
    /// Mask of the transport bits in the opcode byte.
    pub const MASK: u8 = 0xe0;

    /// The transport bits of this service, as they sit in the opcode byte.
    pub const fn bits(self) -> u8 {
        match self {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Rd => 0x40,
            Transport::Ud => 0x60,
            Transport::Cnp => 0x80,
            Transport::Xrc => 0xa0,
        }
    }

    /// The transport of a raw opcode byte; `None` for `0xC0..=0xFF`, which IBA leaves reserved
    /// or to manufacturers.
    pub const fn of(raw_opcode: u8) -> Option<Transport> {
        match raw_opcode & Self::MASK {
            0x00 => Some(Transport::Rc),
            0x20 => Some(Transport::Uc),
            0x40 => Some(Transport::Rd),
            0x60 => Some(Transport::Ud),
            0x80 => Some(Transport::Cnp),
            0xa0 => Some(Transport::Xrc),
            _ => None,
        }
    }
}

/// What a packet does, independent of the transport (the low five bits of the opcode, grouped
/// by message type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SEND, with or without immediate data or invalidate.
    Send,
    /// RDMA WRITE, with or without immediate data.
    RdmaWrite,
    /// RDMA READ request.
    RdmaReadRequest,
    /// RDMA READ response data.
    RdmaReadResponse,
    /// ACK or NAK.
    Acknowledge,
    /// Response to an atomic request, carrying the original value.
    AtomicAcknowledge,
    /// Atomic compare and swap request.
    CompareSwap,
    /// Atomic fetch and add request.
    FetchAdd,
    /// FLUSH request (IBA annex A19).
    Flush,
    /// ATOMIC WRITE request (IBA annex A19).
    AtomicWrite,
}

/// Where a packet sits in its message (IBA 9.2: messages longer than the path MTU travel as a
/// FIRST, any number of MIDDLEs and a LAST; shorter ones as a single ONLY).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// Starts a multi-packet message.
    First,
    /// Continues a multi-packet message.
    Middle,
    /// Ends a multi-packet message.
    Last,
    /// A whole message in one packet (every non-data opcode is one of these).
    Only,
}

/// An extension header that can follow the BTH. The declaration order is the order in which
/// headers appear on the wire (IBA 9.2: RDETH, DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt,
/// IETH; annex A19 puts the FETH before the RETH of a FLUSH), so the offset of a header is the
/// BTH plus every present header declared before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ExtHeader {
    /// Datagram ETH: Q_Key and source QP (UD).
    Deth = 0,
    /// FLUSH ETH: selectivity level and placement type.
    Feth = 1,
    /// RDMA ETH: virtual address, R_Key, DMA length.
    Reth = 2,
    /// Atomic ETH: virtual address, R_Key, swap or add data, compare data.
    AtomicEth = 3,
    /// ACK ETH: syndrome and MSN.
    Aeth = 4,
    /// Atomic ACK ETH: the original remote value.
    AtomicAckEth = 5,
    /// Immediate data.
    ImmDt = 6,
    /// Invalidate ETH: the R_Key to invalidate.
    Ieth = 7,
}

impl ExtHeader {
    /// Every extension header, in wire order.
    pub const ALL: [ExtHeader; 8] = [
        ExtHeader::Deth,
        ExtHeader::Feth,
        ExtHeader::Reth,
        ExtHeader::AtomicEth,
        ExtHeader::Aeth,
        ExtHeader::AtomicAckEth,
        ExtHeader::ImmDt,
        ExtHeader::Ieth,
    ];

    /// Length of the header in bytes.
    pub const fn size(self) -> usize {
        match self {
            ExtHeader::Deth => DETH_LEN,
            ExtHeader::Feth => FETH_LEN,
            ExtHeader::Reth => RETH_LEN,
            ExtHeader::AtomicEth => ATOMIC_ETH_LEN,
            ExtHeader::Aeth => AETH_LEN,
            ExtHeader::AtomicAckEth => ATOMIC_ACK_ETH_LEN,
            ExtHeader::ImmDt => IMMDT_LEN,
            ExtHeader::Ieth => IETH_LEN,
        }
    }

    /// The header at position `i` of the wire order (`i` is taken modulo 8).
    const fn at(i: u8) -> ExtHeader {
        match i & 7 {
            0 => ExtHeader::Deth,
            1 => ExtHeader::Feth,
            2 => ExtHeader::Reth,
            3 => ExtHeader::AtomicEth,
            4 => ExtHeader::Aeth,
            5 => ExtHeader::AtomicAckEth,
            6 => ExtHeader::ImmDt,
            _ => ExtHeader::Ieth,
        }
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of extension headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders(u8);

impl ExtHeaders {
    /// No extension header.
    pub const NONE: ExtHeaders = ExtHeaders(0);

    /// This set plus `h`.
    pub const fn with(self, h: ExtHeader) -> ExtHeaders {
        ExtHeaders(self.0 | h.bit())
    }

    /// Whether `h` is in the set.
    pub const fn contains(self, h: ExtHeader) -> bool {
        self.0 & h.bit() != 0
    }

    /// Total length of the headers in the set whose wire position is below `limit`.
    const fn len_below(self, limit: u8) -> usize {
        let mut total = 0;
        let mut i = 0;
        while i < limit && i < 8 {
            if self.0 & (1 << i) != 0 {
                total += ExtHeader::at(i).size();
            }
            i += 1;
        }
        total
    }
}

/// Where [`OpcodeInfo`]'s offsets keep the payload's: after the 8 extension headers.
const PAYLOAD_AT: usize = 8;

/// Everything the transport needs to know about one opcode. Entries live in a static table and
/// are reached through [`Opcode::info`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpcodeInfo {
    opcode: Opcode,
    name: &'static str,
    transport: Transport,
    operation: Operation,
    position: Position,
    headers: ExtHeaders,
    has_payload: bool,
    /// The offset from the start of the BTH of the header at each wire position (indexed by
    /// [`ExtHeader`]), and at [`PAYLOAD_AT`] the payload's: computed once, when the table is
    /// built, since every packet asks for them.
    offsets: [u8; PAYLOAD_AT + 1],
}

impl OpcodeInfo {
    /// The opcode this entry describes.
    pub const fn opcode(&self) -> Opcode {
        self.opcode
    }

    /// The IBA name with its transport prefix, e.g. `"RC_SEND_FIRST"`, for logs and counters.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The transport service.
    pub const fn transport(&self) -> Transport {
        self.transport
    }

    /// The operation.
    pub const fn operation(&self) -> Operation {
        self.operation
    }

    /// The place of the packet in its message.
    pub const fn position(&self) -> Position {
        self.position
    }

    /// The extension headers between the BTH and the payload.
    pub const fn headers(&self) -> ExtHeaders {
        self.headers
    }

    /// Whether extension header `h` is present.
    pub const fn has(&self, h: ExtHeader) -> bool {
        self.headers.contains(h)
    }

    /// Whether the packet may carry payload. Opcodes without payload carry none at all, not even
    /// pad bytes.
    pub const fn has_payload(&self) -> bool {
        self.has_payload
    }

    /// Length of the BTH and the extension headers: the offset of the payload. Excludes the
    /// UDP/IP headers below and the ICRC at the end.
    pub const fn header_len(&self) -> usize {
        self.offsets[PAYLOAD_AT] as usize
    }

    /// Offset of extension header `h` from the start of the BTH, if the opcode has it.
    pub const fn offset(&self, h: ExtHeader) -> Option<usize> {
        if self.headers.contains(h) {
            Some(self.offsets[h as usize] as usize)
        } else {
            None
        }
    }

    /// Whether a requester sends it (SEND, WRITE, READ request, atomics, FLUSH, ATOMIC WRITE).
    pub const fn is_request(&self) -> bool {
        !self.is_response()
    }

    /// Whether a responder sends it (READ response data, ACK/NAK, atomic ACK). rxe calls all of
    /// these "ack" packets.
    pub const fn is_response(&self) -> bool {
        matches!(
            self.operation,
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }

    /// Whether it is a pure acknowledgement (ACK/NAK or atomic ACK), carrying no read data.
    pub const fn is_ack(&self) -> bool {
        matches!(
            self.operation,
            Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }

    /// Whether it belongs to a SEND.
    pub const fn is_send(&self) -> bool {
        matches!(self.operation, Operation::Send)
    }

    /// Whether it belongs to an RDMA WRITE (ATOMIC WRITE is separate: [`Self::is_atomic_write`]).
    pub const fn is_write(&self) -> bool {
        matches!(self.operation, Operation::RdmaWrite)
    }

    /// Whether it is an RDMA READ request.
    pub const fn is_read(&self) -> bool {
        matches!(self.operation, Operation::RdmaReadRequest)
    }

    /// Whether it carries RDMA READ response data.
    pub const fn is_read_response(&self) -> bool {
        matches!(self.operation, Operation::RdmaReadResponse)
    }

    /// Whether it is an atomic request (compare and swap, fetch and add).
    pub const fn is_atomic(&self) -> bool {
        matches!(self.operation, Operation::CompareSwap | Operation::FetchAdd)
    }

    /// Whether it is a FLUSH request.
    pub const fn is_flush(&self) -> bool {
        matches!(self.operation, Operation::Flush)
    }

    /// Whether it is an ATOMIC WRITE request.
    pub const fn is_atomic_write(&self) -> bool {
        matches!(self.operation, Operation::AtomicWrite)
    }

    /// Whether it starts a message (FIRST or ONLY).
    pub const fn starts_message(&self) -> bool {
        matches!(self.position, Position::First | Position::Only)
    }

    /// Whether it ends a message (LAST or ONLY).
    pub const fn ends_message(&self) -> bool {
        matches!(self.position, Position::Last | Position::Only)
    }

    /// Whether it carries immediate data.
    pub const fn has_immediate(&self) -> bool {
        self.headers.contains(ExtHeader::ImmDt)
    }

    /// Whether it carries an R_Key to invalidate.
    pub const fn has_invalidate(&self) -> bool {
        self.headers.contains(ExtHeader::Ieth)
    }

    /// Whether the responder needs a receive WQE for it: the first packet of a SEND, and an RDMA
    /// WRITE that carries immediate data (IBA 9.4: an RDMA WRITE with immediate consumes a receive
    /// WQE to report the immediate value).
    pub const fn needs_recv_wqe(&self) -> bool {
        match self.operation {
            Operation::Send => self.starts_message(),
            Operation::RdmaWrite => self.has_immediate(),
            _ => false,
        }
    }

    /// Whether the responder completes the receive WQE with it: the last packet of a SEND and the
    /// packet of an RDMA WRITE that carries immediate data (always the last).
    pub const fn completes_recv_wqe(&self) -> bool {
        match self.operation {
            Operation::Send => self.ends_message(),
            Operation::RdmaWrite => self.has_immediate(),
            _ => false,
        }
    }

    /// Whether the requester waits for the responder to acknowledge it (explicitly or by a later
    /// coalesced ACK): every RC request (IBA 9.7). UC and UD requests are never acknowledged.
    pub const fn is_acknowledged(&self) -> bool {
        matches!(self.transport, Transport::Rc) && self.is_request()
    }
}

/// An IBA opcode: the first byte of the BTH.
///
/// Any byte value is representable, so a received opcode is kept as it is and looked up with
/// [`Opcode::info`]; the associated constants name the opcodes roxe implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Opcode(u8);

/// Operation bits (low five bits) shared by every transport.
mod op {
    pub(super) const SEND_FIRST: u8 = 0x00;
    pub(super) const SEND_MIDDLE: u8 = 0x01;
    pub(super) const SEND_LAST: u8 = 0x02;
    pub(super) const SEND_LAST_WITH_IMMEDIATE: u8 = 0x03;
    pub(super) const SEND_ONLY: u8 = 0x04;
    pub(super) const SEND_ONLY_WITH_IMMEDIATE: u8 = 0x05;
    pub(super) const RDMA_WRITE_FIRST: u8 = 0x06;
    pub(super) const RDMA_WRITE_MIDDLE: u8 = 0x07;
    pub(super) const RDMA_WRITE_LAST: u8 = 0x08;
    pub(super) const RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x09;
    pub(super) const RDMA_WRITE_ONLY: u8 = 0x0a;
    pub(super) const RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x0b;
    pub(super) const RDMA_READ_REQUEST: u8 = 0x0c;
    pub(super) const RDMA_READ_RESPONSE_FIRST: u8 = 0x0d;
    pub(super) const RDMA_READ_RESPONSE_MIDDLE: u8 = 0x0e;
    pub(super) const RDMA_READ_RESPONSE_LAST: u8 = 0x0f;
    pub(super) const RDMA_READ_RESPONSE_ONLY: u8 = 0x10;
    pub(super) const ACKNOWLEDGE: u8 = 0x11;
    pub(super) const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    pub(super) const COMPARE_SWAP: u8 = 0x13;
    pub(super) const FETCH_ADD: u8 = 0x14;
    // 0x15 is reserved (it was RESYNC, for RD).
    pub(super) const SEND_LAST_WITH_INVALIDATE: u8 = 0x16;
    pub(super) const SEND_ONLY_WITH_INVALIDATE: u8 = 0x17;
    pub(super) const FLUSH: u8 = 0x1c;
    pub(super) const ATOMIC_WRITE: u8 = 0x1d;
}

const RC: u8 = 0x00;
const UC: u8 = 0x20;
const UD: u8 = 0x60;

impl Opcode {
    /// Mask of the operation bits.
    pub const OPERATION_MASK: u8 = 0x1f;

    /// RC SEND First.
    pub const RC_SEND_FIRST: Opcode = Opcode(RC | op::SEND_FIRST);
    /// RC SEND Middle.
    pub const RC_SEND_MIDDLE: Opcode = Opcode(RC | op::SEND_MIDDLE);
    /// RC SEND Last.
    pub const RC_SEND_LAST: Opcode = Opcode(RC | op::SEND_LAST);
    /// RC SEND Last with Immediate.
    pub const RC_SEND_LAST_WITH_IMMEDIATE: Opcode = Opcode(RC | op::SEND_LAST_WITH_IMMEDIATE);
    /// RC SEND Only.
    pub const RC_SEND_ONLY: Opcode = Opcode(RC | op::SEND_ONLY);
    /// RC SEND Only with Immediate.
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(RC | op::SEND_ONLY_WITH_IMMEDIATE);
    /// RC RDMA WRITE First.
    pub const RC_RDMA_WRITE_FIRST: Opcode = Opcode(RC | op::RDMA_WRITE_FIRST);
    /// RC RDMA WRITE Middle.
    pub const RC_RDMA_WRITE_MIDDLE: Opcode = Opcode(RC | op::RDMA_WRITE_MIDDLE);
    /// RC RDMA WRITE Last.
    pub const RC_RDMA_WRITE_LAST: Opcode = Opcode(RC | op::RDMA_WRITE_LAST);
    /// RC RDMA WRITE Last with Immediate.
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Opcode =
        Opcode(RC | op::RDMA_WRITE_LAST_WITH_IMMEDIATE);
    /// RC RDMA WRITE Only.
    pub const RC_RDMA_WRITE_ONLY: Opcode = Opcode(RC | op::RDMA_WRITE_ONLY);
    /// RC RDMA WRITE Only with Immediate.
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Opcode =
        Opcode(RC | op::RDMA_WRITE_ONLY_WITH_IMMEDIATE);
    /// RC RDMA READ Request.
    pub const RC_RDMA_READ_REQUEST: Opcode = Opcode(RC | op::RDMA_READ_REQUEST);
    /// RC RDMA READ Response First.
    pub const RC_RDMA_READ_RESPONSE_FIRST: Opcode = Opcode(RC | op::RDMA_READ_RESPONSE_FIRST);
    /// RC RDMA READ Response Middle.
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: Opcode = Opcode(RC | op::RDMA_READ_RESPONSE_MIDDLE);
    /// RC RDMA READ Response Last.
    pub const RC_RDMA_READ_RESPONSE_LAST: Opcode = Opcode(RC | op::RDMA_READ_RESPONSE_LAST);
    /// RC RDMA READ Response Only.
    pub const RC_RDMA_READ_RESPONSE_ONLY: Opcode = Opcode(RC | op::RDMA_READ_RESPONSE_ONLY);
    /// RC Acknowledge (ACK or NAK).
    pub const RC_ACKNOWLEDGE: Opcode = Opcode(RC | op::ACKNOWLEDGE);
    /// RC ATOMIC Acknowledge.
    pub const RC_ATOMIC_ACKNOWLEDGE: Opcode = Opcode(RC | op::ATOMIC_ACKNOWLEDGE);
    /// RC CmpSwap.
    pub const RC_COMPARE_SWAP: Opcode = Opcode(RC | op::COMPARE_SWAP);
    /// RC FetchAdd.
    pub const RC_FETCH_ADD: Opcode = Opcode(RC | op::FETCH_ADD);
    /// RC SEND Last with Invalidate.
    pub const RC_SEND_LAST_WITH_INVALIDATE: Opcode = Opcode(RC | op::SEND_LAST_WITH_INVALIDATE);
    /// RC SEND Only with Invalidate.
    pub const RC_SEND_ONLY_WITH_INVALIDATE: Opcode = Opcode(RC | op::SEND_ONLY_WITH_INVALIDATE);
    /// RC FLUSH (IBA annex A19).
    pub const RC_FLUSH: Opcode = Opcode(RC | op::FLUSH);
    /// RC ATOMIC WRITE (IBA annex A19).
    pub const RC_ATOMIC_WRITE: Opcode = Opcode(RC | op::ATOMIC_WRITE);

    /// UC SEND First.
    pub const UC_SEND_FIRST: Opcode = Opcode(UC | op::SEND_FIRST);
    /// UC SEND Middle.
    pub const UC_SEND_MIDDLE: Opcode = Opcode(UC | op::SEND_MIDDLE);
    /// UC SEND Last.
    pub const UC_SEND_LAST: Opcode = Opcode(UC | op::SEND_LAST);
    /// UC SEND Last with Immediate.
    pub const UC_SEND_LAST_WITH_IMMEDIATE: Opcode = Opcode(UC | op::SEND_LAST_WITH_IMMEDIATE);
    /// UC SEND Only.
    pub const UC_SEND_ONLY: Opcode = Opcode(UC | op::SEND_ONLY);
    /// UC SEND Only with Immediate.
    pub const UC_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(UC | op::SEND_ONLY_WITH_IMMEDIATE);
    /// UC RDMA WRITE First.
    pub const UC_RDMA_WRITE_FIRST: Opcode = Opcode(UC | op::RDMA_WRITE_FIRST);
    /// UC RDMA WRITE Middle.
    pub const UC_RDMA_WRITE_MIDDLE: Opcode = Opcode(UC | op::RDMA_WRITE_MIDDLE);
    /// UC RDMA WRITE Last.
    pub const UC_RDMA_WRITE_LAST: Opcode = Opcode(UC | op::RDMA_WRITE_LAST);
    /// UC RDMA WRITE Last with Immediate.
    pub const UC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Opcode =
        Opcode(UC | op::RDMA_WRITE_LAST_WITH_IMMEDIATE);
    /// UC RDMA WRITE Only.
    pub const UC_RDMA_WRITE_ONLY: Opcode = Opcode(UC | op::RDMA_WRITE_ONLY);
    /// UC RDMA WRITE Only with Immediate.
    pub const UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Opcode =
        Opcode(UC | op::RDMA_WRITE_ONLY_WITH_IMMEDIATE);

    /// UD SEND Only.
    pub const UD_SEND_ONLY: Opcode = Opcode(UD | op::SEND_ONLY);
    /// UD SEND Only with Immediate.
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(UD | op::SEND_ONLY_WITH_IMMEDIATE);

    /// The RoCEv2 congestion notification packet (annex A17). Not in the table: roxe neither
    /// sends nor reacts to CNPs, so [`Opcode::info`] answers `None`.
    pub const CNP: Opcode = Opcode(0x81);

    /// Wraps a raw opcode byte.
    pub const fn new(raw: u8) -> Opcode {
        Opcode(raw)
    }

    /// The raw opcode byte.
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The transport bits, decoded; `None` for reserved and vendor codes.
    pub const fn transport(self) -> Option<Transport> {
        Transport::of(self.0)
    }

    /// The operation bits (the low five).
    pub const fn operation_bits(self) -> u8 {
        self.0 & Self::OPERATION_MASK
    }

    /// The table entry of the opcode, or `None` if roxe does not implement it.
    pub fn info(self) -> Option<&'static OpcodeInfo> {
        let slot = *INDEX.get(usize::from(self.0))?;
        OPCODES.get(usize::from(slot))
    }

    /// Every opcode in the table.
    pub fn all() -> impl Iterator<Item = &'static OpcodeInfo> {
        OPCODES.iter()
    }
}

/// Builds one table entry.
const fn entry(
    opcode: Opcode,
    name: &'static str,
    operation: Operation,
    position: Position,
    headers: ExtHeaders,
    has_payload: bool,
) -> OpcodeInfo {
    let transport = match Transport::of(opcode.0) {
        Some(t) => t,
        // Every entry below has a valid transport; RC is an inert stand-in the tests rule out.
        None => Transport::Rc,
    };
    let mut offsets = [0u8; PAYLOAD_AT + 1];
    let mut i = 0;
    while i <= PAYLOAD_AT {
        // At most BTH_LEN plus every extension header: 12 + 56 bytes.
        offsets[i] = (BTH_LEN + headers.len_below(i as u8)) as u8;
        i += 1;
    }
    OpcodeInfo {
        opcode,
        name,
        transport,
        operation,
        position,
        headers,
        has_payload,
        offsets,
    }
}

use ExtHeader as H;
use Operation as O;
use Position as P;

const NO_EXT: ExtHeaders = ExtHeaders::NONE;
const IMM: ExtHeaders = ExtHeaders::NONE.with(H::ImmDt);
const RETH: ExtHeaders = ExtHeaders::NONE.with(H::Reth);
const RETH_IMM: ExtHeaders = RETH.with(H::ImmDt);
const AETH: ExtHeaders = ExtHeaders::NONE.with(H::Aeth);
const AETH_ATOMIC_ACK: ExtHeaders = AETH.with(H::AtomicAckEth);
const ATOMIC: ExtHeaders = ExtHeaders::NONE.with(H::AtomicEth);
const IETH: ExtHeaders = ExtHeaders::NONE.with(H::Ieth);
const FETH_RETH: ExtHeaders = ExtHeaders::NONE.with(H::Feth).with(H::Reth);
const DETH: ExtHeaders = ExtHeaders::NONE.with(H::Deth);
const DETH_IMM: ExtHeaders = DETH.with(H::ImmDt);

/// The SEND and RDMA WRITE families, which RC and UC share: `$t` is the transport bits, `$p`
/// the name prefix.
macro_rules! send_write_family {
    ($t:expr, $p:literal) => {
        [
            entry(
                Opcode($t | op::SEND_FIRST),
                concat!($p, "_SEND_FIRST"),
                O::Send,
                P::First,
                NO_EXT,
                true,
            ),
            entry(
                Opcode($t | op::SEND_MIDDLE),
                concat!($p, "_SEND_MIDDLE"),
                O::Send,
                P::Middle,
                NO_EXT,
                true,
            ),
            entry(
                Opcode($t | op::SEND_LAST),
                concat!($p, "_SEND_LAST"),
                O::Send,
                P::Last,
                NO_EXT,
                true,
            ),
            entry(
                Opcode($t | op::SEND_LAST_WITH_IMMEDIATE),
                concat!($p, "_SEND_LAST_WITH_IMMEDIATE"),
                O::Send,
                P::Last,
                IMM,
                true,
            ),
            entry(
                Opcode($t | op::SEND_ONLY),
                concat!($p, "_SEND_ONLY"),
                O::Send,
                P::Only,
                NO_EXT,
                true,
            ),
            entry(
                Opcode($t | op::SEND_ONLY_WITH_IMMEDIATE),
                concat!($p, "_SEND_ONLY_WITH_IMMEDIATE"),
                O::Send,
                P::Only,
                IMM,
                true,
            ),
            entry(
                Opcode($t | op::RDMA_WRITE_FIRST),
                concat!($p, "_RDMA_WRITE_FIRST"),
                O::RdmaWrite,
                P::First,
                RETH,
                true,
            ),
            entry(
                Opcode($t | op::RDMA_WRITE_MIDDLE),
                concat!($p, "_RDMA_WRITE_MIDDLE"),
                O::RdmaWrite,
                P::Middle,
                NO_EXT,
                true,
            ),
            entry(
                Opcode($t | op::RDMA_WRITE_LAST),
                concat!($p, "_RDMA_WRITE_LAST"),
                O::RdmaWrite,
                P::Last,
                NO_EXT,
                true,
            ),
            entry(
                Opcode($t | op::RDMA_WRITE_LAST_WITH_IMMEDIATE),
                concat!($p, "_RDMA_WRITE_LAST_WITH_IMMEDIATE"),
                O::RdmaWrite,
                P::Last,
                IMM,
                true,
            ),
            entry(
                Opcode($t | op::RDMA_WRITE_ONLY),
                concat!($p, "_RDMA_WRITE_ONLY"),
                O::RdmaWrite,
                P::Only,
                RETH,
                true,
            ),
            entry(
                Opcode($t | op::RDMA_WRITE_ONLY_WITH_IMMEDIATE),
                concat!($p, "_RDMA_WRITE_ONLY_WITH_IMMEDIATE"),
                O::RdmaWrite,
                P::Only,
                RETH_IMM,
                true,
            ),
        ]
    };
}

const RC_FAMILY: [OpcodeInfo; 12] = send_write_family!(RC, "RC");
const UC_FAMILY: [OpcodeInfo; 12] = send_write_family!(UC, "UC");

/// The RC opcodes beyond SEND and RDMA WRITE.
const RC_OTHERS: [OpcodeInfo; 13] = [
    entry(
        Opcode::RC_RDMA_READ_REQUEST,
        "RC_RDMA_READ_REQUEST",
        O::RdmaReadRequest,
        P::Only,
        RETH,
        false,
    ),
    entry(
        Opcode::RC_RDMA_READ_RESPONSE_FIRST,
        "RC_RDMA_READ_RESPONSE_FIRST",
        O::RdmaReadResponse,
        P::First,
        AETH,
        true,
    ),
    // Middle read responses carry no AETH (IBA 9.2): only the first and last do.
    entry(
        Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
        "RC_RDMA_READ_RESPONSE_MIDDLE",
        O::RdmaReadResponse,
        P::Middle,
        NO_EXT,
        true,
    ),
    entry(
        Opcode::RC_RDMA_READ_RESPONSE_LAST,
        "RC_RDMA_READ_RESPONSE_LAST",
        O::RdmaReadResponse,
        P::Last,
        AETH,
        true,
    ),
    entry(
        Opcode::RC_RDMA_READ_RESPONSE_ONLY,
        "RC_RDMA_READ_RESPONSE_ONLY",
        O::RdmaReadResponse,
        P::Only,
        AETH,
        true,
    ),
    entry(
        Opcode::RC_ACKNOWLEDGE,
        "RC_ACKNOWLEDGE",
        O::Acknowledge,
        P::Only,
        AETH,
        false,
    ),
    entry(
        Opcode::RC_ATOMIC_ACKNOWLEDGE,
        "RC_ATOMIC_ACKNOWLEDGE",
        O::AtomicAcknowledge,
        P::Only,
        AETH_ATOMIC_ACK,
        false,
    ),
    entry(
        Opcode::RC_COMPARE_SWAP,
        "RC_COMPARE_SWAP",
        O::CompareSwap,
        P::Only,
        ATOMIC,
        false,
    ),
    entry(
        Opcode::RC_FETCH_ADD,
        "RC_FETCH_ADD",
        O::FetchAdd,
        P::Only,
        ATOMIC,
        false,
    ),
    entry(
        Opcode::RC_SEND_LAST_WITH_INVALIDATE,
        "RC_SEND_LAST_WITH_INVALIDATE",
        O::Send,
        P::Last,
        IETH,
        true,
    ),
    entry(
        Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
        "RC_SEND_ONLY_WITH_INVALIDATE",
        O::Send,
        P::Only,
        IETH,
        true,
    ),
    // FLUSH names its range with a RETH after the FETH and moves no data (annex A19).
    entry(
        Opcode::RC_FLUSH,
        "RC_FLUSH",
        O::Flush,
        P::Only,
        FETH_RETH,
        false,
    ),
    // ATOMIC WRITE carries its 8-byte value as payload after the RETH (annex A19).
    entry(
        Opcode::RC_ATOMIC_WRITE,
        "RC_ATOMIC_WRITE",
        O::AtomicWrite,
        P::Only,
        RETH,
        true,
    ),
];

const UD_SENDS: [OpcodeInfo; 2] = [
    entry(
        Opcode::UD_SEND_ONLY,
        "UD_SEND_ONLY",
        O::Send,
        P::Only,
        DETH,
        true,
    ),
    entry(
        Opcode::UD_SEND_ONLY_WITH_IMMEDIATE,
        "UD_SEND_ONLY_WITH_IMMEDIATE",
        O::Send,
        P::Only,
        DETH_IMM,
        true,
    ),
];

/// Number of opcodes in the table.
pub const OPCODE_COUNT: usize =
    RC_FAMILY.len() + RC_OTHERS.len() + UC_FAMILY.len() + UD_SENDS.len();

/// Marks an opcode without a table entry in [`INDEX`].
const NO_ENTRY: u8 = u8::MAX;

/// The opcode table: the groups above, concatenated. A static, so that [`Opcode::info`] can
/// hand out `'static` references.
///
/// The initializer runs at compile time only, where an out-of-range index is a build error, not
/// a panic.
static OPCODES: [OpcodeInfo; OPCODE_COUNT] = {
    let mut table = [const { entry(Opcode(0), "", O::Send, P::Only, NO_EXT, false) }; OPCODE_COUNT];
    let groups: [&[OpcodeInfo]; 4] = [&RC_FAMILY, &RC_OTHERS, &UC_FAMILY, &UD_SENDS];
    let mut n = 0;
    let mut g = 0;
    while g < groups.len() {
        let mut i = 0;
        while i < groups[g].len() {
            table[n] = groups[g][i];
            n += 1;
            i += 1;
        }
        g += 1;
    }
    table
};

/// Opcode byte to slot in [`OPCODES`]: a 256-byte lookup instead of a search on every packet.
/// Built at compile time like [`OPCODES`].
static INDEX: [u8; 256] = {
    let mut index = [NO_ENTRY; 256];
    let mut i = 0;
    while i < OPCODES.len() {
        index[OPCODES[i].opcode.0 as usize] = i as u8;
        i += 1;
    }
    index
};

/// The verdict of [`check_op_sequence`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeqCheck {
    /// The opcode may follow the previous one.
    Ok,
    /// A MIDDLE or LAST arrived while no message was in progress: its FIRST was lost or never
    /// sent. RC: NAK Invalid Request (error class C); UC: drop the packet silently and wait for a
    /// new FIRST or ONLY.
    MissingFirst,
    /// A message is in progress and the opcode does not continue it (a new FIRST or ONLY, or a
    /// MIDDLE/LAST of another operation): the LAST was lost or never sent. RC: NAK Invalid
    /// Request (class C); UC: abandon the partial message (class D1) and drop the packet.
    MissingLast,
}

impl SeqCheck {
    /// Whether the sequence is legal.
    pub const fn is_ok(self) -> bool {
        matches!(self, SeqCheck::Ok)
    }
}

/// Whether `next` may follow `prev` within one direction of a connected QP (IBA 9.8.3: the
/// responder checks that a multi-packet message arrives as FIRST, MIDDLE*, LAST of one operation
/// and that no other packet interleaves).
///
/// `prev` is the opcode of the last packet accepted in sequence, `None` when there was none (a
/// fresh QP, or after an error reset the check). A message is in progress when `prev` is a FIRST
/// or MIDDLE; then `next` must be a MIDDLE or LAST of the same transport and operation. Otherwise
/// `next` must not be a MIDDLE or LAST. An opcode outside the table neither continues a message
/// nor needs one; the parser has already refused such packets, so this only keeps the function
/// total.
///
/// The same grammar holds for RDMA READ response data, but a requester must also accept a read
/// response that restarts at FIRST or ONLY after it retried the READ; that is its decision, not
/// this function's.
pub fn check_op_sequence(prev: Option<Opcode>, next: Opcode) -> SeqCheck {
    let in_progress = match prev.and_then(Opcode::info) {
        Some(p) if matches!(p.position, Position::First | Position::Middle) => Some(p),
        _ => None,
    };
    let next = next.info();
    let next_continues = matches!(
        next.map(OpcodeInfo::position),
        Some(Position::Middle | Position::Last)
    );
    match (in_progress, next) {
        (Some(p), Some(n))
            if next_continues && n.transport == p.transport && n.operation == p.operation =>
        {
            SeqCheck::Ok
        }
        (Some(_), _) => SeqCheck::MissingLast,
        (None, _) if next_continues => SeqCheck::MissingFirst,
        (None, _) => SeqCheck::Ok,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        assert_eq!(OPCODE_COUNT, 39);
        for (slot, info) in OPCODES.iter().enumerate() {
            // Each opcode appears once and the index points back at it.
            assert_eq!(
                INDEX[info.opcode.0 as usize] as usize, slot,
                "{}",
                info.name
            );
            assert_eq!(info.opcode.info(), Some(info));
            // The transport matches the name prefix and the opcode bits.
            let prefix = match info.transport {
                Transport::Rc => "RC_",
                Transport::Uc => "UC_",
                Transport::Ud => "UD_",
                _ => panic!("unexpected transport in {}", info.name),
            };
            assert!(info.name.starts_with(prefix), "{}", info.name);
            assert_eq!(info.opcode.transport(), Some(info.transport));
            // Headers without payload: the header length is everything.
            assert!(info.header_len() >= BTH_LEN);
            assert!(info.header_len() <= BTH_LEN + RETH_LEN + IMMDT_LEN + DETH_LEN);
        }
        let known = (0..=255u8)
            .filter(|&b| Opcode::new(b).info().is_some())
            .count();
        assert_eq!(known, OPCODE_COUNT);
    }

    #[test]
    fn opcode_values_match_ib_pack() {
        // Spot checks against IBA table 35 (the values of `IB_OPCODE_*` in Linux's ib_pack.h).
        assert_eq!(Opcode::RC_SEND_ONLY.get(), 0x04);
        assert_eq!(Opcode::RC_RDMA_READ_REQUEST.get(), 0x0c);
        assert_eq!(Opcode::RC_ACKNOWLEDGE.get(), 0x11);
        assert_eq!(Opcode::RC_SEND_ONLY_WITH_INVALIDATE.get(), 0x17);
        assert_eq!(Opcode::RC_FLUSH.get(), 0x1c);
        assert_eq!(Opcode::RC_ATOMIC_WRITE.get(), 0x1d);
        assert_eq!(Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE.get(), 0x2b);
        assert_eq!(Opcode::UD_SEND_ONLY.get(), 0x64);
        assert_eq!(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE.get(), 0x65);
    }

    #[test]
    fn unknown_opcodes_have_no_entry() {
        for raw in [
            0x15u8, 0x18, 0x1b, 0x1e, 0x1f, 0x2c, 0x36, 0x40, 0x44, 0x60, 0x63, 0x66, 0x81, 0xa0,
            0xc0, 0xff,
        ] {
            assert_eq!(Opcode::new(raw).info(), None, "{raw:#x}");
        }
        assert_eq!(Opcode::CNP.transport(), Some(Transport::Cnp));
        assert_eq!(Opcode::new(0xa4).transport(), Some(Transport::Xrc));
        assert_eq!(Opcode::new(0xc4).transport(), None);
        assert_eq!(Opcode::new(0xe4).transport(), None);
    }

    fn info(op: Opcode) -> &'static OpcodeInfo {
        op.info().unwrap()
    }

    #[test]
    fn header_offsets_match_rxe() {
        // Offsets from the BTH, as rxe_opcode.c lays them out.
        let w = info(Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE);
        assert_eq!(
            (w.offset(H::Reth), w.offset(H::ImmDt), w.header_len()),
            (Some(12), Some(28), 32)
        );
        let a = info(Opcode::RC_ATOMIC_ACKNOWLEDGE);
        assert_eq!(
            (a.offset(H::Aeth), a.offset(H::AtomicAckEth), a.header_len()),
            (Some(12), Some(16), 24)
        );
        let f = info(Opcode::RC_FLUSH);
        assert_eq!(
            (f.offset(H::Feth), f.offset(H::Reth), f.header_len()),
            (Some(12), Some(16), 32)
        );
        let u = info(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE);
        assert_eq!(
            (u.offset(H::Deth), u.offset(H::ImmDt), u.header_len()),
            (Some(12), Some(20), 24)
        );
        let c = info(Opcode::RC_COMPARE_SWAP);
        assert_eq!((c.offset(H::AtomicEth), c.header_len()), (Some(12), 40));
        let i = info(Opcode::RC_SEND_LAST_WITH_INVALIDATE);
        assert_eq!((i.offset(H::Ieth), i.header_len()), (Some(12), 16));
        assert_eq!(info(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE).header_len(), 12);
        assert_eq!(info(Opcode::RC_ATOMIC_WRITE).header_len(), 28);
        assert_eq!(info(Opcode::RC_ACKNOWLEDGE).offset(H::Reth), None);
    }

    #[test]
    fn offsets_follow_wire_order() {
        for info in Opcode::all() {
            let mut expected = BTH_LEN;
            for h in ExtHeader::ALL {
                if info.has(h) {
                    assert_eq!(info.offset(h), Some(expected), "{} {:?}", info.name, h);
                    expected += h.size();
                } else {
                    assert_eq!(info.offset(h), None);
                }
            }
            assert_eq!(info.header_len(), expected);
        }
    }

    #[test]
    fn classification() {
        let send_first = info(Opcode::RC_SEND_FIRST);
        assert!(send_first.is_send() && send_first.is_request() && send_first.starts_message());
        assert!(send_first.needs_recv_wqe() && !send_first.completes_recv_wqe());
        assert!(send_first.is_acknowledged());
        let send_last = info(Opcode::UC_SEND_LAST);
        assert!(
            !send_last.needs_recv_wqe()
                && send_last.completes_recv_wqe()
                && !send_last.is_acknowledged()
        );
        let write_imm = info(Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE);
        assert!(
            write_imm.is_write() && write_imm.needs_recv_wqe() && write_imm.completes_recv_wqe()
        );
        let write_only = info(Opcode::RC_RDMA_WRITE_ONLY);
        assert!(!write_only.needs_recv_wqe() && !write_only.completes_recv_wqe());
        let read_resp = info(Opcode::RC_RDMA_READ_RESPONSE_ONLY);
        assert!(read_resp.is_response() && read_resp.is_read_response() && !read_resp.is_ack());
        assert!(!read_resp.is_acknowledged());
        let ack = info(Opcode::RC_ACKNOWLEDGE);
        assert!(ack.is_ack() && ack.is_response() && !ack.has_payload());
        assert!(info(Opcode::RC_RDMA_READ_REQUEST).is_read());
        assert!(info(Opcode::RC_FETCH_ADD).is_atomic());
        assert!(info(Opcode::RC_FLUSH).is_flush());
        assert!(info(Opcode::RC_ATOMIC_WRITE).is_atomic_write());
        assert!(info(Opcode::RC_SEND_ONLY_WITH_INVALIDATE).has_invalidate());
        assert!(info(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE).has_immediate());
        assert!(!info(Opcode::UD_SEND_ONLY).is_acknowledged());
        assert_eq!(info(Opcode::RC_SEND_MIDDLE).name(), "RC_SEND_MIDDLE");
        assert_eq!(
            info(Opcode::UC_RDMA_WRITE_FIRST).name(),
            "UC_RDMA_WRITE_FIRST"
        );
    }

    #[test]
    fn op_sequence() {
        use Opcode as Op;
        let ok = |p: Option<Opcode>, n| check_op_sequence(p, n);
        // A message in progress continues with the same operation.
        assert_eq!(
            ok(Some(Op::RC_SEND_FIRST), Op::RC_SEND_MIDDLE),
            SeqCheck::Ok
        );
        assert_eq!(
            ok(Some(Op::RC_SEND_MIDDLE), Op::RC_SEND_LAST_WITH_INVALIDATE),
            SeqCheck::Ok
        );
        assert_eq!(
            ok(
                Some(Op::UC_RDMA_WRITE_FIRST),
                Op::UC_RDMA_WRITE_LAST_WITH_IMMEDIATE
            ),
            SeqCheck::Ok
        );
        assert_eq!(
            ok(
                Some(Op::RC_RDMA_READ_RESPONSE_FIRST),
                Op::RC_RDMA_READ_RESPONSE_LAST
            ),
            SeqCheck::Ok
        );
        // ... and nothing else.
        assert_eq!(
            ok(Some(Op::RC_SEND_FIRST), Op::RC_SEND_ONLY),
            SeqCheck::MissingLast
        );
        assert_eq!(
            ok(Some(Op::RC_SEND_FIRST), Op::RC_RDMA_WRITE_MIDDLE),
            SeqCheck::MissingLast
        );
        assert_eq!(
            ok(Some(Op::RC_RDMA_WRITE_MIDDLE), Op::RC_RDMA_READ_REQUEST),
            SeqCheck::MissingLast
        );
        assert_eq!(
            ok(Some(Op::RC_SEND_FIRST), Op::UC_SEND_LAST),
            SeqCheck::MissingLast
        );
        assert_eq!(
            ok(Some(Op::UC_SEND_MIDDLE), Op::new(0x1f)),
            SeqCheck::MissingLast
        );
        // No message in progress: MIDDLE and LAST lack their FIRST.
        assert_eq!(ok(None, Op::RC_SEND_MIDDLE), SeqCheck::MissingFirst);
        assert_eq!(
            ok(Some(Op::RC_SEND_LAST), Op::RC_RDMA_WRITE_LAST),
            SeqCheck::MissingFirst
        );
        assert_eq!(
            ok(Some(Op::UC_SEND_ONLY), Op::UC_SEND_LAST_WITH_IMMEDIATE),
            SeqCheck::MissingFirst
        );
        assert_eq!(
            ok(Some(Op::new(0xff)), Op::RC_SEND_MIDDLE),
            SeqCheck::MissingFirst
        );
        // New messages may start.
        assert_eq!(ok(None, Op::RC_SEND_FIRST), SeqCheck::Ok);
        assert_eq!(
            ok(Some(Op::RC_SEND_LAST), Op::RC_COMPARE_SWAP),
            SeqCheck::Ok
        );
        assert_eq!(
            ok(Some(Op::RC_RDMA_WRITE_ONLY), Op::RC_RDMA_WRITE_FIRST),
            SeqCheck::Ok
        );
        assert_eq!(ok(None, Op::new(0x15)), SeqCheck::Ok);
        assert!(SeqCheck::Ok.is_ok() && !SeqCheck::MissingLast.is_ok());
    }
}
