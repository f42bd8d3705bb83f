// SPDX-License-Identifier: GPL-2.0

//! Property tests of the send window the RC QPs to one peer share (`proto::cwnd`).

use proptest::prelude::*;
use roxe_proto::proto::cwnd::{admit, may_serve, turn_room, Admit, Cwnd, Turn, CWND_MAX, CWND_MIN};

fn any_cwnd() -> impl Strategy<Value = Cwnd> {
    (CWND_MIN..=CWND_MAX, 0u32..0x1_0000, any::<u32>()).prop_map(|(window, acked, recovery)| Cwnd {
        window,
        acked: acked % (window / 8).max(1),
        recovery,
    })
}

fn any_turn() -> impl Strategy<Value = Turn> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(others_wait, served, used)| Turn {
        others_wait,
        served,
        used,
    })
}

proptest! {
    /// A QP is told to wait only while a response of its own is coming: it has PSNs
    /// unacknowledged and its last packet asked for a response, and the window is full or its
    /// turn used while others wait for one. A QP with nothing unacknowledged is never told
    /// that: it waits for a turn, which others' acknowledgements give.
    #[test]
    fn waits_only_with_a_response_coming(
        window in CWND_MIN..=CWND_MAX,
        in_flight in any::<u32>(),
        own in any::<u32>(),
        asked in any::<bool>(),
        turn in any_turn(),
    ) {
        let a = admit(window, in_flight, own, asked, turn);
        if a == Admit::Wait {
            prop_assert!(own > 0 && asked);
            prop_assert!(in_flight >= window || (turn.others_wait && turn.used));
        }
        // A QP with something unacknowledged whose last packet asked for nothing is never
        // left waiting, and one with nothing unacknowledged never without a turn to come.
        if own > 0 && !asked {
            let goes = matches!(a, Admit::Go { .. });
            prop_assert!(goes);
        }
        if a == Admit::Queue {
            prop_assert!(own == 0 && !turn.served);
        }
        // A QP whose turn came goes.
        if own == 0 && turn.served {
            prop_assert_eq!(a, Admit::Go { ack_req: false });
        }
        // A packet asks beyond its plan only for a QP about to wait for its response.
        if a == (Admit::Go { ack_req: true }) {
            prop_assert!(own > 0 && !asked);
        }
    }

    /// A turn is given only to a QP waiting, and only when a turn's room is free after an
    /// acknowledgement, or nothing is in flight and no turn just given is starting.
    #[test]
    fn turns_need_room(
        window in CWND_MIN..=CWND_MAX,
        in_flight in any::<u32>(),
        waiting in any::<u32>(),
        acked in any::<bool>(),
        starting in any::<bool>(),
    ) {
        if may_serve(window, in_flight, waiting, acked, starting) {
            prop_assert!(waiting > 0);
            prop_assert!(
                (in_flight == 0 && !starting)
                    || (acked && in_flight <= window - turn_room(window))
            );
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
