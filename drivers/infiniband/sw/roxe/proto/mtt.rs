// SPDX-License-Identifier: GPL-2.0

//! Memory translation: the MTT arithmetic that maps an MR's virtual range onto its pinned pages,
//! and memory-key layout (index and key byte).
//!
//! The kernel side holds the array of pinned pages; this module only says which entry of that
//! array, at which offset, backs each byte of an access, and whether an access, a key or a set of
//! access flags is acceptable. Nothing here panics or overflows on any input.

use super::qp_state::Errno;

/// Smallest page shift a geometry accepts: 4 KiB, the smallest page of `page_size_cap`.
pub const MIN_PAGE_SHIFT: u32 = 12;
/// Largest page shift a geometry accepts: 2 GiB, the largest page of `page_size_cap`
/// (0xffff_f000). It also keeps every in-page offset and chunk length within a 32-bit `usize`.
pub const MAX_PAGE_SHIFT: u32 = 31;

/// Why an MR geometry, an access to it, or a set of access flags was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MttError {
    /// Page shift outside [`MIN_PAGE_SHIFT`]`..=`[`MAX_PAGE_SHIFT`].
    BadPageShift,
    /// The offset of the region in its first page is not smaller than a page.
    BadFirstPageOffset,
    /// The user address and the IOVA sit at different offsets in their pages. uverbs refuses
    /// such a registration (`ib_uverbs_reg_mr`) because one page list cannot serve both.
    OffsetMismatch,
    /// The region's end (`iova + length`, `addr + length`, or that end rounded up to a page)
    /// does not fit in 64 bits.
    Overflow,
    /// More pages than a `usize` counts.
    TooManyPages,
    /// The access does not lie inside the region.
    OutOfRange,
    /// Access flags that are invalid in themselves (`EINVAL`): unknown bits, or remote write or
    /// atomic without local write.
    AccessInvalid,
    /// Access flags asking for something this device does not do (`EOPNOTSUPP`).
    AccessNotSupported,
}

impl MttError {
    /// The errno a registration or rereg verb returns for it. On the data path an
    /// [`MttError::OutOfRange`] is no errno but a protection or remote access error completion.
    pub const fn errno(self) -> Errno {
        match self {
            MttError::AccessNotSupported => Errno::OpNotSupp,
            _ => Errno::Inval,
        }
    }
}

/// The shape of a registered region: the IOVA range consumers address, and how it lies on the
/// pinned pages.
///
/// Byte `iova + i` of the region is byte `first_page_offset + i` of the page list, that is page
/// `(first_page_offset + i) >> page_shift` at offset `(first_page_offset + i) & (page_size - 1)`.
/// For a user MR the page list is pinned from the user address, so `first_page_offset` is that
/// address's offset in its page. uverbs makes it equal to the IOVA's, which is why rxe can
/// index with the IOVA alone (`rxe_mr_iova_to_index`: `(iova >> shift) - (mr_iova >> shift)`,
/// offset `iova & (page_size - 1)`); the two formulas agree whenever the offsets do.
///
/// # Invariants
///
/// `page_shift` is in `MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT`; `first_page_offset` is below the page
/// size; `iova + length` and `first_page_offset + length` fit in a u64; `npages` is the number of
/// pages `[first_page_offset, first_page_offset + length)` touches (0 when `length` is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MttGeometry {
    iova: u64,
    length: u64,
    page_shift: u32,
    first_page_offset: u64,
    npages: usize,
}

impl MttGeometry {
    /// A region of `length` bytes addressed from `iova`, starting `first_page_offset` bytes into
    /// the first of its pages of `1 << page_shift` bytes. Fast-registration MRs use this: their
    /// page list comes from a scatterlist, not from a user address.
    ///
    /// A zero-length region is valid and has no pages: only zero-length accesses at `iova`
    /// fall inside it.
    pub const fn new(
        iova: u64,
        length: u64,
        page_shift: u32,
        first_page_offset: u64,
    ) -> Result<MttGeometry, MttError> {
        if page_shift < MIN_PAGE_SHIFT || page_shift > MAX_PAGE_SHIFT {
            return Err(MttError::BadPageShift);
        }
        let page_mask = (1u64 << page_shift) - 1;
        if first_page_offset > page_mask {
            return Err(MttError::BadFirstPageOffset);
        }
        if iova.checked_add(length).is_none() {
            return Err(MttError::Overflow);
        }
        let Some(end) = first_page_offset.checked_add(length) else {
            return Err(MttError::Overflow);
        };
        let pages = if length == 0 {
            0
        } else {
            // Round up without adding, so that an end near 2^64 cannot wrap.
            (end >> page_shift) + if end & page_mask != 0 { 1 } else { 0 }
        };
        if pages > usize::MAX as u64 {
            return Err(MttError::TooManyPages);
        }
        // INVARIANT: checked above.
        Ok(MttGeometry {
            iova,
            length,
            page_shift,
            first_page_offset,
            npages: pages as usize,
        })
    }

    /// The geometry of a user MR (`reg_user_mr`): `length` bytes pinned from user address
    /// `user_addr`, addressed by consumers from `iova` (equal to `user_addr` unless the
    /// application used `ibv_reg_mr_iova`), on pages of `1 << page_shift` bytes.
    ///
    /// Besides [`MttGeometry::new`]'s checks, the user range and its page-rounded end must not
    /// wrap (as `ib_umem_get` demands) and both addresses must share their in-page offset.
    pub const fn for_user(
        user_addr: u64,
        iova: u64,
        length: u64,
        page_shift: u32,
    ) -> Result<MttGeometry, MttError> {
        if page_shift < MIN_PAGE_SHIFT || page_shift > MAX_PAGE_SHIFT {
            return Err(MttError::BadPageShift);
        }
        let page_mask = (1u64 << page_shift) - 1;
        if user_addr & page_mask != iova & page_mask {
            return Err(MttError::OffsetMismatch);
        }
        let Some(user_end) = user_addr.checked_add(length) else {
            return Err(MttError::Overflow);
        };
        if user_end.checked_add(page_mask).is_none() {
            return Err(MttError::Overflow);
        }
        MttGeometry::new(iova, length, page_shift, user_addr & page_mask)
    }

    /// The first IOVA of the region.
    pub const fn iova(&self) -> u64 {
        self.iova
    }

    /// The region's length in bytes.
    pub const fn length(&self) -> u64 {
        self.length
    }

    /// log2 of the page size.
    pub const fn page_shift(&self) -> u32 {
        self.page_shift
    }

    /// The page size in bytes.
    pub const fn page_size(&self) -> u64 {
        1u64 << self.page_shift
    }

    /// Where the region starts in its first page.
    pub const fn first_page_offset(&self) -> u64 {
        self.first_page_offset
    }

    /// How many pages back the region: the length of the page array the kernel side holds.
    pub const fn npages(&self) -> usize {
        self.npages
    }

    /// Checks that the access `[va, va + len)` lies inside the region: the bounds part of an
    /// L_Key or R_Key check (IBA 10.6: an access must not reach outside the region its key
    /// names; IBA 9.7.4.1.3 and 9.7.5.2 make a remote one an R_Key violation NAK).
    ///
    /// A zero-length access is inside when `va` is in `[iova, iova + length]`, the end
    /// included; rxe skips the check for zero-length copies altogether, but we keep a length-0
    /// RDMA operation from naming an address the region does not reach. Nothing overflows:
    /// `va + len` is never formed.
    pub const fn check_range(&self, va: u64, len: u64) -> Result<(), MttError> {
        if va < self.iova {
            return Err(MttError::OutOfRange);
        }
        let start = va - self.iova;
        if start > self.length || len > self.length - start {
            return Err(MttError::OutOfRange);
        }
        Ok(())
    }

    /// The page array entry and offset that hold byte `va`, which must be inside the region.
    /// Atomics use this: their 8 bytes, naturally aligned, never cross a page.
    pub const fn locate(&self, va: u64) -> Result<PagePos, MttError> {
        if let Err(e) = self.check_range(va, 1) {
            return Err(e);
        }
        Ok(self.pos_of(va - self.iova))
    }

    /// The page position of region byte `rel` (`rel < length`).
    const fn pos_of(&self, rel: u64) -> PagePos {
        // The constructor checked first_page_offset + length, so this cannot wrap.
        let pos = self.first_page_offset + rel;
        // INVARIANT: pos >> page_shift < npages, which fits in a usize; the offset is below the
        // page size, at most 2^31.
        PagePos {
            page_index: (pos >> self.page_shift) as usize,
            offset_in_page: (pos & (self.page_size() - 1)) as usize,
        }
    }

    /// The pieces of the access `[va, va + len)`, one per page it touches, in address order.
    /// The kernel side maps each [`Chunk::page_index`] to its pinned page and copies
    /// [`Chunk::len`] bytes at [`Chunk::offset_in_page`]. Fails as [`MttGeometry::check_range`]
    /// does; a zero-length access yields no chunk.
    pub const fn chunks(&self, va: u64, len: u64) -> Result<Chunks, MttError> {
        if let Err(e) = self.check_range(va, len) {
            return Err(e);
        }
        Ok(Chunks {
            pos: self.first_page_offset + (va - self.iova),
            remaining: len,
            page_shift: self.page_shift,
        })
    }
}

/// A byte's place in the page array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagePos {
    /// Index into the MR's page array, below [`MttGeometry::npages`].
    pub page_index: usize,
    /// Offset in that page.
    pub offset_in_page: usize,
}

/// The part of an access that falls in one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Index into the MR's page array, below [`MttGeometry::npages`].
    pub page_index: usize,
    /// Where the chunk starts in the page.
    pub offset_in_page: usize,
    /// Bytes in the chunk: at least 1, and `offset_in_page + len` is at most the page size.
    pub len: usize,
}

/// Iterator over the [`Chunk`]s of an access, from [`MttGeometry::chunks`].
#[derive(Clone, Debug)]
pub struct Chunks {
    /// Position of the next byte in the page list (page index and offset combined).
    pos: u64,
    /// Bytes still to cover.
    remaining: u64,
    page_shift: u32,
}

impl Chunks {
    /// The indices into the page array of the pages the access still touches, in order.
    pub const fn page_indices(&self) -> core::ops::Range<usize> {
        let first = (self.pos >> self.page_shift) as usize;
        if self.remaining == 0 {
            return first..first;
        }
        // INVARIANT (of the geometry): the last byte's page index is below npages.
        let last = ((self.pos + (self.remaining - 1)) >> self.page_shift) as usize;
        first..last + 1
    }
}

impl Iterator for Chunks {
    type Item = Chunk;

    fn next(&mut self) -> Option<Chunk> {
        if self.remaining == 0 {
            return None;
        }
        let page_size = 1u64 << self.page_shift;
        let offset = self.pos & (page_size - 1);
        let len = self.remaining.min(page_size - offset);
        // INVARIANT (of the geometry): the page index is below npages, which fits a usize;
        // offset and len are at most 2^31.
        let chunk = Chunk {
            page_index: (self.pos >> self.page_shift) as usize,
            offset_in_page: offset as usize,
            len: len as usize,
        };
        // pos + remaining stays within first_page_offset + length, which fits a u64.
        self.pos += len;
        self.remaining -= len;
        Some(chunk)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = if self.remaining == 0 {
            0
        } else {
            let last = (self.pos + (self.remaining - 1)) >> self.page_shift;
            last - (self.pos >> self.page_shift) + 1
        };
        // At most npages, which fits a usize.
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Chunks {}

impl core::iter::FusedIterator for Chunks {}

/// A memory key (L_Key or R_Key, IBA 10.6.2): a 24-bit index naming the MR or MW, and in the
/// low byte a key the consumer may change between registrations (IBA 10.6.3.3: `ibv_inc_rkey`,
/// the key of a fast-register or bind WR) so that stale keys held by peers stop working.
///
/// rxe and roxe hand out `lkey == rkey == index << 8 | key`, with a random key byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemKey(u32);

impl MemKey {
    /// Bits of the index.
    pub const INDEX_BITS: u32 = 24;
    /// The largest index.
    pub const INDEX_MAX: u32 = (1 << Self::INDEX_BITS) - 1;
    /// First MR index. Index 0 is never handed out (rxe's pools start at 1), so no valid key
    /// has a zero index.
    pub const MR_INDEX_MIN: u32 = 1;
    /// Last MR index (rxe's `RXE_MAX_MR_INDEX`: half of its 2^20 index space).
    pub const MR_INDEX_MAX: u32 = 0x8_0000;
    /// First MW index: MWs take the upper half, so a key's index tells MR from MW.
    pub const MW_INDEX_MIN: u32 = Self::MR_INDEX_MAX + 1;
    /// Last MW index (rxe's `RXE_MAX_MW_INDEX`).
    pub const MW_INDEX_MAX: u32 = 0x10_0000;

    /// The key for object `index` with key byte `key`; `None` for index 0 or an index wider
    /// than 24 bits.
    pub const fn new(index: u32, key: u8) -> Option<MemKey> {
        if index == 0 || index > Self::INDEX_MAX {
            return None;
        }
        Some(MemKey(index << 8 | key as u32))
    }

    /// A key as it arrives in an SGE, a RETH or a WR: any 32 bits.
    pub const fn from_raw(raw: u32) -> MemKey {
        MemKey(raw)
    }

    /// The 32-bit key.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// The object index (upper 24 bits).
    pub const fn index(self) -> u32 {
        self.0 >> 8
    }

    /// The consumer-owned key byte (low 8 bits).
    pub const fn key_byte(self) -> u8 {
        (self.0 & 0xff) as u8
    }

    /// The same object with key byte `key`.
    pub const fn with_key(self, key: u8) -> MemKey {
        MemKey((self.0 & !0xff) | key as u32)
    }

    /// The key byte incremented, wrapping within the byte (`ibv_inc_rkey`).
    pub const fn next_key(self) -> MemKey {
        self.with_key(self.key_byte().wrapping_add(1))
    }

    /// Whether both keys name the same object, whatever their key bytes (a fast-register WR
    /// may only change the key byte, never the index).
    pub const fn same_object(self, other: MemKey) -> bool {
        self.index() == other.index()
    }

    /// Whether the index falls in the MW range (rxe's `rkey_is_mw`).
    pub const fn is_mw(self) -> bool {
        let i = self.index();
        i >= Self::MW_INDEX_MIN && i <= Self::MW_INDEX_MAX
    }
}

/// Access rights of an MR or MW (`enum ib_access_flags`, the `IB_UVERBS_ACCESS_*` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Access(u32);

impl Access {
    /// No rights: local read only, which every MR grants (IBA 10.6.3.1).
    pub const NONE: Access = Access(0);
    /// Local write (the HCA writes into the MR: receives, RDMA READ responses, atomics).
    pub const LOCAL_WRITE: Access = Access(1 << 0);
    /// Remote RDMA WRITE.
    pub const REMOTE_WRITE: Access = Access(1 << 1);
    /// Remote RDMA READ.
    pub const REMOTE_READ: Access = Access(1 << 2);
    /// Remote atomics.
    pub const REMOTE_ATOMIC: Access = Access(1 << 3);
    /// Memory windows may be bound to the MR.
    pub const MW_BIND: Access = Access(1 << 4);
    /// Zero-based addressing (MWs of type 2).
    pub const ZERO_BASED: Access = Access(1 << 5);
    /// On-demand paging.
    pub const ON_DEMAND: Access = Access(1 << 6);
    /// The memory is backed by huge pages.
    pub const HUGETLB: Access = Access(1 << 7);
    /// Remote FLUSH to global visibility (IBA A19).
    pub const FLUSH_GLOBAL: Access = Access(1 << 8);
    /// Remote FLUSH to persistence (IBA A19).
    pub const FLUSH_PERSISTENT: Access = Access(1 << 9);
    /// Relaxed ordering, the first of the optional hints.
    pub const RELAXED_ORDERING: Access = Access(1 << 20);
    /// `IB_UVERBS_ACCESS_OPTIONAL_RANGE` (bits 20..=29): hints a device may ignore.
    pub const OPTIONAL_RANGE: Access = Access(0x3ff0_0000);
    /// Every remote right.
    pub const REMOTE: Access =
        Access(Self::REMOTE_WRITE.0 | Self::REMOTE_READ.0 | Self::REMOTE_ATOMIC.0);
    /// What the core lets through at all (`IB_ACCESS_SUPPORTED`): bits 0..=9 and the hints.
    pub const CORE_SUPPORTED: Access = Access(0x3ff | Self::OPTIONAL_RANGE.0);
    /// What a user MR may ask of this driver (rxe's `RXE_ACCESS_SUPPORTED_MR`, and the huge
    /// page hint, which rxe refuses): no zero-based MRs.
    pub const DRIVER_SUPPORTED_MR: Access = Access(
        Self::REMOTE.0
            | Self::LOCAL_WRITE.0
            | Self::MW_BIND.0
            | Self::ON_DEMAND.0
            | Self::HUGETLB.0
            | Self::FLUSH_GLOBAL.0
            | Self::FLUSH_PERSISTENT.0
            | Self::OPTIONAL_RANGE.0,
    );
    /// What an MW bind may grant (rxe's `RXE_ACCESS_SUPPORTED_MW`): the MR set without the
    /// huge page hint, and zero-based.
    pub const DRIVER_SUPPORTED_MW: Access =
        Access((Self::DRIVER_SUPPORTED_MR.0 & !Self::HUGETLB.0) | Self::ZERO_BASED.0);

    /// Flags from raw bits, any bits allowed.
    pub const fn from_bits(bits: u32) -> Access {
        Access(bits)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every bit of `other` is set in `self`.
    pub const fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `self` and `other` share a bit.
    pub const fn intersects(self, other: Access) -> bool {
        self.0 & other.0 != 0
    }

    /// The bits in either.
    pub const fn union(self, other: Access) -> Access {
        Access(self.0 | other.0)
    }

    /// The bits of `self` that are not in `other`.
    pub const fn difference(self, other: Access) -> Access {
        Access(self.0 & !other.0)
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;

    fn bitor(self, rhs: Access) -> Access {
        self.union(rhs)
    }
}

/// Whether rights `granted` cover an operation that needs `needed` (rxe's `lookup_mr`:
/// every needed bit must be granted).
pub const fn permits(granted: Access, needed: Access) -> bool {
    granted.contains(needed)
}

/// Device capabilities the registration check depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MrCaps {
    /// `IBK_ON_DEMAND_PAGING`.
    pub on_demand_paging: bool,
    /// `IB_DEVICE_FLUSH_GLOBAL`.
    pub flush_global: bool,
    /// `IB_DEVICE_FLUSH_PERSISTENT`.
    pub flush_persistent: bool,
}

/// Checks the access flags of a memory registration (reg_user_mr, rereg with a new access),
/// in the order the kernel checks them, and returns them typed.
///
/// First the core's `ib_check_mr_access`: remote write or remote atomic without local write is
/// `EINVAL` (IBA 10.6.3.1: the HCA cannot write remotely into memory the consumer may not
/// write locally), as is any bit the core does not know; ODP without the capability, and a
/// FLUSH right the device does not advertise, are `EOPNOTSUPP`. Then the driver's own set (rxe's
/// `rxe_reg_user_mr`): zero-based MRs are `EOPNOTSUPP`. Optional hints pass and are ignored, and
/// so does the huge page hint (`IBV_ACCESS_HUGETLB`), which the result leaves out: a soft HCA
/// maps every MR at the base page size, whatever pages back it.
pub const fn validate_reg_access(flags: u32, caps: MrCaps) -> Result<Access, MttError> {
    let access = Access(flags);
    if access.intersects(Access(Access::REMOTE_WRITE.0 | Access::REMOTE_ATOMIC.0))
        && !access.contains(Access::LOCAL_WRITE)
    {
        return Err(MttError::AccessInvalid);
    }
    if !access.difference(Access::CORE_SUPPORTED).is_empty() {
        return Err(MttError::AccessInvalid);
    }
    if access.contains(Access::ON_DEMAND) && !caps.on_demand_paging {
        return Err(MttError::AccessNotSupported);
    }
    if (access.contains(Access::FLUSH_GLOBAL) && !caps.flush_global)
        || (access.contains(Access::FLUSH_PERSISTENT) && !caps.flush_persistent)
    {
        return Err(MttError::AccessNotSupported);
    }
    if !access.difference(Access::DRIVER_SUPPORTED_MR).is_empty() {
        return Err(MttError::AccessNotSupported);
    }
    Ok(access.difference(Access::HUGETLB))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn collect(g: &MttGeometry, va: u64, len: u64) -> Vec<(usize, usize, usize)> {
        g.chunks(va, len)
            .unwrap()
            .map(|c| (c.page_index, c.offset_in_page, c.len))
            .collect()
    }

    #[test]
    fn geometry_of_an_unaligned_region() {
        // 10 000 bytes from 0x1000_0f00 to 0x1000_3610: four pages, from 0x1000_0000 on.
        let g = MttGeometry::for_user(0x7f00_1000_0f00, 0x1000_0f00, 10_000, 12).unwrap();
        assert_eq!(g.first_page_offset(), 0xf00);
        assert_eq!(g.npages(), 4);
        assert_eq!(
            collect(&g, 0x1000_0f00, 10_000),
            [(0, 0xf00, 256), (1, 0, 4096), (2, 0, 4096), (3, 0, 1552)]
        );
        assert_eq!(collect(&g, 0x1000_1000, 1), [(1, 0, 1)]);
        assert_eq!(
            g.locate(0x1000_0f00),
            Ok(PagePos {
                page_index: 0,
                offset_in_page: 0xf00
            })
        );
        assert_eq!(
            g.locate(0x1000_0f00 + 9_999),
            Ok(PagePos {
                page_index: 3,
                offset_in_page: 0x60f
            })
        );
        assert_eq!(g.locate(0x1000_0f00 + 10_000), Err(MttError::OutOfRange));
        assert_eq!(
            g.chunks(0x1000_0f00, 10_001).err(),
            Some(MttError::OutOfRange)
        );
        assert_eq!(g.chunks(0x1000_0eff, 1).err(), Some(MttError::OutOfRange));
    }

    #[test]
    fn agrees_with_rxe_indexing_when_offsets_match() {
        let g = MttGeometry::for_user(0x5123, 0x9_0000_0123, 50_000, 12).unwrap();
        for rel in [0u64, 1, 0xedc, 0xedd, 4096, 49_999] {
            let va = 0x9_0000_0123 + rel;
            let p = g.locate(va).unwrap();
            assert_eq!(p.page_index as u64, (va >> 12) - (g.iova() >> 12));
            assert_eq!(p.offset_in_page as u64, va & 0xfff);
        }
    }

    #[test]
    fn page_indices_are_the_pages_the_chunks_touch() {
        let g = MttGeometry::for_user(0x7f00_1000_0f00, 0x1000_0f00, 40_000, 12).unwrap();
        for (rel, len) in [
            (0u64, 1u64),
            (0, 256),
            (0, 257),
            (255, 4097),
            (100, 32_768),
            (0, 40_000),
            (39_999, 1),
            (5, 0),
        ] {
            let va = 0x1000_0f00 + rel;
            let pages: Vec<usize> = collect(&g, va, len).iter().map(|c| c.0).collect();
            let range = g.chunks(va, len).unwrap().page_indices();
            assert_eq!(
                range.clone().collect::<Vec<_>>(),
                pages,
                "va +{rel}, {len} bytes"
            );
            if len == 0 {
                assert!(range.is_empty());
            }
        }
        // Part-way through, what is left.
        let mut c = g.chunks(0x1000_0f00, 10_000).unwrap();
        c.next();
        assert_eq!(c.page_indices(), 1..4);
    }

    #[test]
    fn zero_length() {
        let g = MttGeometry::new(0x1000, 0, 12, 0x10).unwrap();
        assert_eq!(g.npages(), 0);
        assert_eq!(g.check_range(0x1000, 0), Ok(()));
        assert_eq!(g.check_range(0x1000, 1), Err(MttError::OutOfRange));
        assert_eq!(g.check_range(0x1001, 0), Err(MttError::OutOfRange));
        assert_eq!(g.chunks(0x1000, 0).unwrap().count(), 0);
        let g = MttGeometry::new(0x1000, 8, 12, 0).unwrap();
        assert_eq!(g.check_range(0x1008, 0), Ok(()));
        assert_eq!(g.check_range(0x1009, 0), Err(MttError::OutOfRange));
    }

    #[test]
    fn constructor_rejections() {
        assert_eq!(MttGeometry::new(0, 1, 0, 0), Err(MttError::BadPageShift));
        assert_eq!(MttGeometry::new(0, 1, 11, 0), Err(MttError::BadPageShift));
        assert_eq!(MttGeometry::new(0, 1, 32, 0), Err(MttError::BadPageShift));
        assert_eq!(
            MttGeometry::new(0, 1, 12, 4096),
            Err(MttError::BadFirstPageOffset)
        );
        assert_eq!(
            MttGeometry::new(u64::MAX, 1, 12, 0),
            Err(MttError::Overflow)
        );
        assert_eq!(
            MttGeometry::new(0, u64::MAX, 12, 1),
            Err(MttError::Overflow)
        );
        assert_eq!(
            MttGeometry::for_user(0x1001, 0x2002, 1, 12),
            Err(MttError::OffsetMismatch)
        );
        assert_eq!(
            MttGeometry::for_user(u64::MAX - 10, 0xff5, 5, 12),
            Err(MttError::Overflow)
        );
        // The largest region: everything from 0, 2^52 pages.
        let g = MttGeometry::new(0, u64::MAX, 12, 0).unwrap();
        assert_eq!(g.npages() as u64, 1 << 52);
        assert_eq!(g.check_range(u64::MAX - 1, 1), Ok(()));
        let last: Vec<_> = collect(&g, u64::MAX - 5, 5);
        assert_eq!(last, [(((1u64 << 52) - 1) as usize, 4090, 5)]);
        assert_eq!(MttError::AccessNotSupported.errno(), Errno::OpNotSupp);
        assert_eq!(MttError::OutOfRange.errno(), Errno::Inval);
    }

    #[test]
    fn keys() {
        let k = MemKey::new(0x12_3456, 0x78).unwrap();
        assert_eq!(k.raw(), 0x1234_5678);
        assert_eq!(k.index(), 0x12_3456);
        assert_eq!(k.key_byte(), 0x78);
        assert_eq!(k.with_key(0xff).raw(), 0x1234_56ff);
        assert_eq!(k.with_key(0xff).next_key().raw(), 0x1234_5600);
        assert!(k.same_object(k.next_key()));
        assert!(!k.same_object(MemKey::new(1, 0x78).unwrap()));
        assert_eq!(MemKey::new(0, 1), None);
        assert_eq!(MemKey::new(1 << 24, 1), None);
        assert!(!MemKey::new(MemKey::MR_INDEX_MAX, 0).unwrap().is_mw());
        assert!(MemKey::new(MemKey::MW_INDEX_MIN, 0).unwrap().is_mw());
        assert!(MemKey::new(MemKey::MW_INDEX_MAX, 0).unwrap().is_mw());
        assert!(!MemKey::from_raw(0).is_mw());
    }

    const ALL_CAPS: MrCaps = MrCaps {
        on_demand_paging: false,
        flush_global: true,
        flush_persistent: true,
    };

    #[test]
    fn access_flags() {
        let ok = |f: u32| validate_reg_access(f, ALL_CAPS);
        assert_eq!(Access::LOCAL_WRITE.bits(), 1);
        assert_eq!(Access::FLUSH_PERSISTENT.bits(), 0x200);
        assert_eq!(Access::CORE_SUPPORTED.bits(), 0x3ff0_03ff);
        assert_eq!(ok(0), Ok(Access::NONE));
        assert_eq!(ok(1 | 2 | 4 | 8), Ok(Access::LOCAL_WRITE | Access::REMOTE));
        assert_eq!(ok(2), Err(MttError::AccessInvalid));
        assert_eq!(ok(8 | 4), Err(MttError::AccessInvalid));
        assert_eq!(ok(4), Ok(Access::REMOTE_READ));
        assert_eq!(ok(1 << 10), Err(MttError::AccessInvalid));
        assert_eq!(ok(1 << 30), Err(MttError::AccessInvalid));
        assert_eq!(
            ok(Access::ON_DEMAND.bits()),
            Err(MttError::AccessNotSupported)
        );
        assert_eq!(
            ok(Access::ZERO_BASED.bits()),
            Err(MttError::AccessNotSupported)
        );
        // The huge page hint passes, and is not part of the MR's rights.
        assert_eq!(ok(Access::HUGETLB.bits() | 1), Ok(Access::LOCAL_WRITE));
        assert_eq!(
            ok(Access::RELAXED_ORDERING.bits() | 1),
            Ok(Access::from_bits(0x10_0001))
        );
        assert_eq!(ok(Access::FLUSH_GLOBAL.bits()), Ok(Access::FLUSH_GLOBAL));
        assert_eq!(
            validate_reg_access(Access::FLUSH_PERSISTENT.bits(), MrCaps::default()),
            Err(MttError::AccessNotSupported)
        );
        // The LOCAL_WRITE rule comes first, as in the core.
        assert_eq!(
            ok(2 | Access::ON_DEMAND.bits()),
            Err(MttError::AccessInvalid)
        );
        assert!(permits(
            Access::LOCAL_WRITE | Access::REMOTE_READ,
            Access::REMOTE_READ
        ));
        assert!(!permits(
            Access::REMOTE_READ,
            Access::REMOTE_READ | Access::REMOTE_WRITE
        ));
        assert!(permits(Access::NONE, Access::NONE));
    }
}
