// SPDX-License-Identifier: GPL-2.0

//! Memory regions and memory windows. Counterpart of rxe's `rxe_mr.c` and `rxe_mw.c`.
//!
//! A user MR pins its pages at registration ([`PinnedPages`]) and keeps the MTT geometry that
//! maps its IOVA range onto them. A fast-registration MR (kernel consumers: `ib_alloc_mr`,
//! `ib_map_mr_sg`, then an `IB_WR_REG_MR` work request) holds a page list of kernel memory and
//! maps it only between a REG_MR and the next invalidation (IBA 10.6.3.6, 10.7.2). MRs and MWs live in the device's key pools, indexed by the key
//! index (`lkey >> 8`): MRs in the lower half of the index space, MWs in the upper, so a key
//! alone tells which one it names.

#![deny(unsafe_code)]

use crate::compat::errno;
use crate::compat::sync::SpinLockIrq;
use crate::rdma::{
    bh,
    device::Device,
    kverbs::KernelMem,
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
    sync::{
        atomic::{Atomic, Relaxed},
        SpinLock,
    },
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
    /// A fast-registration MR: pages of kernel memory, mapped while a REG_MR holds.
    Fast(Pin<KBox<FastMr>>),
    /// An on-demand paging MR (`IB_ACCESS_ON_DEMAND`): user memory that is not pinned, its
    /// pages faulted in by the process work (`odp::next_stage_job`) when the data path finds
    /// them missing (see `odp.rs`). An implicit one spans the whole address space: its geometry
    /// is `[0, U64_MAX)` and its page indices are page numbers of the address space.
    Odp { geometry: MttGeometry, odp: OdpMem },
}

/// A fast-registration MR's two page lists: the one `ib_map_mr_sg` sets up for the next REG_MR,
/// and the one the data path uses while the MR is valid. Two locks, because their contexts
/// differ: consumers may map in any context, even with interrupts off, while the data path
/// copies a packet's payload through the live list, which must not keep hard interrupts off.
#[pin_data]
pub(crate) struct FastMr {
    /// What the next REG_MR maps. IRQ-safe; held to copy a page list, never a payload.
    #[pin]
    staged: SpinLockIrq<FastPages>,
    /// What the MR maps now. A bottom-half lock (see [`FastMr::with_live`]); lock order: `live`,
    /// then `staged`.
    #[pin]
    live: SpinLock<FastPages>,
    /// Access to the kernel pages the lists name.
    pub(crate) mem: KernelMem,
}

/// A fast-registration MR's page list and the range it backs.
pub(crate) struct FastPages {
    /// Kernel virtual addresses of the pages `map_mr_sg` gave (virtual DMA), room reserved at
    /// allocation for the MR's `max_num_sg`.
    pub(crate) pages: KVec<u64>,
    /// Staged: the range the list backs, as `map_mr_sg` set it up. Live: while valid (after a
    /// REG_MR, until invalidated), the range the MR maps; `None` is the Free state, in which
    /// every access through its keys fails (IBA 10.6.3.6).
    pub(crate) range: Option<MttGeometry>,
}

impl FastMr {
    /// Runs `f` on the live page list with bottom halves off: the lock keeps an invalidation
    /// from ending while a copy through the list still runs. Process or softirq context,
    /// interrupts enabled (the data path: softirq, or `req::run`, which turns bottom halves
    /// off).
    pub(crate) fn with_live<R>(&self, f: impl FnOnce(&mut FastPages) -> R) -> R {
        let _bh = bh::disable();
        // A local, so that it drops before `_bh`: as a temporary of the tail expression the
        // guard would outlive it, and bottom halves would come back on (running pending
        // softirqs, which may take this lock) with the lock still held.
        let mut live = self.live.lock();
        f(&mut live)
    }
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
    /// deregistration has begun: a window may no longer attach then, and deregistration is
    /// refused while any is attached (a bound window keeps the MR reachable, IBA 10.6.7.2.4).
    windows: Atomic<u32>,
    pub(crate) mem: MrMem,
}

/// [`RoxeMr::windows`]: deregistration has begun.
const DEREGISTERED: u32 = 1 << 31;

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

    /// Counts a window binding to the MR. `false`: the MR is being deregistered.
    pub(crate) fn attach_window(&self) -> bool {
        let mut cur = self.windows.load(Relaxed);
        loop {
            if cur & DEREGISTERED != 0 || cur + 1 >= DEREGISTERED {
                return false;
            }
            match self.windows.cmpxchg(cur, cur + 1, Relaxed) {
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
    mem: KernelMem,
) -> Result<MrCreated<MrHandle>> {
    if max_pages == 0 || max_pages > crate::param::MAX_FMR_PAGE_LIST_LEN {
        return Err(EINVAL);
    }
    let n = max_pages as usize;
    let (staged, live) = (
        KVec::with_capacity(n, GFP_KERNEL)?,
        KVec::with_capacity(n, GFP_KERNEL)?,
    );
    let state = KBox::pin_init(
        pin_init!(FastMr {
            staged <- crate::compat::sync::new_spinlock_irq!(FastPages { pages: staged, range: None }, "roxe_fast_mr_staged"),
            live <- kernel::new_spinlock!(FastPages { pages: live, range: None }, "roxe_fast_mr"),
            mem,
        }),
        GFP_KERNEL,
    )?;
    insert(pd, Access::from_bits(0), || Ok(MrMem::Fast(state)))
}

/// Takes the page list of `ib_map_mr_sg` for the next REG_MR. Context: any (consumers may map
/// in atomic context); nothing allocates.
pub(crate) fn map_sg(mr: &Mr<Roxe>, list: &FastRegPages<'_>) -> Result {
    let m = mr.device().data().mrs.get(mr.data().index).ok_or(EINVAL)?;
    let MrMem::Fast(state) = &m.mem else {
        return Err(EINVAL);
    };
    let page_mask = 1u64.checked_shl(list.page_shift).ok_or(EINVAL)? - 1;
    let first = *list.pages.first().ok_or(EINVAL)?;
    // The first byte sits in the first page at the IOVA's in-page offset (`ib_sg_to_pages`
    // takes the IOVA from the first entry's address).
    let geometry = MttGeometry::new(
        list.iova,
        list.length,
        list.page_shift,
        list.iova & page_mask,
    )
    .map_err(|_| EINVAL)?;
    if geometry.npages() != list.pages.len() || first & page_mask != 0 {
        return Err(EINVAL);
    }
    let mut st = state.staged.lock();
    if list.pages.len() > st.pages.capacity() {
        return Err(EINVAL);
    }
    st.pages.clear();
    // Within the reserved capacity: never allocates.
    st.pages.extend_from_slice(list.pages, GFP_ATOMIC)?;
    st.range = Some(geometry);
    Ok(())
}

/// Executes a REG_MR work request of a kernel QP of PD `pd_id` (IBA 10.7.2.2 Fast Register):
/// the MR must be a Free fast-registration MR of that PD, and `wr.key` keeps its index. On
/// success the MR maps the pages `map_mr_sg` set up at `wr.iova`, for `wr.length` bytes, with
/// `wr.key` and `wr.access`.
pub(crate) fn reg_fast(dev: &Device<Roxe>, pd_id: u64, wr: &RegMrWr) -> Result<(), MemError> {
    let m = dev.data().mrs.get(wr.mr_index).ok_or(MemError::BadKey)?;
    let MrMem::Fast(state) = &m.mem else {
        return Err(MemError::BadKey);
    };
    if m.pd_id() != pd_id {
        return Err(MemError::WrongPd);
    }
    if MemKey::from_raw(wr.key).index() != wr.mr_index {
        return Err(MemError::BadKey);
    }
    state.with_live(|live| {
        {
            let staged = state.staged.lock();
            let Some(mapped) = staged.range else {
                return Err(MemError::Range);
            };
            if live.range.is_some() {
                // Fast Register needs the MR Free (IBA 10.7.2.2): the consumer invalidates first.
                return Err(MemError::Access);
            }
            // The work request gives the MR its virtual address and length (IBA 10.7.2.2); the
            // mapping gives the pages and where the first byte lies in the first of them. The
            // length may not reach past the mapped pages.
            let geometry = MttGeometry::new(
                wr.iova,
                wr.length,
                mapped.page_shift(),
                mapped.first_page_offset(),
            )
            .map_err(|_| MemError::Range)?;
            if geometry.npages() > staged.pages.len() {
                return Err(MemError::Range);
            }
            live.pages.clear();
            // The same reserved capacity as the staged list: never allocates.
            live.pages
                .extend_from_slice(&staged.pages, GFP_ATOMIC)
                .map_err(|_| MemError::Range)?;
            live.range = Some(geometry);
        }
        m.key.store(wr.key, Relaxed);
        m.access.store(Access::from_bits(wr.access).bits(), Relaxed);
        Ok(())
    })
}

/// Invalidates fast-registration MR `key` (LOCAL_INV, or a SEND with Invalidate received by a
/// QP of PD `pd_id`, IBA 10.6.7.3 and 10.7.2.1): it returns to Free.
pub(crate) fn invalidate_fast(dev: &Device<Roxe>, pd_id: u64, key: u32) -> Result<(), MemError> {
    let mk = MemKey::from_raw(key);
    let m = dev.data().mrs.get(mk.index()).ok_or(MemError::BadKey)?;
    let MrMem::Fast(state) = &m.mem else {
        return Err(MemError::BadKey);
    };
    if m.key().raw() != key || m.pd_id() != pd_id {
        return Err(MemError::BadKey);
    }
    state.with_live(|live| live.range.take().map(|_| ()).ok_or(MemError::BadKey))
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
    apply(&m, flags, req, new_pd)
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
    if mr.key().raw() != key.raw() || !mr.is_valid() {
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
        // copies run under its live list's lock and need the MR valid: taking the lock waits
        // for a running one, and the Free state it leaves refuses the rest (IBA 10.6.3.6),
        // without a grace period. A DMA MR's copies run under RCU: revoking waits for them.
        match &m.mem {
            MrMem::Fast(state) => state.with_live(|live| live.range = None),
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
