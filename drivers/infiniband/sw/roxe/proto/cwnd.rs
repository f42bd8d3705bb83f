// SPDX-License-Identifier: GPL-2.0

//! The send window the RC QPs to one peer share: how many PSNs they may have unacknowledged
//! together ([`Cwnd`]), how it grows and shrinks (additive increase, multiplicative decrease,
//! as TCP's congestion avoidance, RFC 5681), and whether a QP may send its next packet beside
//! the others ([`admit`]).
//!
//! Each RC QP keeps its own [`MAX_UNACKED_PSNS`] window (IBA 9.7.2); this one bounds what all
//! QPs to one peer put on the path at once, so that eight QPs do not overrun a receiving
//! socket that one QP's window fits (`Documentation/performance.md`, "A window per peer").
//! IBA has no such window: RoCEv2's congestion control is left to the HCA (Annex A17.9), and
//! rdma_rxe has none; nothing of it is on the wire, so interoperation is unchanged.

use super::req::MAX_UNACKED_PSNS;

/// The window a peer starts with and returns towards: one QP's own window, so that one QP
/// alone runs as it would without the shared window.
pub const CWND_INIT: u32 = MAX_UNACKED_PSNS;
/// The least the window shrinks to.
pub const CWND_MIN: u32 = 16;
/// The most the window grows to: eight QPs' own windows.
pub const CWND_MAX: u32 = 8 * MAX_UNACKED_PSNS;
/// PSNs the window grows by for each window's worth acknowledged (about one round trip while
/// the QPs keep it full). TCP's one segment per round trip would take a window of 128 halved by
/// one loss some 64 round trips to return, while losses between two VMs under TCG come every
/// few dozen round trips whatever the window (`Documentation/performance.md`, "A window per
/// peer"); eight bring it back in eight, the increase still additive.
pub const CWND_STEP: u32 = 8;

/// A peer's window state, packed into one `u64` ([`Cwnd::pack`]) so that the kernel keeps it
/// in one atomic and updates it with compare-and-exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cwnd {
    /// PSNs the QPs to the peer may have unacknowledged together.
    pub window: u32,
    /// PSNs acknowledged since the window last grew (less than `window / CWND_STEP`).
    pub acked: u32,
    /// PSNs still to be acknowledged before a loss may shrink the window again: the losses of
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

    /// `n` more PSNs acknowledged: while the window limits the QPs (`limited`), it grows by
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

    /// A loss (a PSN sequence NAK or an ACK timeout) while `in_flight` PSNs were unacknowledged:
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
    /// plan says: the window is full, and this QP waits for that acknowledgement next.
    Go {
        /// Set AckReq on the packet.
        ack_req: bool,
    },
    /// Wait: the window is full, and an acknowledgement of this QP's own packets is coming,
    /// which runs its requester again.
    Wait,
}

/// Whether a QP may send its next packet, with `in_flight` PSNs unacknowledged by all QPs to
/// the peer, `own` of them this QP's, and `asked`: whether this QP's last packet asks for a
/// response that will come (AckReq, the end of a message, a READ request, and not resent;
/// IBA 9.7.5.1.2 lets the responder coalesce ACKs until one asks).
///
/// A QP with nothing unacknowledged always sends, and a QP whose last packet asked for no
/// response sends one more that does: so a QP waits only while a response of its own is on
/// its way, whose arrival runs its requester again (no QP waits for another's ACKs; if the
/// response or its request is lost, the kernel lets the QP probe past the window after a
/// short wait). Besides those probes and resent packets (which the kernel sends within the
/// QP's own window), the window is overrun by at most two packets per QP: the one sent with
/// nothing unacknowledged and the one that asks, a READ request counting its response PSNs.
///
/// A packet that finds room asks for nothing more than its plan does: asking for an ACK
/// whenever the window is nearly full made the responder acknowledge about every third packet
/// of a bulk WRITE, each ACK a datagram of its own.
pub const fn admit(window: u32, in_flight: u32, own: u32, asked: bool) -> Admit {
    if own == 0 || in_flight < window {
        return Admit::Go { ack_req: false };
    }
    if !asked {
        return Admit::Go { ack_req: true };
    }
    Admit::Wait
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

    #[test]
    fn admit_never_leaves_a_qp_without_a_response_coming() {
        // Room: go, asking for nothing more.
        assert_eq!(admit(128, 10, 5, false), Admit::Go { ack_req: false });
        assert_eq!(admit(128, 127, 5, true), Admit::Go { ack_req: false });
        // Full: a QP with nothing unacknowledged still goes.
        assert_eq!(admit(128, 500, 0, true), Admit::Go { ack_req: false });
        // Full: one more packet, asking, if the last asked for nothing; else wait.
        assert_eq!(admit(128, 128, 5, false), Admit::Go { ack_req: true });
        assert_eq!(admit(128, 300, 5, true), Admit::Wait);
    }
}
