// SPDX-License-Identifier: GPL-2.0

//! Moving bytes between packets and registered memory. Counterpart of rxe's `copy_data` and
//! `lookup_mr` (`rxe_mr.c`).
//!
//! Every access names its memory by key and checks, in the order IBA 10.6.3 gives: the key
//! names a live MR whose key byte matches, the MR belongs to the QP's PD, it grants the access,
//! and the range lies inside it. Only then are pages touched.

#![deny(unsafe_code)]

pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod odp;

use crate::rdma::{
    device::Device,
    kverbs::{FastRegMap, KernelMemError},
    mr::PinnedPages,
    odp::{OdpMem, OdpMiss, OdpPages},
    pool::PoolRef,
};
use crate::{
    hca::Roxe,
    mem::mr::{lookup_mr, MemError, MrMem, RoxeMr},
    proto::mtt::{Chunks, MttGeometry},
    proto::{
        mtt::{Access, MemKey},
        mtu::Pmtu,
        resp::{KeyBounds, KeyTarget},
        wqe::{sge_at, Sge},
    },
};
use kernel::{page::PAGE_SIZE, prelude::*};

/// Maps a refused copy through a kernel consumer's MR to the data path's error.
fn kernel_mem_err(e: KernelMemError) -> MemError {
    match e {
        // Deregistered, or a fast-registration MR invalidated under the access: the key is gone.
        KernelMemError::Revoked => MemError::BadKey,
        KernelMemError::Range => MemError::Range,
    }
}

/// The MTT geometry of a valid fast-registration MR's mapping.
fn fast_geometry(map: &FastRegMap) -> Result<MttGeometry, MemError> {
    MttGeometry::new(map.iova, map.length, map.page_shift, map.first_page_offset)
        .map_err(|_| MemError::Range)
}

/// Maps a miss of ODP memory to the data path's error.
fn odp_err(m: OdpMiss) -> MemError {
    match m {
        OdpMiss::Missing => MemError::NotPresent,
        // The memory is not mapped with the rights the MR needs: an access error, as for
        // pinned memory that could not be pinned.
        OdpMiss::Failed | OdpMiss::Range => MemError::Range,
        // Deregistered under a late packet: the key is gone.
        OdpMiss::Released => MemError::BadKey,
    }
}

/// The payload of a loopback packet, left in the MR it is read from: pinned user memory at IOVA
/// `va`, `len` bytes. The requester builds an RDMA WRITE's or SEND's headers only, and the
/// responder copies the payload from the sender's MR straight into the target MR or the
/// receive WQE's buffers; the drainer builds a READ response's headers only, and the completer
/// copies from the responder's MR straight into the READ's buffers (`recv::loopback`). A real
/// HCA reads the source once and writes the target once, and so does roxe, instead of copying
/// the bytes into the packet and out again.
pub(crate) struct LocalSource {
    pub(crate) mr: PoolRef<RoxeMr>,
    pub(crate) va: u64,
    pub(crate) len: usize,
}

/// Payload bytes from which a loopback packet (an RDMA WRITE or SEND, a READ response) leaves
/// its payload in the MR it is read from ([`LocalSource`]): below a page, the copy it saves is
/// small beside what it adds (a second key lookup, the device slot's lock taken three times).
pub(crate) const LOCAL_SOURCE_MIN: usize = 4096;

/// The most pages the payload of one loopback packet ([`Pmtu::LOCAL`] bytes) can touch: one
/// more than it fills, when it does not start on a page boundary.
const SEGMENT_PAGES_MAX: usize = (Pmtu::LOCAL.bytes() as usize).div_ceil(PAGE_SIZE) + 1;

/// The MR R_Key `rkey` names now, if it is pinned user memory: a loopback WRITE to it may leave
/// its payload in the sender's MR ([`LocalSource`]). Only a guess at what the responder will
/// find, which checks the key itself when the packet arrives.
pub(crate) fn pinned_target(dev: &Device<Roxe>, rkey: u32) -> Option<PoolRef<RoxeMr>> {
    let key = MemKey::from_raw(rkey);
    if key.is_mw() {
        return None;
    }
    let mr = dev.data().mrs.get(key.index())?;
    (mr.key().raw() == rkey && mr.is_pinned_user()).then_some(mr)
}

/// What R_Key `rkey` names, as seen by QP `qpn` of PD `pd_id`, for `proto::resp::check_rkey`
/// (which decides whether the access is allowed): a window's binding when the key names a
/// memory window, else the MR. With it, the MR whose memory the access would touch. `None`:
/// nothing lives under the key's index.
pub(crate) fn remote_target(
    dev: &Device<Roxe>,
    rkey: u32,
    pd_id: u64,
    qpn: u32,
) -> Option<(KeyTarget, PoolRef<RoxeMr>)> {
    let key = MemKey::from_raw(rkey);
    if key.is_mw() {
        return crate::mem::mw::target(dev, key, pd_id, qpn);
    }
    let mr = dev.data().mrs.get(key.index())?;
    let (valid, bounds) = match &mr.mem {
        // An ODP MR's range is its registration's; whether its pages are present is the
        // copy's business (`MemError::NotPresent`), not the key check's.
        MrMem::User { geometry, .. } | MrMem::Odp { geometry, .. } => (
            true,
            KeyBounds::Range {
                start: geometry.iova(),
                length: geometry.length(),
            },
        ),
        MrMem::Dma(_) => (true, KeyBounds::All),
        // A fast-registration MR maps memory only while registered (IBA 10.7.2: Valid state).
        MrMem::Fast(fast) => match fast.mapping() {
            Some(map) => (
                true,
                KeyBounds::Range {
                    start: map.iova,
                    length: map.length,
                },
            ),
            None => (
                false,
                KeyBounds::Range {
                    start: 0,
                    length: 0,
                },
            ),
        },
    };
    let target = KeyTarget {
        key: mr.key().raw(),
        same_pd: mr.pd_id() == pd_id,
        valid,
        qp_matches: true,
        access: mr.access(),
        bounds,
    };
    Some((target, mr))
}

/// Invalidates the MR or type 2 MW `rkey` names, for a LOCAL_INV or a SEND with Invalidate of a
/// QP of PD `pd_id` (IBA 10.6.7.3, 10.7.2.1). Only fast-registration MRs and type 2 windows can
/// be invalidated; anything else is `MemError::BadKey`.
pub(crate) fn invalidate(dev: &Device<Roxe>, pd_id: u64, rkey: u32) -> Result<(), MemError> {
    if MemKey::from_raw(rkey).is_mw() {
        crate::mem::mw::invalidate(dev, pd_id, rkey)
    } else {
        crate::mem::mr::invalidate_fast(dev, pd_id, rkey)
    }
}

impl RoxeMr {
    /// Whether the MR is pinned user memory, whose pages stay for as long as the MR does (not
    /// ODP, not a fast-registration MR a LOCAL_INV can take away).
    pub(crate) fn is_pinned_user(&self) -> bool {
        matches!(self.mem, MrMem::User { .. })
    }

    /// Whether the MR maps memory now: always, except a fast-registration MR in the Free state.
    pub(crate) fn is_valid(&self) -> bool {
        match &self.mem {
            MrMem::Fast(fast) => fast.mapping().is_some(),
            _ => true,
        }
    }

    /// Whether `[va, va + len)` lies inside the MR.
    pub(crate) fn check_range(&self, va: u64, len: u64) -> Result<(), MemError> {
        match &self.mem {
            MrMem::User { geometry, .. } | MrMem::Odp { geometry, .. } => {
                geometry.check_range(va, len).map_err(|_| MemError::Range)
            }
            MrMem::Dma(_) => va.checked_add(len).map(|_| ()).ok_or(MemError::Range),
            MrMem::Fast(fast) => match fast.mapping() {
                Some(map) => fast_geometry(&map)?
                    .check_range(va, len)
                    .map_err(|_| MemError::Range),
                None => Err(MemError::BadKey),
            },
        }
    }

    /// The pages `[first, first + count)` of an ODP MR that back `[va, va + len)` from the first
    /// one not present on, for a fault of at most `max_pages` pages; `None` for other MRs or a
    /// range outside the MR. Only the first `max_pages` pages of the range are looked at: a
    /// fault brings in no more, so what a miss costs does not grow with the request's length
    /// (a WRITE or READ of gigabytes names its whole range in every packet that misses).
    pub(crate) fn odp_pages(&self, va: u64, len: u64, max_pages: usize) -> Option<(usize, usize)> {
        let MrMem::Odp { geometry, odp } = &self.mem else {
            return None;
        };
        let len = len
            .max(1)
            .min(geometry.page_size().saturating_mul(max_pages as u64));
        let mut chunks = geometry.chunks(va, len).ok()?;
        let first = chunks.next()?.page_index;
        let last = chunks.last().map_or(first, |c| c.page_index);
        // From the first page not present: a fault brings in a bounded number of pages, so a
        // long range comes in piece by piece, and asking from its start again would fault the
        // same leading pages forever.
        let from = odp
            .access(|p| (first..=last).find(|&i| p.check(i).is_err()))
            .unwrap_or(first);
        Some((from, last - from + 1))
    }

    /// Faults in pages `first..first + count` of an ODP MR (process context: it sleeps).
    pub(crate) fn odp_fault(&self, first: usize, count: usize) -> Result {
        match &self.mem {
            MrMem::Odp { odp, .. } => odp.fault(first, count),
            _ => Ok(()),
        }
    }

    /// Whether the bytes `[va, va + len)` can be accessed now without a fault: always, except
    /// for ODP pages not faulted in (`MemError::NotPresent`) or that failed to fault.
    pub(crate) fn check_present(&self, va: u64, len: u64) -> Result<(), MemError> {
        let MrMem::Odp { geometry, odp } = &self.mem else {
            return Ok(());
        };
        let chunks = geometry.chunks(va, len).map_err(|_| MemError::Range)?;
        odp.access(|p| {
            for c in chunks {
                p.check(c.page_index).map_err(odp_err)?;
            }
            Ok(())
        })
    }

    /// Copies between an ODP MR's pages at IOVA `va` and a buffer of `len` bytes under its page
    /// table's lock, so that no page is invalidated mid-copy: `copy(pages, page index, offset
    /// in page, range of the buffer)` per piece. Every page is checked before any byte moves, so
    /// a miss leaves the memory untouched.
    fn odp_copy(
        geometry: &MttGeometry,
        odp: &OdpMem,
        va: u64,
        len: usize,
        mut copy: impl FnMut(
            &OdpPages<'_>,
            usize,
            usize,
            core::ops::Range<usize>,
        ) -> Result<(), OdpMiss>,
    ) -> Result<(), MemError> {
        let chunks = geometry
            .chunks(va, len as u64)
            .map_err(|_| MemError::Range)?;
        odp.access(|p| {
            for c in chunks.clone() {
                p.check(c.page_index).map_err(odp_err)?;
            }
            let mut done = 0usize;
            for c in chunks {
                copy(p, c.page_index, c.offset_in_page, done..done + c.len).map_err(odp_err)?;
                done += c.len;
            }
            Ok(())
        })
    }

    /// Copies `dst.len()` bytes at IOVA `va` of the MR into `dst`.
    pub(crate) fn read_at(&self, va: u64, dst: &mut [u8]) -> Result<(), MemError> {
        let (geometry, pages) = match &self.mem {
            MrMem::Odp { geometry, odp } => {
                let len = dst.len();
                return Self::odp_copy(geometry, odp, va, len, |p, i, off, r| {
                    p.read(i, off, dst.get_mut(r).ok_or(OdpMiss::Range)?)
                });
            }
            MrMem::User { geometry, pages } => (geometry, pages),
            MrMem::Dma(mem) => return mem.read(va, dst).map_err(kernel_mem_err),
            MrMem::Fast(fast) => return fast.read(va, dst).map_err(kernel_mem_err),
        };
        let chunks = geometry
            .chunks(va, dst.len() as u64)
            .map_err(|_| MemError::Range)?;
        let mut done = 0usize;
        for c in chunks {
            let part = dst.get_mut(done..done + c.len).ok_or(MemError::Range)?;
            pages
                .read(c.page_index, c.offset_in_page, part)
                .map_err(|_| MemError::Range)?;
            done += c.len;
        }
        Ok(())
    }

    /// Copies `src` into the MR at IOVA `va`.
    pub(crate) fn write_at(&self, va: u64, src: &[u8]) -> Result<(), MemError> {
        let (geometry, pages) = match &self.mem {
            MrMem::Odp { geometry, odp } => {
                return Self::odp_copy(geometry, odp, va, src.len(), |p, i, off, r| {
                    p.write(i, off, src.get(r).ok_or(OdpMiss::Range)?)
                });
            }
            MrMem::User { geometry, pages } => (geometry, pages),
            MrMem::Dma(mem) => return mem.write(va, src).map_err(kernel_mem_err),
            MrMem::Fast(fast) => return fast.write(va, src).map_err(kernel_mem_err),
        };
        let chunks = geometry
            .chunks(va, src.len() as u64)
            .map_err(|_| MemError::Range)?;
        let mut done = 0usize;
        for c in chunks {
            let part = src.get(done..done + c.len).ok_or(MemError::Range)?;
            pages
                .write(c.page_index, c.offset_in_page, part)
                .map_err(|_| MemError::Range)?;
            done += c.len;
        }
        Ok(())
    }

    /// The pieces of `len` bytes at IOVA `va`, page by page, and the pages, of pinned user memory;
    /// `None` for another kind of MR or a range outside this one.
    fn pinned_chunks(&self, va: u64, len: usize) -> Option<(Chunks, &PinnedPages)> {
        match &self.mem {
            MrMem::User { geometry, pages } => Some((geometry.chunks(va, len as u64).ok()?, pages)),
            _ => None,
        }
    }

    /// Whether `len` bytes at IOVA `va` of this MR and `src_len` bytes at `src_va` of `src` may
    /// share a page (one buffer registered twice, or one MR): true unless both are pinned user
    /// memory whose pages for these bytes all differ. A copy between such bytes, piece by
    /// piece, would read pieces it had already overwritten.
    pub(crate) fn shares_pages(
        &self,
        va: u64,
        len: usize,
        src: &RoxeMr,
        src_va: u64,
        src_len: usize,
    ) -> bool {
        let (Some((to, pages)), Some((from, src_pages))) = (
            self.pinned_chunks(va, len),
            src.pinned_chunks(src_va, src_len),
        ) else {
            return true;
        };
        let (to, from) = (to.page_indices(), from.page_indices());
        // A packet's bytes lie in a few pages on either side (a segment in at most
        // `SEGMENT_PAGES_MAX`), whose every pair is compared; more count as shared.
        if to.len() > SEGMENT_PAGES_MAX || from.len() > SEGMENT_PAGES_MAX {
            return true;
        }
        pages.shares_any(to, src_pages, from).unwrap_or(true)
    }

    /// Copies `len` bytes at IOVA `src_va` of `src` into this MR at IOVA `va`, page to page,
    /// with no buffer between ([`LocalSource`]). Both must be pinned user memory (else
    /// `MemError::Range`). Bytes that share a page with their target move piece by piece, a
    /// later piece reading what an earlier one wrote: such bytes are read whole first (a
    /// WRITE's by the requester, which leaves them in the packet, a SEND's by the responder, a
    /// READ response's by the completer: [`RoxeMr::shares_pages`], [`SgeList::scatter_from`]),
    /// so only a key deregistered and registered again between the check and the copy, naming
    /// memory that both MRs map, gets such a copy, and only that memory's contents suffer.
    pub(crate) fn copy_from_mr(
        &self,
        va: u64,
        src: &RoxeMr,
        src_va: u64,
        len: usize,
    ) -> Result<(), MemError> {
        let (Some((mut to, pages)), Some((mut from, src_pages))) =
            (self.pinned_chunks(va, len), src.pinned_chunks(src_va, len))
        else {
            return Err(MemError::Range);
        };
        let (mut t, mut f) = (to.next(), from.next());
        // Offsets into the current chunk of each side; both sides' chunks add up to `len`.
        let (mut t_done, mut f_done) = (0usize, 0usize);
        while let (Some(tc), Some(fc)) = (t, f) {
            let n = core::cmp::min(tc.len - t_done, fc.len - f_done);
            pages
                .copy_from(
                    tc.page_index,
                    tc.offset_in_page + t_done,
                    src_pages,
                    fc.page_index,
                    fc.offset_in_page + f_done,
                    n,
                )
                .map_err(|_| MemError::Range)?;
            t_done += n;
            f_done += n;
            if t_done == tc.len {
                t = to.next();
                t_done = 0;
            }
            if f_done == fc.len {
                f = from.next();
                f_done = 0;
            }
        }
        Ok(())
    }
}

/// The SGE list of a WQE, as a copy of its slot.
pub(crate) struct SgeList<'a> {
    pub(crate) slot: &'a [u8],
    pub(crate) base: usize,
    pub(crate) num: u32,
}

impl SgeList<'_> {
    fn sge(&self, i: u32) -> Option<Sge> {
        if i >= self.num {
            return None;
        }
        sge_at(self.slot, self.base, i)
    }

    /// Walks the bytes `offset..offset + len` of the list: calls `f(mr, va, range in the
    /// caller's buffer)` for each piece, after looking the piece's MR up with `need` rights.
    pub(crate) fn walk(
        &self,
        dev: &Device<Roxe>,
        pd_id: u64,
        offset: u64,
        len: usize,
        need: Access,
        mut f: impl FnMut(&PoolRef<RoxeMr>, u64, core::ops::Range<usize>) -> Result<(), MemError>,
    ) -> Result<(), MemError> {
        let mut skip = offset;
        let mut done = 0usize;
        let mut i = 0u32;
        while done < len {
            let sge = self.sge(i).ok_or(MemError::Length)?;
            i += 1;
            let sge_len = u64::from(sge.length);
            if skip >= sge_len {
                skip -= sge_len;
                continue;
            }
            let n = core::cmp::min(sge_len - skip, (len - done) as u64) as usize;
            let va = sge.addr.checked_add(skip).ok_or(MemError::Range)?;
            skip = 0;
            let mr = lookup_mr(dev, sge.lkey, pd_id, need)?;
            f(&mr, va, done..done + n)?;
            done += n;
        }
        Ok(())
    }

    /// Copies the bytes at `offset..offset + buf.len()` of the list into `buf` (sending: every
    /// MR grants local read, IBA 10.6.3.1).
    pub(crate) fn gather(
        &self,
        dev: &Device<Roxe>,
        pd_id: u64,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(), MemError> {
        let len = buf.len();
        self.walk(dev, pd_id, offset, len, Access::NONE, |mr, va, r| {
            mr.read_at(va, buf.get_mut(r).ok_or(MemError::Length)?)
        })
    }

    /// The bytes `offset..offset + len` of the list as a [`LocalSource`], when they lie in one
    /// SGE whose MR is pinned user memory and the sender may read them (every MR grants local
    /// read); else `None`, and the caller gathers them.
    pub(crate) fn local_source(
        &self,
        dev: &Device<Roxe>,
        pd_id: u64,
        offset: u64,
        len: usize,
    ) -> Option<LocalSource> {
        let mut found = None;
        // The first piece either is the whole range or ends the walk (the error is not the
        // sender's: the bytes are then gathered, and any fault of theirs is found there).
        self.walk(dev, pd_id, offset, len, Access::NONE, |mr, va, r| {
            if r.len() != len || !mr.is_pinned_user() {
                return Err(MemError::Range);
            }
            mr.check_range(va, len as u64)?;
            found = Some(LocalSource {
                mr: mr.clone(),
                va,
                len,
            });
            Ok(())
        })
        .ok()?;
        found
    }

    /// Copies a payload left in the MR it is read from (`src`) into the bytes at `offset..` of the
    /// list (receiving: needs local write), page to page, when every piece lands in pinned user
    /// memory sharing no page with any of the source's bytes; `Ok(false)`, with nothing
    /// written, when one does not (the caller reads the source whole first, as it would for a
    /// packet, and scatters that).
    pub(crate) fn scatter_from(
        &self,
        dev: &Device<Roxe>,
        pd_id: u64,
        offset: u64,
        src: &LocalSource,
    ) -> Result<bool, MemError> {
        let mut direct = true;
        // A piece written before a later piece is read must not land in the later one's
        // pages, so each target piece is checked against the whole source.
        self.walk(
            dev,
            pd_id,
            offset,
            src.len,
            Access::LOCAL_WRITE,
            |mr, va, r| {
                // Once one piece cannot take it, the others need no look.
                direct = direct
                    && mr.is_pinned_user()
                    && !mr.shares_pages(va, r.len(), &src.mr, src.va, src.len);
                Ok(())
            },
        )?;
        if !direct {
            return Ok(false);
        }
        self.walk(
            dev,
            pd_id,
            offset,
            src.len,
            Access::LOCAL_WRITE,
            |mr, va, r| {
                let from = src.va.checked_add(r.start as u64).ok_or(MemError::Range)?;
                mr.copy_from_mr(va, &src.mr, from, r.len())
            },
        )?;
        Ok(true)
    }

    /// Whether the bytes `offset..offset + len` of the list can be accessed with `need` rights
    /// now, without a fault (`MemError::NotPresent` otherwise).
    pub(crate) fn check_present(
        &self,
        dev: &Device<Roxe>,
        pd_id: u64,
        offset: u64,
        len: usize,
        need: Access,
    ) -> Result<(), MemError> {
        self.walk(dev, pd_id, offset, len, need, |mr, va, r| {
            mr.check_present(va, r.len() as u64)
        })
    }

    /// Copies `buf` into the bytes at `offset..` of the list (receiving: needs local write).
    pub(crate) fn scatter(
        &self,
        dev: &Device<Roxe>,
        pd_id: u64,
        offset: u64,
        buf: &[u8],
    ) -> Result<(), MemError> {
        self.walk(
            dev,
            pd_id,
            offset,
            buf.len(),
            Access::LOCAL_WRITE,
            |mr, va, r| mr.write_at(va, buf.get(r).ok_or(MemError::Length)?),
        )
    }
}
