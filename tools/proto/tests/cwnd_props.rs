// SPDX-License-Identifier: GPL-2.0

//! Property tests of the send window the RC QPs to one peer share (`proto::cwnd`).

use proptest::prelude::*;
use roxe_proto::proto::cwnd::{admit, Admit, Cwnd, CWND_MAX, CWND_MIN};

fn any_cwnd() -> impl Strategy<Value = Cwnd> {
    (CWND_MIN..=CWND_MAX, 0u32..0x1_0000, any::<u32>()).prop_map(|(window, acked, recovery)| Cwnd {
        window,
        acked: acked % (window / 8).max(1),
        recovery,
    })
}

proptest! {
    /// A QP is told to wait only while a response of its own is coming: it has PSNs
    /// unacknowledged and its last packet asked for a response, and the window is full.
    #[test]
    fn waits_only_with_a_response_coming(
        window in CWND_MIN..=CWND_MAX,
        in_flight in any::<u32>(),
        own in any::<u32>(),
        asked in any::<bool>(),
    ) {
        if admit(window, in_flight, own, asked) == Admit::Wait {
            prop_assert!(own > 0 && asked && in_flight >= window);
        }
        // A QP whose last packet asked for nothing is never left waiting.
        if !asked {
            let goes = matches!(admit(window, in_flight, own, asked), Admit::Go { .. });
            prop_assert!(goes);
        }
    }

    /// The window stays within its bounds through any acknowledgement or loss, and the packed
    /// form round-trips.
    #[test]
    fn stays_within_bounds(c in any_cwnd(), n in any::<u32>(), limited in any::<bool>(), in_flight in any::<u32>()) {
        for next in [c.on_acked(n, limited), c.on_loss(in_flight)] {
            prop_assert!((CWND_MIN..=CWND_MAX).contains(&next.window));
            prop_assert_eq!(Cwnd::unpack(next.pack()), next);
        }
    }

    /// Acknowledgements never shrink the window nor lengthen the recovery; a loss never grows
    /// the window, and within a recovery it changes nothing.
    #[test]
    fn moves_the_right_way(c in any_cwnd(), n in any::<u32>(), limited in any::<bool>(), in_flight in any::<u32>()) {
        let a = c.on_acked(n, limited);
        prop_assert!(a.window >= c.window);
        prop_assert!(a.recovery <= c.recovery);
        if !limited {
            prop_assert_eq!(a.window, c.window);
        }
        let l = c.on_loss(in_flight);
        prop_assert!(l.window <= c.window);
        if c.recovery > 0 {
            prop_assert_eq!(l, c);
        }
    }
}
