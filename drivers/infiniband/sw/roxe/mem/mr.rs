// SPDX-License-Identifier: GPL-2.0

//! Memory regions: user MRs (pinned, or on demand: `odp.rs`), DMA MRs and fast-registration
//! MRs; their keys, registration, re-registration and deregistration. Counterpart of rxe's
//! `rxe_mr.c`; windows are in `mw.rs`, copies through SGE lists in `mod.rs`.
//!
//! A user MR pins its pages at registration ([`PinnedPages`]) and keeps the MTT geometry that
//! maps its IOVA range onto them. A fast-registration MR (kernel consumers: `ib_alloc_mr`,
//! `ib_map_mr_sg`, then an `IB_WR_REG_MR` work request) holds a page list of kernel memory and
//! maps it only between a REG_MR and the next invalidation (IBA 10.6.3.6, 10.7.2). MRs and MWs live in the device's key pools, indexed by the key
//! index (`lkey >> 8`): MRs in the lower half of the index space, MWs in the upper, so a key
//! alone tells which one it names.

#![deny(unsafe_code)]

use crate::compat::errno;
use crate::rdma::{
    device::Device,
    kverbs::{FastRegError, FastRegGrant, FastRegMem, KernelMem},
    mr::{rereg, FastRegPages, Mr, MrCreated, PinnedPages, UserMrRequest},
    object::UData,
    odp::{OdpAccount, OdpMem},
    pd::Pd,
    pool::{Alloc, PoolRef},
};
use crate::{
    hca::{errno, Roxe},
    proto::{
        mtt::{permits, validate_reg_access, Access, MemKey, MrCaps, MttGeometry},
        req::RegMrWr,
    },
};
use kernel::{
    prelude::*,
    sync::atomic::{Acquire, Atomic, Relaxed, Release},
};

/// Page shift of pinned user memory (the kernel's page size).
const PAGE_SHIFT: u32 = kernel::page::PAGE_SHIFT as u32;

/// Why an access to registered memory was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemError {
    /// No MR with this key (index unknown, or key byte stale).
    BadKey,
    /// The MR belongs to another PD.
    WrongPd,
    /// The MR does not grant the access.
    Access,
    /// The range is not inside the MR.
    Range,
    /// The SGE list is shorter than the data.
    Length,
    /// On-demand paging: a page of the range is not faulted in now. Nothing was refused: the
    /// caller asks for a fault (`odp::fault_mr`, `odp::fault_sges`) and tries again later.
    NotPresent,
}

/// The memory behind an MR.
pub(crate) enum MrMem {
    /// Pinned user pages and the MTT geometry that maps the IOVA range onto them.
    User {
        geometry: MttGeometry,
        pages: PinnedPages,
    },
    /// All of kernel memory, addressed by kernel virtual address (a kernel consumer's DMA MR).
    Dma(KernelMem),
    /// A fast-registration MR: pages of kernel memory, mapped while a REG_MR holds; its page
    /// lists, range and copies live in [`FastRegMem`].
    Fast(Pin<KBox<FastRegMem>>),
    /// An on-demand paging MR (`IB_ACCESS_ON_DEMAND`): user memory that is not pinned, its
    /// pages faulted in by the process work (`odp::next_stage_job`) when the data path finds
    /// them missing (see `mem/odp.rs`). An implicit one spans the whole address space: its geometry
    /// is `[0, U64_MAX)` and its page indices are page numbers of the address space.
    Odp { geometry: MttGeometry, odp: OdpMem },
}

/// A registered memory region.
pub(crate) struct RoxeMr {
    /// The PD's identity: an access through a key of another PD is refused (IBA 10.6.3.2).
    /// Atomic: `rereg_user_mr` may move the MR to another PD in place.
    pd_id: Atomic<u64>,
    /// The L_Key and R_Key (equal). Atomic: a REG_MR gives a fast-registration MR a new key
    /// byte.
    key: Atomic<u32>,
    /// `IB_ACCESS_*` rights; atomic for the same reason.
    access: Atomic<u32>,
    /// Memory windows bound to the MR (rdma_rxe's `num_mw`), and [`DEREGISTERED`] once
    /// deregistration has begun or [`REREG`] while a rereg of PD or access runs: a window may
    /// not attach then, and deregistration and rereg are refused while any is attached (a bound
    /// window keeps the MR reachable with the PD and rights it was bound under, IBA 10.6.7.2.4).
    windows: Atomic<u32>,
    pub(crate) mem: MrMem,
}

/// [`RoxeMr::windows`]: deregistration has begun.
const DEREGISTERED: u32 = 1 << 31;

/// [`RoxeMr::windows`]: a rereg of PD or access is under way.
const REREG: u32 = 1 << 30;

impl RoxeMr {
    /// The PD the MR belongs to now.
    pub(crate) fn pd_id(&self) -> u64 {
        self.pd_id.load(Relaxed)
    }

    /// The MR's access rights now.
    pub(crate) fn access(&self) -> Access {
        Access::from_bits(self.access.load(Relaxed))
    }

    /// The MR's key now.
    pub(crate) fn key(&self) -> MemKey {
        MemKey::from_raw(self.key.load(Relaxed))
    }

    /// Counts a window binding to the MR. `false`: the MR is being deregistered or reregistered.
    /// The binder checks the MR's PD and rights after this succeeds: a rereg that ended before
    /// it is seen (acquire, against `end_rereg`'s release), and one that starts after it finds
    /// the window and is refused.
    pub(crate) fn attach_window(&self) -> bool {
        let mut cur = self.windows.load(Relaxed);
        loop {
            if cur & (DEREGISTERED | REREG) != 0 || cur + 1 >= REREG {
                return false;
            }
            match self.windows.cmpxchg(cur, cur + 1, Acquire) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// A binding counted by [`RoxeMr::attach_window`] is gone.
    pub(crate) fn detach_window(&self) {
        self.windows.fetch_sub(1u32, Relaxed);
    }

    /// Starts deregistration unless a window is bound (`EBUSY`; rdma_rxe refuses it too).
    fn begin_dereg(&self) -> Result {
        match self.windows.cmpxchg(0, DEREGISTERED, Relaxed) {
            Ok(_) => Ok(()),
            Err(_) => Err(EBUSY),
        }
    }

    /// Starts a rereg of PD or access unless a window is bound (`EBUSY`, as for
    /// deregistration) or deregistration has begun; no window attaches until [`end_rereg`].
    ///
    /// [`end_rereg`]: RoxeMr::end_rereg
    fn begin_rereg(&self) -> Result {
        match self.windows.cmpxchg(0, REREG, Relaxed) {
            Ok(_) => Ok(()),
            Err(_) => Err(EBUSY),
        }
    }

    /// Ends a rereg begun by [`RoxeMr::begin_rereg`]: windows may attach again, and see the new
    /// PD and rights (release). Nothing else changes the count meanwhile: attaching and
    /// deregistering are refused, and no window is attached to detach.
    fn end_rereg(&self) {
        self.windows.store(0, Release);
    }
}

/// The driver's handle of an MR: its key index in the pool.
pub(crate) struct MrHandle {
    pub(crate) index: u32,
}

/// Enters an MR of PD `pd` with rights `access` into the device's key pool: reserves a key
/// index, then builds the memory with `mem` (so that a pool full of MRs fails before pinning)
/// and fills the slot. The L_Key and R_Key are equal.
fn insert(
    pd: &Pd<Roxe>,
    access: Access,
    mem: impl FnOnce() -> Result<MrMem>,
) -> Result<MrCreated<MrHandle>> {
    let dev = pd.device();
    let slot = dev
        .data()
        .mrs
        .reserve(MemKey::MR_INDEX_MIN, MemKey::MR_INDEX_MAX, Alloc::Kernel)?;
    let key = MemKey::new(slot.index(), dev.data().next_key_byte()).ok_or(EINVAL)?;
    let mem = mem()?;
    let index = slot.index();
    slot.fill(try_init!(RoxeMr {
        pd_id: Atomic::new(pd.data().id),
        key: Atomic::new(key.raw()),
        access: Atomic::new(access.bits()),
        windows: Atomic::new(0),
        mem,
    }? Error))?;
    Ok(MrCreated {
        data: MrHandle { index },
        lkey: key.raw(),
        rkey: key.raw(),
    })
}

pub(crate) fn reg_user(
    pd: &Pd<Roxe>,
    req: &UserMrRequest,
    udata: Option<&UData<'_>>,
) -> Result<MrCreated<MrHandle>> {
    if let Some(u) = udata {
        u.check_in_empty()?;
    }
    let dev = pd.device();
    let access = validate_reg_access(req.access, MR_CAPS).map_err(|e| errno(e.errno()))?;
    if access.contains(Access::ON_DEMAND) && req.start == 0 && req.length == u64::MAX {
        return reg_implicit_odp(pd, req, access, odp_account(pd, udata)?);
    }
    let geometry = MttGeometry::for_user(req.start, req.iova, req.length, PAGE_SHIFT)
        .map_err(|e| errno(e.errno()))?;
    if access.contains(Access::ON_DEMAND) {
        return reg_odp(pd, req, access, geometry, odp_account(pd, udata)?);
    }
    insert(pd, access, || {
        // Pinning counts against RLIMIT_MEMLOCK (ib_umem_get), failing with ENOMEM past it.
        let pages = PinnedPages::pin(dev, req.start, req.length, umem_access(req.access))?;
        if pages.page_count() != geometry.npages() {
            return Err(EFAULT);
        }
        Ok(MrMem::User { geometry, pages })
    })
}

/// The access flags a umem is pinned or mapped with: the consumer's, without the huge page
/// hint (every MR is mapped at the base page size).
fn umem_access(access: u32) -> u32 {
    access & !Access::HUGETLB.bits()
}

/// What the registration checks allow: ODP (explicit MRs only), FLUSH.
const MR_CAPS: MrCaps = MrCaps {
    on_demand_paging: true,
    flush_global: true,
    flush_persistent: true,
};

/// What an ODP MR of the process of `udata` is charged to: its process's budget and its
/// device's (`param::ODP_PROCESS_RAM_SHARE`, `param::ODP_DEVICE_RAM_SHARE`).
fn odp_account(pd: &Pd<Roxe>, udata: Option<&UData<'_>>) -> Result<OdpAccount> {
    let dev = pd.device();
    let uctx = udata.and_then(|u| u.ucontext(dev)).ok_or(EINVAL)?;
    Ok(OdpAccount::new(
        uctx.odp.clone(),
        dev.data().odp_budget.clone(),
    ))
}

/// An on-demand paging MR: registers the range with an MMU notifier instead of pinning it
/// (nothing counts against `RLIMIT_MEMLOCK`) and takes in the pages already mapped. The range
/// counts against `account` first (`ENOMEM` past it): the core's tables cover all of it.
fn reg_odp(
    pd: &Pd<Roxe>,
    req: &UserMrRequest,
    access: Access,
    geometry: MttGeometry,
    account: OdpAccount,
) -> Result<MrCreated<MrHandle>> {
    let dev = pd.device();
    // Without the huge page hint: `ib_umem_odp_get` would map the range in huge pages, and the
    // page table is kept at the base page size (`access` has the hint left out).
    let odp = OdpMem::register(dev, req.start, req.length, umem_access(req.access), account)?;
    if odp.page_count() != geometry.npages() {
        return Err(EFAULT);
    }
    insert(pd, access, || Ok(MrMem::Odp { geometry, odp }))
}

/// An implicit ODP MR (`ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND)`): the whole
/// address space of the process, addressed by virtual address (IOVA 0 is address 0). Its pages
/// are faulted in as for an explicit ODP MR, in 2 MiB children made on first touch.
fn reg_implicit_odp(
    pd: &Pd<Roxe>,
    req: &UserMrRequest,
    access: Access,
    account: OdpAccount,
) -> Result<MrCreated<MrHandle>> {
    if req.iova != 0 {
        // The IOVA of an implicit MR is the address itself (mlx5 refuses any other, too).
        return Err(EINVAL);
    }
    let geometry = MttGeometry::new(0, u64::MAX, PAGE_SHIFT, 0).map_err(|e| errno(e.errno()))?;
    let odp = OdpMem::register_implicit(pd.device(), umem_access(req.access), account)?;
    if odp.page_count() != geometry.npages() {
        return Err(EFAULT);
    }
    insert(pd, access, || Ok(MrMem::Odp { geometry, odp }))
}

/// A DMA MR for a kernel consumer (`get_dma_mr`): kernel virtual addresses, no pinning.
pub(crate) fn get_dma(pd: &Pd<Roxe>, access: u32, mem: KernelMem) -> Result<MrCreated<MrHandle>> {
    let access = Access::from_bits(access);
    insert(pd, access, || Ok(MrMem::Dma(mem)))
}

/// A fast-registration MR (`ib_alloc_mr`) for up to `max_pages` pages. It starts Free, with
/// no access rights and no mapping.
pub(crate) fn alloc_fast(
    pd: &Pd<Roxe>,
    max_pages: u32,
    grant: FastRegGrant,
) -> Result<MrCreated<MrHandle>> {
    if max_pages == 0 || max_pages > crate::param::MAX_FMR_PAGE_LIST_LEN {
        return Err(EINVAL);
    }
    let mem = grant.into_mem(max_pages as usize)?;
    insert(pd, Access::from_bits(0), || Ok(MrMem::Fast(mem)))
}

/// Takes the page list of `ib_map_mr_sg` for the next REG_MR. Context: any (consumers may map
/// in atomic context); nothing allocates.
pub(crate) fn map_sg(mr: &Mr<Roxe>, list: &FastRegPages<'_>) -> Result {
    let m = mr.device().data().mrs.get(mr.data().index).ok_or(EINVAL)?;
    let MrMem::Fast(fast) = &m.mem else {
        return Err(EINVAL);
    };
    let page_mask = 1u64.checked_shl(list.page_shift()).ok_or(EINVAL)? - 1;
    let first = *list.pages().first().ok_or(EINVAL)?;
    // The first byte sits in the first page at the IOVA's in-page offset (`ib_sg_to_pages`
    // takes the IOVA from the first entry's address).
    let geometry = MttGeometry::new(
        list.iova(),
        list.length(),
        list.page_shift(),
        list.iova() & page_mask,
    )
    .map_err(|_| EINVAL)?;
    if geometry.npages() != list.pages().len() || first & page_mask != 0 {
        return Err(EINVAL);
    }
    fast.stage(list)
}

/// Executes a REG_MR work request of a kernel QP of PD `pd_id` (IBA 10.7.2.2 Fast Register):
/// the MR must be a Free fast-registration MR of that PD, and `wr.key` keeps its index. On
/// success the MR maps the pages `map_mr_sg` set up at `wr.iova`, for `wr.length` bytes (the
/// work request gives the MR its virtual address and length; the mapping gives the pages and
/// where the first byte lies in the first of them), with `wr.key` and `wr.access`.
pub(crate) fn reg_fast(dev: &Device<Roxe>, pd_id: u64, wr: &RegMrWr) -> Result<(), MemError> {
    let m = dev.data().mrs.get(wr.mr_index).ok_or(MemError::BadKey)?;
    let MrMem::Fast(fast) = &m.mem else {
        return Err(MemError::BadKey);
    };
    if m.pd_id() != pd_id {
        return Err(MemError::WrongPd);
    }
    if MemKey::from_raw(wr.key).index() != wr.mr_index {
        return Err(MemError::BadKey);
    }
    // The new key and rights are stored under the live lock, with the mapping: a lookup that
    // sees the MR valid sees them, and the old key never reaches the new registration.
    fast.register(wr.iova, wr.length, || {
        m.key.store(wr.key, Relaxed);
        m.access.store(Access::from_bits(wr.access).bits(), Relaxed);
    })
    .map_err(|e| match e {
        FastRegError::Range => MemError::Range,
        // Fast Register needs the MR Free (IBA 10.7.2.2): the consumer invalidates first.
        FastRegError::NotFree => MemError::Access,
        FastRegError::Revoked => MemError::BadKey,
    })
}

/// Invalidates fast-registration MR `key` (LOCAL_INV, or a SEND with Invalidate received by a
/// QP of PD `pd_id`, IBA 10.6.7.3 and 10.7.2.1): it returns to Free.
pub(crate) fn invalidate_fast(dev: &Device<Roxe>, pd_id: u64, key: u32) -> Result<(), MemError> {
    let mk = MemKey::from_raw(key);
    let m = dev.data().mrs.get(mk.index()).ok_or(MemError::BadKey)?;
    let MrMem::Fast(fast) = &m.mem else {
        return Err(MemError::BadKey);
    };
    if m.key().raw() != key || m.pd_id() != pd_id {
        return Err(MemError::BadKey);
    }
    if fast.invalidate() {
        Ok(())
    } else {
        Err(MemError::BadKey)
    }
}

/// Changes an MR's PD and/or access rights in place, as rxe does; a new address range
/// (`rereg::TRANS`) is `EOPNOTSUPP`, after which rdma-core falls back to deregistering and
/// registering again.
pub(crate) fn rereg(
    mr: &Mr<Roxe>,
    flags: u32,
    req: &UserMrRequest,
    new_pd: Option<&Pd<Roxe>>,
    udata: Option<&UData<'_>>,
) -> Result {
    if let Some(u) = udata {
        u.check_in_empty()?;
    }
    if flags & rereg::TRANS != 0 || flags & !(rereg::PD | rereg::ACCESS) != 0 {
        return Err(errno::eopnotsupp());
    }
    let m = mr.device().data().mrs.get(mr.data().index).ok_or(EINVAL)?;
    // A window bound to the MR was checked against its PD and rights: a rereg would leave it
    // reaching memory of another PD or with rights the MR no longer grants.
    m.begin_rereg()?;
    let applied = apply(&m, flags, req, new_pd);
    m.end_rereg();
    applied
}

fn apply(m: &RoxeMr, flags: u32, req: &UserMrRequest, new_pd: Option<&Pd<Roxe>>) -> Result {
    if flags & rereg::ACCESS != 0 {
        let access = validate_reg_access(req.access, MR_CAPS).map_err(|e| errno(e.errno()))?;
        match &m.mem {
            MrMem::User { pages, .. } => pages.check_rereg(flags, req.access)?,
            // The umem was registered with its access (writable or not) and its ODP mode; a
            // change of either needs a new registration, which rdma-core then falls back to.
            MrMem::Odp { .. } => return Err(errno::eopnotsupp()),
            _ => {}
        }
        m.access.store(access.bits(), Relaxed);
    }
    if let Some(pd) = new_pd {
        m.pd_id.store(pd.data().id, Relaxed);
    }
    Ok(())
}

/// Finds the MR `key` names for an access of `need` rights by a QP of PD `pd_id`.
pub(crate) fn lookup_mr(
    dev: &Device<Roxe>,
    key: u32,
    pd_id: u64,
    need: Access,
) -> Result<PoolRef<RoxeMr>, MemError> {
    let key = MemKey::from_raw(key);
    if key.is_mw() {
        // A window's key is not an MR's: windows are resolved by `remote_target`.
        return Err(MemError::BadKey);
    }
    let mr = dev.data().mrs.get(key.index()).ok_or(MemError::BadKey)?;
    // Validity first: a fast-registration MR's key changes under its live lock with its
    // mapping (`reg_fast`), so the key read after the lock is that registration's.
    if !mr.is_valid() || mr.key().raw() != key.raw() {
        return Err(MemError::BadKey);
    }
    if mr.pd_id() != pd_id {
        return Err(MemError::WrongPd);
    }
    if !permits(mr.access(), need) {
        return Err(MemError::Access);
    }
    Ok(mr)
}

/// Refuses to deregister an MR that memory windows are bound to (`EBUSY`); otherwise marks it
/// so that no window binds to it any more.
pub(crate) fn prepare_dereg(dev: &Device<Roxe>, mr: &MrHandle) -> Result {
    match dev.data().mrs.get(mr.index) {
        Some(m) => m.begin_dereg(),
        None => Ok(()),
    }
}

pub(crate) fn dereg(dev: &Device<Roxe>, mr: MrHandle) {
    let kernel_mr = dev
        .data()
        .mrs
        .get(mr.index)
        .filter(|m| matches!(m.mem, MrMem::Fast(_) | MrMem::Dma(_)));
    if let Some(m) = kernel_mr {
        // A kernel consumer's MR frees nothing that sleeps: the pool's reference goes after
        // the grace period, without waiting for it here. ULPs deregister MRs by the pool
        // (nvme-rdma: one fast-registration MR per request slot of each queue) when they
        // disconnect, and a grace period per MR made an NVMe-oF disconnect take seconds: too
        // slow for a reconnect within multipath's delayed removal (blktests nvme/068).
        dev.data().mrs.remove_deferred(mr.index);
        // But a responder that found the key before the removal may still be copying into the
        // MR's pages, which the consumer frees once this returns. A fast-registration MR's
        // copies run under its live list's lock and need the MR valid: revoking takes the lock,
        // which waits for a running one, and the Free state it leaves refuses the rest (IBA
        // 10.6.3.6), without a grace period. A DMA MR's copies run under RCU: revoking waits
        // for them.
        match &m.mem {
            MrMem::Fast(fast) => fast.revoke(),
            MrMem::Dma(mem) => mem.revoke(),
            _ => {}
        }
        return;
    }
    // After the grace period in `remove` no lookup holds the MR; dropping the last reference
    // here, in process context, unpins its pages.
    let m = dev.data().mrs.remove(mr.index);
    if let Some(MrMem::Odp { odp, .. }) = m.as_deref().map(|m| &m.mem) {
        // A late packet or a queued fault may still hold the MR, and would then drop the last
        // reference in softirq, where the umem cannot be released (it sleeps): release it now.
        // Accesses through such a stale reference fail from here on.
        odp.release();
    }
    drop(m);
}
