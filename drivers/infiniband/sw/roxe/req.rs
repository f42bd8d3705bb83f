// SPDX-License-Identifier: GPL-2.0

//! The requester: turns send WQEs into packets. Counterpart of rxe's `rxe_req.c`.
//!
//! Scheduling: [`run`] is called by the doorbell (process context), by the completer when an
//! ACK opens the window or asks for a retransmission (softirq, or process context for loopback
//! packets), and it runs in one caller at a time per QP (a `running` flag; a caller that finds it
//! set leaves a "run again" note for the runner). Each packet is planned and built under the
//! QP's send lock and transmitted after releasing it.

#![deny(unsafe_code)]

use crate::{
    comp,
    device::Roxe,
    mem::{MemError, SgeList},
    net, odp,
    proto::{
        mtt::Access,
        cqe::WcStatus,
        mtu::IbMtu,
        opcode::Opcode,
        packet::{pad_count_for, AtomicEth, Deth, Ieth, Packet, Reth},
        psn::Psn,
        qp_state::{QpState, QpType},
        req::RegMrWr,
        wqe::{send_flags, send_layout, Payload, SendOpcode, SendWqe},
    },
    qp::{RoxeQp, SendEntry},
};
use crate::rdma::{
    ah::AddressVector,
    device::{now_ms, Device},
    netdev::NetDevice,
    skb::TxSkBuff,
};
use kernel::{
    prelude::*,
    sync::{aref::ARef, atomic::Full},
};

/// Most packets a QP may have sent and not seen acknowledged (RC): the send window.
const MAX_UNACKED_PSNS: i32 = 128;

/// The QP attributes a packet needs, read once per packet under the state lock, and the
/// port's netdev, looked up before taking any lock (the core's netdev lock is not IRQ-safe).
pub(crate) struct PathInfo {
    pub(crate) netdev: Option<ARef<NetDevice>>,
    pub(crate) state: QpState,
    pub(crate) mtu: u32,
    pub(crate) dest_qpn: u32,
    pub(crate) av: Option<AddressVector>,
    /// The QP's Q_Key (UD sends whose WR Q_Key has the high bit set use it).
    pub(crate) qkey: u32,
    /// The RNR NAK timer code the responder advertises.
    pub(crate) min_rnr_timer: u8,
    pub(crate) pkey: u16,
}

pub(crate) fn path_info(dev: &Device<Roxe>, qp: &RoxeQp) -> PathInfo {
    let netdev = Some(dev.data().netdev.clone());
    let port_mtu = netdev.as_ref().map_or(IbMtu::Mtu256, |n| IbMtu::for_netdev_mtu(n.mtu()));
    let st = qp.state.lock();
    let mtu = match qp.qp_type {
        // Datagrams have no path: they are bounded by the port's MTU (IBA 9.6.1 / rxe's
        // `get_mtu`), read from the netdev.
        QpType::Ud | QpType::Gsi | QpType::Smi => port_mtu.bytes(),
        _ => IbMtu::from_raw(st.attr.path_mtu).unwrap_or(IbMtu::Mtu256).bytes(),
    };
    PathInfo { netdev, state: st.state, mtu, dest_qpn: st.attr.dest_qp_num, av: st.av, qkey: st.attr.qkey, min_rnr_timer: st.attr.min_rnr_timer, pkey: 0xffff }
}

/// The UDP source port of a QP's packets: fixed per QP so that a flow stays on one path, and
/// in the range RoCEv2 reserves for it (IBA A17.2.2: 0xC000 and up).
pub(crate) fn udp_sport(qpn: u32) -> u16 {
    0xc000 | (qpn & 0x3fff) as u16
}

fn rd_u32(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4).and_then(|s| s.try_into().ok()).map_or(0, u32::from_ne_bytes)
}

fn rd_u64(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8).and_then(|s| s.try_into().ok()).map_or(0, u64::from_ne_bytes)
}

/// Fields of the per-opcode union of a send WQE (`struct rxe_send_wr`, union at offset 24).
struct Remote {
    addr: u64,
    rkey: u32,
}

fn rdma_of(w: &SendWqe) -> Remote {
    Remote { addr: rd_u64(&w.wr, 0), rkey: rd_u32(&w.wr, 8) }
}

fn atomic_of(w: &SendWqe) -> (Remote, u64, u64) {
    (Remote { addr: rd_u64(&w.wr, 0), rkey: rd_u32(&w.wr, 24) }, rd_u64(&w.wr, 8), rd_u64(&w.wr, 16))
}

/// The opcode of the packet at byte `offset` of a message of `len` bytes.
fn opcode_for(qp_type: QpType, w: &SendWqe, offset: u32, mtu: u32) -> Option<Opcode> {
    let first = offset == 0;
    let last = w.length.saturating_sub(offset) <= mtu;
    let rc = qp_type == QpType::Rc;
    let imm = matches!(w.opcode, SendOpcode::SendWithImm | SendOpcode::RdmaWriteWithImm);
    let o = match (qp_type, w.opcode) {
        (QpType::Ud | QpType::Gsi, SendOpcode::Send) => Opcode::UD_SEND_ONLY,
        (QpType::Ud | QpType::Gsi, SendOpcode::SendWithImm) => Opcode::UD_SEND_ONLY_WITH_IMMEDIATE,
        (QpType::Ud | QpType::Gsi, _) => return None,
        (_, SendOpcode::Send | SendOpcode::SendWithImm | SendOpcode::SendWithInv) => {
            let inv = w.opcode == SendOpcode::SendWithInv;
            match (first, last, rc) {
                (true, true, true) if inv => Opcode::RC_SEND_ONLY_WITH_INVALIDATE,
                (true, true, true) if imm => Opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
                (true, true, true) => Opcode::RC_SEND_ONLY,
                (true, false, true) => Opcode::RC_SEND_FIRST,
                (false, false, true) => Opcode::RC_SEND_MIDDLE,
                (false, true, true) if inv => Opcode::RC_SEND_LAST_WITH_INVALIDATE,
                (false, true, true) if imm => Opcode::RC_SEND_LAST_WITH_IMMEDIATE,
                (false, true, true) => Opcode::RC_SEND_LAST,
                (true, true, false) if imm => Opcode::UC_SEND_ONLY_WITH_IMMEDIATE,
                (true, true, false) => Opcode::UC_SEND_ONLY,
                (true, false, false) => Opcode::UC_SEND_FIRST,
                (false, false, false) => Opcode::UC_SEND_MIDDLE,
                (false, true, false) if imm => Opcode::UC_SEND_LAST_WITH_IMMEDIATE,
                (false, true, false) => Opcode::UC_SEND_LAST,
            }
        }
        (_, SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm) => match (first, last, rc) {
            (true, true, true) if imm => Opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            (true, true, true) => Opcode::RC_RDMA_WRITE_ONLY,
            (true, false, true) => Opcode::RC_RDMA_WRITE_FIRST,
            (false, false, true) => Opcode::RC_RDMA_WRITE_MIDDLE,
            (false, true, true) if imm => Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
            (false, true, true) => Opcode::RC_RDMA_WRITE_LAST,
            (true, true, false) if imm => Opcode::UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            (true, true, false) => Opcode::UC_RDMA_WRITE_ONLY,
            (true, false, false) => Opcode::UC_RDMA_WRITE_FIRST,
            (false, false, false) => Opcode::UC_RDMA_WRITE_MIDDLE,
            (false, true, false) if imm => Opcode::UC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
            (false, true, false) => Opcode::UC_RDMA_WRITE_LAST,
        },
        (QpType::Rc, SendOpcode::RdmaRead) => Opcode::RC_RDMA_READ_REQUEST,
        (QpType::Rc, SendOpcode::CmpAndSwp) => Opcode::RC_COMPARE_SWAP,
        (QpType::Rc, SendOpcode::FetchAndAdd) => Opcode::RC_FETCH_ADD,
        _ => return None,
    };
    Some(o)
}

/// One packet, built, and where it goes.
struct Outgoing {
    skb: TxSkBuff,
    av: AddressVector,
}

/// What the planning step decided.
enum Step {
    /// Send this packet and plan again.
    Send(Outgoing),
    /// Complete (with an error or flush) these entries, then plan again.
    Complete(KVec<(u64, SendOpcode, u32, WcStatus, bool)>),
    /// Nothing to do now.
    Idle,
}

/// Why a packet could not be built.
enum BuildErr {
    /// The WQE fails with this status.
    Status(WcStatus),
    /// ODP: local memory is not faulted in. The WQE stays where it is; the fault is queued
    /// and the QP kicked after it (`odp::pause`).
    Paused,
}

impl From<WcStatus> for BuildErr {
    fn from(s: WcStatus) -> Self {
        BuildErr::Status(s)
    }
}

/// Builds the packet for `entry` at byte `offset`.
fn build(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    entry: &SendEntry,
    path: &PathInfo,
    offset: u32,
    psn: Psn,
    av: &AddressVector,
) -> Result<(TxSkBuff, u32), BuildErr> {
    let w = &entry.wqe;
    if let (SendOpcode::RdmaRead | SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd, Payload::Sges { num }) = (w.opcode, w.payload) {
        // ODP: the response lands in these buffers in the completer, which cannot wait for a
        // fault; fault them in before asking (a miss there later is a lost response).
        let list = SgeList { slot: &entry.slot, base: send_layout::DMA_DATA, num };
        let len = w.length.saturating_sub(offset) as usize;
        if list.check_present(dev.data(), qp.pd_id, u64::from(offset), len, Access::LOCAL_WRITE) == Err(MemError::NotPresent) {
            if odp::pause(dev, qp.qpn, qp.pd_id, &list, u64::from(offset), len, Access::LOCAL_WRITE) {
                return Err(BuildErr::Paused);
            }
            return Err(WcStatus::LocProtErr.into());
        }
    }
    let netdev = path.netdev.as_ref().ok_or(WcStatus::LocQpOpErr)?;
    let opcode = opcode_for(qp.qp_type, w, offset, path.mtu).ok_or(WcStatus::LocQpOpErr)?;
    let info = opcode.info().ok_or(WcStatus::LocQpOpErr)?;
    let payload_len = if info.has_payload() {
        match w.opcode {
            SendOpcode::RdmaRead => 0,
            _ => core::cmp::min(w.length - offset, path.mtu),
        }
    } else {
        0
    };
    let pad = pad_count_for(payload_len as usize);
    let total = info.header_len() + payload_len as usize + usize::from(pad) + net::ICRC_LEN;
    let mut skb = TxSkBuff::alloc(netdev, total).map_err(|_| WcStatus::LocQpOpErr)?;
    {
        let data = skb.data_mut();
        let mut pkt = Packet::build(&mut data[..], opcode, pad).map_err(|_| WcStatus::LocQpOpErr)?;
        pkt.set_pkey(path.pkey);
        pkt.set_psn(psn);
        pkt.set_solicited_event(w.flags & send_flags::SOLICITED != 0 && info.ends_message());
        let dest_qpn = match qp.qp_type {
            QpType::Ud | QpType::Gsi => entry.ud_remote_qpn,
            _ => path.dest_qpn,
        };
        pkt.set_dest_qpn(dest_qpn);
        // IBA 9.7.2: ask for an ACK at the end of each message (and on READ/atomic requests,
        // whose responses are the acknowledgement).
        // Also every 64th packet of a long message, so that progress is acknowledged (and the
        // retry count restarts) before the message ends, as rxe's requester does.
        let nth = psn.diff(entry.first_psn).wrapping_add(1);
        pkt.set_ack_req(qp.qp_type == QpType::Rc && (info.ends_message() || nth % 64 == 0));
        let ex = w.ex.to_ne_bytes();
        if info.has_immediate() {
            let _ = pkt.set_imm_data(ex);
        }
        if info.has_invalidate() {
            let _ = pkt.set_ieth(&Ieth { rkey: w.ex });
        }
        match w.opcode {
            SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm if offset == 0 => {
                let r = rdma_of(w);
                let _ = pkt.set_reth(&Reth { va: r.addr, rkey: r.rkey, dma_len: w.length });
            }
            SendOpcode::RdmaRead => {
                // A READ re-asked after lost responses asks only for what is missing, at the PSN
                // its first missing response had (IBA 9.7.5.2.2 / 9.7.4.1.3).
                let r = rdma_of(w);
                let reth = Reth { va: r.addr.wrapping_add(u64::from(offset)), rkey: r.rkey, dma_len: w.length - offset };
                let _ = pkt.set_reth(&reth);
            }
            SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd => {
                let (r, compare_add, swap) = atomic_of(w);
                // IBA 9.3.3.3: CmpSwap carries swap then compare; FetchAdd the addend in the
                // first operand.
                let (swap_add, compare) = match w.opcode {
                    SendOpcode::CmpAndSwp => (swap, compare_add),
                    _ => (compare_add, 0),
                };
                let _ = pkt.set_atomic_eth(&AtomicEth { va: r.addr, rkey: r.rkey, swap_add, compare });
            }
            _ => {}
        }
        if matches!(qp.qp_type, QpType::Ud | QpType::Gsi) {
            let _ = pkt.set_deth(&Deth { qkey: entry.ud_qkey, src_qpn: qp.qpn });
        }
        if payload_len > 0 {
            let out = pkt.payload_mut();
            let out = out.get_mut(..payload_len as usize).ok_or(WcStatus::LocLenErr)?;
            match w.payload {
                Payload::Inline { .. } => {
                    let start = send_layout::DMA_DATA + offset as usize;
                    let src = entry.slot.get(start..start + payload_len as usize).ok_or(WcStatus::LocLenErr)?;
                    out.copy_from_slice(src);
                }
                Payload::Sges { num } => {
                    let list = SgeList { slot: &entry.slot, base: send_layout::DMA_DATA, num };
                    match list.gather(dev.data(), qp.pd_id, u64::from(offset), out) {
                        Ok(()) => {}
                        Err(MemError::NotPresent) => {
                            // ODP: fault in the rest of the message, then go on from here.
                            let rest = w.length.saturating_sub(offset) as usize;
                            if odp::pause(dev, qp.qpn, qp.pd_id, &list, u64::from(offset), rest, Access::NONE) {
                                return Err(BuildErr::Paused);
                            }
                            return Err(WcStatus::LocProtErr.into());
                        }
                        Err(_) => return Err(WcStatus::LocProtErr.into()),
                    }
                }
            }
        }
    }
    let _ = av;
    let next = match w.opcode {
        SendOpcode::RdmaRead => w.length,
        SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd => 8,
        _ => offset + payload_len,
    };
    Ok((skb, next))
}

/// Fetches the next WQE of the SQ into the in-flight list. Returns an error completion for a
/// WQE that fails validation (it is consumed).
fn fetch(dev: &Device<Roxe>, qp: &RoxeQp, path: &PathInfo, sq: &mut crate::qp::SqState) -> Option<Result<(), (u64, SendOpcode, WcStatus)>> {
    let mut ring = qp.sq.lock();
    if ring.is_empty() {
        return None;
    }
    let mut slot = KVec::from_elem(0u8, ring.elem_size(), GFP_ATOMIC).ok()?;
    if !ring.peek(&mut slot) {
        return None;
    }
    ring.advance_consumer();
    drop(ring);
    let wqe = match SendWqe::parse(&slot, wqe_qp_type(qp.qp_type), &qp.sq_limits) {
        Ok(w) => w,
        Err(e) => {
            let wr_id = rd_u64(&slot, send_layout::WR_ID);
            let status = WcStatus::from_raw(e.wc_status()).unwrap_or(WcStatus::LocQpOpErr);
            return Some(Err((wr_id, SendOpcode::Send, status)));
        }
    };
    let (mut ud_remote_qpn, mut ud_qkey, mut ud_av) = (0, 0, None);
    if matches!(qp.qp_type, QpType::Ud | QpType::Gsi) {
        ud_remote_qpn = rd_u32(&wqe.wr, 0) & 0x00ff_ffff;
        ud_qkey = rd_u32(&wqe.wr, 4);
        if ud_qkey & 0x8000_0000 != 0 {
            // IBA 10.2.5: a WR Q_Key with the high bit set means "use the QP's own Q_Key" (the
            // MAD layer sends with IB_QP_SET_QKEY).
            ud_qkey = path.qkey;
        }
        let ah_num = rd_u32(&wqe.wr, 12);
        match dev.data().ahs.get(ah_num) {
            Some(ah) if ah.pd_id == qp.pd_id => ud_av = Some(ah.av),
            _ => return Some(Err((wqe.wr_id, wqe.opcode, WcStatus::LocQpOpErr))),
        }
    }
    let entry = SendEntry {
        wqe,
        slot,
        first_psn: sq.next_psn,
        last_psn: sq.next_psn,
        ud_remote_qpn,
        ud_qkey,
        ud_av,
        read_done: 0,
        reissued_at: None,
        sent: false,
    };
    if sq.entries.push(entry, GFP_ATOMIC).is_err() {
        return None;
    }
    Some(Ok(()))
}

pub(crate) fn wqe_qp_type(t: QpType) -> crate::proto::wqe::QpType {
    match t {
        QpType::Rc => crate::proto::wqe::QpType::Rc,
        QpType::Uc => crate::proto::wqe::QpType::Uc,
        QpType::Ud => crate::proto::wqe::QpType::Ud,
        QpType::Gsi | QpType::Smi => crate::proto::wqe::QpType::Gsi,
    }
}

/// Plans and builds the next packet under the send lock.
fn step(dev: &Device<Roxe>, qp: &RoxeQp, path: &PathInfo) -> Step {
    let mut sq = qp.sq_state.lock();
    if matches!(path.state, QpState::Err | QpState::Sqe) {
        // Flush everything not yet completed (IBA 10.3.1: WRs of a QP in error complete with
        // IBV_WC_WR_FLUSH_ERR).
        let mut done = KVec::new();
        for e in sq.entries.drain_all() {
            let _ = done.push((e.wqe.wr_id, e.wqe.opcode, e.wqe.flags, WcStatus::WrFlushErr, true), GFP_ATOMIC);
        }
        sq.cur = 0;
        drop(sq);
        // WQEs still in the ring flush too.
        let mut ring = qp.sq.lock();
        let mut slot = [0u8; 32];
        while ring.peek(&mut slot) {
            ring.advance_consumer();
            let _ = done.push((rd_u64(&slot, send_layout::WR_ID), SendOpcode::Send, 0, WcStatus::WrFlushErr, true), GFP_ATOMIC);
        }
        return if done.is_empty() { Step::Idle } else { Step::Complete(done) };
    }
    if path.state != QpState::Rts {
        return Step::Idle;
    }
    if sq.rnr_until_ms != 0 {
        // Held back by an RNR NAK until the tick releases it.
        return Step::Idle;
    }
    if sq.cur >= sq.entries.len() {
        // Window: do not start more when too many PSNs are unacknowledged.
        if qp.qp_type == QpType::Rc {
            let oldest = sq.entries.first().map(|e| e.first_psn).unwrap_or(sq.next_psn);
            if sq.next_psn.diff(oldest) >= MAX_UNACKED_PSNS || sq.entries.len() >= qp.sq_depth {
                return Step::Idle;
            }
        }
        match fetch(dev, qp, path, &mut sq) {
            None => return Step::Idle,
            Some(Err((wr_id, op, status))) => {
                let mut done = KVec::new();
                let _ = done.push((wr_id, op, send_flags::SIGNALED, status, true), GFP_ATOMIC);
                return Step::Complete(done);
            }
            Some(Ok(())) => {
                let cur = sq.cur;
                let psn = sq.next_psn;
                if let Some(e) = sq.entries.get_mut(cur) {
                    e.first_psn = psn;
                }
                sq.cur_offset = 0;
            }
        }
    }
    let cur = sq.cur;
    let offset = sq.cur_offset;
    let psn = sq.next_psn;
    let Some(entry) = sq.entries.get(cur) else { return Step::Idle };
    // IBA 10.8.3.3: a fenced WQE waits for earlier READs and atomics to complete.
    if offset == 0
        && entry.wqe.flags & send_flags::FENCE != 0
        && sq.entries.iter().take(cur).any(|e| matches!(e.wqe.opcode, SendOpcode::RdmaRead | SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd))
    {
        return Step::Idle;
    }
    if matches!(entry.wqe.opcode, SendOpcode::LocalInv | SendOpcode::BindMw | SendOpcode::RegMr | SendOpcode::Flush | SendOpcode::AtomicWrite) {
        // Local operations execute in order with the sends before them (IBA 10.8.3.1); FLUSH
        // and ATOMIC WRITE are not implemented yet and fail rather than hang.
        let status = match entry.wqe.opcode {
            SendOpcode::BindMw => match crate::mw::bind(dev.data(), qp.pd_id, qp.qpn, &entry.wqe) {
                Ok(()) => WcStatus::Success,
                Err(s) => s,
            },
            SendOpcode::LocalInv => match crate::mem::invalidate(dev.data(), qp.pd_id, entry.wqe.ex) {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::LocQpOpErr,
            },
            // Only kernel QPs fast-register: their WQEs come from `post_send_kernel`, which
            // names the MR by key index; a user ring claiming the opcode gets an error.
            SendOpcode::RegMr if !qp.is_user => match crate::mr::reg_fast(dev.data(), qp.pd_id, &RegMrWr::decode(&entry.wqe.wr)) {
                Ok(()) => WcStatus::Success,
                Err(_) => WcStatus::LocQpOpErr,
            },
            _ => WcStatus::LocQpOpErr,
        };
        let e = sq.entries.remove(cur);
        let mut done = KVec::new();
        if let Ok(e) = e {
            let flags = if status == WcStatus::Success { e.wqe.flags } else { send_flags::SIGNALED };
            let _ = done.push((e.wqe.wr_id, e.wqe.opcode, flags, status, true), GFP_ATOMIC);
        }
        return Step::Complete(done);
    }
    if matches!(qp.qp_type, QpType::Ud | QpType::Gsi) && entry.wqe.length > path.mtu {
        // A datagram longer than the MTU cannot leave; like a datagram lost on the wire it
        // completes successfully (rxe does the same), since UD promises no delivery.
        let e = sq.entries.remove(cur);
        let mut done = KVec::new();
        if let Ok(e) = e {
            let _ = done.push((e.wqe.wr_id, e.wqe.opcode, e.wqe.flags, WcStatus::Success, true), GFP_ATOMIC);
        }
        return Step::Complete(done);
    }
    let av = match (qp.qp_type, entry.ud_av, path.av) {
        (QpType::Ud | QpType::Gsi, Some(av), _) => av,
        (_, _, Some(av)) => av,
        _ => return Step::Idle,
    };
    let (skb, next_offset) = match build(dev, qp, entry, path, offset, psn, &av) {
        Ok(x) => x,
        Err(BuildErr::Paused) => return Step::Idle,
        Err(BuildErr::Status(status)) => {
            let e = sq.entries.remove(cur);
            let mut done = KVec::new();
            if let Ok(e) = e {
                let _ = done.push((e.wqe.wr_id, e.wqe.opcode, send_flags::SIGNALED, status, true), GFP_ATOMIC);
            }
            return Step::Complete(done);
        }
    };
    let npsn = if entry.wqe.opcode == SendOpcode::RdmaRead {
        (entry.wqe.length - offset).div_ceil(path.mtu).max(1)
    } else {
        1
    };
    let finished = next_offset >= entry.wqe.length;
    if qp.qp_type == QpType::Rc && sq.ack_deadline_ms == 0 && sq.ack_timeout_ms != 0 {
        // IBA 9.7.6.1: the local ACK timer runs while a request is unacknowledged.
        sq.ack_deadline_ms = now_ms() + sq.ack_timeout_ms;
    }
    sq.next_psn = psn.add(npsn);
    if let Some(e) = sq.entries.get_mut(cur) {
        e.last_psn = psn.add(npsn - 1);
        e.sent = finished;
    }
    if finished {
        sq.cur += 1;
        sq.cur_offset = 0;
    } else {
        sq.cur_offset = next_offset;
    }
    // UC and UD messages complete once sent (IBA 10.8.5: no acknowledgement).
    if finished && qp.qp_type != QpType::Rc {
        let e = sq.entries.remove(cur);
        sq.cur = sq.cur.saturating_sub(1);
        if let Ok(e) = e {
            drop(sq);
            comp::complete_send(qp, e.wqe.wr_id, e.wqe.opcode, e.wqe.flags, WcStatus::Success, e.wqe.length);
        }
    }
    Step::Send(Outgoing { skb, av })
}

/// Runs the requester of `qp` until it has nothing to send, the window closes, or the budget
/// is spent. Any context; takes no lock across transmission.
pub(crate) fn run(dev: &Device<Roxe>, qp: &RoxeQp) {
    // 0: idle, 1: running, 2: running and asked to run again.
    if qp.req_running.fetch_add(1u32, Full) != 0 {
        return;
    }
    loop {
        let path = path_info(dev, qp);
        match step(dev, qp, &path) {
            Step::Send(o) => {
                // A packet that cannot leave (no route, no memory) is a lost packet: the
                // retransmission timer (RC) recovers it; UC and UD lose it as the wire would.
                let _ = net::xmit(dev, &o.av, udp_sport(qp.qpn), o.skb);
                continue;
            }
            Step::Complete(list) => {
                for (wr_id, op, flags, status, _) in list {
                    comp::complete_send(qp, wr_id, op, flags, status, 0);
                    if status != WcStatus::Success && status != WcStatus::WrFlushErr {
                        comp::move_to_error(qp);
                    }
                }
                continue;
            }
            Step::Idle => {}
        }
        // Leave, unless someone asked for another round meanwhile.
        if qp.req_running.xchg(0u32, Full) <= 1 {
            break;
        }
        if qp.req_running.fetch_add(1u32, Full) != 0 {
            break;
        }
    }
}
