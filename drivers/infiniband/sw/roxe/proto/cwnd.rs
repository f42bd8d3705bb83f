// SPDX-License-Identifier: GPL-2.0

//! The send window the RC QPs to one peer share: how much they may have unacknowledged
//! together ([`Cwnd`]), how it grows and shrinks (additive increase, multiplicative decrease,
//! as TCP's congestion avoidance, RFC 5681), and whether a QP may send its next packet beside
//! the others ([`admit`]).
//!
//! The window counts units of 1 KiB, one per PSN at a path MTU of 1024 or less and four at
//! 4096 (`proto::mtu::Pmtu::wire_units`), so that it bounds bytes, as the receiving socket
//! does; every count below (window, in flight, acknowledged, turns) is in those units.
//!
//! Each RC QP keeps its own window of [`MAX_UNACKED_PSNS`] such units (IBA 9.7.2,
//! `proto::req::psn_window`); this one bounds what all QPs to one peer put on the path at once, so
//! that eight QPs do not overrun a receiving socket that one QP's window fits
//! (`Documentation/performance.md`, "A window per peer"). IBA has no such window: RoCEv2's
//! congestion control is left to the HCA (Annex A17.9), and rdma_rxe has none; nothing of it is on
//! the wire, so interoperation is unchanged.

use super::req::MAX_UNACKED_PSNS;

/// The window a peer starts with and returns towards: one QP's own window, so that one QP
/// alone runs as it would without the shared window.
pub const CWND_INIT: u32 = MAX_UNACKED_PSNS;
/// The least the window shrinks to.
pub const CWND_MIN: u32 = 16;
/// The most the window grows to: eight QPs' own windows.
pub const CWND_MAX: u32 = 8 * MAX_UNACKED_PSNS;
/// Units the window grows by for each window's worth acknowledged (about one round trip while
/// the QPs keep it full). TCP's one segment per round trip would take a window of 128 halved by
/// one loss some 64 round trips to return, while losses between two VMs under TCG come every
/// few dozen round trips whatever the window (`Documentation/performance.md`, "A window per
/// peer"); eight bring it back in eight, the increase still additive.
pub const CWND_STEP: u32 = 8;

/// A peer's window state, packed into one `u64` ([`Cwnd::pack`]) so that the kernel keeps it
/// in one atomic and updates it with compare-and-exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cwnd {
    /// Units the QPs to the peer may have unacknowledged together.
    pub window: u32,
    /// Units acknowledged since the window last grew (less than `window / CWND_STEP`).
    pub acked: u32,
    /// Units still to be acknowledged before a loss may shrink the window again: the losses of
    /// one burst are one congestion event (RFC 5681, 3.2).
    pub recovery: u32,
}

impl Cwnd {
    /// A new peer's window.
    pub const INIT: Cwnd = Cwnd {
        window: CWND_INIT,
        acked: 0,
        recovery: 0,
    };

    /// The state as one word: `window` in bits 0-15, `acked` in 16-31, `recovery` in 32-63.
    pub const fn pack(self) -> u64 {
        (self.window as u64 & 0xffff)
            | ((self.acked as u64 & 0xffff) << 16)
            | ((self.recovery as u64) << 32)
    }

    /// The state [`Cwnd::pack`] packed, its window kept within [`CWND_MIN`]..=[`CWND_MAX`].
    pub const fn unpack(word: u64) -> Cwnd {
        let mut window = (word & 0xffff) as u32;
        if window < CWND_MIN {
            window = CWND_MIN;
        } else if window > CWND_MAX {
            window = CWND_MAX;
        }
        Cwnd {
            window,
            acked: ((word >> 16) & 0xffff) as u32,
            recovery: (word >> 32) as u32,
        }
    }

    /// `n` more units acknowledged: while the window limits the QPs (`limited`), it grows by
    /// [`CWND_STEP`] for each window's worth (one per `window / CWND_STEP` acknowledged), up to
    /// [`CWND_MAX`]; a window the QPs do not fill does not grow (RFC 7661).
    pub const fn on_acked(self, n: u32, limited: bool) -> Cwnd {
        let recovery = self.recovery.saturating_sub(n);
        if !limited {
            return Cwnd { recovery, ..self };
        }
        if self.window >= CWND_MAX {
            return Cwnd {
                window: CWND_MAX,
                acked: 0,
                recovery,
            };
        }
        let per = if self.window / CWND_STEP > 1 {
            self.window / CWND_STEP
        } else {
            1
        };
        let acked = self.acked.saturating_add(n);
        let mut window = self.window.saturating_add(acked / per);
        if window > CWND_MAX {
            window = CWND_MAX;
        }
        Cwnd {
            window,
            acked: acked % per,
            recovery,
        }
    }

    /// A loss (a PSN sequence NAK or an ACK timeout) while `in_flight` units were unacknowledged:
    /// the window halves, down to [`CWND_MIN`], unless a loss of the same burst halved it
    /// already (`recovery`: until what was in flight then is acknowledged).
    pub const fn on_loss(self, in_flight: u32) -> Cwnd {
        if self.recovery > 0 {
            return self;
        }
        let mut window = self.window / 2;
        if window < CWND_MIN {
            window = CWND_MIN;
        }
        let recovery = if in_flight > window {
            in_flight
        } else {
            window
        };
        Cwnd {
            window,
            acked: 0,
            recovery,
        }
    }
}

/// Whether a QP may send its next packet beside the other QPs to its peer, from [`admit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Admit {
    /// Send it; with `ack_req`, ask for an acknowledgement (set AckReq) whatever the packet's
    /// plan says: the window is full, or the QP's turn used while others wait for one, and
    /// this QP waits for that acknowledgement next.
    Go {
        /// Set AckReq on the packet.
        ack_req: bool,
    },
    /// Wait: the window is full, or the QP's turn used while others wait for one, and an
    /// acknowledgement of this QP's own packets is coming, which runs its requester again.
    Wait,
    /// Wait for a turn: the QP has nothing unacknowledged, and the window has less than
    /// [`turn_room`] free or other QPs wait for a turn before it. It joins the peer's queue of
    /// QPs waiting for a turn, and an acknowledgement that leaves that much room gives the
    /// first its turn ([`may_serve`]).
    Queue,
}

/// A QP's turn at its peer's window ([`Admit::Queue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Turn {
    /// QPs wait for a turn that this QP has not been given: for a QP in the queue, always;
    /// for one that is not, whether the queue holds any.
    pub others_wait: bool,
    /// The QP's turn came: it waited in the queue and was served.
    pub served: bool,
    /// The QP sent the [`turn_room`] units of its turn.
    pub used: bool,
}

/// The most units a turn holds: as many as one QP alone sends between two packets that ask for
/// an acknowledgement in a bulk transfer (a 64 KiB message, or `proto::req`'s AckReq every 64
/// units, `proto::req::ack_req_interval`).
pub const TURN_UNITS: u32 = 64;

/// The units of a turn: the room a QP with nothing unacknowledged needs in the window to start
/// sending, and what it sends before it asks for an acknowledgement and stops while others
/// wait: half the window, at most [`TURN_UNITS`]. QPs then take turns at the window, a few at a
/// time, each asking for an acknowledgement about as often as one QP alone does, instead of
/// every QP to the peer holding a sliver of the window and asking for an acknowledgement for
/// each sliver: each acknowledgement is a datagram of its own, which the receiving host handles
/// as it handles a request (`Documentation/performance.md`, "A window per peer").
pub const fn turn_room(window: u32) -> u32 {
    if window / 2 < TURN_UNITS {
        window / 2
    } else {
        TURN_UNITS
    }
}

/// Whether a QP may send its next packet, with `in_flight` units unacknowledged by all QPs to
/// the peer, `own` of them this QP's, `asked`: whether this QP's last packet asks for a
/// response that will come (AckReq, the end of a message, a READ request, and not resent;
/// IBA 9.7.5.1.2 lets the responder coalesce ACKs until one asks), and `turn`: where it stands
/// in the peer's queue.
///
/// A QP with something unacknowledged sends while the window has room, unless others wait for
/// a turn and it has used its own; then a QP whose last packet asked for no response sends one
/// more that does: so such a QP waits only while a response of its own is on its way, whose
/// arrival runs its requester again. A QP with nothing unacknowledged sends if its turn came,
/// or if no QP waits for a turn and the window has [`turn_room`] free; else it waits for a
/// turn, and the acknowledgements of the QPs sending meanwhile free room and give turns in
/// order ([`may_serve`]). If a response or a request is lost, the kernel lets the QP probe past
/// the window after a short wait, and a QP that waited long for a turn goes. Besides those
/// probes and resent packets (which the kernel sends within the QP's own window), the window is
/// overrun by at most two packets per QP sending: the first of its turn, which goes whatever
/// the room once its turn came, and the one that asks, a READ request counting its response
/// PSNs' units.
///
/// A packet that finds room asks for nothing more than its plan does: asking for an ACK
/// whenever the window is nearly full made the responder acknowledge about every third packet
/// of a bulk WRITE, each ACK a datagram of its own.
pub const fn admit(window: u32, in_flight: u32, own: u32, asked: bool, turn: Turn) -> Admit {
    if own == 0 {
        if turn.served
            || (!turn.others_wait && in_flight.saturating_add(turn_room(window)) <= window)
        {
            return Admit::Go { ack_req: false };
        }
        return Admit::Queue;
    }
    if in_flight < window && !(turn.others_wait && turn.used) {
        return Admit::Go { ack_req: false };
    }
    if !asked {
        return Admit::Go { ack_req: true };
    }
    Admit::Wait
}

/// Whether the first QP waiting for a turn at a peer gets it, with `in_flight` units
/// unacknowledged by the QPs to the peer, `waiting` QPs in the queue, `acked`: the settlement
/// asking acknowledged PSNs or gave some back, and `starting`: a QP given its turn has not
/// been run yet. A turn is given when an acknowledgement leaves [`turn_room`] free, one per
/// acknowledgement so that the QPs sending stay few; and when nothing is in flight and no QP
/// given a turn is about to send, when no acknowledgement will come to give one.
pub const fn may_serve(
    window: u32,
    in_flight: u32,
    waiting: u32,
    acked: bool,
    starting: bool,
) -> bool {
    if waiting == 0 {
        return false;
    }
    (in_flight == 0 && !starting)
        || (acked && in_flight.saturating_add(turn_room(window)) <= window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips() {
        let c = Cwnd {
            window: 300,
            acked: 299,
            recovery: 70000,
        };
        assert_eq!(Cwnd::unpack(c.pack()), c);
        assert_eq!(Cwnd::unpack(Cwnd::INIT.pack()), Cwnd::INIT);
        assert_eq!(Cwnd::unpack(0).window, CWND_MIN);
        assert_eq!(Cwnd::unpack(0xffff).window, CWND_MAX);
    }

    #[test]
    fn grows_by_a_step_per_window_acked() {
        let mut c = Cwnd::INIT;
        let per = CWND_INIT / CWND_STEP;
        for _ in 0..per - 1 {
            c = c.on_acked(1, true);
        }
        assert_eq!(c.window, CWND_INIT);
        c = c.on_acked(1, true);
        assert_eq!(c.window, CWND_INIT + 1);
        assert_eq!(c.acked, 0);
        // Not limiting: no growth, but the recovery still counts down.
        let idle = Cwnd {
            recovery: 10,
            ..Cwnd::INIT
        }
        .on_acked(CWND_INIT, false);
        assert_eq!((idle.window, idle.recovery), (CWND_INIT, 0));
        // A window's worth at once: about CWND_STEP more.
        let w = Cwnd::INIT.on_acked(CWND_INIT, true).window;
        assert_eq!(w, CWND_INIT + CWND_STEP);
        // A large acknowledgement grows it at once, never past the maximum.
        assert_eq!(c.on_acked(u32::MAX, true).window, CWND_MAX);
        assert_eq!(
            Cwnd {
                window: CWND_MAX,
                acked: 5,
                recovery: 0
            }
            .on_acked(10_000, true)
            .window,
            CWND_MAX
        );
    }

    #[test]
    fn halves_once_per_burst() {
        let c = Cwnd::INIT.on_loss(200);
        assert_eq!(c.window, CWND_INIT / 2);
        assert_eq!(c.recovery, 200);
        // More losses of the same burst: no further decrease.
        assert_eq!(c.on_loss(300), c);
        // Once the burst is acknowledged, a new loss halves it again.
        let c = c.on_acked(200, true);
        assert_eq!(c.recovery, 0);
        assert_eq!(c.window, CWND_INIT / 2 + 200 / (CWND_INIT / 2 / CWND_STEP));
        assert_eq!(c.on_loss(10).window, c.window / 2);
        // Never below the minimum.
        let mut c = Cwnd::INIT;
        for _ in 0..20 {
            c = Cwnd {
                recovery: 0,
                ..c.on_loss(0)
            };
        }
        assert_eq!(c.window, CWND_MIN);
    }

    const NO_QUEUE: Turn = Turn {
        others_wait: false,
        served: false,
        used: false,
    };

    #[test]
    fn admit_never_leaves_a_qp_without_a_response_coming() {
        // Room: go, asking for nothing more.
        assert_eq!(
            admit(128, 10, 5, false, NO_QUEUE),
            Admit::Go { ack_req: false }
        );
        assert_eq!(
            admit(128, 127, 5, true, NO_QUEUE),
            Admit::Go { ack_req: false }
        );
        // Full: one more packet, asking, if the last asked for nothing; else wait.
        assert_eq!(
            admit(128, 128, 5, false, NO_QUEUE),
            Admit::Go { ack_req: true }
        );
        assert_eq!(admit(128, 300, 5, true, NO_QUEUE), Admit::Wait);
        // Others wait for a turn: a QP goes on while its turn lasts, then asks and stops.
        let others = Turn {
            others_wait: true,
            served: false,
            used: false,
        };
        assert_eq!(
            admit(128, 100, 5, true, others),
            Admit::Go { ack_req: false }
        );
        let used = Turn {
            used: true,
            ..others
        };
        assert_eq!(admit(128, 100, 5, false, used), Admit::Go { ack_req: true });
        assert_eq!(admit(128, 100, 5, true, used), Admit::Wait);
        // Nobody waits: a turn used up does not stop it.
        let alone = Turn {
            others_wait: false,
            ..used
        };
        assert_eq!(
            admit(128, 100, 5, true, alone),
            Admit::Go { ack_req: false }
        );
    }

    #[test]
    fn a_qp_with_nothing_in_flight_takes_its_turn() {
        // Half the window free and nobody waiting: go.
        assert_eq!(
            admit(128, 64, 0, true, NO_QUEUE),
            Admit::Go { ack_req: false }
        );
        assert_eq!(
            admit(128, 0, 0, false, NO_QUEUE),
            Admit::Go { ack_req: false }
        );
        // Less than half free: wait for a turn.
        assert_eq!(admit(128, 65, 0, false, NO_QUEUE), Admit::Queue);
        assert_eq!(admit(128, 500, 0, true, NO_QUEUE), Admit::Queue);
        // Others wait before it: behind them, whatever the room.
        let others = Turn {
            others_wait: true,
            served: false,
            used: false,
        };
        assert_eq!(admit(128, 0, 0, false, others), Admit::Queue);
        // Its turn came: go, whatever the room.
        let served = Turn {
            served: true,
            ..others
        };
        assert_eq!(
            admit(128, 500, 0, false, served),
            Admit::Go { ack_req: false }
        );
    }

    #[test]
    fn turns_are_given_by_acknowledgements_and_when_idle() {
        // Nobody waits: no turn.
        assert!(!may_serve(128, 0, 0, true, false));
        // Nothing in flight: a turn, acknowledgement or not, unless a QP given one is about
        // to send.
        assert!(may_serve(128, 0, 3, false, false));
        assert!(!may_serve(128, 0, 3, false, true));
        // An acknowledgement that leaves half the window free: a turn.
        assert!(may_serve(128, 64, 3, true, true));
        assert!(!may_serve(128, 65, 3, true, false));
        // A large window: a turn's PSNs free are enough.
        assert_eq!(turn_room(1024), TURN_UNITS);
        assert!(may_serve(1024, 1024 - TURN_UNITS, 3, true, false));
        // Room without an acknowledgement (a settlement of the requester's own): none, so
        // that each acknowledgement lets in one QP.
        assert!(!may_serve(128, 10, 3, false, false));
        // The window never overflows the sum.
        assert!(!may_serve(128, u32::MAX, 3, true, false));
    }
}
