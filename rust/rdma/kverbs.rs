// SPDX-License-Identifier: GPL-2.0

//! The verbs of kernel consumers (the MAD layer and its GSI QP, the connection manager, ULPs):
//! work requests posted by function call instead of through mapped rings, completions polled
//! into `struct ib_wc`, and DMA MRs over kernel memory.
//!
//! A software HCA uses virtual DMA (`ib_register_device` with no DMA device), so the addresses
//! kernel consumers put in their SGEs are kernel virtual addresses of memory they own.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    ah::Ah,
    bh::BhLock,
    bindings,
    device::DriverTypes,
    mr::{FastRegPages, Mr},
    qp::QpNotifier,
    revocable::RcuRevocable,
};
use crate::compat::sync::SpinLockIrq;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{ffi, prelude::*, sync::Arc};

/// Most SGEs a kernel work request may carry here (the device's `max_send_sge`).
pub const MAX_SGE: usize = 32;

/// A scatter/gather entry of a kernel work request: a kernel virtual address.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelSge {
    /// Kernel virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key (usually the PD's `local_dma_lkey`).
    pub lkey: u32,
}

/// The UD part of a kernel send work request.
pub struct KernelUd<'a, T: DriverTypes> {
    /// The destination's address handle.
    pub ah: &'a Ah<T>,
    /// Destination QP.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
}

/// A kernel consumer's send work request, decoded from `struct ib_send_wr` and its container.
pub struct KernelSendWr<'a, T: DriverTypes> {
    /// The consumer's id.
    pub wr_id: u64,
    /// `enum ib_wr_opcode` (equal to the user ABI's for the operations both have).
    pub opcode: u32,
    /// `IB_SEND_*` flags.
    pub send_flags: u32,
    /// Immediate data (wire bytes as a native u32) or the rkey to invalidate.
    pub ex: u32,
    /// RDMA and atomics: remote address and key.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Atomics: compare (CmpSwap) or addend (FetchAdd).
    pub compare_add: u64,
    /// Atomics: swap value.
    pub swap: u64,
    /// UD and GSI: the destination.
    pub ud: Option<KernelUd<'a, T>>,
    /// REG_MR: the fast registration.
    pub reg: Option<KernelRegWr<'a, T>>,
    /// The SGEs.
    pub sges: &'a [KernelSge],
}

/// The fast registration of a REG_MR work request (`struct ib_reg_wr`).
pub struct KernelRegWr<'a, T: DriverTypes> {
    /// The MR, allocated by `alloc_mr` and mapped by `map_mr_sg`.
    pub mr: &'a Mr<T>,
    /// The key the MR gets (`ib_update_fast_reg_key` chose its key byte).
    pub key: u32,
    /// `IB_ACCESS_*` rights the MR gets.
    pub access: u32,
    /// The MR's IOVA when the work request was posted: `ib_map_mr_sg` sets it to the first
    /// byte's address, and a consumer may change it before posting (NFS's client puts the RPC's
    /// XID in its upper 32 bits), so the registration takes it from here, not from the mapping.
    pub iova: u64,
    /// The MR's length when the work request was posted.
    pub length: u64,
}

/// `IB_WR_REG_MR`: kernel-only opcode of a fast registration.
pub const WR_REG_MR: u32 = bindings::ib_wr_opcode_IB_WR_REG_MR;

/// A kernel consumer's receive work request.
pub struct KernelRecvWr<'a> {
    /// The consumer's id.
    pub wr_id: u64,
    /// The SGEs.
    pub sges: &'a [KernelSge],
}

/// A completion for a kernel consumer (`struct ib_wc`).
#[derive(Default)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// `enum ib_wc_status`.
    pub status: u32,
    /// `enum ib_wc_opcode`.
    pub opcode: u32,
    /// Bytes received.
    pub byte_len: u32,
    /// Immediate data or invalidated rkey, raw.
    pub ex: u32,
    /// The QP the work request belonged to.
    pub qp: Option<Arc<QpNotifier>>,
    /// UD: source QP.
    pub src_qp: u32,
    /// `IB_WC_*` flags.
    pub wc_flags: u32,
    /// P_Key index.
    pub pkey_index: u16,
    /// UD receives over RoCEv2: IPv4 or IPv6 (`enum rdma_network_type`), 0 if unknown.
    pub network_hdr_type: u8,
}

/// `enum rdma_network_type` of RoCEv2 over IPv4.
pub const NETWORK_IPV4: u8 = bindings::rdma_network_type_RDMA_NETWORK_IPV4 as u8;
/// `enum rdma_network_type` of RoCEv2 over IPv6.
pub const NETWORK_IPV6: u8 = bindings::rdma_network_type_RDMA_NETWORK_IPV6 as u8;
/// `IB_WC_WITH_NETWORK_HDR_TYPE`.
pub const WC_WITH_NETWORK_HDR_TYPE: u32 = bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;

/// Access to kernel virtual memory through a DMA MR (`get_dma_mr`), which only kernel code can
/// create. With virtual DMA a kernel consumer's SGEs (and, with the PD's unsafe global R_Key,
/// remote requests) name buffers by kernel virtual address, and every address a virtual DMA
/// mapping gives (`ib_dma_map_single`, `ib_dma_virt_map_sg`) lies in the kernel's direct map of
/// RAM: that is the MR's range. Each copy checks that its bytes lie there, so no address can
/// reach a user space address, a vmalloc or module mapping or an unmapped hole. The check is a
/// bound, not a proof of ownership: the direct map aliases all of RAM (user pages included),
/// and pages taken out of it (secretmem, debug_pagealloc) pass it and then fault. Within it, a
/// DMA MR grants what the consumer chose to grant (kernel consumers are trusted as any kernel
/// code is, and a DMA MR with remote rights exists only on a PD the consumer made with
/// `IB_PD_UNSAFE_GLOBAL_RKEY`).
///
/// The access ends with [`KernelMem::revoke`], which the driver calls when the MR is
/// deregistered: a copy that began before it has ended when it returns, and every later one is
/// refused, so that `ib_dereg_mr` returns only when nothing can still touch the pages, which the
/// consumer may then free.
///
/// # Invariants
///
/// Only created by this module's `get_dma_mr` op, for a DMA MR of a kernel consumer; a driver
/// cannot make one. Copies run only inside `live`'s read side, and only on ranges that
/// `roxe_helper_virt_range_valid` found in the direct map.
pub struct KernelMem {
    live: RcuRevocable<()>,
}

/// Why a copy through a kernel consumer's MR was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelMemError {
    /// The MR was deregistered (its access revoked), or a fast-registration MR is Free.
    Revoked,
    /// The bytes lie outside what the MR maps.
    Range,
}

impl KernelMem {
    /// The access that comes with a DMA MR being created for a kernel consumer.
    pub(in crate::rdma) fn new() -> Self {
        // INVARIANT: Called only by the op that creates kernel consumers' DMA MRs.
        KernelMem {
            live: RcuRevocable::new(()),
        }
    }

    /// Copies `dst.len()` bytes of kernel memory at `va` into `dst`. Any context; interrupts
    /// stay as they are (the copy runs under RCU).
    pub fn read(&self, va: u64, dst: &mut [u8]) -> Result<(), KernelMemError> {
        self.live
            .try_access_with(|()| {
                check_direct_map(va, dst.len())?;
                // SAFETY: By the type invariant the MR is a kernel consumer's DMA MR, not yet
                // deregistered (`revoke` waits for this read side), and `va..va + len` was just
                // found in the direct map of RAM, the memory such an MR names.
                unsafe { copy_from_kernel(dst, va) };
                Ok(())
            })
            .unwrap_or(Err(KernelMemError::Revoked))
    }

    /// Copies `src` into kernel memory at `va`. Any context.
    pub fn write(&self, va: u64, src: &[u8]) -> Result<(), KernelMemError> {
        self.live
            .try_access_with(|()| {
                check_direct_map(va, src.len())?;
                // SAFETY: As in `read`: memory of the direct map, named through a DMA MR of a
                // kernel consumer that is not yet deregistered.
                unsafe { copy_to_kernel(va, src) };
                Ok(())
            })
            .unwrap_or(Err(KernelMemError::Revoked))
    }

    /// Ends the access: waits until no copy through it runs (a grace period), and refuses every
    /// later one. Process context; sleeps.
    pub fn revoke(&self) {
        self.live.revoke();
    }
}

/// Copies `dst.len()` bytes of kernel memory at `va` into `dst`.
///
/// # Safety
///
/// `va..va + dst.len()` is kernel memory valid for reads for the duration of the call, which
/// nothing writes meanwhile and which does not overlap `dst`.
unsafe fn copy_from_kernel(dst: &mut [u8], va: u64) {
    // SAFETY: `dst` is valid for writes of its length; the caller vouches for the source.
    unsafe {
        bindings::roxe_helper_copy(
            dst.as_mut_ptr().cast(),
            va as usize as *const ffi::c_void,
            dst.len(),
        )
    };
}

/// Copies `src` into kernel memory at `va`.
///
/// # Safety
///
/// `va..va + src.len()` is kernel memory valid for writes for the duration of the call, which
/// no Rust reference covers and which does not overlap `src`.
unsafe fn copy_to_kernel(va: u64, src: &[u8]) {
    // SAFETY: `src` is valid for reads of its length; the caller vouches for the destination.
    unsafe {
        bindings::roxe_helper_copy(
            va as usize as *mut ffi::c_void,
            src.as_ptr().cast(),
            src.len(),
        )
    };
}

/// Whether `va..va + len` lies in the kernel's direct map of RAM, a page at a time.
fn check_direct_map(va: u64, len: usize) -> Result<(), KernelMemError> {
    // SAFETY: The helper only computes on the address; it dereferences nothing.
    if unsafe { bindings::roxe_helper_virt_range_valid(va, len) } {
        Ok(())
    } else {
        Err(KernelMemError::Range)
    }
}

/// Where a valid fast-registration MR's bytes lie (IBA 10.7.2.2): `[iova, iova + length)`,
/// starting `first_page_offset` bytes into the first page of its list.
#[derive(Clone, Copy, Debug)]
pub struct FastRegMap {
    /// The first byte's IOVA.
    pub iova: u64,
    /// Bytes mapped.
    pub length: u64,
    /// log2 of the page size.
    pub page_shift: u32,
    /// Where the first byte lies in the first page.
    pub first_page_offset: u64,
}

/// Why a fast registration was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastRegError {
    /// No page list was mapped, or the range reaches past the mapped pages.
    Range,
    /// The MR is valid: Fast Register needs it Free (IBA 10.7.2.2).
    NotFree,
    /// The MR was deregistered.
    Revoked,
}

/// Access to kernel memory through a fast-registration MR (`ib_alloc_mr`): the pages the
/// consumer's last `ib_map_mr_sg` gave ("staged"), and, while a REG_MR holds (the Valid state,
/// IBA 10.7.2), the pages and range the MR maps ("live"). Copies go only to the live pages, at
/// the offsets the live range gives, and run under the live list's lock, which an invalidation
/// and a deregistration take: when either returns, no copy runs and none can start, so the
/// consumer may reuse the pages.
///
/// Two locks, because their contexts differ: consumers may map in any context, even with
/// interrupts off, while the data path copies a packet's payload through the live list, which
/// must not keep hard interrupts off. Lock order: `live`, then `staged`.
///
/// # Invariants
///
/// Only created through the grant of this module's `alloc_mr` op ([`FastRegGrant`]), for a
/// fast-registration MR of a kernel consumer. Every address in either list came from the core's `ib_sg_to_pages` for this MR (a kernel
/// virtual address of a block of `1 << page_shift` bytes the consumer owns, [`FastRegPages`]).
/// `live.map` is `Some` only while the MR is valid, and then `live.pages` holds every page its
/// range touches.
#[pin_data]
pub struct FastRegMem {
    /// The identity of the grant it was made with, which its MR's page lists carry.
    id: u64,
    #[pin]
    staged: SpinLockIrq<Staged>,
    #[pin]
    live: BhLock<Live>,
}

struct Staged {
    pages: KVec<u64>,
    /// The last mapping's IOVA and page size; `None` until the first.
    mapped: Option<(u64, u32)>,
}

struct Live {
    pages: KVec<u64>,
    map: Option<FastRegMap>,
    revoked: bool,
}

/// What the `alloc_mr` op gives the driver to make its fast-registration MR's
/// [`FastRegMem`] with, once it has accepted the MR's size.
///
/// # Invariants
///
/// Only created by this module's `alloc_mr` op, with an identity no other grant has; the op
/// gives the MR the same identity, and the page lists its `map_mr_sg` makes carry it.
pub struct FastRegGrant {
    id: u64,
}

/// The last identity a [`FastRegGrant`] took.
static LAST_GRANT_ID: AtomicU64 = AtomicU64::new(0);

impl FastRegGrant {
    /// The grant of one `alloc_mr` call.
    pub(in crate::rdma) fn new() -> Self {
        // INVARIANT: Called only by the `alloc_mr` op; identities count up from 1 and a u64
        // does not wrap.
        FastRegGrant {
            id: LAST_GRANT_ID.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }

    /// The identity the op gives the MR (`Mr::fast_reg_id`).
    pub(in crate::rdma) fn id(&self) -> u64 {
        self.id
    }

    /// The MR's access, with room for `max_pages` pages in each list reserved now: mapping and
    /// registering, which consumers may do in atomic context, never allocate. Process context.
    pub fn into_mem(self, max_pages: usize) -> Result<Pin<KBox<FastRegMem>>> {
        FastRegMem::new(self.id, max_pages)
    }
}

impl FastRegMem {
    fn new(id: u64, max_pages: usize) -> Result<Pin<KBox<Self>>> {
        let (staged, live) = (
            KVec::with_capacity(max_pages, GFP_KERNEL)?,
            KVec::with_capacity(max_pages, GFP_KERNEL)?,
        );
        // INVARIANT: Both lists empty, the MR Free; called only through the `alloc_mr` op's
        // grant.
        KBox::pin_init(
            pin_init!(FastRegMem {
                id,
                staged <- crate::compat::sync::new_spinlock_irq!(
                    Staged { pages: staged, mapped: None },
                    "rdma_fast_mr_staged"
                ),
                live <- super::bh::new_bh_lock!(
                    Live { pages: live, map: None, revoked: false },
                    "rdma_fast_mr"
                ),
            }),
            GFP_KERNEL,
        )
    }

    /// Takes the page list of `ib_map_mr_sg` for the next REG_MR (`EINVAL` past the room
    /// reserved, or for the list of another MR). Any context; nothing allocates.
    pub fn stage(&self, list: &FastRegPages<'_>) -> Result {
        if list.owner != self.id {
            return Err(EINVAL);
        }
        let mut st = self.staged.lock();
        if list.pages.len() > st.pages.capacity() {
            return Err(EINVAL);
        }
        st.pages.clear();
        // INVARIANT: The pages come from `ib_sg_to_pages` for this MR (`FastRegPages` is made
        // only by the `map_mr_sg` op, with its MR's identity, checked above). Within the
        // reserved capacity: never allocates.
        st.pages.extend_from_slice(list.pages, GFP_ATOMIC)?;
        st.mapped = Some((list.iova, list.page_shift));
        Ok(())
    }

    /// Makes the MR valid (a REG_MR work request, IBA 10.7.2.2): it maps `length` bytes at
    /// `iova` over the staged pages, starting where the staged mapping's first byte lies in its
    /// first page. `publish` runs once the mapping is set, before the live lock is released: the
    /// caller gives the MR its new key and rights there, so that whoever sees the mapping (under
    /// the lock) sees them too, never the new mapping under the old key. Softirq or process
    /// context, interrupts on.
    pub fn register(
        &self,
        iova: u64,
        length: u64,
        publish: impl FnOnce(),
    ) -> Result<(), FastRegError> {
        let mut live = self.live.lock();
        if live.revoked {
            return Err(FastRegError::Revoked);
        }
        if live.map.is_some() {
            return Err(FastRegError::NotFree);
        }
        let staged = self.staged.lock();
        let (mapped_iova, page_shift) = staged.mapped.ok_or(FastRegError::Range)?;
        let page_mask = 1u64
            .checked_shl(page_shift)
            .and_then(|size| size.checked_sub(1))
            .ok_or(FastRegError::Range)?;
        let first_page_offset = mapped_iova & page_mask;
        iova.checked_add(length).ok_or(FastRegError::Range)?;
        let npages = first_page_offset
            .checked_add(length)
            .map(|end| end.div_ceil(page_mask + 1))
            .ok_or(FastRegError::Range)?;
        if npages > staged.pages.len() as u64 {
            return Err(FastRegError::Range);
        }
        live.pages.clear();
        // The same reserved capacity as the staged list: never allocates.
        live.pages
            .extend_from_slice(&staged.pages, GFP_ATOMIC)
            .map_err(|_| FastRegError::Range)?;
        let map = FastRegMap {
            iova,
            length,
            page_shift,
            first_page_offset,
        };
        // INVARIANT: `iova + length` does not overflow and the live list holds every page of
        // the range (`npages` of them, counted from the first page's offset).
        live.map = Some(map);
        publish();
        Ok(())
    }

    /// Returns the MR to Free (LOCAL_INV, or a SEND with Invalidate): `false` if it was Free.
    /// A copy through it has ended when this returns, and none can start. Softirq or process
    /// context, interrupts on.
    pub fn invalidate(&self) -> bool {
        self.live.lock().map.take().is_some()
    }

    /// What the MR maps now; `None` when it is Free.
    pub fn mapping(&self) -> Option<FastRegMap> {
        self.live.lock().map
    }

    /// Ends the access for good (deregistration): as [`FastRegMem::invalidate`], and no later
    /// REG_MR makes it valid. Process context.
    pub fn revoke(&self) {
        let mut live = self.live.lock();
        live.map = None;
        live.revoked = true;
    }

    /// Copies `dst.len()` bytes at IOVA `va` of the MR into `dst`. Softirq or process context,
    /// interrupts on (the copy holds a bottom-half lock).
    pub fn read(&self, va: u64, dst: &mut [u8]) -> Result<(), KernelMemError> {
        let len = dst.len();
        self.copy(va, len, |kva, r| {
            let part = dst.get_mut(r).ok_or(KernelMemError::Range)?;
            // SAFETY: `kva..kva + part.len()` lies inside one page of the live list (`copy`),
            // kernel memory the consumer gave this MR and does not reuse while the MR is valid,
            // which it stays while the live lock is held.
            unsafe { copy_from_kernel(part, kva) };
            Ok(())
        })
    }

    /// Copies `src` into the MR at IOVA `va`. Softirq or process context, interrupts on.
    pub fn write(&self, va: u64, src: &[u8]) -> Result<(), KernelMemError> {
        self.copy(va, src.len(), |kva, r| {
            let part = src.get(r).ok_or(KernelMemError::Range)?;
            // SAFETY: As in `read`: inside one live page of a valid MR, under the live lock.
            unsafe { copy_to_kernel(kva, part) };
            Ok(())
        })
    }

    /// Calls `f(kernel address, range of the buffer)` for each piece of `[va, va + len)` that
    /// stays inside one page, under the live lock, after checking the range against the MR's.
    /// At most `len / page size + 1` pieces: a packet's payload.
    fn copy(
        &self,
        va: u64,
        len: usize,
        mut f: impl FnMut(u64, core::ops::Range<usize>) -> Result<(), KernelMemError>,
    ) -> Result<(), KernelMemError> {
        let live = self.live.lock();
        let map = live.map.ok_or(KernelMemError::Revoked)?;
        let end = va.checked_add(len as u64).ok_or(KernelMemError::Range)?;
        // No overflow: `register` checked `iova + length`.
        if va < map.iova || end > map.iova + map.length {
            return Err(KernelMemError::Range);
        }
        let page_size = 1u64 << map.page_shift;
        let mut offset = va - map.iova + map.first_page_offset;
        let mut done = 0usize;
        while done < len {
            let in_page = offset & (page_size - 1);
            let n = (page_size - in_page).min((len - done) as u64) as usize;
            let page = *live
                .pages
                .get((offset >> map.page_shift) as usize)
                .ok_or(KernelMemError::Range)?;
            let kva = page.checked_add(in_page).ok_or(KernelMemError::Range)?;
            f(kva, done..done + n)?;
            done += n;
            offset += n as u64;
        }
        Ok(())
    }
}
