// SPDX-License-Identifier: GPL-2.0

//! Property tests of the 24-bit PSN arithmetic.

use proptest::prelude::*;
use roxe_proto::proto::psn::Psn;

proptest! {
    #[test]
    fn add_then_diff_is_identity(base in 0u32..(1 << 24), step in 0u32..(1 << 23)) {
        let a = Psn::new(base);
        prop_assert_eq!(a.add(step).diff(a), step as i32);
    }

    #[test]
    fn values_stay_in_24_bits(raw in any::<u32>(), step in any::<u32>()) {
        prop_assert!(Psn::new(raw).add(step).get() <= Psn::MASK);
    }

    #[test]
    fn ordering_is_antisymmetric(a in 0u32..(1 << 24), b in 0u32..(1 << 24)) {
        let (a, b) = (Psn::new(a), Psn::new(b));
        prop_assert_eq!(a.cmp_seq(b), b.cmp_seq(a).reverse());
    }
}
