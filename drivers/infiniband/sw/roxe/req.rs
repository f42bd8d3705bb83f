// SPDX-License-Identifier: GPL-2.0

//! The requester: turns send WQEs into packets. Counterpart of rxe's `rxe_req.c`.
//!
//! Every protocol decision (whether a WQE may start, the packet's opcode, PSN, headers, AckReq,
//! payload range, what a retry resends) is made by [`crate::proto::req`]; this file fetches
//! WQEs, gathers payloads, builds packets and completes WQEs.
//!
//! Scheduling: [`run`] and `recv::loopback::run_requester` are called by the doorbell (process
//! context, or the kick work on another CPU: `task::doorbell`), by the completer when an
//! ACK opens the window or asks for a retransmission (softirq, or process context for loopback
//! packets), and it runs in one caller at a time per QP (a `running` flag; a caller that finds it
//! set leaves a "run again" note for the runner). Each packet is planned and built under the
//! QP's send lock and transmitted after releasing it.

#![deny(unsafe_code)]

use crate::rdma::{
    ah::AddressVector,
    bh,
    device::{now_ms, Device},
    netdev::NetDevice,
};
use crate::soft::{copy::copy, skb::TxSkBuff};
use crate::{
    hca::Roxe,
    mem::mr::MemError,
    mem::odp,
    mem::{LocalSource, SgeList, LOCAL_SOURCE_MIN},
    net,
    proto::{
        comp::completes_without_ack,
        cqe::WcStatus,
        cwnd::Admit,
        mtt::Access,
        packet::Packet,
        qp_state::{QpState, QpType},
        req::{
            finished, may_continue, may_start, next_packet, window_segment, Finished, InFlight,
            LocalOp, PacketDesc, PacketPlan, RdmaWr, ReqConfig, StartVerdict, UdWr, WqeProgress,
        },
        wqe::{send_flags, send_layout, Payload, SendOpcode, SendWqe},
    },
    qp::{Completions, PathInfo, RoxeQp, SendDone, SendEntry, SqState, COMPLETION_BATCH},
};
use kernel::{
    prelude::*,
    sync::atomic::{Full, Relaxed, Release},
};

fn rd_u64(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

/// Steps (packets built, completions posted) one call of [`run`] makes before it leaves the
/// rest to the device's kick work, or a flush to its process work: the SQ's producer index is
/// user-writable, and a process that keeps posting (or a long message) must not hold the CPU
/// (rdma_rxe: `RXE_MAX_ITERATIONS`).
const RUN_BUDGET: u32 = 256;

/// One packet, built, and where it goes.
struct Outgoing {
    packet: Built,
    av: AddressVector,
    /// Whether the packet may wait in the run's batch (`net::TxBatch`): SEND and WRITE
    /// packets. A READ or atomic request leaves at once: the responder answers it with a reply
    /// of its own, which starts sooner than if it waited for the rest of the run.
    batch: bool,
}

/// A packet's bytes: a socket buffer for the network, or the QP's local buffer (the first
/// `len` bytes: BTH to ICRC) for the device's own GID, with the payload left in the sender's MR
/// when there is a [`LocalSource`].
enum Built {
    Skb(TxSkBuff),
    Local(KVVec<u8>, usize, Option<LocalSource>),
}

/// What the planning step decided.
enum Step {
    /// Send this packet (and post these completions: UC and UD complete once sent), then plan
    /// again.
    Send(Outgoing, Option<SendDone>),
    /// Post these completions, then plan again. `error`: the QP goes to the error state.
    Complete(Completions, bool),
    /// The requester moved past a WQE without a packet or a completion: plan again.
    Again,
    /// Nothing to do now.
    Idle,
}

/// Why a packet could not be built.
enum BuildErr {
    /// The WQE fails with this status.
    Status(WcStatus),
    /// ODP: local memory is not faulted in. The WQE stays where it is, its progress unchanged;
    /// the fault is queued and the QP kicked after it (`odp::pause`).
    Paused,
}

impl From<WcStatus> for BuildErr {
    fn from(s: WcStatus) -> Self {
        BuildErr::Status(s)
    }
}

/// ODP: pauses of the requester in a row, each waiting for a fault that did not make the page
/// present, before the WQE fails with a local protection error (IBA 10.8.3.1, as for memory that
/// cannot be accessed). A fault that succeeds is followed by a packet: one pause; a page
/// invalidated again before the retry costs another. 16 leaves room for a busy process and still
/// ends a WQE that can never make progress.
const MAX_ODP_PAUSES: u32 = 16;

/// ODP: the requester found bytes `offset..offset + len` of `list` (used with `need` rights)
/// not faulted in. Pauses the WQE until the fault is done, or fails it if the fault and the
/// kick cannot be queued (a kick that never comes would leave the QP stuck).
fn pause(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    list: &SgeList<'_>,
    offset: u32,
    len: u32,
    need: Access,
) -> BuildErr {
    // The faults first, then a kick of the QP after them: odp.rs runs its jobs in order.
    if odp::fault_sges(dev, qp.pd_id, list, u64::from(offset), len as usize, need)
        && odp::kick_after(dev, qp.qpn)
    {
        BuildErr::Paused
    } else {
        BuildErr::Status(WcStatus::LocProtErr)
    }
}

/// Builds the packet `d` plans for `entry`: into `local` (the QP's local buffer, taken from
/// it) when it goes to the device's own GID, else into a socket buffer.
fn build(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    netdev: &NetDevice,
    entry: &SendEntry,
    d: &PacketDesc,
    local: Option<&mut KVVec<u8>>,
) -> Result<Built, BuildErr> {
    let len = d.packet_len();
    if let Some(slot) = local {
        let mut buf = core::mem::take(slot);
        return match build_local(dev, qp, entry, d, len, &mut buf) {
            Ok(source) => Ok(Built::Local(buf, len, source)),
            Err(e) => {
                // Kept for the next packet: a pause on an ODP page or a failed WQE does not
                // cost the QP the buffer `modify_qp` allocated for it.
                *slot = buf;
                Err(e)
            }
        };
    }
    let mut skb = TxSkBuff::alloc(netdev, len).map_err(|_| WcStatus::LocQpOpErr)?;
    fill(dev, qp, entry, d, skb.data_mut(), true)?;
    Ok(Built::Skb(skb))
}

/// Builds the packet `d` plans for `entry`, `len` bytes, into `buf`, the QP's local buffer;
/// returns where its payload stays when it is left in the sender's MR.
fn build_local(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    entry: &SendEntry,
    d: &PacketDesc,
    len: usize,
    buf: &mut KVVec<u8>,
) -> Result<Option<LocalSource>, BuildErr> {
    if buf.len() < len {
        // Only when `modify_qp` allocated none (it sizes the buffer for a whole segment).
        buf.resize(len, 0, GFP_ATOMIC)
            .map_err(|_| WcStatus::LocQpOpErr)?;
    }
    let data = buf.get_mut(..len).ok_or(WcStatus::LocQpOpErr)?;
    // `fill` overwrites the payload whole, or the responder copies it from the source and never
    // reads the bytes left here (`recv::loopback`).
    net::clear_around_payload(data, d.payload_len as usize, d.pad);
    let source = local_source(dev, qp, entry, d);
    fill(dev, qp, entry, d, data, source.is_none())?;
    Ok(source)
}

/// Where the payload of the loopback packet `d` plans stays when the responder can copy it from
/// the sender's MR into the target ([`LocalSource`]): at least [`LOCAL_SOURCE_MIN`] bytes in
/// one SGE of pinned user memory, of an RDMA WRITE to an R_Key that names pinned user memory,
/// sharing no page with the target bytes, or of a SEND on a connected QP (whose one receiver
/// checks its receive WQE's buffers itself: `SgeList::scatter_from`). `None`: it is gathered.
fn local_source(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    entry: &SendEntry,
    d: &PacketDesc,
) -> Option<LocalSource> {
    let Payload::Sges { num } = entry.wqe.payload else {
        return None;
    };
    if (d.payload_len as usize) < LOCAL_SOURCE_MIN {
        return None;
    }
    let list = SgeList {
        slot: &entry.slot,
        base: send_layout::DMA_DATA,
        num,
    };
    let len = d.payload_len as usize;
    let offset = u64::from(d.payload_offset);
    match entry.wqe.opcode {
        SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm => {
            let rdma = RdmaWr::decode(&entry.wqe.wr);
            let target = crate::mem::pinned_target(dev, rdma.rkey)?;
            let source = list.local_source(dev, qp.pd_id, offset, len)?;
            // Bytes that may overlap their target are copied into the packet first, as a real
            // HCA reads a packet's payload before it writes it.
            let va = rdma.remote_addr.wrapping_add(offset);
            (!target.shares_pages(va, len, &source.mr, source.va, len)).then_some(source)
        }
        // Not UD: a datagram may go to several QPs (a multicast group), and only the first
        // would find the payload.
        SendOpcode::Send | SendOpcode::SendWithImm | SendOpcode::SendWithInv
            if matches!(qp.qp_type, QpType::Rc | QpType::Uc) =>
        {
            list.local_source(dev, qp.pd_id, offset, len)
        }
        _ => None,
    }
}

/// Writes the packet `d` plans for `entry` into `data` (`d.packet_len()` bytes, zeroed but for
/// the payload), its payload too unless `payload` is false.
fn fill(
    dev: &Device<Roxe>,
    qp: &RoxeQp,
    entry: &SendEntry,
    d: &PacketDesc,
    data: &mut [u8],
    payload: bool,
) -> Result<(), BuildErr> {
    if let (
        SendOpcode::RdmaRead | SendOpcode::CmpAndSwp | SendOpcode::FetchAndAdd,
        Payload::Sges { num },
    ) = (entry.wqe.opcode, entry.wqe.payload)
    {
        // ODP: the response lands in these buffers in the completer, which runs in softirq and
        // cannot wait for a fault; fault them in before asking (a miss there later, after an
        // invalidation, is handled as a lost response). A READ request asks from
        // `payload_offset` to the end of the WQE.
        let list = SgeList {
            slot: &entry.slot,
            base: send_layout::DMA_DATA,
            num,
        };
        let len = entry.wqe.length.saturating_sub(d.payload_offset);
        if list.check_present(
            dev,
            qp.pd_id,
            u64::from(d.payload_offset),
            len as usize,
            Access::LOCAL_WRITE,
        ) == Err(MemError::NotPresent)
        {
            return Err(pause(
                dev,
                qp,
                &list,
                d.payload_offset,
                len,
                Access::LOCAL_WRITE,
            ));
        }
    }
    {
        let mut pkt =
            Packet::build(&mut data[..], d.opcode, d.pad).map_err(|_| WcStatus::LocQpOpErr)?;
        d.write_headers(&mut pkt)
            .map_err(|_| WcStatus::LocQpOpErr)?;
        let len = d.payload_len as usize;
        if payload && len > 0 {
            let out = pkt
                .payload_mut()
                .get_mut(..len)
                .ok_or(WcStatus::LocLenErr)?;
            match entry.wqe.payload {
                Payload::Inline { .. } => {
                    let start = send_layout::DMA_DATA + d.payload_offset as usize;
                    let src = entry
                        .slot
                        .get(start..start + len)
                        .ok_or(WcStatus::LocLenErr)?;
                    copy(out, src);
                }
                Payload::Sges { num } => {
                    let list = SgeList {
                        slot: &entry.slot,
                        base: send_layout::DMA_DATA,
                        num,
                    };
                    match list.gather(dev, qp.pd_id, u64::from(d.payload_offset), out) {
                        Ok(()) => {}
                        Err(MemError::NotPresent) => {
                            // ODP: fault in the rest of the message, then go on from this packet.
                            let rest = entry.wqe.length.saturating_sub(d.payload_offset);
                            return Err(pause(
                                dev,
                                qp,
                                &list,
                                d.payload_offset,
                                rest,
                                Access::NONE,
                            ));
                        }
                        Err(_) => return Err(WcStatus::LocProtErr.into()),
                    }
                }
            }
        }
    }
    Ok(())
}

/// Fetches the next WQE of the SQ into the in-flight list. Returns an error completion for a
/// WQE that fails validation (consumed once no earlier WQE is outstanding); lock order: the
/// send state, then the SQ ring, then the device's AH table.
fn fetch(dev: &Device<Roxe>, qp: &RoxeQp, sq: &mut SqState) -> Option<Result<(), SendDone>> {
    let mut ring = qp.sq.lock();
    if ring.is_empty() {
        return None;
    }
    // A spare slot is there unless unusually many WQEs are in flight (`SqState::spare_slots`).
    let mut slot = match sq.spare_slots.pop() {
        Some(s) => s,
        None => match KVec::from_elem(0u8, ring.elem_size(), GFP_ATOMIC) {
            Ok(s) => s,
            Err(_) => {
                // The WQE stays in the ring; the kick work tries again.
                crate::qp::ask_kick(dev, qp);
                dev.kick();
                return None;
            }
        },
    };
    if slot.len() < ring.elem_size() || !ring.peek(&mut slot) {
        let _ = sq.spare_slots.push_within_capacity(slot);
        return None;
    }
    // A malformed WQE fails, and its QP goes to the error state, only once every WQE before it
    // has completed: completions leave a send queue in order (IBA 10.8.3.1), so it waits in the
    // ring until the completer has retired the earlier ones (it runs the requester after each
    // ACK). Nothing is consumed while it waits.
    let parsed = match SendWqe::parse(&slot, crate::qp::wqe_qp_type(qp.qp_type), &qp.sq_limits) {
        Ok(wqe) if matches!(qp.qp_type, QpType::Ud | QpType::Gsi) => {
            // AH numbers are device-wide: a WQE may only name an AH of its QP's PD (IBA 10.2.3).
            match dev.data().ahs.get(UdWr::decode(&wqe.wr).ah_num) {
                Some(ah) if ah.pd_id == qp.pd_id => Ok((wqe, Some(ah.av))),
                _ => Err((wqe.wr_id, wqe.opcode, wqe.flags, WcStatus::LocQpOpErr, 0)),
            }
        }
        Ok(wqe) => Ok((wqe, None)),
        Err(e) => {
            let wr_id = rd_u64(&slot, send_layout::WR_ID);
            let status = WcStatus::from_raw(e.wc_status()).unwrap_or(WcStatus::LocQpOpErr);
            Err((wr_id, SendOpcode::Send, send_flags::SIGNALED, status, 0))
        }
    };
    let (wqe, ud_av) = match parsed {
        Ok(v) => v,
        Err(done) => {
            let _ = sq.spare_slots.push_within_capacity(slot);
            if !sq.entries.is_empty() {
                return None;
            }
            ring.advance_consumer();
            return Some(Err(done));
        }
    };
    // Room first (reserved at creation for as many entries as there are spare slots, so this
    // normally does not allocate), so that a WQE is never consumed and then lost; it stays in
    // the ring, and the kick work tries again.
    if sq.entries.reserve(1, GFP_ATOMIC).is_err() {
        let _ = sq.spare_slots.push_within_capacity(slot);
        crate::qp::ask_kick(dev, qp);
        dev.kick();
        return None;
    }
    ring.advance_consumer();
    drop(ring);
    qp.awaited.store(
        qp.sq_sig_all || wqe.flags & send_flags::SIGNALED != 0,
        Relaxed,
    );
    let entry = SendEntry {
        wqe,
        slot,
        ud_av,
        progress: None,
        started: false,
        credit: false,
        read_done: 0,
        finished: None,
    };
    if let Err(e) = sq.entries.push_within_capacity(entry) {
        // Not reached: room was made above.
        sq.retire(e.0);
        return None;
    }
    Some(Ok(()))
}

/// The flush of a QP in the error state: every WQE not yet completed, in the list or still in
/// the ring, completes with `IB_WC_WR_FLUSH_ERR` (IBA 10.3.1), oldest first, at most one
/// [`Completions`] per step. A WQE the requester already finished and held for in-order
/// completion (a local operation that took effect: a window bound, a key invalidated or
/// registered; or one that failed) completes with the status it had, not as a flush: its
/// effect stays, and the consumer must be told so. The ring's producer index is
/// user-writable: it is read once per step, and the run's budget bounds the steps, so a
/// process that keeps posting cannot keep the flush going.
fn flush(qp: &RoxeQp, sq: &mut SqState) -> Step {
    let mut done = Completions::new();
    let n = sq.entries.len().min(COMPLETION_BATCH);
    {
        let SqState {
            entries,
            spare_slots,
            ..
        } = sq;
        let mut seen = 0;
        entries.retain(|e| {
            seen += 1;
            if seen > n {
                return true;
            }
            let _ = done.push((
                e.wqe.wr_id,
                e.wqe.opcode,
                e.wqe.flags,
                e.finished.unwrap_or(WcStatus::WrFlushErr),
                0,
            ));
            let _ = spare_slots.push_within_capacity(core::mem::take(&mut e.slot));
            false
        });
    }
    if sq.entries.is_empty() {
        sq.cur = 0;
        sq.rd_atomic_in_flight = 0;
        let mut ring = qp.sq.lock();
        let queued = ring.count() as usize;
        let mut slot = [0u8; 32];
        for _ in 0..queued.min(COMPLETION_BATCH - done.len()) {
            if !ring.peek(&mut slot) {
                break;
            }
            ring.advance_consumer();
            let _ = done.push((
                rd_u64(&slot, send_layout::WR_ID),
                SendOpcode::Send,
                0,
                WcStatus::WrFlushErr,
                0,
            ));
        }
    } else {
        sq.cur = sq.cur.saturating_sub(n);
    }
    if done.is_empty() {
        Step::Idle
    } else {
        Step::Complete(done, false)
    }
}

/// One completion, for [`Step::Complete`].
fn one(done: Option<SendDone>, error: bool) -> Step {
    let mut list = Completions::new();
    if let Some(d) = done {
        let _ = list.push(d);
    }
    Step::Complete(list, error)
}

/// The requester is done with entry `cur` (the WQE being sent), which ends with `status`
/// without a response to wait for: a local operation it executed, or a failure. It completes
/// now if nothing posted before it is outstanding; otherwise it waits in the list, with its
/// status, for the completer to complete it after the WQEs before it (IBA 10.8.3.1), and a
/// failure stops the requester there: the QP goes to the error state only when its completion
/// is out, so the WQEs before it report their own status rather than a flush. Only RC holds:
/// UC and UD WQEs complete once sent, so nothing before `cur` is outstanding there.
fn finish(sq: &mut SqState, cur: usize, status: WcStatus) -> Step {
    let verdict = finished(cur > 0, status);
    if verdict == Finished::CompleteNow {
        return one(sq.take_entry(cur, status), status != WcStatus::Success);
    }
    if let Some(e) = sq.entries.get_mut(cur) {
        e.finished = Some(status);
    }
    if verdict == Finished::HoldAndGoOn {
        sq.cur += 1;
        Step::Again
    } else {
        Step::Idle
    }
}

/// Executes a local operation (no packet) and returns its completion status. Local operations
/// take effect when the requester reaches them, in posting order (a bind when it executes, IBA
/// 10.6.7.2), while earlier WRITEs and SENDs may still await their ACKs; their completions wait
/// for those (`finish`). `may_start` made a LOCAL_INV wait for every earlier WQE, so that
/// nothing still in flight uses the key it invalidates.
fn local(dev: &Device<Roxe>, qp: &RoxeQp, wqe: &SendWqe, op: &LocalOp) -> WcStatus {
    let ok = match op {
        LocalOp::BindMw(_) => match crate::mem::mw::bind(dev, qp.pd_id, qp.qpn, wqe) {
            Ok(()) => return WcStatus::Success,
            Err(status) => return status,
        },
        LocalOp::Invalidate { rkey } => crate::mem::invalidate(dev, qp.pd_id, *rkey).is_ok(),
        // Only kernel QPs fast-register: their WQEs come from `kpost::post_send`, which names the
        // MR by key index; a user ring claiming the opcode gets an error.
        LocalOp::RegMr(wr) => !qp.is_user && crate::mem::mr::reg_fast(dev, qp.pd_id, wr).is_ok(),
    };
    if ok {
        WcStatus::Success
    } else {
        op.failure_status()
    }
}

/// What planning and building a packet needs besides the send queue.
struct StepCx<'a> {
    dev: &'a Device<Roxe>,
    qp: &'a RoxeQp,
    netdev: &'a NetDevice,
    path: &'a PathInfo,
    cfg: &'a ReqConfig,
    /// Packets for the device's own GID are built in the QP's local buffer ([`Loopback`]).
    direct: bool,
}

/// Plans and builds the next packet under the send lock, then brings the QP's part in its
/// peer's send window up to date.
fn step(cx: &StepCx<'_>) -> Step {
    let mut sq = cx.qp.sq_state.lock();
    let s = step_locked(cx, &mut sq);
    sq.settle_peer(cx.dev, cx.path.peer);
    s
}

/// [`step`] under the send lock.
fn step_locked(cx: &StepCx<'_>, sq: &mut SqState) -> Step {
    let StepCx { dev, qp, path, .. } = *cx;
    if matches!(path.state, QpState::Err | QpState::Sqe) {
        return flush(qp, sq);
    }
    if path.state != QpState::Rts || sq.rnr_until_ns != 0 {
        // Not sending, or held back by an RNR NAK until the wake timer releases it.
        return Step::Idle;
    }
    if sq.cur >= sq.entries.len() {
        if sq.entries.len() >= qp.sq_depth {
            return Step::Idle;
        }
        match fetch(dev, qp, sq) {
            None => return Step::Idle,
            Some(Err(done)) => return one(Some(done), true),
            Some(Ok(())) => {}
        }
    }
    let cur = sq.cur;
    let progress = match admit(sq, cur, cx.cfg) {
        Ok(p) => p,
        Err(Held::Idle) => return Step::Idle,
        Err(Held::Again) => return Step::Again,
        Err(Held::Refused(status)) => return finish(sq, cur, status),
    };
    let Some(entry) = sq.entries.get(cur) else {
        return Step::Idle;
    };
    match next_packet(&entry.wqe, &progress, cx.cfg) {
        // A packet sent again after a loss goes within the QP's own window only: the PSNs it
        // resends were counted in the peer's window before the retry.
        PacketPlan::Packet(d) if sq.resends(d.psn) => packet(cx, sq, cur, &d),
        PacketPlan::Packet(mut d) => {
            // The QPs to the peer share a send window (`peer`).
            let data = dev.data();
            let timed = sq.ack_timeout_ms != 0;
            match data
                .peers
                .admit(&mut sq.peer, cx.qp.qpn, timed, now_ms(), &data.counters)
            {
                Admit::Wait | Admit::Queue => Step::Idle,
                Admit::Go { ack_req } => {
                    d.ack_req |= ack_req;
                    packet(cx, sq, cur, &d)
                }
            }
        }
        PacketPlan::Local(op) => {
            // A failed bind or invalidation completes in error and moves the QP to the error
            // state (IBA 10.6.7.2.4, 10.8.3.1), like any other failed WQE, after the WQEs
            // before it have completed.
            let status = local(dev, qp, &entry.wqe, &op);
            finish(sq, cur, status)
        }
        PacketPlan::DiscardDatagram { after } => {
            sq.next_psn = after.next_psn();
            if sq.next_psn.diff(sq.psn_limit) > 0 {
                sq.psn_limit = sq.next_psn;
            }
            one(sq.take_entry(cur, WcStatus::Success), false)
        }
        PacketPlan::Done => {
            sq.cur += 1;
            Step::Idle
        }
        PacketPlan::Error(status) => finish(sq, cur, status),
    }
}

/// Why the WQE at the requester's position sends nothing now.
enum Held {
    /// It waits (the PSN window, the READ and atomic credits, an earlier WQE).
    Idle,
    /// The requester moved past it: plan again.
    Again,
    /// It fails with this status.
    Refused(WcStatus),
}

/// Whether the WQE at `cur` may send now (IBA 9.7.2: the PSN window, the outstanding READ and
/// atomic credits; 10.8.3.1: a WQE finished before is not run again): its progress, or why
/// not.
fn admit(sq: &mut SqState, cur: usize, cfg: &ReqConfig) -> Result<WqeProgress, Held> {
    let in_flight = InFlight {
        oldest_unacked_psn: sq.comp.expected_psn,
        next_psn: sq.next_psn,
        rd_atomic_in_flight: sq.rd_atomic_in_flight,
        earlier_wqes_pending: cur > 0,
    };
    let next_psn = sq.next_psn;
    let Some(entry) = sq.entries.get_mut(cur) else {
        return Err(Held::Idle);
    };
    if let Some(status) = entry.finished {
        // Finished before, held for the completer: a retry went back past it. It is never run
        // again (rdma_rxe's `req_retry` skips WQEs marked done too); a failed one still stops
        // the requester.
        return Err(match finished(true, status) {
            Finished::HoldAndGoOn => {
                sq.cur += 1;
                Held::Again
            }
            _ => Held::Idle,
        });
    }
    match entry.progress {
        Some(p) if p.psns_used > 0 => match may_continue(&entry.wqe, &in_flight, cfg) {
            StartVerdict::Go { .. } => Ok(p),
            _ => Err(Held::Idle),
        },
        p => match may_start(&entry.wqe, entry.started, &in_flight, cfg) {
            StartVerdict::Go { takes_credit } => {
                entry.started = true;
                entry.credit |= takes_credit;
                let p = p.unwrap_or(WqeProgress::start(next_psn));
                entry.progress = Some(p);
                if takes_credit {
                    sq.rd_atomic_in_flight += 1;
                }
                Ok(p)
            }
            StartVerdict::Refuse(status) => Err(Held::Refused(status)),
            _ => Err(Held::Idle),
        },
    }
}

/// Builds the packet `d` plans for the WQE at `cur` and moves the send queue past it: its
/// PSN, the ACK timer, and the WQE's completion when the message needs no acknowledgement.
fn packet(cx: &StepCx<'_>, sq: &mut SqState, cur: usize, d: &PacketDesc) -> Step {
    let StepCx { dev, qp, cfg, .. } = *cx;
    let Some(entry) = sq.entries.get(cur) else {
        return Step::Idle;
    };
    let av = match (qp.qp_type, entry.ud_av, cx.path.av) {
        (QpType::Ud | QpType::Gsi, Some(av), _) => av,
        (QpType::Rc | QpType::Uc, _, Some(av)) => av,
        _ => return Step::Idle,
    };
    // Field by field: the WQE is read while the local buffer is lent out.
    let local_buf = if cx.direct && av.leads_to_own_gid() {
        Some(&mut sq.local_buf)
    } else {
        None
    };
    let packet = match build(dev, qp, cx.netdev, entry, d, local_buf) {
        Ok(packet) => packet,
        // Nothing sent, nothing changed: the kick after the fault plans this packet again, a
        // bounded number of times (a page that never becomes present).
        Err(BuildErr::Paused) if sq.odp_pauses < MAX_ODP_PAUSES => {
            sq.odp_pauses += 1;
            return Step::Idle;
        }
        Err(BuildErr::Paused) => return finish(sq, cur, WcStatus::LocProtErr),
        Err(BuildErr::Status(status)) => return finish(sq, cur, status),
    };
    let op = entry.wqe.opcode;
    // The units of the peer's window each of the packet's PSNs counts for.
    let units = window_segment(&entry.wqe, cfg).wire_units();
    sq.odp_pauses = 0;
    if let Some(e) = sq.entries.get_mut(cur) {
        e.progress = Some(d.after);
    }
    // The responder answers a packet with AckReq, the end of a message and a READ request
    // (IBA 9.7.5.1.2: it may coalesce ACKs until one of them); a resent one may be a duplicate
    // it leaves unanswered (IBA 9.7.5.1.1: behind a READ it executed since).
    let resent = sq.resends(d.psn);
    // The PSNs the packet takes: a READ request's are those of its response.
    let psns = d.after.next_psn().diff(d.psn).max(1) as u32;
    sq.peer.sent(
        !resent && (d.ack_req || d.last_of_wqe || op == SendOpcode::RdmaRead),
        psns,
        units,
    );
    sq.next_psn = d.after.next_psn();
    if sq.next_psn.diff(sq.psn_limit) > 0 {
        sq.psn_limit = sq.next_psn;
    }
    if qp.qp_type == QpType::Rc && sq.ack_deadline_ms == 0 && sq.ack_timeout_ms != 0 {
        // IBA 9.7.6.1: the local ACK timer runs while a request is unacknowledged.
        sq.ack_deadline_ms = now_ms() + sq.ack_timeout_ms;
    }
    let mut done = None;
    if d.last_of_wqe {
        sq.cur += 1;
        // UC and UD messages complete once sent (IBA 10.8.5: no acknowledgement).
        if completes_without_ack(cfg.qp_type, op) {
            done = sq.take_entry(cur, WcStatus::Success);
        }
    }
    let batch = matches!(
        op,
        SendOpcode::Send
            | SendOpcode::SendWithImm
            | SendOpcode::SendWithInv
            | SendOpcode::RdmaWrite
            | SendOpcode::RdmaWriteWithImm
    );
    Step::Send(Outgoing { packet, av, batch }, done)
}

/// Where a run's packets for the device's own GID go.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loopback {
    /// Built in the QP's local buffer and handed to the run's caller ([`Run::next`]), which
    /// delivers them to the responder with no socket buffer (`recv::loopback::run_requester`,
    /// from the driver's entries).
    Direct,
    /// Built into socket buffers and queued for the loopback drainer, like packets to the
    /// wire: for a run started by another stage, which cannot deliver (the completer, the
    /// responder, the completer's timers).
    Queued,
}

/// A packet for the device's own GID, built in the QP's local buffer by a [`Loopback::Direct`]
/// run. The caller delivers [`LocalPacket::bytes`], then gives it back ([`Run::sent_local`]).
pub(crate) struct LocalPacket {
    buf: KVVec<u8>,
    len: usize,
    /// Where its payload is, when it was left in the sender's MR: the payload bytes in `buf`
    /// are not the packet's.
    source: Option<LocalSource>,
    /// Where it goes.
    pub(crate) av: AddressVector,
    /// Its UDP source port.
    pub(crate) sport: u16,
    /// The completion it ends with (UC and UD complete once sent).
    done: Option<SendDone>,
}

impl LocalPacket {
    /// The packet: BTH to ICRC. Its payload is the packet's only once [`LocalPacket::source`]
    /// is `None`.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }

    /// Takes the payload's place in the sender's MR, for the responder to copy from; the
    /// payload bytes in the packet are then not the packet's.
    pub(crate) fn take_source(&mut self) -> Option<LocalSource> {
        self.source.take()
    }

    /// Copies the payload left in the sender's MR into the packet, for a packet that takes the
    /// way of a socket buffer after all; false if it cannot be read (the packet is then lost).
    pub(crate) fn fill_payload(&mut self) -> bool {
        let Some(s) = self.source.take() else {
            return true;
        };
        let Some(bytes) = self.buf.get_mut(..self.len) else {
            return false;
        };
        let Ok(mut pkt) = Packet::new_checked(bytes) else {
            return false;
        };
        pkt.payload_mut()
            .get_mut(..s.len)
            .is_some_and(|out| s.mr.read_at(s.va, out).is_ok())
    }
}

/// Runs the requester of `qp` until it has nothing to send or the window closes, its packets
/// for the device's own GID queued for the loopback drainer ([`Loopback::Queued`]); a timer it
/// armed (the ACK deadline of what it sent) puts the QP on the device tick's list. For the
/// stages (the completer, the responder); the driver's entries use
/// `recv::loopback::run_requester`. Process or softirq context, interrupts enabled; takes no
/// lock across transmission.
pub(crate) fn run(dev: &Device<Roxe>, qp: &RoxeQp) {
    if let Some(mut run) = Run::start(dev, qp, Loopback::Queued) {
        // A queued run builds no local packet; one would still be sent, by the slow way.
        while let Some(mut p) = run.next() {
            if p.fill_payload() {
                net::xmit_copy(dev, &p.av, p.sport, p.bytes());
            }
            run.sent_local(p);
        }
    }
    crate::qp::timers_touched(dev, qp);
}

/// Where a run stands with the ACK the responder holds for the peer ([`Run::flush`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum AckTurn {
    /// Not flushed yet.
    NotYet,
    /// Taken into the batch being flushed, with the turn to send the QP's responses.
    Taken,
    /// Sent, or there was none.
    Done,
}

/// One run of a QP's requester: the QP's only one (`req_running`; a caller that finds a run
/// going leaves it a "run again" note), with bottom halves off throughout. Every other context
/// that wants this QP to send leaves it to the running requester, so a runner preempted in
/// process context (the send doorbell) would hold back the QP's retransmissions until its task
/// ran again, under load for longer than the ACK timer.
pub(crate) struct Run<'a> {
    dev: &'a Device<Roxe>,
    qp: &'a RoxeQp,
    /// Consecutive packets to one destination leave together (`net::TxBatch`): the stack and
    /// the device's doorbell are paid once per batch. Flushed before a completion (a work
    /// request is sent before it completes) and whenever the run has nothing more to build.
    batch: net::TxBatch,
    /// Whether this run's first flush took the ACK the responder holds for the peer.
    ack_turn: AckTurn,
    budget: u32,
    flushing: bool,
    loopback: Loopback,
    _bh: bh::BhGuard,
}

impl<'a> Run<'a> {
    /// Starts a run of `qp`'s requester, unless one is going (which then runs again).
    pub(crate) fn start(dev: &'a Device<Roxe>, qp: &'a RoxeQp, loopback: Loopback) -> Option<Self> {
        let bh = bh::disable();
        // 0: idle, 1: running, 2: running and asked to run again.
        if qp.req_running.fetch_add(1u32, Full) != 0 {
            return None;
        }
        Some(Run {
            dev,
            qp,
            batch: net::TxBatch::new(),
            ack_turn: AckTurn::NotYet,
            budget: RUN_BUDGET,
            flushing: false,
            loopback,
            _bh: bh,
        })
    }

    /// Sends and completes until the run is over (`None`: the claim is given up) or a
    /// [`Loopback::Direct`] run built a packet for the device's own GID, which the caller
    /// delivers and gives back ([`Run::sent_local`]) before it calls again.
    pub(crate) fn next(&mut self) -> Option<LocalPacket> {
        let (dev, qp) = (self.dev, self.qp);
        loop {
            if self.budget == 0 {
                self.out_of_budget();
                return None;
            }
            self.budget -= 1;
            let (path, cfg) = crate::qp::req_config(dev, qp);
            self.flushing = matches!(path.state, QpState::Err | QpState::Sqe);
            let direct = self.loopback == Loopback::Direct;
            let cx = StepCx {
                dev,
                qp,
                netdev: &dev.data().netdev,
                path: &path,
                cfg: &cfg,
                direct,
            };
            let idle = match step(&cx) {
                Step::Send(o, done) => {
                    if let Some(p) = self.send(o, done) {
                        return Some(p);
                    }
                    false
                }
                Step::Complete(list, error) => {
                    // Each completion counts against the budget (a flush step posts a batch).
                    self.budget = self
                        .budget
                        .saturating_sub(list.len().saturating_sub(1) as u32);
                    self.flush();
                    for done in list.iter() {
                        crate::qp::complete_send(dev, qp, done);
                    }
                    if error {
                        crate::qp::move_to_error(qp);
                    }
                    false
                }
                Step::Again => false,
                Step::Idle => {
                    self.flush();
                    true
                }
            };
            // Leave, unless someone asked for another round meanwhile.
            if idle
                && (qp.req_running.xchg(0u32, Full) <= 1
                    || qp.req_running.fetch_add(1u32, Full) != 0)
            {
                return None;
            }
        }
    }

    /// Sends `o` (a local packet goes to the caller) and posts `done` after it.
    fn send(&mut self, o: Outgoing, done: Option<SendDone>) -> Option<LocalPacket> {
        let (dev, qp) = (self.dev, self.qp);
        // The responder may hold its ACKs for this requester's packets (`resp`).
        crate::net::ack::requester_sending(qp);
        let sport = net::udp_sport(qp.qpn);
        // A packet that cannot leave (no route, no memory) is a lost packet: the
        // retransmission timer (RC) recovers it; UC and UD lose it as the wire would.
        match o.packet {
            Built::Skb(skb) if o.batch => self.batch.add(dev, &o.av, sport, skb),
            Built::Skb(skb) => {
                self.flush();
                let _ = net::xmit(dev, &o.av, sport, skb);
            }
            Built::Local(buf, len, source) => {
                return Some(LocalPacket {
                    buf,
                    len,
                    source,
                    av: o.av,
                    sport,
                    done,
                })
            }
        }
        if let Some(done) = done {
            self.flush();
            crate::qp::complete_send(dev, qp, done);
        }
        None
    }

    /// Takes back the local buffer of `p`, which the caller delivered, and posts its
    /// completion.
    pub(crate) fn sent_local(&mut self, p: LocalPacket) {
        // Back for the next packet (this run is the QP's only one).
        self.qp.sq_state.lock().local_buf = p.buf;
        if let Some(done) = p.done {
            self.flush();
            crate::qp::complete_send(self.dev, self.qp, done);
        }
    }

    /// Sends the batch. The run's first flush takes the ACK the responder holds for the peer,
    /// if any, into it, and with the ACK the turn to send the QP's responses, which it ends
    /// once the batch is out (`net::ack`): one doorbell for both, in a ping-pong the answer and
    /// the ACK of the request it answers.
    fn flush(&mut self) {
        let (dev, qp) = (self.dev, self.qp);
        if self.ack_turn == AckTurn::NotYet {
            self.ack_turn = if crate::net::ack::batch_held_ack(dev, qp, &mut self.batch) {
                AckTurn::Taken
            } else {
                AckTurn::Done
            };
        }
        self.batch.flush(dev);
        if self.ack_turn == AckTurn::Taken {
            self.ack_turn = AckTurn::Done;
            crate::net::ack::end_turn(dev, qp);
        }
    }

    /// The budget is spent: the rest goes on elsewhere.
    fn out_of_budget(&mut self) {
        let (dev, qp) = (self.dev, self.qp);
        self.flush();
        qp.req_running.store(0u32, Release);
        if self.flushing {
            // A flush goes on in process context (`qp::continue_flush`).
            crate::qp::continue_flush(dev, qp);
        } else {
            // Sending goes on in the kick work (softirq, after other work on this CPU).
            crate::qp::ask_kick(dev, qp);
            dev.kick();
        }
    }
}
