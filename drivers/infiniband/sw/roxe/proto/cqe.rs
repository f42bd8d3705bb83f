// SPDX-License-Identifier: GPL-2.0

//! Completion queue entries (struct ib_uverbs_wc of the rxe ABI): the 48-byte layout and builders for send and receive completions.
//!
//! A user CQ ring holds `struct ib_uverbs_wc` entries, which rdma-core's rxe provider reads
//! directly. The driver builds a [`Cqe`] and copies [`Cqe::to_bytes`] into the ring slot. Every
//! integer field is in host order (user space and kernel share the CPU), except the immediate
//! data, which the verbs ABI carries as a big-endian `__be32` and which therefore travels as the
//! four bytes it had on the wire.

// Offsets come from [`layout`] and always fit in a CQE.
use super::bytes::write;
use super::packet::ImmDt;
use super::wqe::{send_flags, SendOpcode, SendWqe};

/// Size of one `struct ib_uverbs_wc`.
pub const CQE_LEN: usize = 48;

/// Byte offsets of the fields of `struct ib_uverbs_wc` (`include/uapi/rdma/ib_user_verbs.h`).
pub mod layout {
    /// `wr_id`, u64.
    pub const WR_ID: usize = 0;
    /// `status`, u32 (`enum ib_wc_status`).
    pub const STATUS: usize = 8;
    /// `opcode`, u32 (`enum ib_wc_opcode`).
    pub const OPCODE: usize = 12;
    /// `vendor_err`, u32.
    pub const VENDOR_ERR: usize = 16;
    /// `byte_len`, u32.
    pub const BYTE_LEN: usize = 20;
    /// `ex`: `imm_data` (`__be32`) or `invalidate_rkey` (u32).
    pub const EX: usize = 24;
    /// `qp_num`, u32.
    pub const QP_NUM: usize = 28;
    /// `src_qp`, u32.
    pub const SRC_QP: usize = 32;
    /// `wc_flags`, u32.
    pub const WC_FLAGS: usize = 36;
    /// `pkey_index`, u16.
    pub const PKEY_INDEX: usize = 40;
    /// `slid`, u16.
    pub const SLID: usize = 42;
    /// `sl`, u8.
    pub const SL: usize = 44;
    /// `dlid_path_bits`, u8.
    pub const DLID_PATH_BITS: usize = 45;
    /// `port_num`, u8.
    pub const PORT_NUM: usize = 46;
    /// `reserved`, u8 (always zero).
    pub const RESERVED: usize = 47;
}

/// The status of a work completion; the discriminants are the values of `enum ib_wc_status`
/// (`include/rdma/ib_verbs.h`), which equal libibverbs' `enum ibv_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcStatus {
    /// The work request completed.
    Success = 0,
    /// Local length error: a message did not fit the buffers, or exceeded a limit.
    LocLenErr = 1,
    /// Local QP operation error: an internal consistency error, or a bad work request.
    LocQpOpErr = 2,
    /// Local EE context operation error (RD only).
    LocEecOpErr = 3,
    /// Local protection error: an SGE or buffer failed its memory key check.
    LocProtErr = 4,
    /// The QP went to the error state before the request was processed.
    WrFlushErr = 5,
    /// A memory window bind failed.
    MwBindErr = 6,
    /// The responder returned an unexpected transport opcode.
    BadRespErr = 7,
    /// Local access error on a receive buffer (protection error on incoming data).
    LocAccessErr = 8,
    /// The responder NAKed the request as invalid.
    RemInvReqErr = 9,
    /// The responder NAKed the request with a remote access error.
    RemAccessErr = 10,
    /// The responder NAKed the request with a remote operational error.
    RemOpErr = 11,
    /// The transport retry count was exhausted (ACK timeouts, sequence errors).
    RetryExcErr = 12,
    /// The RNR retry count was exhausted.
    RnrRetryExcErr = 13,
    /// Local RDD violation (RD only).
    LocRddViolErr = 14,
    /// Remote invalid RD request (RD only).
    RemInvRdReqErr = 15,
    /// The remote side aborted the operation.
    RemAbortErr = 16,
    /// Invalid EE context number (RD only).
    InvEecnErr = 17,
    /// Invalid EE context state (RD only).
    InvEecStateErr = 18,
    /// Fatal error.
    FatalErr = 19,
    /// Response timeout.
    RespTimeoutErr = 20,
    /// Any other error.
    GeneralErr = 21,
}

impl WcStatus {
    /// The raw `enum ib_wc_status` value.
    pub const fn as_raw(self) -> u32 {
        self as u32
    }

    /// Parses a raw `enum ib_wc_status` value.
    pub const fn from_raw(raw: u32) -> Option<WcStatus> {
        Some(match raw {
            0 => WcStatus::Success,
            1 => WcStatus::LocLenErr,
            2 => WcStatus::LocQpOpErr,
            3 => WcStatus::LocEecOpErr,
            4 => WcStatus::LocProtErr,
            5 => WcStatus::WrFlushErr,
            6 => WcStatus::MwBindErr,
            7 => WcStatus::BadRespErr,
            8 => WcStatus::LocAccessErr,
            9 => WcStatus::RemInvReqErr,
            10 => WcStatus::RemAccessErr,
            11 => WcStatus::RemOpErr,
            12 => WcStatus::RetryExcErr,
            13 => WcStatus::RnrRetryExcErr,
            14 => WcStatus::LocRddViolErr,
            15 => WcStatus::RemInvRdReqErr,
            16 => WcStatus::RemAbortErr,
            17 => WcStatus::InvEecnErr,
            18 => WcStatus::InvEecStateErr,
            19 => WcStatus::FatalErr,
            20 => WcStatus::RespTimeoutErr,
            21 => WcStatus::GeneralErr,
            _ => return None,
        })
    }

    /// Whether the status is [`WcStatus::Success`].
    pub const fn is_success(self) -> bool {
        matches!(self, WcStatus::Success)
    }
}

/// The operation a work completion reports; the discriminants are the values of
/// `enum ib_wc_opcode` (`include/rdma/ib_verbs.h`; the send-side values are those of
/// `enum ib_uverbs_wc_opcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WcOpcode {
    /// SEND, SEND with immediate, SEND with invalidate.
    Send = 0,
    /// RDMA WRITE, with or without immediate.
    RdmaWrite = 1,
    /// RDMA READ.
    RdmaRead = 2,
    /// Atomic compare and swap.
    CompSwap = 3,
    /// Atomic fetch and add.
    FetchAdd = 4,
    /// Memory window bind.
    BindMw = 5,
    /// Local invalidate.
    LocalInv = 6,
    /// TCP segmentation offload (raw packet QPs; never produced by roxe).
    Tso = 7,
    /// RDMA FLUSH.
    Flush = 8,
    /// RDMA ATOMIC WRITE.
    AtomicWrite = 9,
    /// Fast memory registration (kernel consumers only).
    RegMr = 10,
    /// Masked compare and swap (never produced by roxe).
    MaskedCompSwap = 11,
    /// Masked fetch and add (never produced by roxe).
    MaskedFetchAdd = 12,
    /// A receive WQE consumed by a SEND. The value is a flag bit: consumers test
    /// `opcode & RECV` to tell receive completions from send completions.
    Recv = 128,
    /// A receive WQE consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm = 129,
}

impl WcOpcode {
    /// The raw `enum ib_wc_opcode` value.
    pub const fn as_raw(self) -> u32 {
        self as u32
    }

    /// Whether it reports a receive completion.
    pub const fn is_recv(self) -> bool {
        self.as_raw() & WcOpcode::Recv.as_raw() != 0
    }
}

/// `wc_flags` bits (`enum ib_wc_flags`).
pub mod wc_flags {
    /// The receive buffer starts with the 40 bytes of a GRH (or its RoCE stand-in).
    pub const GRH: u32 = 1 << 0;
    /// `ex` holds immediate data.
    pub const WITH_IMM: u32 = 1 << 1;
    /// `ex` holds the R_Key a SEND with invalidate invalidated.
    pub const WITH_INVALIDATE: u32 = 1 << 2;
    /// The IP checksum was verified (raw packet QPs).
    pub const IP_CSUM_OK: u32 = 1 << 3;
    /// The source MAC is reported (kernel `struct ib_wc` only).
    pub const WITH_SMAC: u32 = 1 << 4;
    /// The VLAN id is reported (kernel `struct ib_wc` only).
    pub const WITH_VLAN: u32 = 1 << 5;
    /// The network header type is reported (kernel `struct ib_wc` only).
    pub const WITH_NETWORK_HDR_TYPE: u32 = 1 << 6;
}

/// What a UD receive completion of a user QP reports in `sl` on RoCE: the frame's L3 header
/// type, as mlx5's provider reports it from its CQE (there is no SL on Ethernet). IBA A17.4.5.1
/// has a RoCEv2 UD completion say whether the frame was IPv4 or IPv6, and the user ABI's CQE has
/// no other field for it; UCX's UD transport (1.18 and before) reads it there to find the
/// destination GID in the GRH, and drops every datagram whose type it gets wrong.
pub mod roce_sl {
    /// An IPv4 frame (RoCEv2).
    pub const IPV4: u8 = 2;
    /// An IPv6 frame (RoCEv2).
    pub const IPV6: u8 = 1;
}

/// The completion opcode of a send work request. Immediate data and invalidation do not show in
/// the opcode: a SEND with immediate completes as [`WcOpcode::Send`] (with
/// [`wc_flags::WITH_IMM`] set by [`Cqe::send`]), an RDMA WRITE with immediate as
/// [`WcOpcode::RdmaWrite`].
pub const fn wc_opcode_for_send(op: SendOpcode) -> WcOpcode {
    match op {
        SendOpcode::Send | SendOpcode::SendWithImm | SendOpcode::SendWithInv => WcOpcode::Send,
        SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm => WcOpcode::RdmaWrite,
        SendOpcode::RdmaRead => WcOpcode::RdmaRead,
        SendOpcode::CmpAndSwp => WcOpcode::CompSwap,
        SendOpcode::FetchAndAdd => WcOpcode::FetchAdd,
        SendOpcode::LocalInv => WcOpcode::LocalInv,
        SendOpcode::BindMw => WcOpcode::BindMw,
        SendOpcode::RegMr => WcOpcode::RegMr,
        SendOpcode::Flush => WcOpcode::Flush,
        SendOpcode::AtomicWrite => WcOpcode::AtomicWrite,
    }
}

/// Whether a finished send WQE gets a completion entry: always when it failed (the IBA reports
/// every completion error, even of an unsignaled request), otherwise when the QP signals every
/// request (`sq_sig_all`) or the request asked for it ([`send_flags::SIGNALED`]).
pub const fn send_completion_wanted(sq_sig_all: bool, flags: u32, status: WcStatus) -> bool {
    sq_sig_all || flags & send_flags::SIGNALED != 0 || !status.is_success()
}

/// One work completion, as the ring's `struct ib_uverbs_wc` holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cqe {
    /// The work request's id.
    pub wr_id: u64,
    /// The outcome.
    pub status: WcStatus,
    /// The operation (meaningful only when `status` is [`WcStatus::Success`]).
    pub opcode: WcOpcode,
    /// Vendor error code (roxe reports none).
    pub vendor_err: u32,
    /// Bytes transferred (receive: bytes placed; send: the message length).
    pub byte_len: u32,
    /// Immediate data as on the wire, or the invalidated R_Key in host order (see
    /// [`Cqe::with_invalidate`]); `wc_flags` says which.
    pub ex: [u8; 4],
    /// The local QP number.
    pub qp_num: u32,
    /// The remote QP number (UD receive completions).
    pub src_qp: u32,
    /// [`wc_flags`] bits.
    pub wc_flags: u32,
    /// P_Key index (GSI receive completions).
    pub pkey_index: u16,
    /// Source LID (none on RoCE).
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// DLID path bits (none on RoCE).
    pub dlid_path_bits: u8,
    /// The port the completion happened on.
    pub port_num: u8,
}

impl Cqe {
    /// A completion with only the fields every completion carries; the rest zero.
    pub const fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qp_num: u32) -> Cqe {
        Cqe {
            wr_id,
            status,
            opcode,
            vendor_err: 0,
            byte_len: 0,
            ex: [0; 4],
            qp_num,
            src_qp: 0,
            wc_flags: 0,
            pkey_index: 0,
            slid: 0,
            sl: 0,
            dlid_path_bits: 0,
            port_num: 0,
        }
    }

    /// The completion of a send WQE on QP `qp_num`.
    ///
    /// On success it reports the operation, the message length, and [`wc_flags::WITH_IMM`] for
    /// the two "with immediate" operations (the immediate value itself is only reported to the
    /// receiver). On failure only `wr_id`, `status` and `qp_num` are valid, as for rxe: the verbs
    /// leave the other fields undefined in error completions.
    pub const fn send(wqe: &SendWqe, status: WcStatus, qp_num: u32) -> Cqe {
        if !status.is_success() {
            return Cqe::new(wqe.wr_id, status, WcOpcode::Send, qp_num);
        }
        let mut cqe = Cqe::new(wqe.wr_id, status, wc_opcode_for_send(wqe.opcode), qp_num);
        cqe.byte_len = wqe.length;
        if matches!(
            wqe.opcode,
            SendOpcode::SendWithImm | SendOpcode::RdmaWriteWithImm
        ) {
            cqe.wc_flags = wc_flags::WITH_IMM;
        }
        cqe
    }

    /// A flushed work request (send or receive) of QP `qp_num`: the QP is in the error state, so
    /// the request completes unexecuted with [`WcStatus::WrFlushErr`].
    pub const fn flush(wr_id: u64, qp_num: u32) -> Cqe {
        Cqe::new(wr_id, WcStatus::WrFlushErr, WcOpcode::Send, qp_num)
    }

    /// A failed receive WQE; like [`Cqe::send`], only `wr_id`, `status` and `qp_num` are valid.
    pub const fn recv_error(wr_id: u64, status: WcStatus, qp_num: u32) -> Cqe {
        Cqe::new(wr_id, status, WcOpcode::Recv, qp_num)
    }

    /// A successful receive completion; see [`RecvCompletion`] for the fields.
    pub const fn recv(r: &RecvCompletion) -> Cqe {
        let opcode = if r.rdma_write_with_imm {
            WcOpcode::RecvRdmaWithImm
        } else {
            WcOpcode::Recv
        };
        let mut cqe = Cqe::new(r.wr_id, WcStatus::Success, opcode, r.qp_num);
        cqe.byte_len = r.byte_len;
        cqe.port_num = r.port_num;
        cqe.pkey_index = r.pkey_index;
        if r.grh {
            cqe.wc_flags |= wc_flags::GRH;
        }
        if let Some(src_qp) = r.src_qp {
            cqe.src_qp = src_qp;
        }
        // A packet carries either an ImmDt or an IETH, never both (no opcode has both headers),
        // so at most one of these writes `ex`.
        if let Some(imm) = r.imm_data {
            cqe = cqe.with_imm(imm);
        }
        if let Some(rkey) = r.invalidated_rkey {
            cqe = cqe.with_invalidate(rkey);
        }
        cqe
    }

    /// This completion carrying immediate data (the four bytes as on the wire).
    pub const fn with_imm(mut self, imm: ImmDt) -> Cqe {
        self.ex = imm;
        self.wc_flags |= wc_flags::WITH_IMM;
        self
    }

    /// This completion reporting the R_Key a SEND with invalidate invalidated. `invalidate_rkey`
    /// is a plain `__u32` in the ABI, so it is stored in host order.
    pub const fn with_invalidate(mut self, rkey: u32) -> Cqe {
        self.ex = rkey.to_ne_bytes();
        self.wc_flags |= wc_flags::WITH_INVALIDATE;
        self
    }

    /// The 48 bytes of `struct ib_uverbs_wc`, ready to copy into a CQ ring slot.
    pub fn to_bytes(self) -> [u8; CQE_LEN] {
        use layout as L;
        let mut b = [0u8; CQE_LEN];
        write(&mut b, L::WR_ID, self.wr_id.to_ne_bytes());
        write(&mut b, L::STATUS, self.status.as_raw().to_ne_bytes());
        write(&mut b, L::OPCODE, self.opcode.as_raw().to_ne_bytes());
        write(&mut b, L::VENDOR_ERR, self.vendor_err.to_ne_bytes());
        write(&mut b, L::BYTE_LEN, self.byte_len.to_ne_bytes());
        write(&mut b, L::EX, self.ex);
        write(&mut b, L::QP_NUM, self.qp_num.to_ne_bytes());
        write(&mut b, L::SRC_QP, self.src_qp.to_ne_bytes());
        write(&mut b, L::WC_FLAGS, self.wc_flags.to_ne_bytes());
        write(&mut b, L::PKEY_INDEX, self.pkey_index.to_ne_bytes());
        write(&mut b, L::SLID, self.slid.to_ne_bytes());
        write(&mut b, L::SL, [self.sl]);
        write(&mut b, L::DLID_PATH_BITS, [self.dlid_path_bits]);
        write(&mut b, L::PORT_NUM, [self.port_num]);
        b
    }
}

/// What the responder knows when a receive WQE completes successfully.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RecvCompletion {
    /// The receive WQE's id.
    pub wr_id: u64,
    /// The local QP number.
    pub qp_num: u32,
    /// Bytes placed: the SEND's length (plus the 40-byte GRH area on UD), or for an RDMA WRITE
    /// with immediate the length of the write.
    pub byte_len: u32,
    /// The message was an RDMA WRITE with immediate ([`WcOpcode::RecvRdmaWithImm`]) rather than
    /// a SEND ([`WcOpcode::Recv`]).
    pub rdma_write_with_imm: bool,
    /// The immediate data, if the message carried some.
    pub imm_data: Option<ImmDt>,
    /// The R_Key a SEND with invalidate invalidated.
    pub invalidated_rkey: Option<u32>,
    /// The sender's QP number, from the DETH of a UD message.
    pub src_qp: Option<u32>,
    /// Set [`wc_flags::GRH`]. rxe sets it on every receive completion of a user CQ; on UD it
    /// tells the consumer that the buffer starts with the 40-byte GRH area.
    pub grh: bool,
    /// P_Key index the packet matched (GSI).
    pub pkey_index: u16,
    /// The port the message arrived on.
    pub port_num: u8,
}

#[cfg(test)]
mod tests {
    use super::super::wqe::Payload;
    use super::*;

    fn wqe(opcode: SendOpcode, length: u32) -> SendWqe {
        SendWqe {
            wr_id: 0x1122_3344_5566_7788,
            opcode,
            flags: 0,
            ex: 0,
            wr: [0; 32],
            length,
            payload: Payload::Sges { num: 1 },
        }
    }

    #[test]
    fn enum_values_match_ib_verbs() {
        // include/rdma/ib_verbs.h: enum ib_wc_status counts up from IB_WC_SUCCESS.
        assert_eq!(WcStatus::Success.as_raw(), 0);
        assert_eq!(WcStatus::WrFlushErr.as_raw(), 5);
        assert_eq!(WcStatus::BadRespErr.as_raw(), 7);
        assert_eq!(WcStatus::RemInvReqErr.as_raw(), 9);
        assert_eq!(WcStatus::RetryExcErr.as_raw(), 12);
        assert_eq!(WcStatus::RnrRetryExcErr.as_raw(), 13);
        assert_eq!(WcStatus::GeneralErr.as_raw(), 21);
        for raw in 0..=21 {
            assert_eq!(WcStatus::from_raw(raw).map(WcStatus::as_raw), Some(raw));
        }
        assert_eq!(WcStatus::from_raw(22), None);
        // enum ib_uverbs_wc_opcode and the kernel-only values after it.
        assert_eq!(WcOpcode::Flush.as_raw(), 8);
        assert_eq!(WcOpcode::AtomicWrite.as_raw(), 9);
        assert_eq!(WcOpcode::RegMr.as_raw(), 10);
        assert_eq!(WcOpcode::Recv.as_raw(), 128);
        assert_eq!(WcOpcode::RecvRdmaWithImm.as_raw(), 129);
        assert!(WcOpcode::RecvRdmaWithImm.is_recv() && !WcOpcode::AtomicWrite.is_recv());
        assert_eq!(
            (wc_flags::GRH, wc_flags::WITH_IMM, wc_flags::WITH_INVALIDATE),
            (1, 2, 4)
        );
    }

    #[test]
    fn send_opcodes_map_to_completion_opcodes() {
        use SendOpcode as S;
        let expect = [
            (S::RdmaWrite, WcOpcode::RdmaWrite),
            (S::RdmaWriteWithImm, WcOpcode::RdmaWrite),
            (S::Send, WcOpcode::Send),
            (S::SendWithImm, WcOpcode::Send),
            (S::SendWithInv, WcOpcode::Send),
            (S::RdmaRead, WcOpcode::RdmaRead),
            (S::CmpAndSwp, WcOpcode::CompSwap),
            (S::FetchAndAdd, WcOpcode::FetchAdd),
            (S::LocalInv, WcOpcode::LocalInv),
            (S::BindMw, WcOpcode::BindMw),
            (S::Flush, WcOpcode::Flush),
            (S::AtomicWrite, WcOpcode::AtomicWrite),
        ];
        for (s, w) in expect {
            assert_eq!(wc_opcode_for_send(s), w, "{s:?}");
        }
    }

    #[test]
    fn send_completion_bytes() {
        let mut w = wqe(SendOpcode::RdmaWriteWithImm, 10_000);
        w.ex = 0xdead_beef;
        let b = Cqe::send(&w, WcStatus::Success, 0x11).to_bytes();
        let mut expect = [0u8; CQE_LEN];
        expect[0..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
        expect[12..16].copy_from_slice(&1u32.to_ne_bytes()); // RDMA_WRITE
        expect[20..24].copy_from_slice(&10_000u32.to_ne_bytes());
        expect[28..32].copy_from_slice(&0x11u32.to_ne_bytes());
        expect[36..40].copy_from_slice(&wc_flags::WITH_IMM.to_ne_bytes());
        assert_eq!(b, expect);

        // Errors carry wr_id, status and qp_num only.
        let e = Cqe::send(&w, WcStatus::RetryExcErr, 0x11).to_bytes();
        let mut expect = [0u8; CQE_LEN];
        expect[0..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
        expect[8..12].copy_from_slice(&12u32.to_ne_bytes());
        expect[28..32].copy_from_slice(&0x11u32.to_ne_bytes());
        assert_eq!(e, expect);
        assert_eq!(Cqe::flush(5, 7).to_bytes()[8..12], 5u32.to_ne_bytes());
    }

    #[test]
    fn recv_completion_bytes() {
        let r = RecvCompletion {
            wr_id: 9,
            qp_num: 0x12,
            byte_len: 100,
            rdma_write_with_imm: false,
            imm_data: Some([0xca, 0xfe, 0xba, 0xbe]),
            invalidated_rkey: None,
            src_qp: Some(0x33),
            grh: true,
            pkey_index: 2,
            port_num: 1,
        };
        let b = Cqe::recv(&r).to_bytes();
        assert_eq!(b[0..8], 9u64.to_ne_bytes());
        assert_eq!(b[8..12], [0; 4]);
        assert_eq!(b[12..16], 128u32.to_ne_bytes());
        assert_eq!(b[20..24], 100u32.to_ne_bytes());
        // Immediate data keeps its wire bytes whatever the host order.
        assert_eq!(b[24..28], [0xca, 0xfe, 0xba, 0xbe]);
        assert_eq!(b[28..32], 0x12u32.to_ne_bytes());
        assert_eq!(b[32..36], 0x33u32.to_ne_bytes());
        assert_eq!(
            b[36..40],
            (wc_flags::GRH | wc_flags::WITH_IMM).to_ne_bytes()
        );
        assert_eq!(b[40..42], 2u16.to_ne_bytes());
        assert_eq!(b[42..48], [0, 0, 0, 0, 1, 0]);

        let inv = Cqe::recv(&RecvCompletion {
            invalidated_rkey: Some(0x0102_0304),
            ..RecvCompletion::default()
        });
        let b = inv.to_bytes();
        assert_eq!(b[24..28], 0x0102_0304u32.to_ne_bytes());
        assert_eq!(b[36..40], wc_flags::WITH_INVALIDATE.to_ne_bytes());

        let w = Cqe::recv(&RecvCompletion {
            rdma_write_with_imm: true,
            ..RecvCompletion::default()
        });
        assert_eq!(w.opcode, WcOpcode::RecvRdmaWithImm);
    }

    #[test]
    fn signalling() {
        assert!(send_completion_wanted(true, 0, WcStatus::Success));
        assert!(send_completion_wanted(
            false,
            send_flags::SIGNALED,
            WcStatus::Success
        ));
        assert!(!send_completion_wanted(
            false,
            send_flags::FENCE,
            WcStatus::Success
        ));
        assert!(send_completion_wanted(false, 0, WcStatus::WrFlushErr));
    }
}
