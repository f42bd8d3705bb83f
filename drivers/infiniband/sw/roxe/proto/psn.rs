// SPDX-License-Identifier: GPL-2.0

//! 24-bit packet sequence numbers (IBA 9.7.1) with modular arithmetic.

use core::cmp::Ordering;

/// A packet sequence number: 24 bits, wrapping.
///
/// # Invariants
///
/// The value is always below `1 << 24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// Number of bits in a PSN.
    pub const BITS: u32 = 24;
    /// Mask of the valid bits.
    pub const MASK: u32 = (1 << Self::BITS) - 1;

    /// Creates a PSN from the low 24 bits of `raw` (the upper byte of a BTH word is ignored).
    pub const fn new(raw: u32) -> Psn {
        // INVARIANT: masked to 24 bits.
        Psn(raw & Self::MASK)
    }

    /// The raw 24-bit value.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// `self + n`, wrapping at 2^24.
    pub const fn add(self, n: u32) -> Psn {
        Psn::new(self.0.wrapping_add(n))
    }

    /// The next PSN.
    pub const fn next(self) -> Psn {
        self.add(1)
    }

    /// The signed distance `self - other` in the 24-bit ring: positive when `self` is ahead.
    ///
    /// IBA 9.7.1: PSNs are compared within half the sequence space, so the result is in
    /// `-(2^23)..2^23`.
    pub const fn diff(self, other: Psn) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back to sign-extend it.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Orders two PSNs within the same half of the sequence space (rxe's `psn_compare`).
    pub const fn cmp_seq(self, other: Psn) -> Ordering {
        let d = self.diff(other);
        if d < 0 {
            Ordering::Less
        } else if d > 0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_24_bits() {
        assert_eq!(Psn::new(Psn::MASK).next(), Psn::new(0));
        assert_eq!(Psn::new(0x1ff_ffff).get(), 0xff_ffff);
        assert_eq!(Psn::new(5).add(u32::MAX), Psn::new(4));
    }

    #[test]
    fn distance_across_the_wrap() {
        let a = Psn::new(Psn::MASK);
        let b = Psn::new(2);
        assert_eq!(b.diff(a), 3);
        assert_eq!(a.diff(b), -3);
        assert_eq!(a.cmp_seq(b), Ordering::Less);
        assert_eq!(b.cmp_seq(a), Ordering::Greater);
        assert_eq!(a.cmp_seq(a), Ordering::Equal);
    }

    #[test]
    fn distance_is_antisymmetric_and_consistent_with_add() {
        // A deterministic sweep standing in for a property test: every (base, step) pair in a
        // coarse grid over the ring.
        for base in (0..(1u32 << 24)).step_by(65_521) {
            for step in [0u32, 1, 2, 1000, (1 << 23) - 1] {
                let a = Psn::new(base);
                let b = a.add(step);
                assert_eq!(b.diff(a), step as i32);
                assert_eq!(a.diff(b), -(step as i32));
            }
        }
    }
}
