// SPDX-License-Identifier: GPL-2.0

//! Memory regions and memory windows. Counterpart of rxe's `rxe_mr.c` and `rxe_mw.c`.
//!
//! A user MR pins its pages at registration ([`PinnedPages`]) and keeps the MTT geometry that
//! maps its IOVA range onto them. MRs and MWs live in the device's key pools, indexed by the key
//! index (`lkey >> 8`): MRs in the lower half of the index space, MWs in the upper, so a key
//! alone tells which one it names.

#![deny(unsafe_code)]

use crate::{
    device::{errno, Roxe},
    mw::{MwState, RoxeMw},
    proto::mtt::{validate_reg_access, Access, MemKey, MrCaps, MttGeometry},
};
use crate::rdma::{
    device::Device,
    mr::{rereg, Mr, MrCreated, PinnedPages, UserMrRequest},
    object::UData,
    pd::Pd,
    pool::Alloc,
};
use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// Page shift of pinned user memory (the kernel's page size).
const PAGE_SHIFT: u32 = kernel::page::PAGE_SHIFT as u32;

/// The memory behind an MR.
pub(crate) enum MrMem {
    /// Pinned user pages and the MTT geometry that maps the IOVA range onto them.
    User { geometry: MttGeometry, pages: PinnedPages },
    /// All of kernel memory, addressed by kernel virtual address (a kernel consumer's DMA MR).
    Dma,
}

/// A registered memory region.
pub(crate) struct RoxeMr {
    /// The PD's identity: an access through a key of another PD is refused (IBA 10.6.3.2).
    /// Atomic: `rereg_user_mr` may move the MR to another PD in place.
    pd_id: Atomic<u64>,
    pub(crate) key: MemKey,
    /// `IB_ACCESS_*` rights; atomic for the same reason.
    access: Atomic<u32>,
    pub(crate) mem: MrMem,
}

impl RoxeMr {
    /// The PD the MR belongs to now.
    pub(crate) fn pd_id(&self) -> u64 {
        self.pd_id.load(Relaxed)
    }

    /// The MR's access rights now.
    pub(crate) fn access(&self) -> Access {
        Access::from_bits(self.access.load(Relaxed))
    }
}

/// The driver's handle of an MR: its key index in the pool.
pub(crate) struct MrHandle {
    index: u32,
}

pub(crate) fn reg_user(pd: &Pd<Roxe>, req: &UserMrRequest, udata: Option<&UData<'_>>) -> Result<MrCreated<MrHandle>> {
    if let Some(u) = udata {
        u.check_in_empty()?;
    }
    let dev = pd.device::<Roxe>();
    let caps = MrCaps { on_demand_paging: false, flush_global: true, flush_persistent: true };
    let access = validate_reg_access(req.access, caps).map_err(|e| errno(e.errno()))?;
    let geometry = MttGeometry::for_user(req.start, req.iova, req.length, PAGE_SHIFT).map_err(|e| errno(e.errno()))?;
    let slot = dev.data().mrs.reserve(MemKey::MR_INDEX_MIN, MemKey::MR_INDEX_MAX, Alloc::Kernel)?;
    let key = MemKey::new(slot.index(), dev.data().next_key_byte()).ok_or(EINVAL)?;
    // Pinning counts against RLIMIT_MEMLOCK (ib_umem_get), failing with ENOMEM past it.
    let pages = PinnedPages::pin(dev, req.start, req.length, req.access)?;
    if pages.page_count() != geometry.npages() {
        return Err(EFAULT);
    }
    let index = slot.index();
    slot.fill(try_init!(RoxeMr {
        pd_id: Atomic::new(pd.data().id),
        key,
        access: Atomic::new(access.bits()),
        mem: MrMem::User { geometry, pages },
    }? Error))?;
    Ok(MrCreated { data: MrHandle { index }, lkey: key.raw(), rkey: key.raw() })
}

/// A DMA MR for a kernel consumer (`get_dma_mr`): kernel virtual addresses, no pinning.
pub(crate) fn get_dma(pd: &Pd<Roxe>, access: u32) -> Result<MrCreated<MrHandle>> {
    let dev = pd.device::<Roxe>();
    let access = Access::from_bits(access);
    let slot = dev.data().mrs.reserve(MemKey::MR_INDEX_MIN, MemKey::MR_INDEX_MAX, Alloc::Kernel)?;
    let key = MemKey::new(slot.index(), dev.data().next_key_byte()).ok_or(EINVAL)?;
    let index = slot.index();
    slot.fill(try_init!(RoxeMr { pd_id: Atomic::new(pd.data().id), key, access: Atomic::new(access.bits()), mem: MrMem::Dma }? Error))?;
    Ok(MrCreated { data: MrHandle { index }, lkey: key.raw(), rkey: key.raw() })
}

/// Changes an MR's PD and/or access rights in place, as rxe does; a new address range
/// (`rereg::TRANS`) is `EOPNOTSUPP`, after which rdma-core falls back to deregistering and
/// registering again.
pub(crate) fn rereg(mr: &Mr<Roxe>, flags: u32, req: &UserMrRequest, new_pd: Option<&Pd<Roxe>>, udata: Option<&UData<'_>>) -> Result {
    if let Some(u) = udata {
        u.check_in_empty()?;
    }
    if flags & rereg::TRANS != 0 || flags & !(rereg::PD | rereg::ACCESS) != 0 {
        return Err(EOPNOTSUPP);
    }
    let m = mr.device().data().mrs.get(mr.data().index).ok_or(EINVAL)?;
    apply(&m, flags, req, new_pd)
}

fn apply(m: &RoxeMr, flags: u32, req: &UserMrRequest, new_pd: Option<&Pd<Roxe>>) -> Result {
    if flags & rereg::ACCESS != 0 {
        let caps = MrCaps { on_demand_paging: false, flush_global: true, flush_persistent: true };
        let access = validate_reg_access(req.access, caps).map_err(|e| errno(e.errno()))?;
        if let MrMem::User { pages, .. } = &m.mem {
            pages.check_rereg(flags, req.access)?;
        }
        m.access.store(access.bits(), Relaxed);
    }
    if let Some(pd) = new_pd {
        m.pd_id.store(pd.data().id, Relaxed);
    }
    Ok(())
}

pub(crate) fn dereg(dev: &Device<Roxe>, mr: MrHandle) {
    // After the grace period in `remove` no lookup holds the MR; dropping the last reference
    // here, in process context, unpins its pages.
    drop(dev.data().mrs.remove(mr.index));
}

/// The driver's handle of an MW: its key index in the pool.
pub(crate) struct MwHandle {
    index: u32,
}

pub(crate) fn alloc_mw(pd: &Pd<Roxe>, type2: bool, udata: Option<&UData<'_>>) -> Result<(MwHandle, u32)> {
    if let Some(u) = udata {
        u.check_in_empty()?;
    }
    let dev = pd.device::<Roxe>();
    let slot = dev.data().mws.reserve(MemKey::MW_INDEX_MIN, MemKey::MW_INDEX_MAX, Alloc::Kernel)?;
    let key = MemKey::new(slot.index(), dev.data().next_key_byte()).ok_or(EINVAL)?;
    let index = slot.index();
    slot.fill(try_pin_init!(RoxeMw {
        pd_id: pd.data().id,
        type2,
        state <- kernel::new_spinlock_irq!(MwState { key, binding: None }, "roxe_mw"),
    }? Error))?;
    Ok((MwHandle { index }, key.raw()))
}

pub(crate) fn dealloc_mw(dev: &Device<Roxe>, mw: MwHandle) {
    drop(dev.data().mws.remove(mw.index));
}
