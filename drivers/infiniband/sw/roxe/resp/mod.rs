// SPDX-License-Identifier: GPL-2.0

//! The responder: requests from the peer become memory writes, reads, atomics and receive
//! completions, answered by ACKs, NAKs and responses. Counterpart of rxe's `rxe_resp.c`.
//!
//! Every protocol decision (PSN and opcode-sequence checks, access and length checks, duplicate
//! handling with the responder resources cache, the response, the error class) is made by
//! [`crate::proto::resp`]; this file looks keys up, moves bytes, builds packets and posts
//! completions.
//!
//! Context: [`receive`] runs in the receive pipeline (softirq, or the loopback drainer). The
//! responder state is updated under the QP's receive lock; completions are posted and packets
//! sent after releasing it.

#![deny(unsafe_code)]

mod held;
pub(crate) mod read_reply;
pub(crate) mod response;

use crate::rdma::{
    ah::Network,
    device::{now_ms, Device},
    netdev::NetDevice,
    pool::PoolRef,
    qp::QpEvent,
};
use crate::soft::skb::TxSkBuff;
use crate::{
    counters::Counter,
    device::{LocalAck, LocalResponse},
    hca::Roxe,
    mem::mr::MemError,
    mem::mr::RoxeMr,
    mem::odp,
    mem::{remote_target, LocalSource, SgeList},
    net::source::Source,
    proto::{
        cqe::{roce_sl, Cqe, RecvCompletion, WcStatus},
        mtt::Access,
        opcode::{Opcode, Operation, Transport},
        packet::{Aeth, NakCode, Packet, Syndrome},
        psn::Psn,
        qp_state::{QpState, QpType},
        resp::{
            ack_syndrome, check_length, check_op_allowed, check_opcode, check_psn, check_resource,
            check_rkey, commit, handle_duplicate, PageFaultAction, Placement, PsnVerdict,
            RecvSuccess, RecvWqeFate, RemoteAccess, Request, RespConfig, RespError, RespHeader,
            Response, READ_REPLY_BURST, UD_GRH_LEN,
        },
        wqe::{recv_layout, RecvWqe},
    },
    qp::resp_state::{RecvEntry, RespState},
    qp::{self, PathInfo, RoxeQp},
    req,
    resp::read_reply::{send_read_burst, ReplyPath},
    resp::response::{ack_packet, local_source, response},
};
use kernel::{prelude::*, sync::aref::ARef};

/// What the responder sends, completes or raises once its lock is released.
struct Effects {
    /// The device's netdev (the data path never calls `ib_device_get_netdev`, whose lock is not
    /// IRQ-safe).
    netdev: ARef<NetDevice>,
    /// A positive ACKNOWLEDGE and its PSN, which may be held back (see [`send_responses`]).
    ack: Option<(Psn, TxSkBuff)>,
    /// Every other response, sent at once, in order.
    packets: KVec<TxSkBuff>,
    recv_cqe: Option<Cqe>,
    solicited: bool,
    error: bool,
    access_event: bool,
    /// The id of a receive WQE taken from the ring that failed to parse.
    bad_recv: Option<u64>,
    /// The request came from this device, through the loopback drainer (`Source::local`).
    local: bool,
    /// A response that the loopback drainer delivers (see [`LocalResponse`]).
    local_response: Option<LocalResponse>,
    /// A burst of the READ reply is due ([`send_read_burst`]), read through this MR when the
    /// request's key was looked up already (a new READ).
    read_burst: Option<Option<PoolRef<RoxeMr>>>,
}

impl Effects {
    fn new(dev: &Device<Roxe>, local: bool) -> Self {
        Effects {
            netdev: dev.data().netdev.clone(),
            ack: None,
            packets: KVec::new(),
            recv_cqe: None,
            solicited: false,
            error: false,
            access_event: false,
            bad_recv: None,
            local,
            local_response: None,
            read_burst: None,
        }
    }
}

fn push(fx: &mut Effects, skb: Option<TxSkBuff>) {
    if let Some(skb) = skb {
        let _ = fx.packets.push(skb, GFP_ATOMIC);
    }
}

/// What the responder knows of the request packet it handles: the device and QP, the packet
/// and its addresses, and the QP's path and responder configuration, read once per packet.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    dev: &'a Device<Roxe>,
    qp: &'a RoxeQp,
    pkt: &'a Packet<&'a [u8]>,
    src: &'a Source,
    path: &'a PathInfo,
    cfg: &'a RespConfig,
    /// The request was held behind a READ reply and runs now ([`held::run_held`]).
    held: bool,
}

/// Queues an ACKNOWLEDGE (ACK or NAK) with BTH PSN `psn`.
fn acknowledge(path: &PathInfo, fx: &mut Effects, psn: Psn, aeth: Aeth) {
    let skb = ack_packet(&fx.netdev, path, psn, aeth);
    push(fx, skb);
}

/// A buffer of `len` bytes for a copy of a receive WQE's slot: `spare` if it has that size,
/// else a new one. Allocated before the ring's lock, which turns interrupts off.
fn slot_buffer(spare: &mut Option<KVec<u8>>, len: usize) -> Option<KVec<u8>> {
    match spare.take() {
        Some(slot) if slot.len() == len => Some(slot),
        _ => KVec::from_elem(0u8, len, GFP_ATOMIC).ok(),
    }
}

/// Takes the next receive WQE of the QP (its RQ or SRQ), copied into `spare` if it fits.
/// `Err(wr_id)`: it does not parse. With no WQE posted, `spare` keeps the buffer.
fn take_recv(qp: &RoxeQp, spare: &mut Option<KVec<u8>>) -> Option<Result<RecvEntry, u64>> {
    let (slot, max_sge) = if let Some(srq) = &qp.srq {
        let mut slot = slot_buffer(spare, srq.elem_size)?;
        let mut inner = srq.inner.lock();
        if inner.resizing || !inner.queue.peek(&mut slot) {
            drop(inner);
            *spare = Some(slot);
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
        let mut slot = slot_buffer(spare, qp.rq_elem_size)?;
        let mut rq = qp.rq.lock();
        let peeked = match (*rq).as_mut() {
            Some(q) if q.peek(&mut slot) => {
                q.advance_consumer();
                true
            }
            _ => false,
        };
        drop(rq);
        if !peeked {
            *spare = Some(slot);
            return None;
        }
        (slot, qp.rq_max_sge)
    };
    match RecvWqe::parse(&slot, max_sge) {
        Ok(wqe) => Some(Ok(RecvEntry { wqe, slot })),
        Err(_) => {
            let wr_id = slot
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_ne_bytes);
            Some(Err(wr_id))
        }
    }
}

/// A GRH for a UD receive (IBA 8.3): for IPv4 the IPv4 header sits in its last 20 bytes, as
/// rdma-core's UD users expect from RoCEv2.
fn grh_bytes(src: &Source) -> [u8; UD_GRH_LEN as usize] {
    let mut g = [0u8; UD_GRH_LEN as usize];
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

/// The QP's path and responder configuration, and its Q_Key: one look at its attributes per
/// packet. `None` when the QP does not receive (IBA 10.3.1: from RTR on; in RESET, INIT or ERR
/// packets are dropped).
fn qp_view(qp: &RoxeQp) -> Option<(PathInfo, RespConfig, u32)> {
    let st = qp.state.lock();
    let a = &st.attr;
    let path = PathInfo::of(&st);
    let cfg = RespConfig {
        qp_type: qp.qp_type,
        access_flags: a.qp_access_flags,
        mtu: st.segment(),
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
    };
    let receiving = matches!(
        path.state,
        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
    );
    receiving.then_some((path, cfg, a.qkey))
}

/// Handles a request packet for `qp`, and then the requests held behind a READ reply that its
/// responses let go ([`held::run_held`]).
pub(crate) fn receive(dev: &Device<Roxe>, qp: &RoxeQp, pkt: &Packet<&[u8]>, src: &Source) {
    let Some((path, cfg, qkey)) = qp_view(qp) else {
        dev.data().counters.inc(Counter::RcvdDrops);
        return;
    };
    let mut fx = Effects::new(dev, src.local);
    let cx = Ctx {
        dev,
        qp,
        pkt,
        src,
        path: &path,
        cfg: &cfg,
        held: false,
    };
    let idle = {
        let mut rs = qp.resp_state.lock();
        handle(&cx, qkey, &mut rs, &mut fx);
        rs.held.idle()
    };
    // After a burst the reply may be out; requests a budget left waiting need no tick either.
    if finish(&cx, fx) || !idle {
        held::run_held(dev, qp);
    }
}

/// Posts, sends and raises what handling a request left in `fx`, with the responder's lock
/// released. Returns whether a burst of a READ reply went out: the reply may be complete, and
/// requests held behind it may run.
fn finish(cx: &Ctx<'_>, mut fx: Effects) -> bool {
    let Ctx { dev, qp, path, .. } = *cx;
    // The receive completion first, then the response; the QP goes to error after both.
    if let Some(cqe) = fx.recv_cqe {
        if cqe.status == WcStatus::Success {
            // rxe's `rdma_recvs`: receive WQEs a SEND or a WRITE with immediate completed.
            dev.data().counters.inc(Counter::RdmaRecvs);
        }
        let mut bytes = cqe.to_bytes();
        if !qp.is_user && matches!(qp.qp_type, QpType::Ud | QpType::Gsi) {
            // Kernel consumers learn the network header type from `ib_wc` (the MAD layer needs
            // it to build a reply's address); the byte is reserved in the user ABI's CQE.
            if let Some(b) = bytes.get_mut(47) {
                *b = match cx.src.network {
                    Network::Ipv4 => crate::rdma::kverbs::NETWORK_IPV4,
                    Network::Ipv6 => crate::rdma::kverbs::NETWORK_IPV6,
                };
            }
        }
        if qp.recv_cq.post(&bytes, fx.solicited, &qp.notifier).is_err() {
            // IBA 10.10.2.3: the receive completion is lost with its CQ; the QP goes to error.
            dev.data().counters.inc(Counter::CqOverflow);
            fx.error = true;
        }
    }
    if let Some(r) = fx.local_response {
        // `response::local_source` found the slot empty, and only this drainer fills it.
        let mut slot = dev.data().local_response.lock();
        if slot.is_none() {
            *slot = Some(r);
        }
    }
    if let Some(av) = path.av {
        // A one-packet message's ACK may wait for the end of the receive pass: it frees one
        // PSN of the requester's window. A longer message's frees many, and the requester
        // waits for it.
        let info = cx.pkt.info();
        let one_packet = info.starts_message() && info.ends_message();
        crate::net::ack::send_responses(dev, qp, &av, fx.ack, fx.packets, one_packet);
    }
    let burst = fx.read_burst.is_some();
    if let Some(mr) = fx.read_burst {
        send_read_burst(dev, qp, path, cx.cfg.mtu, mr);
    }
    if fx.access_event {
        // C9-222.1: an access error no receive completion reports.
        qp.notifier.event(QpEvent::AccessError);
    }
    if fx.error {
        crate::qp::move_to_error(qp);
        qp::flush_recv(dev, qp);
        req::run(dev, qp);
    } else if path.state == QpState::Rtr && cx.pkt.info().starts_message() {
        // IBA 11.6.3.1: the first packet received in RTR establishes communication.
        qp.notifier.event(QpEvent::CommEstablished);
    }
    burst
}

fn handle(cx: &Ctx<'_>, qkey: u32, rs: &mut RespState, fx: &mut Effects) {
    let Ctx {
        dev,
        qp,
        pkt,
        path,
        cfg,
        ..
    } = *cx;
    if matches!(qp.qp_type, QpType::Ud | QpType::Gsi) {
        // IBA 10.2.5: a datagram whose Q_Key differs from the QP's is dropped.
        match pkt.deth() {
            Some(d) if d.qkey == qkey => {}
            _ => return,
        }
    }
    let req = Request::from_packet(pkt);
    if !cx.held && (rs.read.active() || !rs.held.idle()) && held::hold(cx, &req, rs) {
        return;
    }
    match check_psn(&mut rs.proto, cfg, &req) {
        PsnVerdict::Expected | PsnVerdict::Resync => {}
        PsnVerdict::Duplicate => {
            dev.data().counters.inc(Counter::DuplicateRequest);
            match handle_duplicate(&rs.proto, &rs.cache, cfg, &req) {
                // A replay moves the paced reply stream; it builds nothing here, so a replayed
                // request costs the same whatever the length of the READ it names.
                Response::Read(reply) => {
                    if rs.read.replay(reply, reply.responses(cfg.mtu), now_ms()) {
                        fx.read_burst = Some(None);
                    }
                }
                r => respond(cx, rs, fx, r, None),
            }
            return;
        }
        PsnVerdict::SequenceNak { expected } => {
            dev.data().counters.inc(Counter::OutOfSeqRequest);
            acknowledge(
                path,
                fx,
                expected,
                rs.proto.aeth(Syndrome::Nak(NakCode::PsnSequenceError)),
            );
            return;
        }
        PsnVerdict::Drop => return,
    }
    match execute(cx, &req, rs, fx) {
        Ok(()) => {}
        Err(Refusal::Error(e)) => fail(cx, &req, rs, fx, e),
        Err(Refusal::NotPresent) => page_fault(cx, &req, rs, fx),
        Err(Refusal::Lost) => cx.dev.data().counters.inc(Counter::RcvdDrops),
    }
}

/// Why [`execute`] did not commit a request.
enum Refusal {
    /// The request is refused: [`fail`] says what follows.
    Error(RespError),
    /// ODP: it needs memory that is not faulted in; the fault is queued. Nothing of the request
    /// was consumed (not even a receive WQE taken for it, which stays held), so this is no
    /// error of the protocol: [`page_fault`] answers it, never [`fail`], which would abandon
    /// the message and, for most errors, move the QP to the error state.
    NotPresent,
    /// The packet is lost, as on a wire, and counted (`rcvd_drops`): nothing of it was
    /// consumed, as for [`Refusal::NotPresent`]. RC resends it (as a socket buffer carrying its
    /// payload); UC loses the message, as it loses any packet.
    Lost,
}

impl From<RespError> for Refusal {
    fn from(e: RespError) -> Self {
        Refusal::Error(e)
    }
}

/// What a copy to or from remote memory means for the request: a miss on an ODP page queues a
/// fault of `[va, va + len)` of `mr` (the rest of the request, so that the resend finds it all)
/// and defers the request; any other failure is an R_Key violation.
fn remote_copy<T>(
    dev: &Device<Roxe>,
    mr: &RoxeMr,
    va: u64,
    len: u64,
    r: Result<T, MemError>,
) -> Result<T, Refusal> {
    match r {
        Ok(v) => Ok(v),
        Err(MemError::NotPresent) => {
            // A fault that cannot be queued (too many jobs) is retried on the resend's miss.
            let _ = odp::fault_mr(dev, mr, va, len);
            Err(Refusal::NotPresent)
        }
        Err(_) => Err(RespError::RemoteAccess.into()),
    }
}

/// Copies SEND data to byte `offset` of a receive WQE's buffers (`recv_len` bytes in all). A
/// miss on an ODP page queues a fault of the rest of the buffers, where the rest of the message
/// goes.
fn place_recv(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    list: &SgeList<'_>,
    offset: u32,
    data: &[u8],
    recv_len: u32,
) -> Result<(), Refusal> {
    match list.scatter(dev, qp.pd_id, u64::from(offset), data) {
        Ok(()) => Ok(()),
        Err(MemError::NotPresent) => {
            let rest = recv_len.saturating_sub(offset) as usize;
            let _ = odp::fault_sges(
                dev,
                qp.pd_id,
                list,
                u64::from(offset),
                rest,
                Access::LOCAL_WRITE,
            );
            Err(Refusal::NotPresent)
        }
        Err(_) => Err(RespError::RecvProtection.into()),
    }
}

/// Copies a SEND packet's payload, left in the sender's MR (`s`), to byte `offset` of a
/// receive WQE's buffers: page to page when they are pinned user memory that shares no page
/// with the source, else read whole first as a packet's payload is
/// (`RoxeDevice::with_source_bytes`). No memory for that loses the packet, as on a wire.
fn place_recv_from(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    list: &SgeList<'_>,
    offset: u32,
    s: &LocalSource,
    recv_len: u32,
) -> Result<(), Refusal> {
    match list.scatter_from(dev, qp.pd_id, u64::from(offset), s) {
        Ok(true) => return Ok(()),
        Ok(false) => {}
        Err(_) => return Err(RespError::RecvProtection.into()),
    }
    dev.data()
        .with_source_bytes(s, |b| place_recv(dev, qp, list, offset, b, recv_len))
        .unwrap_or(Err(Refusal::Lost))
}

/// Answers a request deferred by an ODP miss as [`crate::proto::resp::RespState::page_fault`] says. Called
/// before `commit`: the expected PSN, the MSN and the message in progress are as before the
/// packet.
fn page_fault(cx: &Ctx<'_>, req: &Request, rs: &mut RespState, fx: &mut Effects) {
    let Ctx {
        dev,
        qp,
        pkt,
        src,
        path,
        cfg,
        ..
    } = *cx;
    match rs.proto.page_fault(cfg) {
        PageFaultAction::Reply(syndrome) => {
            // An RNR NAK like any other for `rdma statistic` (send_rnr_err).
            dev.data().counters.inc(Counter::SendRnrErr);
            acknowledge(path, fx, req.psn, rs.proto.aeth(syndrome));
        }
        PageFaultAction::Redeliver => {
            // Out of memory or jobs, or handed back too often: the datagram is lost, as on
            // the wire, and counted.
            if !odp::redeliver_after(dev, qp.qpn, pkt, src) {
                dev.data().counters.inc(Counter::RcvdDrops);
            }
        }
        PageFaultAction::Drop => {}
    }
}

/// Runs the checks after the PSN check, executes the request and commits it.
fn execute(
    cx: &Ctx<'_>,
    req: &Request,
    rs: &mut RespState,
    fx: &mut Effects,
) -> Result<(), Refusal> {
    let Ctx { qp, cfg, .. } = *cx;
    check_opcode(&mut rs.proto, cfg, req)?;
    check_op_allowed(cfg, req)?;
    if req.info.needs_recv_wqe() && rs.recv.is_none() {
        match take_recv(qp, &mut rs.spare_slot) {
            Some(Ok(entry)) => rs.recv = Some(entry),
            Some(Err(wr_id)) => {
                fx.bad_recv = Some(wr_id);
                return Err(RespError::MalformedRecvWqe.into());
            }
            None => {}
        }
    }
    check_resource(cfg, req, rs.recv.is_some())?;
    let recv_len = rs.recv.as_ref().map_or(0, |r| r.wqe.length);
    let placement = check_length(&rs.proto, cfg, req, recv_len)?;
    let (original, read_mr) = match placement {
        Placement::Nothing => (0, None),
        Placement::Recv { offset } => {
            place_message(cx, rs, offset)?;
            (0, None)
        }
        Placement::Remote(access) => remote(cx, req, &access)?,
    };
    let done = commit(&mut rs.proto, &mut rs.cache, cfg, req, original);
    if let Some(ok) = done.recv {
        if let Some(r) = rs.recv.take() {
            fx.recv_cqe = Some(recv_cqe(cx, r.wqe.wr_id, ok));
            fx.solicited = cx.pkt.solicited_event();
            rs.spare_slot = Some(r.slot);
        }
    }
    respond(cx, rs, fx, done.response, read_mr);
    Ok(())
}

/// Places a SEND's payload (after a UD datagram's GRH) into the receive WQE it fills, at
/// `offset`; a SEND with Invalidate then invalidates its R_Key.
fn place_message(cx: &Ctx<'_>, rs: &RespState, offset: u32) -> Result<(), Refusal> {
    let Ctx {
        dev,
        qp,
        pkt,
        src,
        cfg,
        ..
    } = *cx;
    let r = rs.recv.as_ref().ok_or(RespError::ReceiverNotReady)?;
    let list = SgeList {
        slot: &r.slot,
        base: recv_layout::DMA_DATA,
        num: r.wqe.num_sge,
    };
    if cfg.transport() == Transport::Ud {
        place_recv(dev, qp, &list, 0, &grh_bytes(src), r.wqe.length)?;
    }
    let local = local_payload(cx).map_err(|_| RespError::RecvProtection)?;
    match local {
        Some(s) => place_recv_from(dev, qp, &list, offset, &s, r.wqe.length)?,
        None => place_recv(dev, qp, &list, offset, pkt.payload(), r.wqe.length)?,
    }
    if let Some(ieth) = pkt.ieth() {
        // SEND with Invalidate (its LAST or ONLY packet carries the IETH) frees the named
        // window or fast-registration MR before the receive completes (IBA 10.6.7.3); an R_Key
        // that names nothing this QP may invalidate fails the message (class J).
        crate::mem::invalidate(dev, qp.pd_id, ieth.rkey)
            .map_err(|_| RespError::InvalidateFailed)?;
    }
    Ok(())
}

/// Executes an RDMA or atomic request on the memory its R_Key names: the atomic's original
/// value, and for a READ the MR its reply reads through.
fn remote(
    cx: &Ctx<'_>,
    req: &Request,
    access: &RemoteAccess,
) -> Result<(u64, Option<PoolRef<RoxeMr>>), Refusal> {
    let Ctx {
        dev, qp, pkt, cfg, ..
    } = *cx;
    let found = remote_target(dev, access.rkey, qp.pd_id, qp.qpn);
    check_rkey(found.as_ref().map(|(t, _)| t), access)?;
    let Some((_, mr)) = found else {
        return Err(RespError::RemoteAccess.into());
    };
    match req.info.operation() {
        Operation::RdmaWrite => {
            let done = write_payload(cx, &mr, access.va);
            remote_copy(dev, &mr, access.va, access.len, done)?;
        }
        Operation::RdmaReadRequest => {
            // ODP: the responses are built in softirq, which cannot fault, so the first
            // burst's bytes must be present before the READ is accepted (it then counts as a
            // message). Only those: what one request packet costs stays bounded whatever the
            // READ's length. A page missing further on ends the reply where it is, with its
            // fault queued (`read_responses`), and the requester asks again from there.
            let first_burst = u64::from(READ_REPLY_BURST) * u64::from(cfg.mtu.bytes());
            let len = access.len.min(first_burst);
            let present = mr.check_present(access.va, len);
            remote_copy(dev, &mr, access.va, access.len, present)?;
            return Ok((0, Some(mr)));
        }
        Operation::CompareSwap | Operation::FetchAdd => {
            return Ok((atomic(cx, req, &mr, access)?, None));
        }
        Operation::AtomicWrite => {
            let done = {
                let _guard = dev.data().atomic_lock.lock();
                mr.write_at(access.va, pkt.payload())
            };
            remote_copy(dev, &mr, access.va, 8, done)?;
        }
        // Registered memory is ordinary RAM, coherent once written: nothing to flush.
        _ => {}
    }
    Ok((0, None))
}

/// Copies an RDMA WRITE packet's payload into `mr` at IOVA `va`: from the sender's MR when the
/// requester's loopback delivery left it there (the device's `local_source` slot, filled only
/// while that delivery holds the drainer claim), else from the packet.
fn write_payload(cx: &Ctx<'_>, mr: &RoxeMr, va: u64) -> Result<(), MemError> {
    match local_payload(cx)? {
        Some(s) => mr.copy_from_mr(va, &s.mr, s.va, s.len),
        None => mr.write_at(va, cx.pkt.payload()),
    }
}

/// The payload of the packet being handled, when the requester's loopback delivery left it in
/// the sender's MR ([`LocalSource`]: the device's `local_source` slot, filled only while that
/// delivery holds the drainer claim, `Source::payload_in_slot`); `None`: it is in the packet.
/// The packet's own payload bytes are then not its payload, and are never written anywhere: an
/// empty slot, or a source of another length than the packet's payload (neither of which the
/// requester makes), is `MemError::Range`.
fn local_payload(cx: &Ctx<'_>) -> Result<Option<LocalSource>, MemError> {
    if !cx.src.payload_in_slot {
        return Ok(None);
    }
    match cx.dev.data().local_source.lock().take() {
        Some(s) if s.len == cx.pkt.payload_len() => Ok(Some(s)),
        _ => Err(MemError::Range),
    }
}

/// Runs a COMPARE SWAP or FETCH ADD (IBA 9.4.5) on the 8 bytes at `access.va` under the
/// device's atomic lock, so that no other atomic of the device sees a half-done one; returns
/// the original value (rxe: `atomic_reply`).
fn atomic(
    cx: &Ctx<'_>,
    req: &Request,
    mr: &PoolRef<RoxeMr>,
    access: &RemoteAccess,
) -> Result<u64, Refusal> {
    let a = cx.pkt.atomic_eth().ok_or(RespError::Length)?;
    let swap = req.info.operation() == Operation::CompareSwap;
    let done = {
        let _guard = cx.dev.data().atomic_lock.lock();
        let mut cur = [0u8; 8];
        mr.read_at(access.va, &mut cur).and_then(|()| {
            let orig = u64::from_ne_bytes(cur);
            let new = if swap {
                if orig == a.compare {
                    a.swap_add
                } else {
                    orig
                }
            } else {
                orig.wrapping_add(a.swap_add)
            };
            // A page invalidated since the read: nothing was written, the resend runs the
            // atomic anew.
            mr.write_at(access.va, &new.to_ne_bytes()).map(|()| orig)
        })
    };
    // Any fault is queued after the atomic lock is released: the job queue's lock is never
    // taken under it.
    remote_copy(cx.dev, mr, access.va, 8, done)
}

/// The completion of the receive WQE `wr_id` that the message filled.
fn recv_cqe(cx: &Ctx<'_>, wr_id: u64, ok: RecvSuccess) -> Cqe {
    let pkt = cx.pkt;
    let ud = cx.cfg.transport() == Transport::Ud;
    let c = RecvCompletion {
        wr_id,
        qp_num: cx.qp.qpn,
        byte_len: ok.byte_len,
        rdma_write_with_imm: ok.rdma_with_imm,
        imm_data: pkt.imm_data(),
        invalidated_rkey: pkt.ieth().map(|i| i.rkey),
        src_qp: if ud {
            pkt.deth().map(|d| d.src_qpn)
        } else {
            None
        },
        grh: ud,
        pkey_index: 0,
        port_num: crate::hca::PORT as u8,
    };
    let mut cqe = Cqe::recv(&c);
    // A user QP learns the frame's L3 type from `sl` ([`roce_sl`]); kernel consumers from
    // `ib_wc.network_hdr_type` ([`receive`]).
    if ud && cx.qp.is_user {
        cqe.sl = match cx.src.network {
            Network::Ipv4 => roce_sl::IPV4,
            Network::Ipv6 => roce_sl::IPV6,
        };
    }
    cqe
}

/// Queues the responses of `r`. A READ's reply is only started here: its first burst goes out
/// after the responder's lock ([`send_read_burst`]), or from the loopback drainer
/// (`device::LocalReply`); it reads through `mr`, the MR the request's key named.
fn respond(
    cx: &Ctx<'_>,
    rs: &mut RespState,
    fx: &mut Effects,
    r: Response,
    mr: Option<PoolRef<RoxeMr>>,
) {
    let Ctx { dev, path, cfg, .. } = *cx;
    let ack = rs.proto.aeth(ack_syndrome());
    match r {
        Response::None => {}
        // Kept apart from the other responses: it may be held (`send_responses`).
        Response::Ack { psn } => {
            let hdr = RespHeader::new(Opcode::RC_ACKNOWLEDGE, psn, Some(ack));
            if !leave_local_ack(cx, fx, hdr) {
                fx.ack = ack_packet(&fx.netdev, path, psn, ack).map(|skb| (psn, skb));
            }
        }
        Response::AtomicAck { psn, original } => {
            let hdr = RespHeader {
                orig: Some(original),
                ..RespHeader::new(Opcode::RC_ATOMIC_ACKNOWLEDGE, psn, Some(ack))
            };
            if !leave_local_ack(cx, fx, hdr) {
                let skb = response(&fx.netdev, path, hdr, 0, |_| true);
                push(fx, skb);
            }
        }
        Response::EmptyRead { psn } => {
            let hdr = RespHeader::new(Opcode::RC_RDMA_READ_RESPONSE_ONLY, psn, Some(ack));
            if !leave_local_ack(cx, fx, hdr) {
                let skb = response(&fx.netdev, path, hdr, 0, |_| true);
                push(fx, skb);
            }
        }
        Response::Read(reply) => {
            let to = ReplyPath {
                path,
                mtu: cfg.mtu,
                ack,
            };
            // One local reply per delivery: the drainer builds it right after.
            let local = match fx.local_response {
                None => read_reply::local_reply(dev, to, mr, &reply, fx.local),
                Some(_) => Err(mr),
            };
            match local {
                Ok(r) => {
                    fx.local_response = Some(LocalResponse::Read(r));
                    // The drainer delivers the first burst; the tick sends the rest.
                    if let Some(rest) = reply.rest_after(cfg.mtu, READ_REPLY_BURST) {
                        rs.read.start_later(rest, now_ms());
                    }
                }
                Err(mr) => {
                    rs.read.start(reply);
                    fx.read_burst = Some(mr);
                }
            }
        }
    }
}

/// Leaves the headers-only response `hdr` for the loopback drainer to deliver right after this
/// request ([`LocalAck`]) when it can (`response::local_source`); returns whether it did.
fn leave_local_ack(cx: &Ctx<'_>, fx: &mut Effects, hdr: RespHeader) -> bool {
    if fx.local_response.is_some() {
        return false;
    }
    let Some(src) = local_source(cx.dev, cx.path, fx.local) else {
        return false;
    };
    fx.local_response = Some(LocalResponse::Ack(LocalAck {
        hdr,
        dest_qpn: cx.path.dest_qpn,
        src,
    }));
    true
}

/// Handles a refused request as [`crate::proto::resp::RespState::fail`] says.
fn fail(cx: &Ctx<'_>, req: &Request, rs: &mut RespState, fx: &mut Effects, err: RespError) {
    let Ctx {
        dev, qp, path, cfg, ..
    } = *cx;
    let action = rs.proto.fail(cfg, err);
    if matches!(action.reply, Some(Syndrome::RnrNak { .. })) {
        dev.data().counters.inc(Counter::SendRnrErr);
    }
    if let Some(syndrome) = action.reply {
        acknowledge(path, fx, req.psn, rs.proto.aeth(syndrome));
    }
    let held = rs.recv.is_some() || fx.bad_recv.is_some();
    if let RecvWqeFate::Complete(status) = action.recv_wqe {
        let wr_id = rs.recv.take().map(|r| r.wqe.wr_id).or(fx.bad_recv.take());
        if let Some(wr_id) = wr_id {
            let status = WcStatus::from_raw(status.wc_status()).unwrap_or(WcStatus::GeneralErr);
            fx.recv_cqe = Some(Cqe::recv_error(wr_id, status, qp.qpn));
        }
    }
    fx.access_event = action.qp_access_event && !held;
    fx.error = action.qp_error;
}
