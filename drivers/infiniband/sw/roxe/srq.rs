// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues. Counterpart of rxe's `rxe_srq.c`.
//!
//! Locking: `RoxeSrq::inner` is an IRQ-safe spinlock: the responder takes receive WQEs from it
//! in softirq, kernel consumers post to it from any context, the verbs resize and arm it in
//! process context. Nothing sized by a user is copied under it (`replace_ring`).

#![deny(unsafe_code)]

use crate::compat::errno;
use crate::compat::sync::SpinLockIrq;
use crate::compat::task::Preemptible;
use crate::rdma::{
    device::Device,
    object::UData,
    pool::Alloc,
    srq::{srq_mask, Srq, SrqAttr, SrqInit, SrqNotifier},
};
use crate::rdma::{mmap::MmapInfo, pool::PoolRef};
use crate::{
    cq::{mminfo_bytes, MMINFO_SIZE},
    hca::Roxe,
    param,
    proto::wqe::{recv_layout, SGE_SIZE},
    queue::{Direction, Queue},
};
use kernel::{
    prelude::*,
    sync::Arc,
    uaccess::{UserPtr, UserSlice},
};

/// `struct rxe_create_srq_resp`: `mi` (16 bytes), `srq_num` u32, `reserved` u32.
fn create_srq_resp(mi: MmapInfo, srq_num: u32) -> [u8; MMINFO_SIZE + 8] {
    let mut out = [0u8; MMINFO_SIZE + 8];
    out[..MMINFO_SIZE].copy_from_slice(&mminfo_bytes(mi));
    out[MMINFO_SIZE..MMINFO_SIZE + 4].copy_from_slice(&srq_num.to_ne_bytes());
    out
}

/// The locked part of an SRQ.
pub(crate) struct SrqInner {
    pub(crate) queue: Queue,
    /// Scatter/gather entries per WQE.
    pub(crate) max_sge: u32,
    /// Armed limit (0: disarmed). IBA 11.5.2.4: the event fires once when fewer WQEs remain.
    pub(crate) limit: u32,
    /// A resize of a user ring is copying it outside the lock: the responder takes no WQE
    /// until the new ring is in place (it answers as for an empty SRQ: RNR NAK).
    pub(crate) resizing: bool,
}

/// A shared receive queue.
#[pin_data]
pub(crate) struct RoxeSrq {
    pub(crate) srq_num: u32,
    pub(crate) pd_id: u64,
    /// The ring's slot size, fixed at creation (a resize keeps it): the responder allocates a
    /// slot's copy before it takes the lock.
    pub(crate) elem_size: usize,
    #[pin]
    pub(crate) inner: SpinLockIrq<SrqInner>,
    pub(crate) notifier: Arc<SrqNotifier>,
}

fn elem_size(max_sge: u32) -> usize {
    recv_layout::DMA_DATA + max_sge as usize * SGE_SIZE
}

pub(crate) fn create(
    dev: &Device<Roxe>,
    init: &mut SrqInit<'_, Roxe>,
    notifier: Arc<SrqNotifier>,
    udata: Option<&UData<'_>>,
) -> Result<PoolRef<RoxeSrq>> {
    if let Some(u) = udata {
        if u.out_len() < MMINFO_SIZE + 8 {
            return Err(EINVAL);
        }
    }
    if !init.basic {
        return Err(errno::eopnotsupp());
    }
    let a = &mut init.attr;
    if a.max_wr == 0
        || a.max_wr > param::MAX_SRQ_WR
        || a.max_sge > param::MAX_SRQ_SGE
        || a.srq_limit > a.max_wr
    {
        return Err(EINVAL);
    }
    a.max_sge = a.max_sge.max(1);
    let mut queue = Queue::new(
        a.max_wr,
        elem_size(a.max_sge),
        param::MAX_SRQ_WR,
        Direction::FromClient,
    )?;
    a.max_wr = queue.capacity();
    let mi = match udata {
        Some(u) => Some(queue.offer_mmap(u)?),
        None => None,
    };
    let slot =
        dev.data()
            .srqs
            .reserve(param::SRQ_INDEX_MIN, param::SRQ_INDEX_MAX, Alloc::Kernel)?;
    let srq_num = slot.index();
    if let (Some(u), Some(mi)) = (udata, mi) {
        u.respond_bytes(&create_srq_resp(mi, srq_num))?;
    }
    let (max_sge, limit) = (a.max_sge, a.srq_limit);
    let pd_id = init.pd.data().id;
    let elem_size = queue.elem_size();
    slot.fill(try_pin_init!(RoxeSrq {
        srq_num,
        pd_id,
        elem_size,
        inner <- crate::compat::sync::new_spinlock_irq!(SrqInner { queue, max_sge, limit, resizing: false }, "roxe_srq"),
        notifier,
    }? Error))
}

pub(crate) fn modify(
    srq: &Srq<Roxe>,
    attr: &SrqAttr,
    mask: u32,
    udata: Option<&UData<'_>>,
) -> Result {
    let this = srq.srq_data();
    // `struct rxe_modify_srq_cmd`: the user address to write the new ring's mmap info to.
    let mut cmd = [0u8; 8];
    if let Some(u) = udata {
        let len = cmd.len();
        u.copy_in_bytes(&mut cmd, len)?;
    }
    let mmap_info_addr = u64::from_ne_bytes(cmd);
    if mask & !(srq_mask::MAX_WR | srq_mask::LIMIT) != 0 {
        return Err(EINVAL);
    }
    if mask & srq_mask::MAX_WR != 0 {
        let limit_after = if mask & srq_mask::LIMIT != 0 {
            attr.srq_limit
        } else {
            this.inner.lock().limit
        };
        if attr.max_wr == 0
            || attr.max_wr > param::MAX_SRQ_WR
            || (limit_after != 0 && attr.max_wr < limit_after)
        {
            return Err(EINVAL);
        }
        // Everything that allocates or touches user memory happens before the lock.
        let elem = elem_size(this.inner.lock().max_sge);
        let mut new = Queue::new(attr.max_wr, elem, param::MAX_SRQ_WR, Direction::FromClient)?;
        let entry = match udata {
            Some(u) => {
                let e = new.make_mmap_entry(u)?;
                let addr = usize::try_from(mmap_info_addr).map_err(|_| EFAULT)?;
                UserSlice::new(UserPtr::from_addr(addr), MMINFO_SIZE)
                    .writer()
                    .write_slice(&mminfo_bytes(e.info()))?;
                Some(e)
            }
            None => None,
        };
        if let Some(e) = entry {
            new.attach_mmap(e);
        }
        let old = replace_ring(this, new, &Preemptible::claim())?;
        drop(old);
    }
    if mask & srq_mask::LIMIT != 0 {
        let mut inner = this.inner.lock();
        if attr.srq_limit > inner.queue.capacity() {
            return Err(EINVAL);
        }
        inner.limit = attr.srq_limit;
    }
    Ok(())
}

/// Puts `new` in place of the SRQ's ring with the queued WQEs copied over, in order; returns
/// the old ring, to be dropped outside the lock. Process context (`ctx`).
///
/// A user ring's producer index is user memory: the count to copy can be the whole ring (2^20
/// slots of up to 4 KiB), so it is copied with interrupts on. Under the lock the ring is frozen
/// (`resizing`: the responder takes nothing) and its queued span noted; the copy runs
/// preemptible; under the lock again the new ring goes in. rdma-core's provider holds its own
/// lock of the SRQ during the resize, so no WQE is posted meanwhile; a process that posts anyway
/// loses only its own WQEs. A kernel consumer's ring is only written by the kernel and sized by
/// it, and its posts go on during a resize: it is copied under the lock.
fn replace_ring(this: &RoxeSrq, mut new: Queue, ctx: &Preemptible) -> Result<Queue> {
    let (src, from, count) = {
        let mut inner = this.inner.lock();
        if !inner.queue.is_user() {
            new.take_over(&inner.queue)?;
            return Ok(core::mem::replace(&mut inner.queue, new));
        }
        if inner.resizing {
            return Err(EBUSY);
        }
        let (consumer, producer) = inner.queue.span();
        let count = inner.queue.distance(consumer, producer);
        if count > new.capacity() {
            return Err(EINVAL);
        }
        inner.resizing = true;
        (inner.queue.source(), consumer, count)
    };
    let copied = new
        .copy_from_preemptible(&src, from, 0, count, ctx)
        .and_then(|()| new.start_at(0, count));
    let mut inner = this.inner.lock();
    inner.resizing = false;
    copied?;
    Ok(core::mem::replace(&mut inner.queue, new))
}

pub(crate) fn query(srq: &Srq<Roxe>) -> SrqAttr {
    let inner = srq.srq_data().inner.lock();
    SrqAttr {
        max_wr: inner.queue.capacity(),
        max_sge: inner.max_sge,
        srq_limit: inner.limit,
    }
}

pub(crate) fn destroy(srq: &Srq<Roxe>) {
    drop(srq.device().data().srqs.remove(srq.srq_data().srq_num));
}
