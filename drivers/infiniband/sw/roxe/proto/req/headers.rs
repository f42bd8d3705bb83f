// SPDX-License-Identifier: GPL-2.0

//! The extension header values of a request packet ([`ExtValues`]): DETH, FETH, RETH, AtomicETH,
//! immediate data and IETH, from the WQE and its work request union.

use super::*;

/// The Q_Key of the GSI QP (IBA 13.4.6.1: QP1 uses the well-known Q_Key 0x80010000). Every
/// datagram QP1 sends carries it, whatever the work request says.
pub const GSI_QKEY: u32 = 0x8001_0000;

/// A UD work request whose Q_Key has this bit set asks for the QP's own Q_Key instead. The
/// hardware drivers of the kernel (mlx4, mthca, hns, pvrdma, erdma) all implement this rule;
/// rxe does not.
pub const QKEY_FROM_QP: u32 = 1 << 31;

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

/// The extension header values for a packet of `wqe` with table entry `info`, carrying the
/// message from byte `offset` on.
pub(super) fn header_values(
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
