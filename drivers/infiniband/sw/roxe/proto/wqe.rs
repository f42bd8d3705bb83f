// SPDX-License-Identifier: GPL-2.0

//! Work queue entries of the rxe ABI (`struct rxe_send_wqe`, `struct rxe_recv_wqe` in
//! `rdma_user_rxe.h`), parsed from a copy of one ring slot and validated.
//!
//! The rings are user-writable: the driver copies a slot out of the ring first, then parses the
//! copy here, so that what is checked is what is used. Nothing here panics on any input, and every
//! rejection maps to the completion status a hardware HCA reports for it.

/// Byte layout of `struct rxe_send_wqe` (LP64), from `rdma_user_rxe.h`.
pub mod send_layout {
    /// `wr.wr_id`.
    pub const WR_ID: usize = 0;
    /// `wr.opcode`.
    pub const OPCODE: usize = 12;
    /// `wr.send_flags`.
    pub const SEND_FLAGS: usize = 16;
    /// `wr.ex`: immediate data (big-endian on the wire) or the rkey to invalidate.
    pub const EX: usize = 20;
    /// `wr.wr`: the per-opcode union.
    pub const WR_UNION: usize = 24;
    /// `dma.length`.
    pub const DMA_LENGTH: usize = 184;
    /// `dma.num_sge`.
    pub const DMA_NUM_SGE: usize = 196;
    /// `dma.sge[]` / `dma.inline_data[]`: right after the 208-byte fixed part.
    pub const DMA_DATA: usize = 208;
}

/// Byte layout of `struct rxe_recv_wqe`.
pub mod recv_layout {
    /// `wr_id`.
    pub const WR_ID: usize = 0;
    /// `dma.length`.
    pub const DMA_LENGTH: usize = 16;
    /// `dma.num_sge`.
    pub const DMA_NUM_SGE: usize = 28;
    /// `dma.sge[]`.
    pub const DMA_DATA: usize = 40;
}

/// Size of one scatter/gather entry (`struct rxe_sge`: addr u64, length u32, lkey u32).
pub const SGE_SIZE: usize = 16;

/// `send_flags` bits (`IBV_SEND_*`).
pub mod send_flags {
    /// Wait for previous RDMA READs and atomics to complete (IBA 10.8.3.3).
    pub const FENCE: u32 = 1;
    /// Generate a completion.
    pub const SIGNALED: u32 = 2;
    /// Set the solicited event bit.
    pub const SOLICITED: u32 = 4;
    /// The payload is inline in the WQE.
    pub const INLINE: u32 = 8;
    /// Offload the IP checksum (raw packet QPs only).
    pub const IP_CSUM: u32 = 16;
}

/// A work request opcode (`enum ib_uverbs_wr_opcode`), the ones the rxe ABI carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOpcode {
    /// RDMA WRITE.
    RdmaWrite,
    /// RDMA WRITE with immediate.
    RdmaWriteWithImm,
    /// SEND.
    Send,
    /// SEND with immediate.
    SendWithImm,
    /// RDMA READ.
    RdmaRead,
    /// Atomic compare and swap.
    CmpAndSwp,
    /// Atomic fetch and add.
    FetchAndAdd,
    /// Local invalidate.
    LocalInv,
    /// Bind a memory window.
    BindMw,
    /// SEND with invalidate.
    SendWithInv,
    /// RDMA FLUSH.
    Flush,
    /// RDMA ATOMIC WRITE.
    AtomicWrite,
    /// Fast registration of an MR (`IB_WR_REG_MR`): kernel consumers only, whose work requests
    /// the driver writes into the ring itself.
    RegMr,
}

impl SendOpcode {
    /// Parses a raw opcode; TSO, READ_WITH_INV and the masked atomics are not part of the ABI.
    pub const fn from_raw(raw: u32) -> Option<SendOpcode> {
        Some(match raw {
            0 => SendOpcode::RdmaWrite,
            1 => SendOpcode::RdmaWriteWithImm,
            2 => SendOpcode::Send,
            3 => SendOpcode::SendWithImm,
            4 => SendOpcode::RdmaRead,
            5 => SendOpcode::CmpAndSwp,
            6 => SendOpcode::FetchAndAdd,
            7 => SendOpcode::LocalInv,
            8 => SendOpcode::BindMw,
            9 => SendOpcode::SendWithInv,
            14 => SendOpcode::Flush,
            15 => SendOpcode::AtomicWrite,
            0x20 => SendOpcode::RegMr,
            _ => return None,
        })
    }

    /// Whether a QP of type `qp` may post this opcode (IBA 10.8.2, table 78 "Work request
    /// operations"; rxe adds FLUSH and ATOMIC WRITE on RC).
    pub const fn allowed_on(self, qp: QpType) -> bool {
        match qp {
            QpType::Rc => true,
            QpType::Uc => matches!(
                self,
                SendOpcode::RdmaWrite
                    | SendOpcode::RdmaWriteWithImm
                    | SendOpcode::Send
                    | SendOpcode::SendWithImm
                    | SendOpcode::LocalInv
                    | SendOpcode::RegMr
                    | SendOpcode::BindMw
                    | SendOpcode::SendWithInv
            ),
            QpType::Ud | QpType::Gsi => matches!(self, SendOpcode::Send | SendOpcode::SendWithImm),
        }
    }

    /// Whether the opcode moves a payload from local buffers (so SGEs or inline data count).
    const fn has_payload(self) -> bool {
        matches!(
            self,
            SendOpcode::RdmaWrite
                | SendOpcode::RdmaWriteWithImm
                | SendOpcode::Send
                | SendOpcode::SendWithImm
                | SendOpcode::SendWithInv
                | SendOpcode::RdmaRead
        )
    }
}

/// QP transport types with a send queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// General services interface (QP1, UD semantics).
    Gsi,
}

/// A scatter/gather entry as user space wrote it; checked against the MR at use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sge {
    /// Virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key of the MR that covers it.
    pub lkey: u32,
}

/// Limits of the send queue, from the QP's creation.
#[derive(Clone, Copy, Debug)]
pub struct SqLimits {
    /// Maximum SGEs per WQE.
    pub max_sge: u32,
    /// Maximum inline payload.
    pub max_inline: u32,
    /// Maximum message size (the port's `max_msg_sz`).
    pub max_msg: u32,
}

/// Where the payload of a send WQE is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// `num_sge` entries at [`send_layout::DMA_DATA`] of the slot copy.
    Sges {
        /// Number of entries.
        num: u32,
    },
    /// `len` inline bytes at [`send_layout::DMA_DATA`] of the slot copy.
    Inline {
        /// Number of bytes.
        len: u32,
    },
}

/// A validated send WQE: the fixed part, decoded. The payload descriptors stay in the slot copy
/// and are read with [`sge_at`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWqe {
    /// The caller's id, returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub opcode: SendOpcode,
    /// `IBV_SEND_*` flags.
    pub flags: u32,
    /// Immediate data or the rkey to invalidate (raw, as written).
    pub ex: u32,
    /// The first 32 bytes of the per-opcode union (remote address, rkey, atomic operands,
    /// UD destination), decoded by the requester per opcode.
    pub wr: [u8; 32],
    /// Total payload length.
    pub length: u32,
    /// Where the payload is.
    pub payload: Payload,
}

/// Why a send WQE was rejected, mapped to the completion status a real HCA reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WqeError {
    /// The slot copy is shorter than the fixed part.
    Truncated,
    /// Unknown opcode, or one the QP type does not allow: `IBV_WC_LOC_QP_OP_ERR`.
    BadOpcode,
    /// More SGEs than the QP allows, or than fit the slot: `IBV_WC_LOC_QP_OP_ERR`.
    TooManySges,
    /// Inline payload longer than `max_inline` or than fits the slot: `IBV_WC_LOC_LEN_ERR`.
    InlineTooLong,
    /// Message longer than `max_msg`, or SGE lengths that overflow: `IBV_WC_LOC_LEN_ERR`.
    TooLong,
    /// Atomic operations move exactly 8 bytes: `IBV_WC_LOC_LEN_ERR`.
    BadAtomicLength,
}

/// Completion status values (`enum ib_wc_status`) the WQE checks produce.
pub const WC_LOC_LEN_ERR: u32 = 1;
/// See [`WC_LOC_LEN_ERR`].
pub const WC_LOC_QP_OP_ERR: u32 = 2;

impl WqeError {
    /// The `ib_wc_status` the error completes with.
    pub const fn wc_status(self) -> u32 {
        match self {
            WqeError::Truncated | WqeError::BadOpcode | WqeError::TooManySges => WC_LOC_QP_OP_ERR,
            WqeError::InlineTooLong | WqeError::TooLong | WqeError::BadAtomicLength => {
                WC_LOC_LEN_ERR
            }
        }
    }
}

/// `N` bytes at `off`, or `None` past the end.
fn read_array<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}

// The rings hold host-endian values (user space and kernel share the CPU).
fn read_u32(b: &[u8], off: usize) -> Option<u32> {
    read_array(b, off).map(u32::from_ne_bytes)
}

fn read_u64(b: &[u8], off: usize) -> Option<u64> {
    read_array(b, off).map(u64::from_ne_bytes)
}

/// Reads SGE `i` of a slot copy whose SGE array starts at `base`.
pub fn sge_at(slot: &[u8], base: usize, i: u32) -> Option<Sge> {
    let off = base.checked_add((i as usize).checked_mul(SGE_SIZE)?)?;
    Some(Sge {
        addr: read_u64(slot, off)?,
        length: read_u32(slot, off + 8)?,
        lkey: read_u32(slot, off + 12)?,
    })
}

/// Sums the lengths of `num` SGEs at `base`; `None` if they overflow u32 or leave the slot.
fn sum_sges(slot: &[u8], base: usize, num: u32) -> Option<u32> {
    (0..num).try_fold(0u32, |acc, i| {
        acc.checked_add(sge_at(slot, base, i)?.length)
    })
}

impl SendWqe {
    /// Parses and validates a copy of one send-queue slot for a QP of type `qp`.
    ///
    /// The message length is recomputed from the SGEs (or taken from `dma.length` for inline
    /// data, bounded by `max_inline`): rdma-core providers before v64 could write a wrong
    /// `dma.length`, and user space may write anything.
    pub fn parse(slot: &[u8], qp: QpType, limits: &SqLimits) -> Result<SendWqe, WqeError> {
        use send_layout as L;
        if slot.len() < L::DMA_DATA {
            return Err(WqeError::Truncated);
        }
        let rd32 = |off| read_u32(slot, off).ok_or(WqeError::Truncated);
        let wr_id = read_u64(slot, L::WR_ID).ok_or(WqeError::Truncated)?;
        let opcode = SendOpcode::from_raw(rd32(L::OPCODE)?).ok_or(WqeError::BadOpcode)?;
        if !opcode.allowed_on(qp) {
            return Err(WqeError::BadOpcode);
        }
        let flags = rd32(L::SEND_FLAGS)?;
        let ex = rd32(L::EX)?;
        let wr: [u8; 32] = read_array(slot, L::WR_UNION).ok_or(WqeError::Truncated)?;
        let room = slot.len() - L::DMA_DATA;

        let (length, payload) = match opcode {
            SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd => (8, Payload::Sges { num: 1 }),
            SendOpcode::AtomicWrite => {
                // The 8-byte value travels inline in `dma.atomic_wr`.
                if rd32(L::DMA_LENGTH)? != 8 {
                    return Err(WqeError::BadAtomicLength);
                }
                (8, Payload::Inline { len: 8 })
            }
            SendOpcode::LocalInv | SendOpcode::BindMw | SendOpcode::RegMr => {
                (0, Payload::Sges { num: 0 })
            }
            SendOpcode::Flush => (rd32(L::DMA_LENGTH)?, Payload::Sges { num: 0 }),
            _ if flags & send_flags::INLINE != 0
                && opcode.has_payload()
                && opcode != SendOpcode::RdmaRead =>
            {
                let len = rd32(L::DMA_LENGTH)?;
                if len > limits.max_inline || len as usize > room {
                    return Err(WqeError::InlineTooLong);
                }
                (len, Payload::Inline { len })
            }
            _ => {
                let num = rd32(L::DMA_NUM_SGE)?;
                if num > limits.max_sge || (num as usize).saturating_mul(SGE_SIZE) > room {
                    return Err(WqeError::TooManySges);
                }
                let len = sum_sges(slot, L::DMA_DATA, num).ok_or(WqeError::TooLong)?;
                (len, Payload::Sges { num })
            }
        };
        if matches!(opcode, SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd) {
            // The single SGE receives the original value: exactly 8 bytes (IBA 9.4.5).
            let num = rd32(L::DMA_NUM_SGE)?;
            let sge = sge_at(slot, L::DMA_DATA, 0).ok_or(WqeError::Truncated)?;
            if num != 1 || sge.length != 8 {
                return Err(WqeError::BadAtomicLength);
            }
        }
        // The maximum message size bounds the data a message moves. A FLUSH moves none: its
        // length names a range to make persistent or visible, and at the MR selectivity level
        // it means nothing at all (annex A19; rdma-core's tests send a FLUSH of the whole MR
        // with lengths past the maximum message size and expect success, as rxe gives).
        if length > limits.max_msg && opcode != SendOpcode::Flush {
            return Err(WqeError::TooLong);
        }
        Ok(SendWqe {
            wr_id,
            opcode,
            flags,
            ex,
            wr,
            length,
            payload,
        })
    }
}

/// A validated receive WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvWqe {
    /// The caller's id, returned in the completion.
    pub wr_id: u64,
    /// Number of SGEs at [`recv_layout::DMA_DATA`] of the slot copy.
    pub num_sge: u32,
    /// Total buffer length.
    pub length: u32,
}

impl RecvWqe {
    /// Parses and validates a copy of one receive-queue slot.
    pub fn parse(slot: &[u8], max_sge: u32) -> Result<RecvWqe, WqeError> {
        use recv_layout as L;
        if slot.len() < L::DMA_DATA {
            return Err(WqeError::Truncated);
        }
        let wr_id = read_u64(slot, L::WR_ID).ok_or(WqeError::Truncated)?;
        let num_sge = read_u32(slot, L::DMA_NUM_SGE).ok_or(WqeError::Truncated)?;
        if num_sge > max_sge
            || (num_sge as usize).saturating_mul(SGE_SIZE) > slot.len() - L::DMA_DATA
        {
            return Err(WqeError::TooManySges);
        }
        let length = sum_sges(slot, L::DMA_DATA, num_sge).ok_or(WqeError::TooLong)?;
        Ok(RecvWqe {
            wr_id,
            num_sge,
            length,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use send_layout as L;

    const LIMITS: SqLimits = SqLimits {
        max_sge: 4,
        max_inline: 64,
        max_msg: 1 << 23,
    };

    fn slot(size: usize) -> std::vec::Vec<u8> {
        std::vec![0u8; size]
    }
    fn put32(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }
    fn put64(b: &mut [u8], off: usize, v: u64) {
        b[off..off + 8].copy_from_slice(&v.to_ne_bytes());
    }
    fn put_sge(b: &mut [u8], base: usize, i: usize, addr: u64, len: u32, lkey: u32) {
        let o = base + i * SGE_SIZE;
        put64(b, o, addr);
        put32(b, o + 8, len);
        put32(b, o + 12, lkey);
    }

    #[test]
    fn send_with_two_sges() {
        let mut s = slot(256);
        put64(&mut s, L::WR_ID, 0xabcd);
        put32(&mut s, L::OPCODE, 2);
        put32(&mut s, L::SEND_FLAGS, send_flags::SIGNALED);
        put32(&mut s, L::DMA_NUM_SGE, 2);
        put32(&mut s, L::DMA_LENGTH, 999); // a lie: the length comes from the SGEs
        put_sge(&mut s, L::DMA_DATA, 0, 0x1000, 100, 7);
        put_sge(&mut s, L::DMA_DATA, 1, 0x2000, 28, 7);
        let w = SendWqe::parse(&s, QpType::Rc, &LIMITS).unwrap();
        assert_eq!(w.wr_id, 0xabcd);
        assert_eq!(w.opcode, SendOpcode::Send);
        assert_eq!(w.length, 128);
        assert_eq!(w.payload, Payload::Sges { num: 2 });
        assert_eq!(
            sge_at(&s, L::DMA_DATA, 1),
            Some(Sge {
                addr: 0x2000,
                length: 28,
                lkey: 7
            })
        );
    }

    #[test]
    fn inline_send() {
        let mut s = slot(256);
        put32(&mut s, L::OPCODE, 2);
        put32(&mut s, L::SEND_FLAGS, send_flags::INLINE);
        put32(&mut s, L::DMA_LENGTH, 48);
        assert_eq!(
            SendWqe::parse(&s, QpType::Ud, &LIMITS).unwrap().payload,
            Payload::Inline { len: 48 }
        );
        put32(&mut s, L::DMA_LENGTH, 65);
        assert_eq!(
            SendWqe::parse(&s, QpType::Ud, &LIMITS),
            Err(WqeError::InlineTooLong)
        );
    }

    #[test]
    fn opcode_rules() {
        let mut s = slot(256);
        for raw in [10, 11, 12, 13, 16, 0xffff_ffff] {
            put32(&mut s, L::OPCODE, raw);
            assert_eq!(SendOpcode::from_raw(raw), None);
            assert_eq!(
                SendWqe::parse(&s, QpType::Rc, &LIMITS),
                Err(WqeError::BadOpcode)
            );
        }
        put32(&mut s, L::OPCODE, 4); // RDMA READ on UD
        assert_eq!(
            SendWqe::parse(&s, QpType::Ud, &LIMITS),
            Err(WqeError::BadOpcode)
        );
        assert_eq!(
            SendWqe::parse(&s, QpType::Uc, &LIMITS),
            Err(WqeError::BadOpcode)
        );
        assert_eq!(WqeError::BadOpcode.wc_status(), WC_LOC_QP_OP_ERR);
    }

    #[test]
    fn sge_count_and_length_limits() {
        let mut s = slot(256);
        put32(&mut s, L::OPCODE, 0);
        put32(&mut s, L::DMA_NUM_SGE, 5);
        assert_eq!(
            SendWqe::parse(&s, QpType::Rc, &LIMITS),
            Err(WqeError::TooManySges)
        );
        // Fits the QP limit but not the slot (48 bytes after the fixed part = 3 SGEs).
        let mut small = slot(L::DMA_DATA + 48);
        put32(&mut small, L::DMA_NUM_SGE, 4);
        assert_eq!(
            SendWqe::parse(&small, QpType::Rc, &LIMITS),
            Err(WqeError::TooManySges)
        );
        put32(&mut s, L::DMA_NUM_SGE, 2);
        put_sge(&mut s, L::DMA_DATA, 0, 0, u32::MAX, 1);
        put_sge(&mut s, L::DMA_DATA, 1, 0, 1, 1);
        assert_eq!(
            SendWqe::parse(&s, QpType::Rc, &LIMITS),
            Err(WqeError::TooLong)
        );
        put_sge(&mut s, L::DMA_DATA, 0, 0, 1 << 23, 1);
        assert_eq!(
            SendWqe::parse(&s, QpType::Rc, &LIMITS),
            Err(WqeError::TooLong)
        );
        assert_eq!(WqeError::TooLong.wc_status(), WC_LOC_LEN_ERR);
    }

    #[test]
    fn flush_length_is_not_a_message_length() {
        let mut s = slot(256);
        put32(&mut s, L::OPCODE, 14);
        put32(&mut s, L::DMA_LENGTH, 12_345_678);
        let w = SendWqe::parse(&s, QpType::Rc, &LIMITS).unwrap();
        assert_eq!(
            (w.opcode, w.length, w.payload),
            (SendOpcode::Flush, 12_345_678, Payload::Sges { num: 0 })
        );
        assert_eq!(
            SendWqe::parse(&s, QpType::Uc, &LIMITS),
            Err(WqeError::BadOpcode)
        );
    }

    #[test]
    fn atomics_need_one_8_byte_sge() {
        let mut s = slot(256);
        put32(&mut s, L::OPCODE, 6);
        put32(&mut s, L::DMA_NUM_SGE, 1);
        put_sge(&mut s, L::DMA_DATA, 0, 0x1000, 8, 3);
        assert_eq!(SendWqe::parse(&s, QpType::Rc, &LIMITS).unwrap().length, 8);
        put_sge(&mut s, L::DMA_DATA, 0, 0x1000, 4, 3);
        assert_eq!(
            SendWqe::parse(&s, QpType::Rc, &LIMITS),
            Err(WqeError::BadAtomicLength)
        );
        assert_eq!(
            SendWqe::parse(&s, QpType::Uc, &LIMITS),
            Err(WqeError::BadOpcode)
        );
    }

    #[test]
    fn short_slots_are_rejected() {
        for n in 0..L::DMA_DATA {
            assert_eq!(
                SendWqe::parse(&slot(n), QpType::Rc, &LIMITS),
                Err(WqeError::Truncated)
            );
        }
        assert_eq!(RecvWqe::parse(&slot(10), 4), Err(WqeError::Truncated));
    }

    #[test]
    fn recv_wqe() {
        let mut s = slot(128);
        put64(&mut s, recv_layout::WR_ID, 5);
        put32(&mut s, recv_layout::DMA_NUM_SGE, 2);
        put_sge(&mut s, recv_layout::DMA_DATA, 0, 0x10, 10, 1);
        put_sge(&mut s, recv_layout::DMA_DATA, 1, 0x20, 20, 1);
        assert_eq!(
            RecvWqe::parse(&s, 4),
            Ok(RecvWqe {
                wr_id: 5,
                num_sge: 2,
                length: 30
            })
        );
        assert_eq!(RecvWqe::parse(&s, 1), Err(WqeError::TooManySges));
    }
}
