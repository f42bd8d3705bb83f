// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: creation, the IB state machine, attributes, destruction. Counterpart of rxe's
//! `rxe_qp.c` and the QP verbs.
//!
//! Locking: `RoxeQp::state` (BH-disabling) holds the state and attributes; the send and receive
//! rings have locks of their own. Order: `state`, then `sq`, then `rq`. The data path reads the
//! state under the same lock from softirq.

#![deny(unsafe_code)]

use crate::rdma::{
    ah::AddressVector,
    device::Device,
    kverbs::{KernelRecvWr, KernelSendWr},
    mmap::MmapInfo,
    object::UData,
    pool::{Alloc, PoolRef},
    qp::{Qp, QpAttr, QpAttrMask, QpCap, QpCreated, QpEvent, QpInit, QpNotifier},
    skb::TxSkBuff,
};
use crate::{
    cq::{mminfo_bytes, RoxeCq, MMINFO_SIZE},
    device::{errno, Roxe, PORT},
    param,
    proto::{
        comp::{ack_timeout_ms, CompState, RetryCounters},
        cqe::{Cqe, WcOpcode, WcStatus},
        mtu::IbMtu,
        psn::Psn,
        qp_state::{
            check_attr_values, check_modify_request, psn_from_attr, recv_verdict, send_verdict,
            AttrLimits, AttrMask, AttrValues, ModifyRequest, PostVerdict, QpState, QpType,
        },
        req::WqeProgress,
        wqe::{recv_layout, send_flags, send_layout, SendWqe, SqLimits, SGE_SIZE},
    },
    queue::{Direction, Queue},
    req,
    resp::RespState,
    srq::RoxeSrq,
};
use kernel::sync::{SpinLock, SpinLockIrq};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, AtomicFlag, Relaxed, Release},
        Arc,
    },
};

/// Most WQE slot buffers a QP keeps ready ([`SqState::spare_slots`]): more than the WQEs the
/// PSN and initiator-depth windows let be in flight at once in practice. Past them (a deep SQ of
/// local operations or many small unacknowledged requests) a slot is allocated, and a failed
/// allocation leaves the WQE in the ring for the kick work to try again.
const SPARE_SLOTS_MAX: usize = 1024;

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
    /// Send WQEs are still being drained in SQD.
    pub(crate) sq_draining: bool,
}

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
    /// Until when an RNR NAK holds the requester back (ms since boot; 0: not held).
    pub(crate) rnr_until_ms: u64,
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
    pub(crate) local_buf: KVec<u8>,
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
    pub(crate) sq_state: SpinLock<SqState>,
    /// Responder state. A bottom-half lock, not an IRQ-safe one: the responder copies payload
    /// and builds packets under it, which must not keep hard interrupts off (the receive path
    /// and the device tick run in softirq, the loopback drainer and the ODP redelivery with
    /// bottom halves off, modify QP under `state`, whose lock turns interrupts off).
    #[pin]
    pub(crate) resp_state: SpinLock<RespState>,
    /// The requester runs (see `req::run`): 0 idle, 1 running, more: run again.
    pub(crate) req_running: Atomic<u32>,
    /// A kernel consumer posted sends: the device's kick work runs the requester.
    pub(crate) kick_pending: AtomicFlag,
    /// The flush of this QP in the error state was cut short by its budget: the device's
    /// process work goes on with it ([`continue_flush`]).
    pub(crate) flush_pending: AtomicFlag,
    /// An ACK the responder holds back so that it leaves with the requester's next packets to
    /// the same peer, in one batch (`ack::send_responses`); the device's short timer sends it
    /// if none come. Taken before the device's `held_acks` lock.
    #[pin]
    pub(crate) held_ack: SpinLockIrq<Option<HeldAck>>,
    /// Whether the responder holds ACKs back: set when the requester sends soon after an ACK
    /// (`ack::requester_sending`), cleared when a held ACK had to leave on its own, so that a
    /// QP that only receives, or answers slowly, ACKs at once.
    pub(crate) hold_acks: AtomicFlag,
    /// When the responder last sent a lone positive ACK at once (`now_ns`; 0: never).
    pub(crate) unheld_ack_ns: Atomic<u64>,
}

/// An acknowledgement waiting to leave (see [`RoxeQp::held_ack`]).
pub(crate) struct HeldAck {
    /// The BTH PSN of the ACK: a later ACK acknowledges everything this one does.
    pub(crate) psn: Psn,
    pub(crate) skb: TxSkBuff,
    pub(crate) av: AddressVector,
}

fn qp_type_of(raw: u32) -> Result<QpType> {
    match QpType::from_raw(raw) {
        Some(t) if t.create_supported() => Ok(t),
        _ => Err(EOPNOTSUPP),
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

pub(crate) fn create(
    dev: &Device<Roxe>,
    init: &mut QpInit<'_, Roxe>,
    notifier: Arc<QpNotifier>,
    udata: Option<&UData<'_>>,
) -> Result<QpCreated<PoolRef<RoxeQp>>> {
    if let Some(u) = udata {
        // The rxe ABI has no create-QP request and an mmap-info response.
        if u.in_len() != 0 || u.out_len() < CREATE_QP_RESP_SIZE {
            return Err(EINVAL);
        }
    }
    let qp_type = qp_type_of(init.qp_type)?;
    if init.create_flags != 0 || init.unsupported_parts {
        return Err(EOPNOTSUPP);
    }
    let (Some(send_cq), Some(recv_cq)) = (init.send_cq, init.recv_cq) else {
        return Err(EINVAL);
    };
    let srq = init.srq.map(|s| s.srq_data().clone());
    check_cap(&init.cap, srq.is_some())?;
    if qp_type == QpType::Gsi && init.port_num != PORT {
        return Err(EINVAL);
    }

    // Send queue: a WQE slot holds the fixed part and either the SGEs or the inline data.
    let payload =
        (init.cap.max_send_sge as usize * SGE_SIZE).max(init.cap.max_inline_data as usize);
    let mut sq = Queue::new(
        init.cap.max_send_wr.max(1),
        send_layout::DMA_DATA + payload,
        param::MAX_QP_WR,
        Direction::FromClient,
    )?;
    // What fits in a slot may be more than was asked for; report it (as rxe does).
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

    let (mut rq, rq_max_sge, rq_elem_size) = if srq.is_some() {
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

    if let Some(u) = udata {
        let sq_mi = sq.offer_mmap(u)?;
        let rq_mi = match rq.as_mut() {
            Some(q) => q.offer_mmap(u)?,
            None => MmapInfo::default(),
        };
        let mut resp = [0u8; CREATE_QP_RESP_SIZE];
        // The RQ's info comes first in `struct rxe_create_qp_resp`.
        resp[..MMINFO_SIZE].copy_from_slice(&mminfo_bytes(rq_mi));
        resp[MMINFO_SIZE..].copy_from_slice(&mminfo_bytes(sq_mi));
        u.respond_bytes(&resp)?;
    }

    // Room for the requester's entries and their slot buffers for as many WQEs as are normally
    // in flight: taking a WQE off the ring does not allocate.
    let spares = sq_depth.min(SPARE_SLOTS_MAX);
    let entries = KVec::with_capacity(spares, GFP_KERNEL_ACCOUNT)?;
    let mut spare_slots = KVec::with_capacity(spares, GFP_KERNEL_ACCOUNT)?;
    for _ in 0..spares {
        spare_slots.push(
            KVec::from_elem(0u8, sq.elem_size(), GFP_KERNEL_ACCOUNT)?,
            GFP_KERNEL_ACCOUNT,
        )?;
    }

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
        state <- kernel::new_spinlock_irq!(
            QpStateData { state: QpState::Reset, attr, av: None, sq_draining: false },
            "roxe_qp_state"
        ),
        sq <- kernel::new_spinlock_irq!(sq, "roxe_qp_sq"),
        rq <- kernel::new_spinlock_irq!(rq, "roxe_qp_rq"),
        notifier,
        sq_depth,
        sq_state <- kernel::new_spinlock!(
            SqState {
                entries,
                spare_slots,
                cur: 0,
                next_psn: Psn::new(0),
                psn_limit: Psn::new(0),
                rd_atomic_in_flight: 0,
                ack_deadline_ms: 0,
                rnr_until_ms: 0,
                comp: CompState::new(Psn::new(0), IbMtu::Mtu256, 7, 7),
                ack_timeout_ms: 0,
                local_buf: KVec::new(),
            },
            "roxe_qp_sq_state"
        ),
        resp_state <- kernel::new_spinlock!(resp_state, "roxe_qp_resp_state"),
        req_running: Atomic::new(0),
        kick_pending: AtomicFlag::new(false),
        flush_pending: AtomicFlag::new(false),
        held_ack <- kernel::new_spinlock_irq!(None, "roxe_qp_held_ack"),
        hold_acks: AtomicFlag::new(false),
        unheld_ack_ns: Atomic::new(0),
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

pub(crate) fn modify(
    qp: &Qp<Roxe>,
    attr: &QpAttr,
    mask: QpAttrMask,
    udata: Option<&UData<'_>>,
) -> Result {
    if let Some(u) = udata {
        u.check_in_empty()?;
    }
    let this = qp.qp_data();
    let amask = AttrMask::from_bits(mask);
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
    check_attr_values(amask, &values, &attr_limits()).map_err(|e| errno(e.errno()))?;

    let mut st = this.state.lock();
    let request = ModifyRequest {
        mask: amask,
        qp_state: attr.qp_state,
        cur_qp_state: attr.cur_qp_state,
    };
    let next = check_modify_request(st.state, this.qp_type, st.sq_draining, &request)
        .map_err(|e| errno(e.errno()))?;

    // Apply the attributes (IBA 11.2.5.2): all checks passed, nothing below fails.
    let a = &mut st.attr;
    if amask.contains(AttrMask::ACCESS_FLAGS) {
        a.qp_access_flags = attr.qp_access_flags;
    }
    if amask.contains(AttrMask::PKEY_INDEX) {
        a.pkey_index = attr.pkey_index;
    }
    if amask.contains(AttrMask::PORT) {
        a.port_num = attr.port_num;
    }
    if amask.contains(AttrMask::QKEY) {
        a.qkey = attr.qkey;
    }
    if amask.contains(AttrMask::PATH_MTU) {
        a.path_mtu = attr.path_mtu;
    }
    if amask.contains(AttrMask::TIMEOUT) {
        a.timeout = attr.timeout;
    }
    if amask.contains(AttrMask::RETRY_CNT) {
        a.retry_cnt = attr.retry_cnt;
    }
    if amask.contains(AttrMask::RNR_RETRY) {
        a.rnr_retry = attr.rnr_retry;
    }
    if amask.contains(AttrMask::RQ_PSN) {
        a.rq_psn = psn_from_attr(attr.rq_psn).get();
        // Lock order: state, then the responder's state.
        this.resp_state
            .lock()
            .set_rq_psn(psn_from_attr(attr.rq_psn));
    }
    if amask.contains(AttrMask::SQ_PSN) {
        a.sq_psn = psn_from_attr(attr.sq_psn).get();
        let mut sq = this.sq_state.lock();
        sq.next_psn = psn_from_attr(attr.sq_psn);
        sq.psn_limit = sq.next_psn;
        sq.comp.expected_psn = sq.next_psn;
    }
    if amask.contains(AttrMask::MIN_RNR_TIMER) {
        a.min_rnr_timer = attr.min_rnr_timer;
    }
    if amask.contains(AttrMask::MAX_QP_RD_ATOMIC) {
        a.max_rd_atomic = attr.max_rd_atomic;
    }
    if amask.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
        a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        // The responder resources are sized by it (IBA 9.4.4, 11.2.5.2).
        this.resp_state
            .lock()
            .set_max_dest_rd_atomic(attr.max_dest_rd_atomic);
    }
    if amask.contains(AttrMask::DEST_QPN) {
        a.dest_qp_num = attr.dest_qp_num;
    }
    if amask.contains(AttrMask::PATH_MIG_STATE) {
        a.path_mig_state = attr.path_mig_state;
    }
    if amask.contains(AttrMask::EN_SQD_ASYNC_NOTIFY) {
        a.en_sqd_async_notify = attr.en_sqd_async_notify;
    }
    if amask.contains(AttrMask::AV) {
        st.av = attr.av;
    }
    if amask.intersects(
        AttrMask::RETRY_CNT
            .union(AttrMask::RNR_RETRY)
            .union(AttrMask::TIMEOUT),
    ) {
        let (retry_cnt, rnr_retry, timeout) =
            (st.attr.retry_cnt, st.attr.rnr_retry, st.attr.timeout);
        let mut sq = this.sq_state.lock();
        sq.comp.counters = RetryCounters::new(retry_cnt, rnr_retry);
        // At least proto::comp::MIN_ACK_TIMEOUT_MS: a soft HCA is slower than consumers assume.
        sq.ack_timeout_ms = ack_timeout_ms(timeout);
    }
    let prev = st.state;
    st.state = next;
    st.attr.qp_state = next.as_raw();
    st.attr.cur_qp_state = next.as_raw();
    let to_error = next == QpState::Err && prev != QpState::Err;
    if to_error {
        drop(st);
        // Outstanding and queued WQEs complete with a flush error (IBA 10.3.1).
        req::run(qp.device(), this);
        flush_recv(qp.device(), this);
        last_wqe_reached(this);
        return Ok(());
    }
    if next == QpState::Reset && prev != QpState::Reset {
        // IBA 10.3.1: RESET empties the work queues and forgets the path.
        st.av = None;
        let max_dest_rd_atomic = st.attr.max_dest_rd_atomic;
        this.resp_state.lock().reset(max_dest_rd_atomic);
        {
            // The send side starts over too: nothing in flight, PSN 0 until modify sets sq_psn.
            let mut sq = this.sq_state.lock();
            let (retry_cnt, rnr_retry) = (st.attr.retry_cnt, st.attr.rnr_retry);
            sq.retire_all();
            sq.cur = 0;
            sq.next_psn = Psn::new(0);
            sq.psn_limit = Psn::new(0);
            sq.rd_atomic_in_flight = 0;
            sq.ack_deadline_ms = 0;
            sq.rnr_until_ms = 0;
            sq.comp = CompState::new(Psn::new(0), IbMtu::Mtu256, retry_cnt, rnr_retry);
        }
        drop(st);
        // An ACK held for the old connection still leaves (it carries its own address), with
        // no lock held.
        crate::ack::send_held_ack(qp.device(), this);
        // The next connection learns again whether its answers come quickly.
        this.hold_acks.store(false, Relaxed);
        this.unheld_ack_ns.store(0, Relaxed);
        this.sq.lock().reset();
        let mut rq = this.rq.lock();
        if let Some(q) = &mut *rq {
            q.reset();
        }
    }
    Ok(())
}

pub(crate) fn query(qp: &Qp<Roxe>) -> (QpAttr, bool) {
    let this = qp.qp_data();
    let st = this.state.lock();
    let mut attr = st.attr;
    attr.av = st.av;
    attr.sq_draining = st.sq_draining;
    (attr, this.sq_sig_all)
}

pub(crate) fn destroy(qp: &Qp<Roxe>) {
    let this = qp.qp_data();
    if this.qp_type == QpType::Ud {
        // uverbs detaches its groups first; a kernel consumer may not have.
        crate::mcast::detach_all(qp.device().data(), this.qpn);
    }
    // After the grace period in `remove` no packet handler still uses the QP's number.
    drop(qp.device().data().qps.remove(this.qpn));
    // No responder finds the QP any more to hold an ACK. One it holds leaves now: its request
    // completed here, and the peer's requester waits for it (after its last message to a
    // consumer that then destroys the QP, it would time out for good).
    crate::ack::send_held_ack(qp.device(), this);
}

/// The send doorbell: new WQEs are in the ring; the requester sends them (or flushes them in
/// the error state).
pub(crate) fn doorbell(qp: &Qp<Roxe>) -> Result {
    let state = qp.qp_data().state.lock().state;
    match send_verdict(state) {
        PostVerdict::Reject => Err(EINVAL),
        PostVerdict::Queue | PostVerdict::FlushWithError => {
            req::run(qp.device(), qp.qp_data());
            Ok(())
        }
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

/// The device's process work: goes on with the flushes [`continue_flush`] left, one budget
/// each per pass (a QP whose ring is still not empty asks for another pass).
pub(crate) fn run_pending_flushes(dev: &Device<Roxe>) {
    dev.data().qps.for_each(|_, qp| {
        if qp.flush_pending.xchg(false, Acquire) {
            req::run(dev, qp);
            if qp.state.lock().state == QpState::Err {
                flush_recv(dev, qp);
            }
        }
    });
}

/// Writes a kernel consumer's send WR into the SQ ring as the rxe-ABI WQE user space would
/// write, so that one requester serves both. Context: any (kernel consumers may post from
/// atomic context).
pub(crate) fn post_send_kernel(qp: &Qp<Roxe>, wr: &KernelSendWr<'_, Roxe>) -> Result {
    let this = qp.qp_data();
    if this.is_user {
        return Err(EINVAL);
    }
    if let PostVerdict::Reject = send_verdict(this.state.lock().state) {
        return Err(EINVAL);
    }
    if wr.send_flags & send_flags::INLINE != 0 || wr.sges.len() > this.sq_limits.max_sge as usize {
        // Kernel consumers that want inline data get it from rdma_rxe-class HCAs only when
        // `max_inline_data` says so; roxe reports its inline room but copies through SGEs.
        return Err(EINVAL);
    }
    let mut ring = this.sq.lock();
    let mut slot = KVec::from_elem(0u8, ring.elem_size(), GFP_ATOMIC)?;
    let put32 = |b: &mut [u8], off: usize, v: u32| {
        if let Some(d) = b.get_mut(off..off + 4) {
            d.copy_from_slice(&v.to_ne_bytes());
        }
    };
    let put64 = |b: &mut [u8], off: usize, v: u64| {
        if let Some(d) = b.get_mut(off..off + 8) {
            d.copy_from_slice(&v.to_ne_bytes());
        }
    };
    put64(&mut slot, send_layout::WR_ID, wr.wr_id);
    put32(&mut slot, send_layout::OPCODE, wr.opcode);
    put32(&mut slot, send_layout::SEND_FLAGS, wr.send_flags);
    put32(&mut slot, send_layout::EX, wr.ex);
    let u = send_layout::WR_UNION;
    if let Some(reg) = &wr.reg {
        // `wr.reg` as rxe lays it out, with the MR's key index where rxe keeps the `ib_mr`
        // pointer, and the MR's IOVA and length at posting after it (`proto::req::RegMrWr`).
        put64(&mut slot, u, u64::from(reg.mr.data().index));
        put32(&mut slot, u + 8, reg.key);
        put32(&mut slot, u + 12, reg.access);
        put64(&mut slot, u + 16, reg.iova);
        put64(&mut slot, u + 24, reg.length);
    }
    match &wr.ud {
        Some(_) if wr.reg.is_some() => {}
        Some(ud) => {
            put32(&mut slot, u, ud.remote_qpn);
            put32(&mut slot, u + 4, ud.remote_qkey);
            put32(&mut slot, u + 12, ud.ah.data().ah_num());
        }
        None if wr.reg.is_some() => {}
        None => {
            put64(&mut slot, u, wr.remote_addr);
            if matches!(wr.opcode, 5 | 6) {
                // Atomics: remote address, compare/add, swap, rkey.
                put64(&mut slot, u + 8, wr.compare_add);
                put64(&mut slot, u + 16, wr.swap);
                put32(&mut slot, u + 24, wr.rkey);
            } else {
                put32(&mut slot, u + 8, wr.rkey);
            }
        }
    }
    let mut total = 0u32;
    for (i, sge) in wr.sges.iter().enumerate() {
        let o = send_layout::DMA_DATA + i * SGE_SIZE;
        put64(&mut slot, o, sge.addr);
        put32(&mut slot, o + 8, sge.length);
        put32(&mut slot, o + 12, sge.lkey);
        total = total.saturating_add(sge.length);
    }
    put32(&mut slot, send_layout::DMA_LENGTH, total);
    put32(&mut slot, send_layout::DMA_NUM_SGE, wr.sges.len() as u32);
    ring.produce(&slot)?;
    drop(ring);
    // The caller may hold a lock with interrupts disabled, where nothing may be sent: the
    // requester runs from the device's kick work, in softirq context.
    this.kick_pending.store(true, Release);
    qp.device().kick();
    Ok(())
}

/// A kernel consumer's receive WR as the rxe-ABI receive WQE user space would write (for an RQ
/// or an SRQ ring with `elem_size`-byte slots).
pub(crate) fn encode_recv_wqe(elem_size: usize, wr: &KernelRecvWr<'_>) -> Result<KVec<u8>> {
    let mut slot = KVec::from_elem(0u8, elem_size, GFP_ATOMIC)?;
    let mut total = 0u32;
    if let Some(d) = slot.get_mut(recv_layout::WR_ID..recv_layout::WR_ID + 8) {
        d.copy_from_slice(&wr.wr_id.to_ne_bytes());
    }
    for (i, sge) in wr.sges.iter().enumerate() {
        let o = recv_layout::DMA_DATA + i * SGE_SIZE;
        let d = slot.get_mut(o..o + SGE_SIZE).ok_or(EINVAL)?;
        d[..8].copy_from_slice(&sge.addr.to_ne_bytes());
        d[8..12].copy_from_slice(&sge.length.to_ne_bytes());
        d[12..].copy_from_slice(&sge.lkey.to_ne_bytes());
        total = total.saturating_add(sge.length);
    }
    if let Some(d) = slot.get_mut(recv_layout::DMA_LENGTH..recv_layout::DMA_LENGTH + 4) {
        d.copy_from_slice(&total.to_ne_bytes());
    }
    if let Some(d) = slot.get_mut(recv_layout::DMA_NUM_SGE..recv_layout::DMA_NUM_SGE + 4) {
        d.copy_from_slice(&(wr.sges.len() as u32).to_ne_bytes());
    }
    Ok(slot)
}

/// Writes a kernel consumer's receive WR into the RQ ring. Context: any.
pub(crate) fn post_recv(qp: &Qp<Roxe>, wr: &KernelRecvWr<'_>) -> Result {
    let this = qp.qp_data();
    if this.is_user || wr.sges.len() > this.rq_max_sge as usize {
        return Err(EINVAL);
    }
    if let PostVerdict::Reject = recv_verdict(this.state.lock().state) {
        // IBA C10-97.2.1: receives cannot be posted in RESET.
        return Err(EINVAL);
    }
    let mut rq = this.rq.lock();
    let Some(ring) = &mut *rq else {
        return Err(EINVAL);
    };
    let slot = encode_recv_wqe(ring.elem_size(), wr)?;
    ring.produce(&slot)?;
    drop(rq);
    // Checked after producing: a move to ERR that flushed the ring just before this WQE
    // arrived must not leave it behind.
    if let PostVerdict::FlushWithError = recv_verdict(this.state.lock().state) {
        // The flush completion goes out from the kick work, not from inside the consumer's
        // call, which may hold the lock its completion handler takes.
        this.kick_pending.store(true, Release);
        qp.device().kick();
    }
    Ok(())
}
