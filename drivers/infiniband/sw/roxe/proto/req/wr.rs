// SPDX-License-Identifier: GPL-2.0

//! The work request union of `struct rxe_send_wr` (the 32 bytes
//! [`SendWqe::wr`](super::SendWqe::wr) keeps), decoded per operation: RDMA, atomic, datagram,
//! FLUSH, memory window bind, fast registration.

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
/// through `ah_num` (the embedded `av` lies beyond the 32 bytes kept in
/// [`SendWqe::wr`](super::SendWqe::wr)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct UdWr {
    /// Destination QP number.
    pub remote_qpn: u32,
    /// Q_Key for the DETH (see [`QKEY_FROM_QP`](super::QKEY_FROM_QP)).
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
/// flush length in `dma.length` ([`SendWqe::length`](super::SendWqe::length)), which is what the
/// RETH carries.
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
