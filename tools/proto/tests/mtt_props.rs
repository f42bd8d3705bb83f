// SPDX-License-Identifier: GPL-2.0

//! Property tests of the MTT arithmetic: chunks tile an access exactly, stay within one page
//! and within the page array, the bounds check agrees with a 128-bit model, and no u64 input
//! overflows or panics.

use proptest::prelude::*;
use roxe_proto::proto::mtt::{
    permits, validate_reg_access, Access, MemKey, MrCaps, MttError, MttGeometry, MAX_PAGE_SHIFT,
    MIN_PAGE_SHIFT,
};

/// A region with room to iterate: any IOVA and offset, up to 1 MiB, small pages mostly.
fn region() -> impl Strategy<Value = MttGeometry> {
    (
        any::<u64>(),
        0u64..(1 << 20),
        prop_oneof![Just(12u32), Just(13), Just(16), 12u32..=31],
        any::<u64>(),
    )
        .prop_filter_map("region must fit", |(iova, length, shift, off)| {
            MttGeometry::new(iova, length, shift, off & ((1u64 << shift) - 1)).ok()
        })
}

/// A region and an access inside it.
fn region_and_access() -> impl Strategy<Value = (MttGeometry, u64, u64)> {
    region().prop_flat_map(|g| {
        (Just(g), 0..=g.length())
            .prop_flat_map(|(g, rel)| (Just(g), Just(g.iova() + rel), 0..=(g.length() - rel)))
    })
}

proptest! {
    #[test]
    fn chunks_tile_the_access((g, va, len) in region_and_access()) {
        let chunks = g.chunks(va, len).unwrap();
        let expected = chunks.len();
        let page = g.page_size();
        // Position in the page list of the next byte.
        let mut pos = g.first_page_offset() + (va - g.iova());
        let mut covered = 0u64;
        let mut count = 0usize;
        for c in chunks {
            prop_assert!(c.len >= 1);
            prop_assert!(c.page_index < g.npages());
            prop_assert!((c.offset_in_page + c.len) as u64 <= page);
            prop_assert_eq!((c.page_index as u64) * page + c.offset_in_page as u64, pos);
            // Every chunk but the last ends its page.
            pos += c.len as u64;
            covered += c.len as u64;
            count += 1;
            if covered < len {
                prop_assert_eq!(pos % page, 0);
            }
        }
        prop_assert_eq!(covered, len);
        prop_assert_eq!(count, expected);
    }

    #[test]
    fn locate_is_the_first_chunk((g, va, len) in region_and_access()) {
        if len > 0 {
            let first = g.chunks(va, len).unwrap().next().unwrap();
            let p = g.locate(va).unwrap();
            prop_assert_eq!((p.page_index, p.offset_in_page), (first.page_index, first.offset_in_page));
        }
    }

    #[test]
    fn npages_matches_a_wide_model(
        iova in any::<u64>(), length in any::<u64>(), shift in 0u32..40, off in any::<u64>()
    ) {
        match MttGeometry::new(iova, length, shift, off) {
            Ok(g) => {
                let page = 1u128 << shift;
                let want = if length == 0 { 0 } else { (off as u128 + length as u128).div_ceil(page) };
                prop_assert_eq!(g.npages() as u128, want);
                prop_assert!(iova as u128 + length as u128 <= u64::MAX as u128);
            }
            Err(MttError::BadPageShift) => prop_assert!(!(MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT).contains(&shift)),
            Err(MttError::BadFirstPageOffset) => prop_assert!(off >= 1u64 << shift),
            Err(MttError::Overflow) => prop_assert!(
                iova.checked_add(length).is_none() || off.checked_add(length).is_none()
            ),
            Err(e) => prop_assert!(false, "unexpected {:?}", e),
        }
    }

    #[test]
    fn check_range_matches_a_wide_model(g in region(), va in any::<u64>(), len in any::<u64>()) {
        let inside = va >= g.iova()
            && va as u128 + len as u128 <= g.iova() as u128 + g.length() as u128;
        prop_assert_eq!(g.check_range(va, len).is_ok(), inside);
        prop_assert_eq!(g.chunks(va, len).is_ok(), inside);
        let holds_byte = va >= g.iova() && (va as u128) < g.iova() as u128 + g.length() as u128;
        prop_assert_eq!(g.locate(va).is_ok(), holds_byte);
    }

    #[test]
    fn arbitrary_u64s_never_panic(
        addr in any::<u64>(), iova in any::<u64>(), length in any::<u64>(), shift in 0u32..70,
        va in any::<u64>(), len in any::<u64>()
    ) {
        for g in [MttGeometry::for_user(addr, iova, length, shift), MttGeometry::new(iova, length, shift, addr)]
            .into_iter()
            .flatten()
        {
            let _ = g.check_range(va, len);
            let _ = g.locate(va);
            if let Ok(chunks) = g.chunks(va, len) {
                let (lo, hi) = chunks.size_hint();
                prop_assert_eq!(Some(lo), hi);
                prop_assert!(lo <= g.npages());
                for c in chunks.take(3) {
                    prop_assert!(c.page_index < g.npages());
                }
            }
            // The last byte of a non-empty region is always addressable.
            if g.length() > 0 {
                let last = g.locate(g.iova() + (g.length() - 1)).unwrap();
                prop_assert_eq!(last.page_index, g.npages() - 1);
            }
        }
    }

    #[test]
    fn user_regions_share_the_offset(addr in any::<u64>(), iova in any::<u64>(), length in 0u64..(1 << 30)) {
        match MttGeometry::for_user(addr, iova, length, 12) {
            Ok(g) => {
                prop_assert_eq!(addr & 0xfff, iova & 0xfff);
                prop_assert_eq!(g.first_page_offset(), addr & 0xfff);
            }
            Err(MttError::OffsetMismatch) => prop_assert_ne!(addr & 0xfff, iova & 0xfff),
            Err(MttError::Overflow) => prop_assert!(
                addr.checked_add(length).and_then(|e| e.checked_add(0xfff)).is_none()
                    || iova.checked_add(length).is_none()
            ),
            Err(e) => prop_assert!(false, "unexpected {:?}", e),
        }
    }

    #[test]
    fn keys_split_and_join(index in 1u32..(1 << 24), key in any::<u8>(), other in any::<u8>(), raw in any::<u32>()) {
        let k = MemKey::new(index, key).unwrap();
        prop_assert_eq!(k.index(), index);
        prop_assert_eq!(k.key_byte(), key);
        prop_assert_eq!(k.with_key(other).index(), index);
        prop_assert_eq!(k.with_key(other).key_byte(), other);
        prop_assert_eq!(k.next_key().key_byte(), key.wrapping_add(1));
        prop_assert!(k.same_object(k.with_key(other)));
        let r = MemKey::from_raw(raw);
        prop_assert_eq!(r.index() << 8 | r.key_byte() as u32, raw);
        prop_assert_eq!(MemKey::new(r.index(), r.key_byte()).map(MemKey::raw), (r.index() != 0).then_some(raw));
    }

    #[test]
    fn accepted_access_flags_are_consistent(
        flags in any::<u32>(), odp in any::<bool>(), fg in any::<bool>(), fp in any::<bool>()
    ) {
        let caps = MrCaps { on_demand_paging: odp, flush_global: fg, flush_persistent: fp };
        if let Ok(a) = validate_reg_access(flags, caps) {
            prop_assert_eq!(a.bits(), flags);
            prop_assert!(Access::DRIVER_SUPPORTED_MR.contains(a));
            if a.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC) {
                prop_assert!(a.contains(Access::LOCAL_WRITE));
            }
            prop_assert!(!a.contains(Access::FLUSH_GLOBAL) || fg);
            prop_assert!(!a.contains(Access::FLUSH_PERSISTENT) || fp);
        }
    }

    #[test]
    fn permits_is_subset(granted in any::<u32>(), needed in any::<u32>()) {
        prop_assert_eq!(
            permits(Access::from_bits(granted), Access::from_bits(needed)),
            granted & needed == needed
        );
    }
}
