// SPDX-License-Identifier: GPL-2.0

//! Memory windows: binding, invalidation, and access through a window's R_Key. Counterpart of
//! rxe's `rxe_mw.c`.
//!
//! A window grants remote access to a range of an MR under an R_Key of its own (IBA 10.6.7).
//! Type 1 windows are bound by `ibv_bind_mw` and type 2 by a BIND_MW work request; both arrive
//! as a BIND_MW send WQE. Type 2 windows are tied to the QP that bound them (type 2B) and are
//! freed by LOCAL_INV or a remote SEND with Invalidate.
//!
//! Locking: `RoxeMw::state` is an IRQ-safe spinlock (the responder checks windows in softirq,
//! and kernel consumers bind with interrupts off); nothing sized by a user runs under it.

#![deny(unsafe_code)]

use crate::compat::sync::SpinLockIrq;
use crate::rdma::{
    device::Device,
    object::UData,
    pd::Pd,
    pool::{Alloc, PoolRef},
};
use crate::{
    hca::Roxe,
    mem::mr::{lookup_mr, MemError, RoxeMr},
    proto::{
        cqe::WcStatus,
        mtt::{Access, MemKey},
        resp::{KeyBounds, KeyTarget},
        wqe::SendWqe,
    },
};
use kernel::prelude::*;

/// The range a bound window grants, and to whom. While it exists the MR counts it
/// ([`RoxeMr::attach_window`]), and deregistering the MR is refused, so the pool's reference
/// outlives the binding's: dropping a binding never drops the MR's last reference (whose
/// release may sleep) under the window's spinlock.
pub(crate) struct Binding {
    mr: PoolRef<RoxeMr>,
    addr: u64,
    length: u64,
    access: Access,
    /// Type 2: the QP it is bound to.
    qpn: Option<u32>,
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.mr.detach_window();
    }
}

/// The mutable part of a window.
pub(crate) struct MwState {
    /// The current R_Key (its key byte changes with every bind).
    pub(crate) key: MemKey,
    pub(crate) binding: Option<Binding>,
    /// Deallocated: no bind may attach a binding any more (`dealloc_mw`).
    pub(crate) dead: bool,
}

/// A memory window.
#[pin_data]
pub(crate) struct RoxeMw {
    pub(crate) pd_id: u64,
    pub(crate) type2: bool,
    #[pin]
    pub(crate) state: SpinLockIrq<MwState>,
}

fn rd_u32(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u32::from_ne_bytes)
}

fn rd_u64(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

/// Executes a BIND_MW WQE of QP `qpn` (PD `pd_id`). The WQE's union holds, as rdma-core's rxe
/// provider writes it: `addr` u64, `length` u64, `mr_lkey`, `mw_rkey`, the new `rkey`, `access`.
/// Every violation completes with `IBV_WC_MW_BIND_ERR` (IBA 10.6.7.2.4).
pub(crate) fn bind(
    dev: &Device<Roxe>,
    pd_id: u64,
    qpn: u32,
    wqe: &SendWqe,
) -> Result<(), WcStatus> {
    let w = &wqe.wr;
    let (addr, length) = (rd_u64(w, 0), rd_u64(w, 8));
    let (mr_lkey, mw_rkey, new_rkey, access) =
        (rd_u32(w, 16), rd_u32(w, 20), rd_u32(w, 24), rd_u32(w, 28));
    let err = WcStatus::MwBindErr;
    let old = MemKey::from_raw(mw_rkey);
    let new = MemKey::from_raw(new_rkey);
    // Only the key byte may change (IBA 10.6.7.2.2).
    if !old.is_mw() || !old.same_object(new) {
        return Err(err);
    }
    let mw = dev.data().mws.get(old.index()).ok_or(err)?;
    let access = Access::from_bits(access);
    // Zero-based windows (addressed from 0 rather than by VA) are not supported.
    if access.contains(Access::ZERO_BASED) {
        return Err(err);
    }
    // Either type of window is bound only by a QP of its own PD (IBA 10.6.7.2.4; rdma_rxe:
    // `rxe_check_bind_mw`).
    if mw.pd_id != pd_id {
        return Err(err);
    }
    // The MR is looked up, and counts the new binding, before the window's lock is taken; the
    // binding it replaces (or one that fails to form) is dropped after the lock is released.
    let binding = if length == 0 {
        None
    } else {
        let mr = lookup_mr(dev, mr_lkey, pd_id, Access::MW_BIND).map_err(|_| err)?;
        if mr.check_range(addr, length).is_err() {
            return Err(err);
        }
        // An MR being deregistered or reregistered takes no new window. Its PD and rights are
        // checked again once the window counts: a rereg that ran since the lookup has ended,
        // and no later one runs while the window is attached.
        if !mr.attach_window() {
            return Err(err);
        }
        let mr_access = mr.access();
        // Remote write or atomic rights on a window need local write on its MR (IBA 10.6.7.2.4).
        let needs_local_write =
            access.intersects(Access::REMOTE_WRITE.union(Access::REMOTE_ATOMIC));
        if mr.pd_id() != pd_id
            || !mr_access.contains(Access::MW_BIND)
            || (needs_local_write && !mr_access.contains(Access::LOCAL_WRITE))
        {
            mr.detach_window();
            return Err(err);
        }
        Some(Binding {
            mr,
            addr,
            length,
            access,
            qpn: mw.type2.then_some(qpn),
        })
    };
    let old_binding = {
        let mut st = mw.state.lock();
        if st.dead || st.key.raw() != old.raw() {
            return Err(err);
        }
        // A type 2 window must be free (IBA 10.6.7.2.4), and binding one to a zero-length range
        // is not how it is freed; a type 1 window bound to a zero-length range is unbound.
        if mw.type2 && (st.binding.is_some() || binding.is_none()) {
            return Err(err);
        }
        st.key = new;
        core::mem::replace(&mut st.binding, binding)
    };
    drop(old_binding);
    Ok(())
}

/// Invalidates the type 2 window `rkey` names (LOCAL_INV, or a SEND with Invalidate received by
/// QP `qpn` of PD `pd_id`, IBA 10.6.7.3). Errors: `MemError::BadKey` for anything else.
pub(crate) fn invalidate(dev: &Device<Roxe>, pd_id: u64, rkey: u32) -> Result<(), MemError> {
    let key = MemKey::from_raw(rkey);
    if !key.is_mw() {
        return Err(MemError::BadKey);
    }
    let mw = dev.data().mws.get(key.index()).ok_or(MemError::BadKey)?;
    let old = {
        let mut st = mw.state.lock();
        if !mw.type2 || st.key.raw() != key.raw() || st.binding.is_none() || mw.pd_id != pd_id {
            return Err(MemError::BadKey);
        }
        st.binding.take()
    };
    drop(old);
    Ok(())
}

/// What window key `key` names for an access by QP `qpn` of PD `pd_id`, for
/// `proto::resp::check_rkey`, and the MR behind the window's binding. `None`: no window under
/// the key's index, or the window is not bound (nothing to reach through it).
pub(crate) fn target(
    dev: &Device<Roxe>,
    key: MemKey,
    pd_id: u64,
    qpn: u32,
) -> Option<(KeyTarget, PoolRef<RoxeMr>)> {
    let mw = dev.data().mws.get(key.index())?;
    let st = mw.state.lock();
    let b = st.binding.as_ref()?;
    let target = KeyTarget {
        key: st.key.raw(),
        // Either type of window is reached only through a QP of its own PD (IBA 10.6.7.2.4;
        // rdma_rxe: `rxe_lookup_mw`); its MR was checked against the PD when it was bound.
        same_pd: mw.pd_id == pd_id,
        valid: b.length != 0,
        // Type 2 windows are bound to one QP (type 2B).
        qp_matches: b.qpn.is_none_or(|q| q == qpn),
        access: b.access,
        bounds: KeyBounds::Range {
            start: b.addr,
            length: b.length,
        },
    };
    Some((target, b.mr.clone()))
}

/// The driver's handle of an MW: its key index in the pool.
pub(crate) struct MwHandle {
    index: u32,
}

pub(crate) fn alloc_mw(
    pd: &Pd<Roxe>,
    type2: bool,
    udata: Option<&UData<'_>>,
) -> Result<(MwHandle, u32)> {
    if let Some(u) = udata {
        u.check_in_empty()?;
    }
    let dev = pd.device();
    let slot = dev
        .data()
        .mws
        .reserve(MemKey::MW_INDEX_MIN, MemKey::MW_INDEX_MAX, Alloc::Kernel)?;
    let key = MemKey::new(slot.index(), dev.data().next_key_byte()).ok_or(EINVAL)?;
    let index = slot.index();
    slot.fill(try_pin_init!(RoxeMw {
        pd_id: pd.data().id,
        type2,
        state <- crate::compat::sync::new_spinlock_irq!(MwState { key, binding: None, dead: false }, "roxe_mw"),
    }? Error))?;
    Ok((MwHandle { index }, key.raw()))
}

/// Deallocates a window: its key stops resolving at once, and its binding goes now, so that its
/// MR may be deregistered once this returns, even if a packet handler still holds the window.
/// The pool's reference goes after a grace period, without waiting for it: a window holds
/// nothing whose release sleeps once unbound, and a process looping over alloc/dealloc pairs
/// (the cheapest of them) makes the kernel wait for, or interrupt, nothing.
pub(crate) fn dealloc_mw(dev: &Device<Roxe>, mw: MwHandle) {
    let pool = &dev.data().mws;
    let window = pool.get(mw.index);
    pool.remove_deferred(mw.index);
    if let Some(w) = window {
        // Dead under its lock: a bind that found the window before the removal and runs now
        // fails, rather than leaving a binding that would keep the MR from deregistering.
        let old = {
            let mut st = w.state.lock();
            st.dead = true;
            st.binding.take()
        };
        drop(old);
    }
}
