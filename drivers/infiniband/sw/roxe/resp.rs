// SPDX-License-Identifier: GPL-2.0

//! The responder: requests from the peer become memory writes, reads, atomics and receive
//! completions, answered by ACKs, NAKs and responses. Counterpart of rxe's `rxe_resp.c`.
//!
//! Context: [`receive`] runs in the receive pipeline (softirq, or the loopback drainer). The
//! responder state is updated under the QP's receive lock; completions are posted and packets
//! sent after releasing it.

#![deny(unsafe_code)]

use crate::{
    comp,
    device::Roxe,
    mem::{lookup_remote, MemError, SgeList},
    odp,
    mr::RoxeMr,
    net::{self, Source},
    proto::{
        cqe::{Cqe, RecvCompletion, WcStatus},
        mtt::Access,
        opcode::{check_op_sequence, Opcode},
        packet::{pad_count_for, Aeth, AtomicAckEth, Msn, NakCode, Packet, Syndrome},
        psn::Psn,
        qp_state::{qp_access, QpState, QpType},
        wqe::{recv_layout, RecvWqe},
    },
    qp::RoxeQp,
    req::{self, PathInfo},
};
use crate::rdma::{ah::Network, device::Device, pool::PoolRef, skb::TxSkBuff};
use kernel::prelude::*;

/// The bytes a UD receive buffer starts with: room for the GRH (IBA 11.4.1.2), which for RoCEv2
/// over IPv4 holds the IPv4 header in its last 20 bytes.
const GRH_LEN: usize = 40;

/// Saved results of recent atomics, for duplicates (IBA 9.4.5: an atomic executes once).
const ATOMIC_CACHE: usize = 16;

/// A receive WQE being filled by a SEND.
pub(crate) struct RecvEntry {
    wqe: RecvWqe,
    slot: KVec<u8>,
    placed: u32,
}

/// An RDMA WRITE in progress.
pub(crate) struct WriteCursor {
    mr: PoolRef<RoxeMr>,
    va: u64,
    remaining: u32,
}

/// The responder's state of one QP.
pub(crate) struct RespState {
    pub(crate) expected_psn: Psn,
    msn: Msn,
    /// Opcode of the last packet of the message in progress, for the sequence check.
    last_opcode: Option<Opcode>,
    /// A PSN sequence NAK went out for the current gap (IBA 9.7.5.2.1: one per gap).
    nak_sent: bool,
    recv: Option<RecvEntry>,
    write: Option<WriteCursor>,
    atomics: [(u32, u64, bool); ATOMIC_CACHE],
    atomic_next: usize,
    /// ODP: `recv` is held for a packet that found its buffer not faulted in (RC: the resend
    /// after the RNR NAK; UD: the deferred packet), so the next first packet reuses it rather
    /// than take another WQE.
    odp_held: bool,
}

impl RespState {
    pub(crate) fn new(rq_psn: Psn) -> RespState {
        RespState {
            expected_psn: rq_psn,
            msn: Msn::new(0),
            last_opcode: None,
            nak_sent: false,
            recv: None,
            write: None,
            atomics: [(0, 0, false); ATOMIC_CACHE],
            atomic_next: 0,
            odp_held: false,
        }
    }
}

/// What the responder sends or completes once its lock is released.
struct Effects {
    packets: KVec<TxSkBuff>,
    recv_cqe: Option<Cqe>,
    solicited: bool,
    error: bool,
}

/// Builds a response packet (ACK, NAK, read response, atomic acknowledge).
fn response(
    dev: &Device<Roxe>,
    path: &PathInfo,
    opcode: Opcode,
    psn: Psn,
    aeth: Option<Aeth>,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), MemError>,
    orig: Option<u64>,
) -> Option<TxSkBuff> {
    let _ = dev;
    let netdev = path.netdev.as_ref()?;
    let info = opcode.info()?;
    let pad = pad_count_for(payload_len);
    let total = info.header_len() + payload_len + usize::from(pad) + net::ICRC_LEN;
    let mut skb = TxSkBuff::alloc(netdev, total).ok()?;
    {
        let data = skb.data_mut();
        let mut pkt = Packet::build(&mut data[..], opcode, pad).ok()?;
        pkt.set_pkey(0xffff);
        pkt.set_dest_qpn(path.dest_qpn);
        pkt.set_psn(psn);
        if let Some(a) = aeth {
            let _ = pkt.set_aeth(&a);
        }
        if let Some(orig) = orig {
            let _ = pkt.set_atomic_ack_eth(&AtomicAckEth { orig });
        }
        if payload_len > 0 {
            let out = pkt.payload_mut().get_mut(..payload_len)?;
            fill(out).ok()?;
        }
    }
    Some(skb)
}

/// AETH of an ACK: no end-to-end credits (IBA 9.7.7.2.2 "invalid" credit count 0x1F).
fn ack_aeth(msn: Msn) -> Aeth {
    Aeth { syndrome: Syndrome::Ack { credits: 0x1f }, msn }
}

fn nak_aeth(code: NakCode, msn: Msn) -> Aeth {
    Aeth { syndrome: Syndrome::Nak(code), msn }
}

/// Takes the next receive WQE of the QP (its RQ or SRQ), as a validated copy.
fn take_recv(dev: &Device<Roxe>, qp: &RoxeQp) -> Option<Result<RecvEntry, u64>> {
    let _ = dev;
    let (slot, max_sge) = if let Some(srq) = &qp.srq {
        let mut inner = srq.inner.lock();
        let mut slot = KVec::from_elem(0u8, inner.queue.elem_size(), GFP_ATOMIC).ok()?;
        if !inner.queue.peek(&mut slot) {
            return None;
        }
        inner.queue.advance_consumer();
        // IBA 11.5.2.4: the limit event fires once when the SRQ falls below its limit.
        let fire = inner.limit != 0 && inner.queue.count() < inner.limit;
        if fire {
            inner.limit = 0;
        }
        let max_sge = inner.max_sge;
        drop(inner);
        if fire {
            srq.notifier.limit_reached();
        }
        (slot, max_sge)
    } else {
        let mut rq = qp.rq.lock();
        let q = (&mut *rq).as_mut()?;
        let mut slot = KVec::from_elem(0u8, q.elem_size(), GFP_ATOMIC).ok()?;
        if !q.peek(&mut slot) {
            return None;
        }
        q.advance_consumer();
        (slot, qp.rq_max_sge)
    };
    match RecvWqe::parse(&slot, max_sge) {
        Ok(wqe) => Some(Ok(RecvEntry { wqe, slot, placed: 0 })),
        Err(_) => {
            let wr_id = slot.get(..8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_ne_bytes);
            Some(Err(wr_id))
        }
    }
}

/// A receive buffer that cannot take the data: the receive fails with a status, or (ODP) its
/// memory is not faulted in, with the fault queued.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Fail(WcStatus),
    NotPresent,
}

fn scatter(dev: &Device<Roxe>, qp: &RoxeQp, r: &mut RecvEntry, data: &[u8]) -> Result<(), Place> {
    if u64::from(r.placed) + data.len() as u64 > u64::from(r.wqe.length) {
        return Err(Place::Fail(WcStatus::LocLenErr));
    }
    let list = SgeList { slot: &r.slot, base: recv_layout::DMA_DATA, num: r.wqe.num_sge };
    match list.scatter(dev.data(), qp.pd_id, u64::from(r.placed), data) {
        Ok(()) => {}
        Err(MemError::NotPresent) => {
            // Fault in the rest of the buffer: the rest of the message goes there.
            let rest = r.wqe.length.saturating_sub(r.placed) as usize;
            let _ = odp::fault_sges(dev, qp.pd_id, &list, u64::from(r.placed), rest, Access::LOCAL_WRITE);
            return Err(Place::NotPresent);
        }
        Err(_) => return Err(Place::Fail(WcStatus::LocProtErr)),
    }
    r.placed += data.len() as u32;
    Ok(())
}

/// ODP: the request needs memory that is not faulted in; the fault is queued. Nothing of the
/// request is consumed (a receive WQE already taken stays held for it). RC answers with an RNR
/// NAK (IBA 9.7.5.2.8; what ConnectX HCAs do on an ODP page fault): the requester sends again
/// from this PSN after the QP's RNR timer. UD has no NAK: the packet is handed to the responder
/// again from the fault work, after the fault. UC (no ODP offered) loses it.
fn odp_miss(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, src: &Source, path: &PathInfo, rs: &mut RespState, fx: &mut Effects) {
    rs.odp_held = rs.recv.is_some();
    match qp.qp_type {
        QpType::Rc => {
            dev.data().counters.inc(crate::counters::Counter::SendRnrErr);
            let aeth = Aeth { syndrome: Syndrome::RnrNak { timer: path.min_rnr_timer }, msn: rs.msn };
            push(fx, response(dev, path, Opcode::RC_ACKNOWLEDGE, pkt.psn(), Some(aeth), 0, |_| Ok(()), None));
        }
        QpType::Ud | QpType::Gsi => {
            if let Some(r) = rs.recv.as_mut() {
                // Whichever datagram uses the held WQE writes its own GRH first.
                r.placed = 0;
            }
            let _ = odp::redeliver_after(dev, qp.qpn, pkt, src);
        }
        _ => {
            if let Some(r) = rs.recv.as_mut() {
                r.placed = 0;
            }
        }
    }
}

/// A GRH for a UD receive (IBA 8.3): for IPv4 the IPv4 header sits in its last 20 bytes, as
/// rdma-core's UD users expect from RoCEv2.
fn grh_bytes(src: &Source) -> [u8; GRH_LEN] {
    let mut g = [0u8; GRH_LEN];
    match src.network {
        Network::Ipv4 => {
            g[20] = 0x45;
            g[29] = 17;
            g[32..36].copy_from_slice(&src.sgid[12..16]);
            g[36..40].copy_from_slice(&src.dgid[12..16]);
        }
        Network::Ipv6 => {
            g[0] = 0x60;
            g[6] = 17;
            g[8..24].copy_from_slice(&src.sgid);
            g[24..40].copy_from_slice(&src.dgid);
        }
    }
    g
}

/// Handles a request packet for `qp`.
pub(crate) fn receive(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, src: &Source) {
    let path = req::path_info(dev, qp);
    let (access, qkey) = {
        let st = qp.state.lock();
        (st.attr.qp_access_flags, st.attr.qkey)
    };
    // IBA 10.3.1: a QP receives from RTR on; in RESET, INIT or ERR packets are dropped.
    if !matches!(path.state, QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe) {
        return;
    }
    let mut fx = Effects { packets: KVec::new(), recv_cqe: None, solicited: false, error: false };
    {
        let mut rs = qp.resp_state.lock();
        handle(dev, qp, pkt, src, &path, access, qkey, &mut rs, &mut fx);
    }
    if fx.error {
        comp::move_to_error(qp);
    }
    if let Some(cqe) = fx.recv_cqe {
        let mut bytes = cqe.to_bytes();
        if !qp.is_user && matches!(qp.qp_type, QpType::Ud | QpType::Gsi) {
            // Kernel consumers learn the network header type from `ib_wc` (the MAD layer needs
            // it to build a reply's address); the byte is reserved in the user ABI's CQE.
            if let Some(b) = bytes.get_mut(47) {
                *b = match src.network {
                    Network::Ipv4 => crate::rdma::kverbs::NETWORK_IPV4,
                    Network::Ipv6 => crate::rdma::kverbs::NETWORK_IPV6,
                };
            }
        }
        let _ = qp.recv_cq.post(&bytes, fx.solicited);
    }
    if let Some(av) = path.av {
        for skb in fx.packets {
            let _ = net::xmit(dev, &av, req::udp_sport(qp.qpn), skb);
        }
    }
    if path.state == QpState::Rtr && pkt.info().starts_message() {
        // IBA 11.6.3.1: the first packet received in RTR establishes communication.
        qp.notifier.event(crate::rdma::qp::QpEvent::CommEstablished);
    }
}

#[allow(clippy::too_many_arguments)]
fn handle(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    pkt: &Packet<&[u8]>,
    src: &Source,
    path: &PathInfo,
    access: u32,
    qkey: u32,
    rs: &mut RespState,
    fx: &mut Effects,
) {
    let info = pkt.info();
    let psn = pkt.psn();
    let rc = qp.qp_type == QpType::Rc;
    let ud = matches!(qp.qp_type, QpType::Ud | QpType::Gsi);

    if ud {
        // IBA 10.2.5: a datagram whose Q_Key differs from the QP's is dropped.
        match pkt.deth() {
            Some(d) if d.qkey == qkey => {}
            _ => return,
        }
    } else {
        let d = psn.diff(rs.expected_psn);
        if d < 0 {
            if rc {
                dev.data().counters.inc(crate::counters::Counter::DuplicateRequest);
                duplicate(dev, qp, pkt, path, rs, fx);
            }
            return;
        }
        if d > 0 {
            if rc {
                dev.data().counters.inc(crate::counters::Counter::OutOfSeqRequest);
                if !rs.nak_sent {
                    rs.nak_sent = true;
                    push(fx, response(dev, path, Opcode::RC_ACKNOWLEDGE, rs.expected_psn, Some(nak_aeth(NakCode::PsnSequenceError, rs.msn)), 0, |_| Ok(()), None));
                }
                return;
            }
            // UC: packets were lost; the message in progress is abandoned (IBA 9.8.3).
            rs.expected_psn = psn;
            rs.last_opcode = None;
            rs.write = None;
            if let Some(r) = rs.recv.as_mut() {
                r.placed = 0;
            }
            if !info.starts_message() {
                rs.expected_psn = psn.next();
                return;
            }
        }
        rs.nak_sent = false;
        if !check_op_sequence(rs.last_opcode, pkt.opcode()).is_ok() {
            if rc {
                push(fx, response(dev, path, Opcode::RC_ACKNOWLEDGE, psn, Some(nak_aeth(NakCode::InvalidRequest, rs.msn)), 0, |_| Ok(()), None));
                fx.error = true;
            } else {
                rs.last_opcode = None;
                rs.expected_psn = psn.next();
            }
            return;
        }
    }

    let needed = if info.is_write() {
        qp_access::REMOTE_WRITE
    } else if info.is_read() {
        qp_access::REMOTE_READ
    } else if info.is_atomic() {
        qp_access::REMOTE_ATOMIC
    } else {
        0
    };
    if needed != 0 && access & needed == 0 {
        nak_error(dev, path, rs, fx, psn, NakCode::InvalidRequest);
        return;
    }

    if info.is_send() {
        send(dev, qp, pkt, src, path, rs, fx);
    } else if info.is_write() {
        write(dev, qp, pkt, src, path, rs, fx);
    } else if info.is_read() {
        read(dev, qp, pkt, src, path, rs, fx, psn);
    } else if info.is_atomic() {
        atomic(dev, qp, pkt, src, path, rs, fx);
    } else {
        nak_error(dev, path, rs, fx, psn, NakCode::InvalidRequest);
    }
}

fn push(fx: &mut Effects, skb: Option<TxSkBuff>) {
    if let Some(skb) = skb {
        let _ = fx.packets.push(skb, GFP_ATOMIC);
    }
}

/// A fatal request error on RC (IBA 9.7.5.2.3/4): NAK and the QP goes to error.
fn nak_error(dev: &Device<Roxe>, path: &PathInfo, rs: &mut RespState, fx: &mut Effects, psn: Psn, code: NakCode) {
    push(fx, response(dev, path, Opcode::RC_ACKNOWLEDGE, psn, Some(nak_aeth(code, rs.msn)), 0, |_| Ok(()), None));
    fx.error = true;
}

/// Ends an accepted packet: advance the PSN, close the message, ACK if asked.
fn accepted(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, path: &PathInfo, rs: &mut RespState, fx: &mut Effects) {
    let info = pkt.info();
    rs.expected_psn = pkt.psn().next();
    if info.ends_message() {
        rs.msn = rs.msn.next();
        rs.last_opcode = None;
    } else {
        rs.last_opcode = Some(pkt.opcode());
    }
    if qp.qp_type == QpType::Rc && pkt.ack_req() {
        push(fx, response(dev, path, Opcode::RC_ACKNOWLEDGE, pkt.psn(), Some(ack_aeth(rs.msn)), 0, |_| Ok(()), None));
    }
}

fn send(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, src: &Source, path: &PathInfo, rs: &mut RespState, fx: &mut Effects) {
    let info = pkt.info();
    let rc = qp.qp_type == QpType::Rc;
    let ud = matches!(qp.qp_type, QpType::Ud | QpType::Gsi);
    let held = core::mem::take(&mut rs.odp_held);
    if (info.starts_message() && !held) || rs.recv.is_none() {
        match take_recv(dev, qp) {
            Some(Ok(r)) => rs.recv = Some(r),
            Some(Err(wr_id)) => {
                fx.recv_cqe = Some(Cqe::recv_error(wr_id, WcStatus::LocQpOpErr, qp.qpn));
                if rc {
                    nak_error(dev, path, rs, fx, pkt.psn(), NakCode::RemoteOperationalError);
                }
                return;
            }
            None => {
                // No receive WQE: RNR NAK on RC (IBA 9.7.5.2.8); UC and UD drop the message.
                if rc {
                    dev.data().counters.inc(crate::counters::Counter::SendRnrErr);
                    let timer = path.min_rnr_timer;
                    let aeth = Aeth { syndrome: Syndrome::RnrNak { timer }, msn: rs.msn };
                    push(fx, response(dev, path, Opcode::RC_ACKNOWLEDGE, pkt.psn(), Some(aeth), 0, |_| Ok(()), None));
                } else if !ud {
                    rs.expected_psn = pkt.psn().next();
                }
                return;
            }
        }
    }
    let Some(r) = rs.recv.as_mut() else { return };
    if ud && r.placed == 0 {
        match scatter(dev, qp, r, &grh_bytes(src)) {
            Ok(()) => {}
            Err(Place::NotPresent) => return odp_miss(dev, qp, pkt, src, path, rs, fx),
            Err(Place::Fail(status)) => {
                let wr_id = r.wqe.wr_id;
                rs.recv = None;
                fx.recv_cqe = Some(Cqe::recv_error(wr_id, status, qp.qpn));
                return;
            }
        }
    }
    let Some(r) = rs.recv.as_mut() else { return };
    if let Err(place) = scatter(dev, qp, r, pkt.payload()) {
        let Place::Fail(status) = place else { return odp_miss(dev, qp, pkt, src, path, rs, fx) };
        // The receive fails. On RC the sender gets, for a message too long for the buffer, an
        // invalid request NAK (IBA 9.7.5.2.3, class C); for a buffer the QP may not write (bad
        // L_Key, address outside the MR), a remote operational error NAK (IBA 9.7.5.2.4: an
        // error local to the responder; rxe's RESPST_ERR_MALFORMED_WQE).
        let wr_id = r.wqe.wr_id;
        rs.recv = None;
        fx.recv_cqe = Some(Cqe::recv_error(wr_id, status, qp.qpn));
        if rc {
            let code = if status == WcStatus::LocLenErr { NakCode::InvalidRequest } else { NakCode::RemoteOperationalError };
            nak_error(dev, path, rs, fx, pkt.psn(), code);
        }
        return;
    }
    if info.ends_message() {
        if let Some(ieth) = pkt.ieth() {
            // SEND with Invalidate frees the named window before the receive completes (IBA
            // 10.6.7.3); an R_Key that names no invalidatable window fails the request.
            if crate::mem::invalidate(dev.data(), qp.pd_id, ieth.rkey).is_err() {
                if let Some(r) = rs.recv.take() {
                    fx.recv_cqe = Some(Cqe::recv_error(r.wqe.wr_id, WcStatus::RemInvReqErr, qp.qpn));
                }
                if rc {
                    nak_error(dev, path, rs, fx, pkt.psn(), NakCode::InvalidRequest);
                }
                return;
            }
        }
        if let Some(r) = rs.recv.take() {
            let (src_qp, grh) = if ud { (pkt.deth().map(|d| d.src_qpn), true) } else { (None, false) };
            let c = RecvCompletion {
                wr_id: r.wqe.wr_id,
                qp_num: qp.qpn,
                byte_len: r.placed,
                rdma_write_with_imm: false,
                imm_data: pkt.imm_data(),
                invalidated_rkey: pkt.ieth().map(|i| i.rkey),
                src_qp,
                grh,
                pkey_index: 0,
                port_num: crate::device::PORT as u8,
            };
            fx.recv_cqe = Some(Cqe::recv(&c));
            fx.solicited = pkt.solicited_event();
        }
    }
    if !ud {
        accepted(dev, qp, pkt, path, rs, fx);
    }
}

fn write(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, src: &Source, path: &PathInfo, rs: &mut RespState, fx: &mut Effects) {
    let info = pkt.info();
    let psn = pkt.psn();
    if info.has_immediate() && rs.recv.is_none() {
        // WRITE with immediate consumes a receive WQE; without one, RNR before touching memory.
        match take_recv(dev, qp) {
            Some(Ok(r)) => rs.recv = Some(r),
            _ => {
                if qp.qp_type == QpType::Rc {
                    dev.data().counters.inc(crate::counters::Counter::SendRnrErr);
                    let timer = path.min_rnr_timer;
                    let aeth = Aeth { syndrome: Syndrome::RnrNak { timer }, msn: rs.msn };
                    push(fx, response(dev, path, Opcode::RC_ACKNOWLEDGE, psn, Some(aeth), 0, |_| Ok(()), None));
                }
                return;
            }
        }
    }
    let payload = pkt.payload();
    // C9-88: a zero-length RDMA WRITE names no memory, so neither its R_Key nor its VA is
    // checked (as for READ).
    let zero_length = pkt.reth().is_some_and(|r| r.dma_len == 0) && payload.is_empty() && info.ends_message();
    if let Some(reth) = pkt.reth().filter(|_| !zero_length) {
        match lookup_remote(dev.data(), reth.rkey, qp.pd_id, qp.qpn, Access::REMOTE_WRITE, reth.va, u64::from(reth.dma_len)) {
            Ok(mr) => rs.write = Some(WriteCursor { mr, va: reth.va, remaining: reth.dma_len }),
            Err(_) => {
                rs.write = None;
                // A WRITE with immediate took a receive WQE above: it left the ring, so only this
                // completion reports it (rxe: class C, IB_WC_REM_ACCESS_ERR).
                if let Some(r) = rs.recv.take() {
                    fx.recv_cqe = Some(Cqe::recv_error(r.wqe.wr_id, WcStatus::RemAccessErr, qp.qpn));
                }
                nak_error(dev, path, rs, fx, psn, NakCode::RemoteAccessError);
                return;
            }
        }
    }
    if !zero_length {
        let Some(w) = rs.write.as_mut() else {
            nak_error(dev, path, rs, fx, psn, NakCode::InvalidRequest);
            return;
        };
        if payload.len() as u64 > u64::from(w.remaining) {
            rs.write = None;
            nak_error(dev, path, rs, fx, psn, NakCode::InvalidRequest);
            return;
        }
        if let Err(e) = w.mr.write_at(w.va, payload) {
            if e == MemError::NotPresent {
                // Fault in the rest of the WRITE; the cursor stays for the resent packet.
                let _ = odp::fault_mr(dev, &w.mr, w.va, u64::from(w.remaining));
                return odp_miss(dev, qp, pkt, src, path, rs, fx);
            }
            rs.write = None;
            nak_error(dev, path, rs, fx, psn, NakCode::RemoteAccessError);
            return;
        }
        w.va = w.va.wrapping_add(payload.len() as u64);
        w.remaining -= payload.len() as u32;
    }
    if info.ends_message() {
        rs.write = None;
        if info.has_immediate() {
            if let Some(r) = rs.recv.take() {
                let c = RecvCompletion {
                    wr_id: r.wqe.wr_id,
                    qp_num: qp.qpn,
                    byte_len: pkt.reth().map_or(0, |x| x.dma_len),
                    rdma_write_with_imm: true,
                    imm_data: pkt.imm_data(),
                    invalidated_rkey: None,
                    src_qp: None,
                    grh: false,
                    pkey_index: 0,
                    port_num: crate::device::PORT as u8,
                };
                fx.recv_cqe = Some(Cqe::recv(&c));
                fx.solicited = pkt.solicited_event();
            }
        }
    }
    accepted(dev, qp, pkt, path, rs, fx);
}

#[allow(clippy::too_many_arguments)]
fn read(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, src: &Source, path: &PathInfo, rs: &mut RespState, fx: &mut Effects, start_psn: Psn) {
    let Some(reth) = pkt.reth() else {
        nak_error(dev, path, rs, fx, start_psn, NakCode::InvalidRequest);
        return;
    };
    // A zero-length READ touches no memory, so its R_Key is not checked (IBA 9.4.3).
    let mr = if reth.dma_len == 0 {
        None
    } else {
        match lookup_remote(dev.data(), reth.rkey, qp.pd_id, qp.qpn, Access::REMOTE_READ, reth.va, u64::from(reth.dma_len)) {
            Ok(mr) => Some(mr),
            Err(_) => {
                nak_error(dev, path, rs, fx, start_psn, NakCode::RemoteAccessError);
                return;
            }
        }
    };
    if let Some(mr) = &mr {
        if mr.check_present(reth.va, u64::from(reth.dma_len)) == Err(MemError::NotPresent) {
            let _ = odp::fault_mr(dev, mr, reth.va, u64::from(reth.dma_len));
            return odp_miss(dev, qp, pkt, src, path, rs, fx);
        }
    }
    // The request counts as one message; its responses carry the MSN after it (IBA 9.7.5.1.3).
    rs.msn = rs.msn.next();
    rs.last_opcode = None;
    let npkts = reth.dma_len.div_ceil(path.mtu).max(1);
    read_responses(dev, path, rs.msn, mr.as_ref().map(|m| &***m), reth.va, reth.dma_len, start_psn, 0, npkts, fx);
    rs.expected_psn = start_psn.add(npkts);
}

/// Sends the response packets `from..npkts` of a READ of `len` bytes at `va`.
#[allow(clippy::too_many_arguments)]
fn read_responses(
    dev: &Device<Roxe>,
    path: &PathInfo,
    msn: Msn,
    mr: Option<&RoxeMr>,
    va: u64,
    len: u32,
    first_psn: Psn,
    from: u32,
    npkts: u32,
    fx: &mut Effects,
) {
    for i in from..npkts {
        let offset = i.saturating_mul(path.mtu);
        let n = core::cmp::min(path.mtu, len.saturating_sub(offset)) as usize;
        let opcode = match (i == 0, i + 1 == npkts) {
            (true, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
            (true, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            (false, false) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            (false, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
        };
        let aeth = opcode.info().filter(|x| x.has(crate::proto::opcode::ExtHeader::Aeth)).map(|_| ack_aeth(msn));
        let at = va.wrapping_add(u64::from(offset));
        let skb = response(
            dev,
            path,
            opcode,
            first_psn.add(i),
            aeth,
            n,
            |out| match mr {
                Some(mr) => mr.read_at(at, out),
                None => Ok(()),
            },
            None,
        );
        push(fx, skb);
    }
}

fn atomic(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, src: &Source, path: &PathInfo, rs: &mut RespState, fx: &mut Effects) {
    let psn = pkt.psn();
    let Some(a) = pkt.atomic_eth() else {
        nak_error(dev, path, rs, fx, psn, NakCode::InvalidRequest);
        return;
    };
    if a.va % 8 != 0 {
        // IBA 9.4.5: atomics need naturally aligned 8-byte operands.
        nak_error(dev, path, rs, fx, psn, NakCode::InvalidRequest);
        return;
    }
    let mr = match lookup_remote(dev.data(), a.rkey, qp.pd_id, qp.qpn, Access::REMOTE_ATOMIC, a.va, 8) {
        Ok(mr) => mr,
        Err(_) => {
            nak_error(dev, path, rs, fx, psn, NakCode::RemoteAccessError);
            return;
        }
    };
    let orig = {
        let _guard = dev.data().atomic_lock.lock();
        let mut cur = [0u8; 8];
        if let Err(e) = mr.read_at(a.va, &mut cur) {
            drop(_guard);
            if e == MemError::NotPresent {
                let _ = odp::fault_mr(dev, &mr, a.va, 8);
                return odp_miss(dev, qp, pkt, src, path, rs, fx);
            }
            nak_error(dev, path, rs, fx, psn, NakCode::RemoteAccessError);
            return;
        }
        let orig = u64::from_ne_bytes(cur);
        let new = if pkt.opcode() == Opcode::RC_COMPARE_SWAP {
            if orig == a.compare { a.swap_add } else { orig }
        } else {
            orig.wrapping_add(a.swap_add)
        };
        if let Err(e) = mr.write_at(a.va, &new.to_ne_bytes()) {
            drop(_guard);
            if e == MemError::NotPresent {
                // Invalidated since the read: nothing was written, so the resend runs it anew.
                let _ = odp::fault_mr(dev, &mr, a.va, 8);
                return odp_miss(dev, qp, pkt, src, path, rs, fx);
            }
            nak_error(dev, path, rs, fx, psn, NakCode::RemoteAccessError);
            return;
        }
        orig
    };
    if let Some(slot) = rs.atomics.get_mut(rs.atomic_next % ATOMIC_CACHE) {
        *slot = (psn.get(), orig, true);
    }
    rs.atomic_next = rs.atomic_next.wrapping_add(1);
    rs.msn = rs.msn.next();
    rs.last_opcode = None;
    rs.expected_psn = psn.next();
    push(fx, response(dev, path, Opcode::RC_ATOMIC_ACKNOWLEDGE, psn, Some(ack_aeth(rs.msn)), 0, |_| Ok(()), Some(orig)));
}

/// A request with a PSN already seen (IBA 9.7.5.1.1): SEND and WRITE get an ACK of the latest
/// PSN, a READ is served again (reads have no side effect), an atomic gets its saved result
/// without running again.
fn duplicate(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, path: &PathInfo, rs: &mut RespState, fx: &mut Effects) {
    let info = pkt.info();
    let last = rs.expected_psn.add(0xff_ffff);
    if info.is_read() {
        if let Some(reth) = pkt.reth() {
            if let Ok(mr) = lookup_remote(dev.data(), reth.rkey, qp.pd_id, qp.qpn, Access::REMOTE_READ, reth.va, u64::from(reth.dma_len)) {
                if mr.check_present(reth.va, u64::from(reth.dma_len)) == Err(MemError::NotPresent) {
                    // ODP: no answer now; the requester asks again after its timeout.
                    let _ = odp::fault_mr(dev, &mr, reth.va, u64::from(reth.dma_len));
                } else {
                    let npkts = reth.dma_len.div_ceil(path.mtu).max(1);
                    read_responses(dev, path, rs.msn, Some(&mr), reth.va, reth.dma_len, pkt.psn(), 0, npkts, fx);
                }
            }
        }
    } else if info.is_atomic() {
        let psn = pkt.psn().get();
        if let Some((_, orig, _)) = rs.atomics.iter().find(|(p, _, valid)| *valid && *p == psn) {
            let orig = *orig;
            push(fx, response(dev, path, Opcode::RC_ATOMIC_ACKNOWLEDGE, pkt.psn(), Some(ack_aeth(rs.msn)), 0, |_| Ok(()), Some(orig)));
        }
    } else if pkt.ack_req() || info.ends_message() {
        push(fx, response(dev, path, Opcode::RC_ACKNOWLEDGE, last, Some(ack_aeth(rs.msn)), 0, |_| Ok(()), None));
    }
}
