// SPDX-License-Identifier: GPL-2.0

//! Completion queues. Counterpart of rxe's `rxe_cq.c`.
//!
//! Locking: `RoxeCq::inner` is an IRQ-safe spinlock: completions are posted from softirq (the
//! data path) and from process context (flushes), kernel consumers poll it from any context, and
//! it is armed from process context. The consumer's completion handler is called after the lock
//! is released; nothing sized by a user is copied under it (`replace_user_ring`).

#![deny(unsafe_code)]

use crate::compat::errno;
use crate::compat::sync::SpinLockIrq;
use crate::compat::task::Preemptible;
use crate::rdma::{
    cq::{Cq, CqInit, CqNotifier, NotifyFlags},
    device::Device,
    kverbs::{Wc, WC_WITH_NETWORK_HDR_TYPE},
    mmap::MmapInfo,
    object::UData,
    qp::QpNotifier,
};
use crate::{
    hca::Roxe,
    param,
    queue::{Direction, Queue, RESIZE_BATCH},
};
use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// Size of a completion entry: `struct ib_uverbs_wc`, which rdma-core copies out as `ibv_wc`.
pub(crate) const CQE_SIZE: usize = 48;

/// Size of `struct mminfo`.
pub(crate) const MMINFO_SIZE: usize = 16;

/// `struct mminfo` of the rxe ABI (`rxe_create_cq_resp`, `rxe_resize_cq_resp`, and parts of
/// the QP and SRQ responses): `offset` u64, `size` u32, `pad` u32, native byte order.
pub(crate) fn mminfo_bytes(info: MmapInfo) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&info.offset.to_ne_bytes());
    out[8..12].copy_from_slice(&info.size.to_ne_bytes());
    out
}

/// The locked part of a CQ.
struct CqInner {
    queue: Queue,
    /// Armed notification (`IB_CQ_NEXT_COMP` or `IB_CQ_SOLICITED`), cleared when it fires.
    notify: u32,
    /// Kernel consumers' CQs: per ring slot, the QP whose completion it holds, as referenced
    /// when the completion was posted, for `ib_wc.qp`. A QP number looked up again at poll time
    /// could name a newer QP (or none) once the QP is destroyed; the reference names the QP of
    /// the work request, or, once that is destroyed, nothing. Empty for user CQs.
    owners: KVVec<Option<Arc<QpNotifier>>>,
}

/// A slot table for a kernel consumer's ring of `slots` slots, allocated before any lock.
fn owner_table(slots: u32) -> Result<KVVec<Option<Arc<QpNotifier>>>> {
    let mut owners = KVVec::with_capacity(slots as usize, GFP_KERNEL)?;
    for _ in 0..slots {
        owners.push(None, GFP_KERNEL)?;
    }
    Ok(owners)
}

/// A completion queue.
#[pin_data]
pub(crate) struct RoxeCq {
    #[pin]
    inner: SpinLockIrq<CqInner>,
    notifier: Arc<CqNotifier>,
    /// Completions that found the CQ full. The first one raised `IB_EVENT_CQ_ERR`.
    overruns: Atomic<u64>,
}

impl RoxeCq {
    /// Whether completions wait in the ring for the consumer to poll them. Only a hint: a user
    /// CQ's consumer index is the process's to write at any time.
    pub(crate) fn unpolled(&self) -> bool {
        !self.inner.lock().queue.is_empty()
    }

    /// Posts one completion entry; calls the consumer's handler if it was armed for it. A full
    /// CQ is an overrun (IBA 11.4.2.1): the consumer gets `IB_EVENT_CQ_ERR` (once: the CQ is in
    /// error from then on), and the caller gets `EBUSY` and must put the QP whose completion
    /// it was into the error state (IBA 10.10.2.3), counting it (`cq_overflow`).
    pub(crate) fn post(
        &self,
        cqe: &[u8; CQE_SIZE],
        solicited: bool,
        owner: &Arc<QpNotifier>,
    ) -> Result {
        let mut replaced = None;
        let fire = {
            let mut inner = self.inner.lock();
            let slot = inner.queue.producer_slot() as usize;
            if let Err(e) = inner.queue.push(cqe) {
                drop(inner);
                if self.overruns.fetch_add(1, Relaxed) == 0 {
                    self.notifier.error_event();
                }
                return Err(e);
            }
            if let Some(o) = inner.owners.get_mut(slot) {
                // The slot's previous owner is dropped after the lock.
                replaced = o.replace(owner.clone());
            }
            let armed = inner.notify;
            let fire = armed & NotifyFlags::NEXT_COMP != 0
                || (armed & NotifyFlags::SOLICITED != 0 && solicited);
            if fire {
                inner.notify = 0;
            }
            fire
        };
        drop(replaced);
        if fire {
            self.notifier.completion();
        }
        Ok(())
    }
}

/// The response to create and resize.
fn respond(udata: &UData<'_>, info: MmapInfo) -> Result {
    udata.respond_bytes(&mminfo_bytes(info))
}

fn check_udata(udata: Option<&UData<'_>>) -> Result {
    // rdma-core's rxe provider always gives room for the mmap info; anything else is malformed.
    match udata {
        Some(u) if u.out_len() < MMINFO_SIZE => Err(EINVAL),
        _ => Ok(()),
    }
}

pub(crate) fn create(
    _dev: &Device<Roxe>,
    init: &CqInit,
    notifier: Arc<CqNotifier>,
    udata: Option<&UData<'_>>,
) -> Result<(Arc<RoxeCq>, u32)> {
    check_udata(udata)?;
    if init.flags != 0 {
        return Err(errno::eopnotsupp());
    }
    let max_cqe = (1u32 << param::MAX_LOG_CQE) - 1;
    if init.cqe == 0 || init.cqe > max_cqe {
        return Err(EINVAL);
    }
    let mut queue = Queue::new(init.cqe, CQE_SIZE, max_cqe, Direction::ToClient)?;
    if let Some(u) = udata {
        let info = queue.offer_mmap(u)?;
        respond(u, info)?;
    }
    let capacity = queue.capacity();
    let owners = if udata.is_some() {
        KVVec::new()
    } else {
        owner_table(queue.slots())?
    };
    let cq = Arc::pin_init(
        pin_init!(RoxeCq {
            inner <- crate::compat::sync::new_spinlock_irq!(CqInner { queue, notify: 0, owners }, "roxe_cq"),
            notifier,
            overruns: Atomic::new(0),
        }),
        GFP_KERNEL,
    )?;
    Ok((cq, capacity))
}

pub(crate) fn resize(cq: &Cq<Roxe>, cqe: u32, udata: Option<&UData<'_>>) -> Result<u32> {
    check_udata(udata)?;
    let max_cqe = (1u32 << param::MAX_LOG_CQE) - 1;
    if cqe == 0 || cqe > max_cqe {
        return Err(EINVAL);
    }
    let this = cq.cq_data();
    // Everything that allocates happens before the lock: the ring, its mmap offer, the reply.
    let mut new = Queue::new(cqe, CQE_SIZE, max_cqe, Direction::ToClient)?;
    let entry = match udata {
        Some(u) => {
            let e = new.make_mmap_entry(u)?;
            respond(u, e.info())?;
            Some(e)
        }
        None => None,
    };
    let capacity = new.capacity();
    let new_owners = if udata.is_some() {
        KVVec::new()
    } else {
        owner_table(new.slots())?
    };
    let ctx = Preemptible::claim();
    let (old, old_owners) = match entry {
        Some(e) => {
            new.attach_mmap(e);
            (replace_user_ring(this, new, &ctx)?, KVVec::new())
        }
        None => replace_kernel_ring(this, new, new_owners)?,
    };
    // The old ring (and its mmap offer) and the owners it still had go outside the lock.
    drop(old);
    drop(old_owners);
    Ok(capacity)
}

/// Resize of a kernel consumer's CQ: its size and both indices are the kernel's own, so the
/// entries, and their owners, move under the lock. Returns the old ring and owners.
fn replace_kernel_ring(
    this: &RoxeCq,
    mut new: Queue,
    mut new_owners: KVVec<Option<Arc<QpNotifier>>>,
) -> Result<(Queue, KVVec<Option<Arc<QpNotifier>>>)> {
    let mut inner = this.inner.lock();
    // Entries posted meanwhile move over too; fewer slots than queued entries is EINVAL,
    // as IBA 11.2.6.2 (resize CQ) requires.
    new.take_over(&inner.queue)?;
    // The owners move with their entries, to slots 0, 1, ... as `take_over` moved them.
    let CqInner { queue, owners, .. } = &mut *inner;
    for (to, from) in queue.queued_slots().enumerate() {
        if let (Some(dst), Some(src)) = (new_owners.get_mut(to), owners.get_mut(from as usize)) {
            *dst = src.take();
        }
    }
    let old_owners = core::mem::replace(&mut inner.owners, new_owners);
    Ok((core::mem::replace(&mut inner.queue, new), old_owners))
}

/// Copy rounds of a user CQ's resize before it gives up with `EAGAIN`.
const RESIZE_ROUNDS: u32 = 4;

/// Resize of a user CQ: its consumer index is user memory, so the entries to move can be the
/// whole ring (2^15), and they are copied with interrupts on, while the completer may go on
/// adding entries to the old ring. Each round copies, preemptibly, what was queued when it
/// began; under the lock, when at most [`RESIZE_BATCH`] entries came meanwhile, they are copied
/// there and the new ring goes in. rdma-core's provider holds its lock of the CQ during the
/// resize, so nothing is polled meanwhile; a process that polls anyway garbles only its own
/// completions. Returns the old ring. Process context (`ctx`).
fn replace_user_ring(this: &RoxeCq, mut new: Queue, ctx: &Preemptible) -> Result<Queue> {
    let (src, base, mut end) = {
        let inner = this.inner.lock();
        let (consumer, producer) = inner.queue.span();
        (inner.queue.source(), consumer, producer)
    };
    let mut copied = 0;
    for _ in 0..RESIZE_ROUNDS {
        let total = src.distance(base, end);
        if total < copied {
            // The producer went round past the entries copied: the ring overflowed.
            return Err(EAGAIN);
        }
        new.copy_from_preemptible(&src, base.wrapping_add(copied), copied, total - copied, ctx)?;
        copied = total;
        let mut inner = this.inner.lock();
        let (consumer, producer) = inner.queue.span();
        let total = src.distance(base, producer);
        if total < copied {
            return Err(EAGAIN);
        }
        if total - copied <= RESIZE_BATCH {
            new.copy_from(&src, base.wrapping_add(copied), copied, total - copied)?;
            // Entries the process polled meanwhile stay polled.
            new.start_at(src.distance(base, consumer).min(total), total)?;
            return Ok(core::mem::replace(&mut inner.queue, new));
        }
        end = producer;
    }
    Err(EAGAIN)
}

pub(crate) fn req_notify(cq: &Cq<Roxe>, flags: NotifyFlags) -> Result<bool> {
    let mut inner = cq.cq_data().inner.lock();
    inner.notify |= flags.bits() & NotifyFlags::SOLICITED_MASK;
    Ok(flags.bits() & NotifyFlags::REPORT_MISSED_EVENTS != 0 && !inner.queue.is_empty())
}

fn rd32(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_ne_bytes)
}

/// Takes the oldest completion of a kernel consumer's CQ, as a `Wc` (the CQE layout is
/// `struct ib_uverbs_wc`, whose status and opcode values the kernel's `ib_wc` shares).
pub(crate) fn poll(cq: &Cq<Roxe>) -> Option<Wc> {
    let mut e = [0u8; CQE_SIZE];
    let owner = {
        let mut inner = cq.cq_data().inner.lock();
        let slot = inner.queue.pop_client(&mut e)?;
        inner.owners.get_mut(slot as usize).and_then(Option::take)
    };
    let wr_id = e
        .get(..8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_ne_bytes);
    let net = e.get(47).copied().unwrap_or(0);
    let mut wc_flags = rd32(&e, 36);
    if net != 0 {
        wc_flags |= WC_WITH_NETWORK_HDR_TYPE;
    }
    Some(Wc {
        wr_id,
        status: rd32(&e, 8),
        opcode: rd32(&e, 12),
        byte_len: rd32(&e, 20),
        ex: rd32(&e, 24),
        qp: owner,
        src_qp: rd32(&e, 32),
        wc_flags,
        pkey_index: e
            .get(40..42)
            .and_then(|s| s.try_into().ok())
            .map_or(0, u16::from_ne_bytes),
        network_hdr_type: net,
    })
}
