// SPDX-License-Identifier: GPL-2.0

//! Kernel consumers' work requests (`ib_post_send`, `ib_post_recv`, `ib_post_srq_recv`): each is
//! written into its ring as the rxe-ABI WQE user space would write, so that one requester and
//! one responder serve both kinds of consumer. Context: any (kernel consumers may post from
//! atomic context); nothing here sends or completes.

#![deny(unsafe_code)]

use crate::rdma::{
    kverbs::{KernelRecvWr, KernelSendWr},
    qp::Qp,
    srq::Srq,
};
use crate::{
    hca::Roxe,
    proto::{
        qp_state::{recv_verdict, send_verdict, PostVerdict},
        wqe::{recv_layout, send_flags, send_layout, SGE_SIZE},
    },
};
use kernel::prelude::*;

/// Writes a kernel consumer's send WR into the SQ ring as the rxe-ABI WQE user space would
/// write, so that one requester serves both. Context: any (kernel consumers may post from
/// atomic context).
pub(crate) fn post_send(qp: &Qp<Roxe>, wr: &KernelSendWr<'_, Roxe>) -> Result {
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
    // The slot is built before the ring's lock, which turns interrupts off: nothing is
    // allocated under it. Its size is fixed at creation.
    let elem_size = this.sq.lock().elem_size();
    let mut slot = KVec::from_elem(0u8, elem_size, GFP_ATOMIC)?;
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
    this.sq.lock().produce(&slot)?;
    // The caller may hold a lock with interrupts disabled, where nothing may be sent: the
    // requester runs from the device's kick work, in softirq context.
    crate::qp::ask_kick(qp.device(), this);
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
    // Built before the ring's lock (interrupts off under it); the slot size is fixed at
    // creation.
    let slot = encode_recv_wqe(this.rq_elem_size, wr)?;
    let mut rq = this.rq.lock();
    let Some(ring) = &mut *rq else {
        return Err(EINVAL);
    };
    ring.produce(&slot)?;
    drop(rq);
    // Checked after producing: a move to ERR that flushed the ring just before this WQE
    // arrived must not leave it behind.
    if let PostVerdict::FlushWithError = recv_verdict(this.state.lock().state) {
        // The flush completion goes out from the kick work, not from inside the consumer's
        // call, which may hold the lock its completion handler takes.
        crate::qp::ask_kick(qp.device(), this);
        qp.device().kick();
    }
    Ok(())
}

/// Writes a kernel consumer's receive WR into the SRQ ring (`ib_post_srq_recv`). Context: any;
/// the QPs sharing the SRQ take it from there in the receive path.
pub(crate) fn post_srq_recv(srq: &Srq<Roxe>, wr: &KernelRecvWr<'_>) -> Result {
    let s = srq.srq_data();
    let max_sge = s.inner.lock().max_sge;
    if wr.sges.len() > max_sge as usize {
        return Err(EINVAL);
    }
    // Built before the ring's lock (interrupts off under it); the slot size is fixed at
    // creation, and a resize keeps it.
    let slot = encode_recv_wqe(s.elem_size, wr)?;
    // Not the tail expression: in edition 2021 a tail's temporaries (the guard) outlive the
    // locals, so `slot` would be freed under the lock.
    let produced = s.inner.lock().queue.produce(&slot);
    produced
}
