// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation, the IB state machine, attributes, destruction. Counterpart of rxe's
//! `rxe_qp.c` and the QP verbs.
//!
//! Locking: `RoxeQp::state` (an IRQ-safe spinlock: kernel consumers post, and so read it, with
//! interrupts off) holds the state and attributes; the send and receive rings have IRQ-safe
//! locks of their own; the requester's and the responder's state (`sq_state`, `resp_state`)
//! are bottom-half locks (`rdma::bh::BhLock`), which modify QP takes under `state` with its
//! proof that interrupts are off. Order: `state`, then `sq_state` or `resp_state`, then `sq`,
//! then `rq`. The data path reads the state under the same lock from softirq.

#![deny(unsafe_code)]

pub(crate) mod marks;
pub(crate) mod resp_state;

pub(crate) use marks::{ask_kick, left_tick, timers_touched, KICKED, TIMED};

pub(crate) use resp_state::{HeldAck, Queued, RespTx};

use crate::compat::errno;
use crate::compat::sync::{irqs_off, IrqOff, SpinLockIrq};
use crate::rdma::{
    ah::AddressVector,
    bh::BhLock,
    device::Device,
    mmap::MmapInfo,
    object::UData,
    pool::{Alloc, PoolRef},
    qp::{Qp, QpAttr, QpAttrMask, QpCap, QpCreated, QpEvent, QpInit, QpNotifier},
};
use crate::{
    counters::Counter,
    cq::{mminfo_bytes, RoxeCq, MMINFO_SIZE},
    hca::{errno, Roxe, PORT},
    param,
    peer::PeerShare,
    proto::{
        batch::Batch,
        comp::{ack_timeout_ms, CompState, RetryCounters},
        cqe::{wc_opcode_for_send, Cqe, WcOpcode, WcStatus},
        mtu::{IbMtu, Pmtu, ROCE_MAX_HDR_LEN},
        psn::Psn,
        qp_state::{
            check_attr_values, check_modify_request, psn_from_attr, send_verdict, AttrLimits,
            AttrMask, AttrValues, ModifyRequest, PostVerdict, QpState, QpType,
        },
        req::{ReqConfig, WqeProgress},
        resp::ResponseTx,
        wqe::{recv_layout, send_flags, send_layout, SendOpcode, SendWqe, SqLimits, SGE_SIZE},
    },
    qp::resp_state::RespState,
    queue::{Direction, Queue},
    srq::RoxeSrq,
};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, AtomicFlag, Relaxed, Release},
        Arc,
    },
};

/// Most WQE slot buffers a QP keeps ready ([`SqState::spare_slots`]): more than the WQEs the
/// PSN and initiator-depth windows let be in flight at once in practice. Past them (a deep SQ of
/// local operations or many small unacknowledged requests) a slot is allocated, and a failed
/// allocation leaves the WQE in the ring for the kick work to try again.
const SPARE_SLOTS_MAX: usize = 1024;

/// The local buffer a QP connected to this device's own GID hands its packets to the responder
/// in ([`SqState::local_buf`]): a segment of [`Pmtu::LOCAL`] and its headers, pad and ICRC
/// (fewer than `ROCE_MAX_HDR_LEN`, which also counts IP and UDP).
pub(crate) const LOCAL_PACKET_MAX: usize = Pmtu::LOCAL.bytes() as usize + ROCE_MAX_HDR_LEN as usize;

/// The Q_Key of the GSI QP (IBA 13.4.6.1: QP1 uses the well-known Q_Key 0x80010000).
const GSI_QKEY: u32 = 0x8001_0000;

/// Size of `struct rxe_create_qp_resp`: the RQ's mminfo, then the SQ's.
const CREATE_QP_RESP_SIZE: usize = 2 * MMINFO_SIZE;

/// The QP's state and the attributes `modify_qp` sets.
pub(crate) struct QpStateData {
    pub(crate) state: QpState,
    /// The attributes as last set (what `query_qp` reports).
    pub(crate) attr: QpAttr,
    /// The primary path; `None` until set (connected QPs set it on the way to RTR).
    pub(crate) av: Option<AddressVector>,
    /// The slot of the path's peer in the device's send windows (`peer::Peers::slot_of`), set
    /// with the path: an RC QP's path to another host has one.
    pub(crate) peer: Option<u8>,
    /// Send WQEs are still being drained in SQD.
    pub(crate) sq_draining: bool,
}

/// The QP attributes the requester and responder need, read under the state lock.
pub(crate) struct PathInfo {
    pub(crate) state: QpState,
    pub(crate) dest_qpn: u32,
    pub(crate) av: Option<AddressVector>,
    /// [`QpStateData::peer`].
    pub(crate) peer: Option<u8>,
}

impl QpStateData {
    /// The segment a connected QP cuts its messages into and checks its peer's by: the path
    /// MTU, or [`Pmtu::LOCAL`] on a path to the device's own GID
    /// ([`AddressVector::leads_to_own_gid`]), where no packet leaves memory. Both ends of a
    /// loopback connection see their path so, so requester, responder and completer of both
    /// agree.
    pub(crate) fn segment(&self) -> Pmtu {
        if self.av.is_some_and(|av| av.leads_to_own_gid()) {
            return Pmtu::LOCAL;
        }
        Pmtu::of(IbMtu::from_raw(self.attr.path_mtu).unwrap_or(IbMtu::Mtu256))
    }
}

impl PathInfo {
    /// The path of a QP whose state lock the caller holds.
    pub(crate) fn of(st: &QpStateData) -> PathInfo {
        PathInfo {
            state: st.state,
            dest_qpn: st.attr.dest_qp_num,
            av: st.av,
            peer: st.peer,
        }
    }
}

pub(crate) fn path_info(qp: &RoxeQp) -> PathInfo {
    PathInfo::of(&qp.state.lock())
}

/// The requester's view of the QP's attributes: the path and the [`ReqConfig`]. RC and UC
/// segment by the path MTU; datagrams by the port's active MTU (they have no path, IBA 9.6.1),
/// read from the netdev the device holds (the data path never calls `ib_device_get_netdev`,
/// whose lock is not IRQ-safe). Takes the state lock: call it before `sq_state`.
pub(crate) fn req_config(dev: &Device<Roxe>, qp: &RoxeQp) -> (PathInfo, ReqConfig) {
    let port_mtu = match qp.qp_type {
        QpType::Rc | QpType::Uc => None,
        _ => Some(Pmtu::of(IbMtu::for_netdev_mtu(dev.data().netdev.mtu()))),
    };
    let st = qp.state.lock();
    let mtu = port_mtu.unwrap_or_else(|| st.segment());
    let path = PathInfo::of(&st);
    let cfg = ReqConfig {
        qp_type: wqe_qp_type(qp.qp_type),
        mtu,
        qp_num: qp.qpn,
        dest_qp_num: st.attr.dest_qp_num,
        qkey: st.attr.qkey,
        pkey: 0xffff,
        max_rd_atomic: u32::from(st.attr.max_rd_atomic),
    };
    (path, cfg)
}

pub(crate) fn wqe_qp_type(t: QpType) -> crate::proto::wqe::QpType {
    match t {
        QpType::Rc => crate::proto::wqe::QpType::Rc,
        QpType::Uc => crate::proto::wqe::QpType::Uc,
        QpType::Ud => crate::proto::wqe::QpType::Ud,
        QpType::Gsi | QpType::Smi => crate::proto::wqe::QpType::Gsi,
    }
}

/// A completion the requester posts: `(wr_id, opcode, flags, status, byte_len)`.
pub(crate) type SendDone = (u64, SendOpcode, u32, WcStatus, u32);

/// How many completions one step collects under the send lock before they are posted. Small:
/// every requester step returns a step that can hold a batch, and the completer builds one
/// per response packet, so the batch's size is paid per packet.
pub(crate) const COMPLETION_BATCH: usize = 8;

/// Completions collected under the send lock, posted after it is released; never allocates.
pub(crate) type Completions = Batch<SendDone, COMPLETION_BATCH>;

/// A send WQE taken off the SQ: a validated copy, and its progress on the wire.
pub(crate) struct SendEntry {
    pub(crate) wqe: SendWqe,
    /// The copy of the ring slot (the SGE list or inline data live here).
    pub(crate) slot: KVec<u8>,
    /// UD: the address of the WQE's AH.
    pub(crate) ud_av: Option<AddressVector>,
    /// The requester's progress; `None` until the WQE starts.
    pub(crate) progress: Option<WqeProgress>,
    /// The WQE passed `may_start` once (a retry does not check its fence or credit again).
    pub(crate) started: bool,
    /// The WQE holds an initiator-depth (`max_rd_atomic`) credit until it completes.
    pub(crate) credit: bool,
    /// READ: bytes of response data placed so far.
    pub(crate) read_done: u32,
    /// The requester finished the WQE with this status (a local operation it executed, or a
    /// failure) while WQEs posted before it were outstanding: the completer completes it once
    /// they have completed (IBA 10.8.3.1, `proto::req::finished`).
    pub(crate) finished: Option<WcStatus>,
}

/// The requester's and completer's state: WQEs in flight, oldest first.
pub(crate) struct SqState {
    pub(crate) entries: KVec<SendEntry>,
    /// Index in `entries` of the WQE being sent.
    pub(crate) cur: usize,
    /// PSN of the next packet.
    pub(crate) next_psn: Psn,
    /// One past the highest PSN ever sent: a retry never lowers it.
    pub(crate) psn_limit: Psn,
    /// Started WQEs holding an initiator-depth credit, not yet completed.
    pub(crate) rd_atomic_in_flight: u32,
    /// When the oldest unacknowledged request times out (ms since boot; 0: no timer).
    pub(crate) ack_deadline_ms: u64,
    /// Until when an RNR NAK holds the requester back (`now_ns`; 0: not held).
    pub(crate) rnr_until_ns: u64,
    /// The completer's state: the next PSN it expects a response for (every PSN before it is
    /// acknowledged), the retry counters (IBA 9.7.6.1.3, 9.7.5.2.8), a retry under way.
    pub(crate) comp: CompState,
    /// The local ACK timeout in ms (from the `timeout` attribute; 0: no timer).
    pub(crate) ack_timeout_ms: u64,
    /// Slot buffers for WQEs taken off the ring, allocated with the QP (up to
    /// [`SPARE_SLOTS_MAX`]): a WQE is normally never held back by an allocation. Entries give
    /// theirs back when they complete ([`SqState::retire`]).
    pub(crate) spare_slots: KVec<KVec<u8>>,
    /// Where packets to the device's own GID are built, reused from packet to packet: they
    /// go to the responder without a socket buffer (`net::deliver_local`). Lent out while a
    /// packet is delivered; the requester (one run at a time per QP) gives it back.
    pub(crate) local_buf: KVVec<u8>,
    /// ODP: times in a row the requester paused on a missing page without building a packet
    /// (`req::MAX_ODP_PAUSES` bounds it).
    pub(crate) odp_pauses: u32,
    /// The QP's part in its peer's shared send window (`peer`), brought up to date by
    /// [`SqState::settle_peer`].
    pub(crate) peer: PeerShare,
}

impl SqState {
    /// Gives the slot of a completed or flushed entry back for the next WQE.
    pub(crate) fn retire(&mut self, e: SendEntry) {
        // The spares and the entries together never exceed the capacity reserved at creation.
        let _ = self.spare_slots.push_within_capacity(e.slot);
    }

    /// Retires every entry (a QP reset).
    pub(crate) fn retire_all(&mut self) {
        let SqState {
            entries,
            spare_slots,
            ..
        } = self;
        for e in entries.drain_all() {
            let _ = spare_slots.push_within_capacity(e.slot);
        }
    }

    /// Removes entry `idx` and returns its completion, returning its initiator-depth credit.
    pub(crate) fn take_entry(&mut self, idx: usize, status: WcStatus) -> Option<SendDone> {
        if idx >= self.entries.len() {
            return None;
        }
        let e = self.entries.remove(idx).ok()?;
        if idx < self.cur {
            self.cur -= 1;
        }
        if e.credit {
            self.rd_atomic_in_flight = self.rd_atomic_in_flight.saturating_sub(1);
        }
        let len = match e.wqe.opcode {
            SendOpcode::RdmaRead => e.read_done,
            _ => e.wqe.length,
        };
        let done = (e.wqe.wr_id, e.wqe.opcode, e.wqe.flags, status, len);
        self.retire(e);
        Some(done)
    }

    /// Whether a packet with `psn` is sent again after a retry: below the highest PSN sent.
    pub(crate) fn resends(&self, psn: Psn) -> bool {
        psn.diff(self.psn_limit) < 0
    }

    /// Brings the QP's part in its peer's send window up to date (`peer::Peers::settle`)
    /// after its PSNs changed: an RC QP with a path to another host (`slot`, from
    /// [`PathInfo::peer`]) and an ACK timer counts the PSNs it sent and has not had acknowledged
    /// while it has WQEs in flight; any other QP, or a reset or destroyed one (`slot` `None`),
    /// counts none.
    /// If that gives a QP waiting at the peer its turn, kicks the device, whose kick work runs
    /// that QP's requester (`task::kicked`).
    pub(crate) fn settle_peer(&mut self, dev: &Device<Roxe>, slot: Option<u8>) {
        let data = dev.data();
        // A QP without an ACK timer never waits for the window (`peer::Peers::admit`), nor
        // holds a part of it: a lost response would leave its share there for good.
        let share = if slot.is_some() && !self.entries.is_empty() && self.ack_timeout_ms != 0 {
            self.next_psn.diff(self.comp.expected_psn).max(0) as u32
        } else {
            0
        };
        let expected = self.comp.expected_psn;
        if data
            .peers
            .settle(&mut self.peer, slot, share, expected, &data.counters)
        {
            dev.kick();
        }
    }

    /// Goes back to `from_psn` (a retry): the WQE holding it resumes there, every later started
    /// WQE restarts from its first PSN, and the next packet gets `from_psn`. The highest PSN
    /// sent (`psn_limit`) stays.
    pub(crate) fn rewind(&mut self, from_psn: Psn, cfg: &ReqConfig) {
        let mut found = None;
        for (i, e) in self.entries.iter_mut().enumerate() {
            let Some(p) = e.progress else { break };
            match found {
                None => {
                    if let Some(np) = WqeProgress::resume_at(&e.wqe, p.first_psn, from_psn, cfg) {
                        e.progress = Some(np);
                        if np.psns_used == 0 {
                            e.read_done = 0;
                        }
                        found = Some(i);
                    }
                }
                Some(_) => {
                    e.progress = Some(WqeProgress::start(p.first_psn));
                    e.read_done = 0;
                }
            }
        }
        if let Some(i) = found {
            self.cur = i;
            self.next_psn = from_psn;
        }
    }
}

/// A queue pair.
#[pin_data]
pub(crate) struct RoxeQp {
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) pd_id: u64,
    pub(crate) sq_sig_all: bool,
    pub(crate) is_user: bool,
    pub(crate) send_cq: Arc<RoxeCq>,
    pub(crate) recv_cq: Arc<RoxeCq>,
    pub(crate) srq: Option<PoolRef<RoxeSrq>>,
    /// Limits every send WQE is validated against.
    pub(crate) sq_limits: SqLimits,
    /// Scatter/gather entries per receive WQE.
    pub(crate) rq_max_sge: u32,
    /// The RQ's slot size, fixed at creation (0 with an SRQ): the responder allocates a slot's
    /// copy before it takes the RQ's lock.
    pub(crate) rq_elem_size: usize,
    #[pin]
    pub(crate) state: SpinLockIrq<QpStateData>,
    #[pin]
    pub(crate) sq: SpinLockIrq<Queue>,
    /// `None` when the QP takes its receives from an SRQ.
    #[pin]
    pub(crate) rq: SpinLockIrq<Option<Queue>>,
    pub(crate) notifier: Arc<QpNotifier>,
    /// SQ depth: the most WQEs in flight.
    pub(crate) sq_depth: usize,
    /// Requester and completer state. A bottom-half lock, like `resp_state`: the requester
    /// gathers payload into the packets it builds and the completer scatters READ responses
    /// under it (both run in softirq or with bottom halves off, `req::run`; modify QP takes it
    /// under `state`, whose lock turns interrupts off).
    #[pin]
    pub(crate) sq_state: BhLock<SqState>,
    /// Responder state. A bottom-half lock, not an IRQ-safe one: the responder copies payload
    /// and builds packets under it, which must not keep hard interrupts off (the receive path
    /// and the device tick run in softirq, the loopback drainer and the ODP redelivery with
    /// bottom halves off, modify QP under `state`, whose lock turns interrupts off).
    #[pin]
    pub(crate) resp_state: BhLock<RespState>,
    /// The requester runs (see `req::run`): 0 idle, 1 running, more: run again.
    pub(crate) req_running: Atomic<u32>,
    /// A kernel consumer posted sends: the device's kick work runs the requester.
    pub(crate) kick_pending: AtomicFlag,
    /// The last send WQE the requester took asks for a completion (signaled, or every WQE
    /// is): its poster may wait for it, and if it has polled every completion so far, the send
    /// doorbell runs the requester at once on the poster's CPU (`task::doorbell`). Set until
    /// the first WQE is taken.
    pub(crate) awaited: AtomicFlag,
    /// The QP is connected to this device's own GID (an RC or UC QP whose AV leads there; set
    /// by modify QP under `state`). Its packets are delivered by the device's one loopback
    /// drainer at a time, so its send doorbells hand its requester to the kick work without
    /// waiting for the turn (`task::doorbell`): run beside the kick work, they would find the
    /// drainer busy and take the slow way, through socket buffers.
    pub(crate) local_path: AtomicFlag,
    /// Whether the QP is on the tick's list ([`TIMED`]) as far as the stages need to know: set
    /// before the mark, cleared by the tick after it takes the mark off. A stage that finds it
    /// set leaves the list alone, so the data path reads a flag instead of the device's table
    /// ([`timers_touched`]).
    pub(crate) on_tick: AtomicFlag,
    /// The flush of this QP in the error state was cut short by its budget: the device's
    /// process work goes on with it ([`continue_flush`]).
    pub(crate) flush_pending: AtomicFlag,
    /// Who sends the QP's responses, an ACK the responder holds back so that it leaves with the
    /// requester's next packets to the same peer, and the responses that wait for their turn
    /// (`net::ack`). Taken before the device's `held_acks` lock.
    #[pin]
    pub(crate) resp_tx: SpinLockIrq<RespTx>,
    /// Whether the responder holds ACKs back: set when the requester sends soon after an ACK
    /// (`ack::requester_sending`), cleared when a held ACK had to leave on its own, so that a
    /// QP that only receives, or answers slowly, ACKs at the end of the receive pass.
    pub(crate) hold_acks: AtomicFlag,
    /// When the responder last made a lone positive ACK without holding it for the requester
    /// (`now_ns`; 0: never).
    pub(crate) unheld_ack_ns: Atomic<u64>,
    /// The responder holds an ACK until the end of the current receive pass: the device's kick
    /// work sends it (`ack::send_at_pass_end`). Set before the QP's [`KICKED`] mark.
    pub(crate) ack_at_pass_end: AtomicFlag,
}

fn qp_type_of(raw: u32) -> Result<QpType> {
    match QpType::from_raw(raw) {
        Some(t) if t.create_supported() => Ok(t),
        _ => Err(errno::eopnotsupp()),
    }
}

/// Checks the requested queue sizes against the device's limits (rxe's `rxe_qp_chk_cap`).
fn check_cap(cap: &QpCap, has_srq: bool) -> Result {
    if cap.max_send_wr > param::MAX_QP_WR
        || cap.max_send_sge > param::MAX_SGE
        || cap.max_inline_data > param::MAX_INLINE_DATA
    {
        return Err(EINVAL);
    }
    if !has_srq && (cap.max_recv_wr > param::MAX_QP_WR || cap.max_recv_sge > param::MAX_SGE) {
        return Err(EINVAL);
    }
    Ok(())
}

/// A new QP's rings, sized as the consumer asked and the device allows, and what they can hold.
struct Rings {
    sq: Queue,
    sq_depth: usize,
    sq_limits: SqLimits,
    /// `None` with an SRQ.
    rq: Option<Queue>,
    rq_max_sge: u32,
    rq_elem_size: usize,
}

/// Makes the rings of a QP with `init.cap` (and no receive queue with an SRQ), and reports in
/// `init.cap` what they can hold: what fits in a slot may be more than was asked for (as rxe
/// does).
fn make_rings(init: &mut QpInit<'_, Roxe>, has_srq: bool) -> Result<Rings> {
    // Send queue: a WQE slot holds the fixed part and either the SGEs or the inline data.
    let payload =
        (init.cap.max_send_sge as usize * SGE_SIZE).max(init.cap.max_inline_data as usize);
    let sq = Queue::new(
        init.cap.max_send_wr.max(1),
        send_layout::DMA_DATA + payload,
        param::MAX_QP_WR,
        Direction::FromClient,
    )?;
    let slot_payload =
        (sq.elem_size() - send_layout::DMA_DATA).min(param::MAX_INLINE_DATA as usize);
    init.cap.max_send_wr = sq.capacity();
    let sq_depth = sq.capacity() as usize;
    init.cap.max_send_sge = ((slot_payload / SGE_SIZE) as u32).min(param::MAX_SGE);
    init.cap.max_inline_data = slot_payload as u32;
    let sq_limits = SqLimits {
        max_sge: init.cap.max_send_sge,
        max_inline: init.cap.max_inline_data,
        max_msg: param::PORT_MAX_MSG_SZ,
    };
    let (rq, rq_max_sge, rq_elem_size) = if has_srq {
        (None, 0, 0)
    } else {
        let q = Queue::new(
            init.cap.max_recv_wr.max(1),
            recv_layout::DMA_DATA + init.cap.max_recv_sge as usize * SGE_SIZE,
            param::MAX_QP_WR,
            Direction::FromClient,
        )?;
        init.cap.max_recv_wr = q.capacity();
        let elem_size = q.elem_size();
        (Some(q), init.cap.max_recv_sge, elem_size)
    };
    Ok(Rings {
        sq,
        sq_depth,
        sq_limits,
        rq,
        rq_max_sge,
        rq_elem_size,
    })
}

/// Offers a user QP's rings for `mmap` and answers `struct rxe_create_qp_resp`.
fn respond_rings(u: &UData<'_>, rings: &mut Rings) -> Result {
    let sq_mi = rings.sq.offer_mmap(u)?;
    let rq_mi = match rings.rq.as_mut() {
        Some(q) => q.offer_mmap(u)?,
        None => MmapInfo::default(),
    };
    let mut resp = [0u8; CREATE_QP_RESP_SIZE];
    // The RQ's info comes first in `struct rxe_create_qp_resp`.
    resp[..MMINFO_SIZE].copy_from_slice(&mminfo_bytes(rq_mi));
    resp[MMINFO_SIZE..].copy_from_slice(&mminfo_bytes(sq_mi));
    u.respond_bytes(&resp)
}

/// The requester's state of a new QP, with room for its entries and their slot buffers for as
/// many WQEs as are normally in flight: taking a WQE off the ring does not allocate.
fn new_sq_state(sq_depth: usize, elem_size: usize) -> Result<SqState> {
    let spares = sq_depth.min(SPARE_SLOTS_MAX);
    let entries = KVec::with_capacity(spares, GFP_KERNEL_ACCOUNT)?;
    let mut spare_slots = KVec::with_capacity(spares, GFP_KERNEL_ACCOUNT)?;
    for _ in 0..spares {
        spare_slots.push(
            KVec::from_elem(0u8, elem_size, GFP_KERNEL_ACCOUNT)?,
            GFP_KERNEL_ACCOUNT,
        )?;
    }
    Ok(SqState {
        entries,
        spare_slots,
        cur: 0,
        next_psn: Psn::new(0),
        psn_limit: Psn::new(0),
        rd_atomic_in_flight: 0,
        ack_deadline_ms: 0,
        rnr_until_ns: 0,
        comp: CompState::new(Psn::new(0), Pmtu::of(IbMtu::Mtu256), 7, 7),
        ack_timeout_ms: 0,
        local_buf: KVVec::new(),
        odp_pauses: 0,
        peer: PeerShare::new(),
    })
}

/// What `create_qp` asks for that the device refuses before allocating anything: the rxe ABI's
/// udata sizes, the QP type, flags, capabilities and the GSI QP's port (the CQs: `create`).
fn check_create(init: &QpInit<'_, Roxe>, udata: Option<&UData<'_>>) -> Result<QpType> {
    if let Some(u) = udata {
        // The rxe ABI has no create-QP request and an mmap-info response.
        if u.in_len() != 0 || u.out_len() < CREATE_QP_RESP_SIZE {
            return Err(EINVAL);
        }
    }
    let qp_type = qp_type_of(init.qp_type)?;
    if init.create_flags != 0 || init.unsupported_parts {
        return Err(errno::eopnotsupp());
    }
    check_cap(&init.cap, init.srq.is_some())?;
    if qp_type == QpType::Gsi && init.port_num != PORT {
        return Err(EINVAL);
    }
    Ok(qp_type)
}

pub(crate) fn create(
    dev: &Device<Roxe>,
    init: &mut QpInit<'_, Roxe>,
    notifier: Arc<QpNotifier>,
    udata: Option<&UData<'_>>,
) -> Result<QpCreated<PoolRef<RoxeQp>>> {
    let qp_type = check_create(init, udata)?;
    let (Some(send_cq), Some(recv_cq)) = (init.send_cq, init.recv_cq) else {
        return Err(EINVAL);
    };
    let srq = init.srq.map(|s| s.srq_data().clone());
    let mut rings = make_rings(init, srq.is_some())?;
    if let Some(u) = udata {
        respond_rings(u, &mut rings)?;
    }
    let sq_state = new_sq_state(rings.sq_depth, rings.sq.elem_size())?;
    let resp_state = RespState::new()?;
    let pool = &dev.data().qps;
    let slot = if qp_type == QpType::Gsi {
        pool.reserve(param::GSI_QPN, param::GSI_QPN, Alloc::Kernel)
            .map_err(|_| EINVAL)?
    } else {
        pool.reserve(param::QP_INDEX_MIN, param::QP_INDEX_MAX, Alloc::Kernel)?
    };
    let qpn = slot.index();
    let attr = QpAttr {
        qp_state: QpState::Reset.as_raw(),
        cur_qp_state: QpState::Reset.as_raw(),
        path_mtu: IbMtu::Mtu256.as_raw(),
        qkey: if qp_type == QpType::Gsi { GSI_QKEY } else { 0 },
        port_num: PORT,
        cap: init.cap,
        ..Default::default()
    };
    let Rings {
        sq,
        sq_depth,
        sq_limits,
        rq,
        rq_max_sge,
        rq_elem_size,
    } = rings;
    let qp = slot.fill(try_pin_init!(RoxeQp {
        qpn,
        qp_type,
        pd_id: init.pd.data().id,
        sq_sig_all: init.sq_sig_all,
        is_user: udata.is_some(),
        send_cq: send_cq.cq_data().clone(),
        recv_cq: recv_cq.cq_data().clone(),
        srq,
        sq_limits,
        rq_max_sge,
        rq_elem_size,
        state <- crate::compat::sync::new_spinlock_irq!(
            QpStateData {
                state: QpState::Reset,
                attr,
                av: None,
                peer: None,
                sq_draining: false,
            },
            "roxe_qp_state"
        ),
        sq <- crate::compat::sync::new_spinlock_irq!(sq, "roxe_qp_sq"),
        rq <- crate::compat::sync::new_spinlock_irq!(rq, "roxe_qp_rq"),
        notifier,
        sq_depth,
        sq_state <- crate::rdma::bh::new_bh_lock!(sq_state, "roxe_qp_sq_state"),
        resp_state <- crate::rdma::bh::new_bh_lock!(resp_state, "roxe_qp_resp_state"),
        req_running: Atomic::new(0),
        kick_pending: AtomicFlag::new(false),
        awaited: AtomicFlag::new(true),
        local_path: AtomicFlag::new(false),
        on_tick: AtomicFlag::new(false),
        flush_pending: AtomicFlag::new(false),
        resp_tx <- crate::compat::sync::new_spinlock_irq!(ResponseTx::new(), "roxe_qp_resp_tx"),
        hold_acks: AtomicFlag::new(false),
        unheld_ack_ns: Atomic::new(0),
        ack_at_pass_end: AtomicFlag::new(false),
    }? Error))?;
    Ok(QpCreated {
        data: qp,
        qp_num: qpn,
    })
}

/// The device limits `modify_qp`'s value checks use.
fn attr_limits() -> AttrLimits {
    AttrLimits {
        pkey_table_len: param::PORT_PKEY_TBL_LEN,
        max_rd_atomic: param::MAX_QP_INIT_RD_ATOM,
        max_dest_rd_atomic: param::MAX_QP_RD_ATOM,
        port_max_mtu: IbMtu::Mtu4096,
    }
}

/// What a Modify QP did that the stages must follow up, once the QP's locks are released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    /// The QP entered the error state: its work queues are to be flushed (IBA 10.3.1).
    ToError,
    /// The QP went to RESET: an ACK held for the old connection is still to leave.
    ToReset,
    /// Nothing to follow up.
    Other,
}

/// Modify QP (IBA 11.2.5.2): checks the request against the state machine and the device's
/// limits, then applies it; what the stages must do about the transition is returned.
pub(crate) fn modify(
    qp: &Qp<Roxe>,
    attr: &QpAttr,
    mask: QpAttrMask,
    udata: Option<&UData<'_>>,
) -> Result<Transition> {
    if let Some(u) = udata {
        u.check_in_empty()?;
    }
    let this = qp.qp_data();
    let amask = AttrMask::from_bits(mask);
    check_values(amask, attr)?;
    let mut local_buf = local_buf_for(this, amask, attr)?;
    let mut st_guard = this.state.lock();
    // Interrupts are off under `state`: the bottom-half locks below are taken with that proof.
    let (st, irq) = irqs_off(&mut st_guard);
    let request = ModifyRequest {
        mask: amask,
        qp_state: attr.qp_state,
        cur_qp_state: attr.cur_qp_state,
    };
    let next = check_modify_request(st.state, this.qp_type, st.sq_draining, &request)
        .map_err(|e| errno(e.errno()))?;
    // Apply the attributes (IBA 11.2.5.2): all checks passed, nothing below fails.
    apply_plain(&mut st.attr, amask, attr);
    apply_to_stages(this, st, &irq, amask, attr);
    if amask.contains(AttrMask::AV) {
        st.av = attr.av;
        // The buffer comes with a path to the device's own GID.
        this.local_path.store(!local_buf.is_empty(), Relaxed);
        st.peer = match (this.qp_type, attr.av) {
            (QpType::Rc, Some(av)) => qp.device().data().peers.slot_of(&av),
            _ => None,
        };
        let mut sq = this.sq_state.lock_with(&irq);
        if sq.local_buf.len() < local_buf.len() {
            core::mem::swap(&mut sq.local_buf, &mut local_buf);
        }
    }
    let prev = st.state;
    st.state = next;
    st.attr.qp_state = next.as_raw();
    st.attr.cur_qp_state = next.as_raw();
    if next == QpState::Err && prev != QpState::Err {
        // The caller flushes the outstanding and queued WQEs (IBA 10.3.1).
        return Ok(Transition::ToError);
    }
    if next == QpState::Reset && prev != QpState::Reset {
        // IBA 10.3.1: RESET empties the work queues and forgets the path.
        st.av = None;
        this.local_path.store(false, Relaxed);
        st.peer = None;
        reset_stages(qp.device(), this, st, &irq);
        drop(st_guard);
        reset_rings(this);
        // An ACK held for the old connection still leaves: the caller sends it.
        return Ok(Transition::ToReset);
    }
    Ok(Transition::Other)
}

/// The value checks of `modify_qp` against the device's limits (IBA 11.2.5.2).
fn check_values(amask: AttrMask, attr: &QpAttr) -> Result {
    let values = AttrValues {
        port_num: attr.port_num,
        pkey_index: attr.pkey_index,
        qp_access_flags: attr.qp_access_flags,
        path_mtu: attr.path_mtu,
        timeout: attr.timeout,
        retry_cnt: attr.retry_cnt,
        rnr_retry: attr.rnr_retry,
        min_rnr_timer: attr.min_rnr_timer,
        max_rd_atomic: attr.max_rd_atomic,
        max_dest_rd_atomic: attr.max_dest_rd_atomic,
    };
    check_attr_values(amask, &values, &attr_limits()).map_err(|e| errno(e.errno()))
}

/// A connected QP whose path leads to this device's own GID hands its packets to the
/// responder in its local buffer, [`Pmtu::LOCAL`] of payload each: allocated here, where the
/// verb may sleep, so that the requester does not allocate it in softirq, and from vmalloc space
/// when no contiguous pages are free (only the CPU reads it). Dropped, if unused, after the
/// state lock.
fn local_buf_for(this: &RoxeQp, amask: AttrMask, attr: &QpAttr) -> Result<KVVec<u8>> {
    match attr.av {
        Some(av)
            if amask.contains(AttrMask::AV)
                && av.leads_to_own_gid()
                && matches!(this.qp_type, QpType::Rc | QpType::Uc) =>
        {
            Ok(KVVec::from_elem(0u8, LOCAL_PACKET_MAX, GFP_KERNEL)?)
        }
        _ => Ok(KVVec::new()),
    }
}

/// The attributes that are only recorded (IBA 11.2.5.2).
fn apply_plain(a: &mut QpAttr, m: AttrMask, attr: &QpAttr) {
    /// `*field = value` if `bit` is in `m`.
    fn set<T: Copy>(m: AttrMask, bit: AttrMask, field: &mut T, value: T) {
        if m.contains(bit) {
            *field = value;
        }
    }
    set(
        m,
        AttrMask::ACCESS_FLAGS,
        &mut a.qp_access_flags,
        attr.qp_access_flags,
    );
    set(m, AttrMask::PKEY_INDEX, &mut a.pkey_index, attr.pkey_index);
    set(m, AttrMask::PORT, &mut a.port_num, attr.port_num);
    set(m, AttrMask::QKEY, &mut a.qkey, attr.qkey);
    set(m, AttrMask::PATH_MTU, &mut a.path_mtu, attr.path_mtu);
    set(m, AttrMask::TIMEOUT, &mut a.timeout, attr.timeout);
    set(m, AttrMask::RETRY_CNT, &mut a.retry_cnt, attr.retry_cnt);
    set(m, AttrMask::RNR_RETRY, &mut a.rnr_retry, attr.rnr_retry);
    set(
        m,
        AttrMask::MIN_RNR_TIMER,
        &mut a.min_rnr_timer,
        attr.min_rnr_timer,
    );
    set(
        m,
        AttrMask::MAX_QP_RD_ATOMIC,
        &mut a.max_rd_atomic,
        attr.max_rd_atomic,
    );
    set(m, AttrMask::DEST_QPN, &mut a.dest_qp_num, attr.dest_qp_num);
    set(
        m,
        AttrMask::PATH_MIG_STATE,
        &mut a.path_mig_state,
        attr.path_mig_state,
    );
    set(
        m,
        AttrMask::EN_SQD_ASYNC_NOTIFY,
        &mut a.en_sqd_async_notify,
        attr.en_sqd_async_notify,
    );
}

/// The attributes the stages' state follows: the PSNs, the responder resources, the retry
/// counters and ACK timeout. Lock order: `state` (held, `irq`), then the responder's or the
/// requester's state.
fn apply_to_stages(
    this: &RoxeQp,
    st: &mut QpStateData,
    irq: &IrqOff<'_>,
    amask: AttrMask,
    attr: &QpAttr,
) {
    if amask.contains(AttrMask::RQ_PSN) {
        st.attr.rq_psn = psn_from_attr(attr.rq_psn).get();
        this.resp_state
            .lock_with(irq)
            .set_rq_psn(psn_from_attr(attr.rq_psn));
    }
    if amask.contains(AttrMask::SQ_PSN) {
        st.attr.sq_psn = psn_from_attr(attr.sq_psn).get();
        let mut sq = this.sq_state.lock_with(irq);
        sq.next_psn = psn_from_attr(attr.sq_psn);
        sq.psn_limit = sq.next_psn;
        sq.comp.expected_psn = sq.next_psn;
        let expected = sq.comp.expected_psn;
        sq.peer.psns_set(expected);
    }
    if amask.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
        st.attr.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        // The responder resources are sized by it (IBA 9.4.4, 11.2.5.2).
        this.resp_state
            .lock_with(irq)
            .set_max_dest_rd_atomic(attr.max_dest_rd_atomic);
    }
    if amask.intersects(
        AttrMask::RETRY_CNT
            .union(AttrMask::RNR_RETRY)
            .union(AttrMask::TIMEOUT),
    ) {
        let (retry_cnt, rnr_retry, timeout) =
            (st.attr.retry_cnt, st.attr.rnr_retry, st.attr.timeout);
        let mut sq = this.sq_state.lock_with(irq);
        sq.comp.counters = RetryCounters::new(retry_cnt, rnr_retry);
        // At least proto::comp::MIN_ACK_TIMEOUT_MS: a soft HCA is slower than consumers assume.
        sq.ack_timeout_ms = ack_timeout_ms(timeout);
    }
}

/// RESET (IBA 10.3.1): the responder and the send side start over, nothing in flight, PSN 0
/// until modify sets sq_psn, no part in a peer's send window. `state` is held (`irq`).
fn reset_stages(dev: &Device<Roxe>, this: &RoxeQp, st: &QpStateData, irq: &IrqOff<'_>) {
    this.resp_state
        .lock_with(irq)
        .reset(st.attr.max_dest_rd_atomic);
    let mut sq = this.sq_state.lock_with(irq);
    let (retry_cnt, rnr_retry) = (st.attr.retry_cnt, st.attr.rnr_retry);
    sq.retire_all();
    sq.cur = 0;
    sq.next_psn = Psn::new(0);
    sq.psn_limit = Psn::new(0);
    sq.rd_atomic_in_flight = 0;
    sq.ack_deadline_ms = 0;
    sq.rnr_until_ns = 0;
    sq.comp = CompState::new(Psn::new(0), Pmtu::of(IbMtu::Mtu256), retry_cnt, rnr_retry);
    sq.settle_peer(dev, None);
}

/// RESET, after the state lock: the rings are emptied, and the next connection learns again
/// whether its answers come quickly.
fn reset_rings(this: &RoxeQp) {
    this.hold_acks.store(false, Relaxed);
    this.unheld_ack_ns.store(0, Relaxed);
    this.sq.lock().reset();
    let mut rq = this.rq.lock();
    if let Some(q) = &mut *rq {
        q.reset();
    }
}

pub(crate) fn query(qp: &Qp<Roxe>) -> (QpAttr, bool) {
    let this = qp.qp_data();
    let st = this.state.lock();
    let mut attr = st.attr;
    attr.av = st.av;
    attr.sq_draining = st.sq_draining;
    (attr, this.sq_sig_all)
}

/// Takes the QP out of the device's table; after the grace period in `remove` no packet
/// handler still uses its number, so no responder holds an ACK for it any more (the caller
/// sends one it holds).
pub(crate) fn destroy(qp: &Qp<Roxe>) {
    let this = qp.qp_data();
    if this.qp_type == QpType::Ud {
        // uverbs detaches its groups first; a kernel consumer may not have.
        crate::mcast::detach_all(qp.device(), this.qpn);
    }
    drop(qp.device().data().qps.remove(this.qpn));
    // Its part in its peer's send window goes back, and stays so whatever still runs for it.
    let mut sq = this.sq_state.lock();
    sq.peer.close();
    sq.settle_peer(qp.device(), None);
}

/// The send doorbell's admission: new WQEs may be sent (or flushed in the error state) unless
/// the QP's state refuses posting.
pub(crate) fn doorbell(qp: &Qp<Roxe>) -> Result {
    match send_verdict(qp.qp_data().state.lock().state) {
        PostVerdict::Reject => Err(EINVAL),
        PostVerdict::Queue | PostVerdict::FlushWithError => Ok(()),
    }
}

/// Tells the consumer of a QP that shares an SRQ and just entered the error state that it will
/// take no more WQEs from the SRQ (IBA 11.6.3.1, Last WQE Reached). `ib_drain_qp` waits for
/// this event before it lets an SRQ-attached QP be destroyed.
pub(crate) fn last_wqe_reached(qp: &RoxeQp) {
    if qp.srq.is_some() {
        qp.notifier.event(QpEvent::LastWqeReached);
    }
}

/// Receive WQEs [`flush_recv`] completes per call; the device's process work does the rest.
const RECV_FLUSH_BUDGET: u32 = 256;

/// Completes the posted receive WQEs of the QP's own RQ with a flush error (IBA 10.3.1), at
/// most [`RECV_FLUSH_BUDGET`] per call: the producer index is user-writable and is read once,
/// so a process that keeps posting cannot keep this loop going; what is left is flushed by
/// the device's process work ([`continue_flush`]). WQEs of an SRQ stay: other QPs may use them.
pub(crate) fn flush_recv(dev: &Device<Roxe>, qp: &RoxeQp) {
    let queued = match &*qp.rq.lock() {
        Some(q) => q.count(),
        None => return,
    };
    for _ in 0..queued.min(RECV_FLUSH_BUDGET) {
        let wr_id = {
            let mut rq = qp.rq.lock();
            let Some(q) = &mut *rq else { return };
            let mut head = [0u8; 8];
            if !q.peek(&mut head) {
                return;
            }
            q.advance_consumer();
            u64::from_ne_bytes(head)
        };
        let mut cqe = Cqe::flush(wr_id, qp.qpn);
        cqe.opcode = WcOpcode::Recv;
        if qp
            .recv_cq
            .post(&cqe.to_bytes(), false, &qp.notifier)
            .is_err()
        {
            // The QP is in error already; the overflow is counted.
            dev.data()
                .counters
                .inc(crate::counters::Counter::CqOverflow);
        }
    }
    if queued > RECV_FLUSH_BUDGET {
        continue_flush(dev, qp);
    }
}

/// Leaves the rest of a QP's flush (send or receive side) to the device's process work: a
/// process that keeps posting to a QP in error can make the flush last as long as it likes,
/// and in process context that work is preempted and scheduled like any other, where in
/// softirq it would hold the CPU.
pub(crate) fn continue_flush(dev: &Device<Roxe>, qp: &RoxeQp) {
    qp.flush_pending.store(true, Release);
    dev.queue_process_work();
}

/// Posts the completion of a send WQE, if it asked for one (or all do, or it failed: IBA 10.8.6
/// reports every error), and counts it.
pub(crate) fn complete_send(dev: &Device<Roxe>, qp: &RoxeQp, done: SendDone) {
    let (wr_id, op, flags, status, byte_len) = done;
    // rxe's `rdma_sends`: every SEND the requester completes, signalled or not, with success or
    // an error; a flushed one never ran (rxe flushes without `do_complete`).
    let send = matches!(
        op,
        SendOpcode::Send | SendOpcode::SendWithImm | SendOpcode::SendWithInv
    );
    if send && status != WcStatus::WrFlushErr {
        dev.data().counters.inc(Counter::RdmaSends);
    }
    let signalled =
        qp.sq_sig_all || flags & send_flags::SIGNALED != 0 || status != WcStatus::Success;
    if !signalled {
        return;
    }
    let mut cqe = Cqe::new(wr_id, status, wc_opcode_for_send(op), qp.qpn);
    if status == WcStatus::Success {
        cqe.byte_len = byte_len;
    }
    if qp
        .send_cq
        .post(&cqe.to_bytes(), false, &qp.notifier)
        .is_err()
    {
        cq_overflow(dev, qp);
    }
}

/// A completion of `qp` found its CQ full (the CQ has told its consumer): the QP goes to the
/// error state (IBA 10.10.2.3: a CQ overrun is an error for the QPs that feed it), and its
/// WQEs flush, each reporting against the same CQ.
pub(crate) fn cq_overflow(dev: &Device<Roxe>, qp: &RoxeQp) {
    dev.data().counters.inc(Counter::CqOverflow);
    move_to_error(qp);
}

/// Moves the QP to the error state after a failed WQE (IBA 10.3.1: completion errors on RC put
/// the QP in error), and tells the consumer.
pub(crate) fn move_to_error(qp: &RoxeQp) {
    let mut st = qp.state.lock();
    if st.state != QpState::Err {
        st.state = QpState::Err;
        st.attr.qp_state = QpState::Err.as_raw();
        drop(st);
        qp.notifier.event(QpEvent::Fatal);
        crate::qp::last_wqe_reached(qp);
    }
}
