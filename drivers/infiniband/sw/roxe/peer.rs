// SPDX-License-Identifier: GPL-2.0

//! The send window the RC QPs to one peer share ([`Peers`]): each RC QP whose path leaves the
//! device holds a part of its peer's window ([`PeerShare`], in its send state), the PSNs it has
//! sent and not had acknowledged; the requester asks before each packet whether the QPs to the
//! peer together have room ([`Peers::admit`]), and the window grows as acknowledgements arrive
//! and halves on a loss (`proto::cwnd`). Below the stages and the QP: the requester and the
//! completer call it under their QP's `sq_state` lock, and it takes no lock of its own.
//!
//! Peers are the slots of a fixed table, chosen by a keyed hash of the destination GID: nothing
//! is allocated per peer, and two peers that share a slot (rare, and not choosable without the
//! key) share a window, which costs them speed, never correctness. Loopback (the device's own
//! GID) has no window: its packets never meet a socket.
//!
//! Contexts: process or softirq, interrupts enabled; lock-free (atomics).

#![deny(unsafe_code)]

use crate::rdma::ah::AddressVector;
use crate::soft::random::HashKey;
use crate::{
    counters::{Counter, Counters},
    proto::cwnd::{admit, Admit, Cwnd},
    proto::psn::Psn,
};
use kernel::sync::atomic::{Atomic, Relaxed};

/// Slots in the peer table (a power of two).
const PEER_SLOTS: usize = 64;

/// How long a QP waits for the window before it sends one packet past it
/// ([`PeerShare::probe_due`]): two of the device's tick periods, far below the shortest ACK
/// timeout (`proto::comp::MIN_ACK_TIMEOUT_MS`) and above the round trip between two busy VMs
/// under TCG.
const PROBE_MS: u64 = 20;

/// The most PSNs one settlement counts as acknowledged: more is a PSN reset (modify QP), not
/// progress.
const MAX_ACKED_STEP: i32 = 1 << 16;

/// One peer's window.
struct PeerWindow {
    /// PSNs the QPs to the peer have unacknowledged together: the sum of their
    /// [`PeerShare::share`]s.
    in_flight: Atomic<u32>,
    /// The window's state ([`Cwnd::pack`]).
    cwnd: Atomic<u64>,
}

impl PeerWindow {
    const fn new() -> Self {
        PeerWindow {
            in_flight: Atomic::new(0),
            cwnd: Atomic::new(Cwnd::INIT.pack()),
        }
    }

    /// Applies `f` to the window's state, atomically; the state before and after (the same
    /// twice if the update was lost).
    fn update(&self, f: impl Fn(Cwnd) -> Cwnd) -> (Cwnd, Cwnd) {
        let mut cur = self.cwnd.load(Relaxed);
        // A bounded number of tries: under contention an update may be lost, which makes the
        // window a little less exact, never unsafe.
        for _ in 0..8 {
            let old = Cwnd::unpack(cur);
            let new = f(old);
            match self.cwnd.cmpxchg(cur, new.pack(), Relaxed) {
                Ok(_) => return (old, new),
                Err(seen) => cur = seen,
            }
        }
        let c = Cwnd::unpack(cur);
        (c, c)
    }
}

/// The device's peer table.
pub(crate) struct Peers {
    key: HashKey,
    slots: [PeerWindow; PEER_SLOTS],
}

/// A QP's part in its peer's window, in its send state (`SqState::peer`): changed only under
/// the QP's `sq_state` lock, so that the QP's share is added to and taken from its slot's sum
/// exactly once.
pub(crate) struct PeerShare {
    /// The slot of the peer the share is counted in; `None`: no share (not an RC QP to another
    /// host).
    slot: Option<u8>,
    /// The PSNs counted in the slot's `in_flight`.
    share: u32,
    /// The completer's expected PSN at the last settlement: acknowledgements since then grow
    /// the window.
    acked_to: Psn,
    /// Whether the last packet sent asks for a response that will come (see
    /// `proto::cwnd::admit`): false after a retransmission, which the responder may leave
    /// unanswered (a duplicate).
    asked: bool,
    /// When the QP began to wait for the window (ms since boot; 0: not waiting).
    waiting_since_ms: u64,
    /// The tick let the waiting QP send one packet past the window ([`PeerShare::probe_due`]).
    probe: bool,
    /// The QP probed and nothing has been acknowledged since: one probe per PSN it waits at.
    probed: bool,
    /// A loss was seen since the last settlement (a sequence NAK or an ACK timeout).
    lost: bool,
    /// The QP is being destroyed: it counts no share any more, whatever a stage still running
    /// for it settles.
    closed: bool,
}

impl PeerShare {
    /// No share.
    pub(crate) const fn new() -> Self {
        PeerShare {
            slot: None,
            share: 0,
            acked_to: Psn::new(0),
            asked: false,
            waiting_since_ms: 0,
            probe: false,
            probed: false,
            lost: false,
            closed: false,
        }
    }

    /// The QP's requester sent a packet; `asked`: it asks for a response that will come.
    pub(crate) fn sent(&mut self, asked: bool) {
        self.asked = asked;
        self.waiting_since_ms = 0;
    }

    /// Whether the QP has waited for the window for [`PROBE_MS`] by `now` (ms since boot): then
    /// it may send one packet past the window, and the device's tick runs its requester. The
    /// response the QP waits for may be lost, or its request: a later packet makes the
    /// responder NAK the gap (IBA 9.7.5.1.3), instead of the ACK timer finding it. Once per
    /// PSN the QP waits at: a responder NAKs a gap once and drops what follows silently, so if
    /// that NAK was lost, more probes would only add packets, and the ACK timer recovers.
    pub(crate) fn probe_due(&mut self, now: u64) -> bool {
        if self.waiting_since_ms == 0 || now < self.waiting_since_ms.saturating_add(PROBE_MS) {
            return false;
        }
        self.waiting_since_ms = 0;
        if self.probed {
            return false;
        }
        self.probed = true;
        self.probe = true;
        true
    }

    /// The completer saw a loss: the next settlement halves the window.
    pub(crate) fn lost(&mut self) {
        self.lost = true;
    }

    /// The QP's PSNs were set (modify QP): the jump to `expected` is no acknowledgement.
    pub(crate) fn psns_set(&mut self, expected: Psn) {
        self.acked_to = expected;
    }

    /// The QP is being destroyed: from the next settlement on it holds no share.
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }
}

impl Peers {
    pub(crate) fn new() -> Self {
        Peers {
            key: HashKey::new(),
            slots: [const { PeerWindow::new() }; PEER_SLOTS],
        }
    }

    /// The slot of the peer `av` leads to; `None` for the device's own GID. Computed when a
    /// QP's path is set (`qp::modify`), not per packet.
    pub(crate) fn slot_of(&self, av: &AddressVector) -> Option<u8> {
        if av.leads_to_own_gid() {
            return None;
        }
        Some((self.key.hash16(&av.dgid) as usize % PEER_SLOTS) as u8)
    }

    fn window(&self, slot: u8) -> Option<&PeerWindow> {
        self.slots.get(usize::from(slot))
    }

    /// Whether the QP holding `ps` may send its next packet now (`proto::cwnd::admit`), at
    /// `now` (ms since boot); a QP with no share (loopback, UC, UD) always may, and so does one
    /// without an ACK timer (`timed` false: a lost response would leave it waiting for good) and
    /// one the tick let probe.
    pub(crate) fn admit(
        &self,
        ps: &mut PeerShare,
        timed: bool,
        now: u64,
        counters: &Counters,
    ) -> Admit {
        let Some(w) = ps.slot.and_then(|s| self.window(s)) else {
            return Admit::Go { ack_req: false };
        };
        if !timed {
            return Admit::Go { ack_req: false };
        }
        if core::mem::take(&mut ps.probe) {
            return Admit::Go { ack_req: true };
        }
        let window = Cwnd::unpack(w.cwnd.load(Relaxed)).window;
        let a = admit(window, w.in_flight.load(Relaxed), ps.share, ps.asked);
        if a == Admit::Wait {
            counters.inc(Counter::PeerWindowWaits);
            if ps.waiting_since_ms == 0 {
                ps.waiting_since_ms = now.max(1);
            }
        }
        a
    }

    /// Brings the QP's share up to date: `slot` is its peer now, `share` the PSNs it has
    /// unacknowledged, `expected` its completer's expected PSN. Applies the acknowledgements
    /// and the loss seen since the last settlement to the window. Called under the QP's
    /// `sq_state` lock after each requester step, completer batch and tick; `slot` `None` and
    /// `share` 0 take the QP's share back (reset, destroy).
    pub(crate) fn settle(
        &self,
        ps: &mut PeerShare,
        slot: Option<u8>,
        share: u32,
        expected: Psn,
        counters: &Counters,
    ) {
        let (slot, share) = if ps.closed { (None, 0) } else { (slot, share) };
        if ps.slot != slot {
            // A new peer, or none (reset, destroy): the share moves, and nothing of a wait or
            // a loss is left over from the old one.
            self.take_back(ps);
            *ps = PeerShare {
                slot,
                acked_to: expected,
                closed: ps.closed,
                ..PeerShare::new()
            };
        }
        let Some(w) = slot.and_then(|s| self.window(s)) else {
            return;
        };
        let acked = expected.diff(ps.acked_to);
        ps.acked_to = expected;
        if acked > 0 {
            ps.probed = false;
        }
        if acked > 0 && acked < MAX_ACKED_STEP {
            // The window grows only while it limits (RFC 7661): the sum, this QP's
            // acknowledged PSNs still in it, fills half of it.
            let in_flight = w.in_flight.load(Relaxed);
            w.update(|c| c.on_acked(acked as u32, in_flight >= c.window / 2));
        }
        if share != ps.share {
            w.in_flight.add(share.wrapping_sub(ps.share), Relaxed);
            ps.share = share;
        }
        if core::mem::take(&mut ps.lost) {
            let in_flight = w.in_flight.load(Relaxed);
            let (old, new) = w.update(|c| c.on_loss(in_flight));
            if new.window < old.window {
                counters.inc(Counter::PeerWindowCuts);
            }
        }
    }

    /// Takes the QP's share out of its slot's sum.
    fn take_back(&self, ps: &PeerShare) {
        if let Some(w) = ps.slot.and_then(|s| self.window(s)) {
            w.in_flight.add(0u32.wrapping_sub(ps.share), Relaxed);
        }
    }
}
