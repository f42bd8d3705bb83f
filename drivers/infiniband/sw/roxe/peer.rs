// SPDX-License-Identifier: GPL-2.0

//! The send window the RC QPs to one peer share ([`Peers`]): each RC QP whose path leaves the
//! device holds a part of its peer's window ([`PeerShare`], in its send state), the PSNs it has
//! sent and not had acknowledged, each counted in units of 1 KiB (`proto::mtu::Pmtu::wire_units`: 4
//! at a path MTU of 4096), so that the window bounds bytes; the requester asks before each packet
//! whether the QPs to the peer together have room ([`Peers::admit`]), and the window grows as
//! acknowledgements arrive and halves on a loss (`proto::cwnd`). A QP with nothing unacknowledged
//! that finds the window short of room waits for a turn in the peer's queue ([`PeerWindow`]'s
//! tickets): an acknowledgement that frees room serves the first, and the device's kick work runs
//! the requesters of the QPs served ([`Peers::take_served`]). Below the stages and the QP: the
//! requester and the completer call it under their QP's `sq_state` lock, and it takes no lock of
//! its own.
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
    proto::cwnd::{admit, may_serve, turn_room, Admit, Cwnd, Turn},
    proto::psn::Psn,
};
use kernel::{
    prelude::*,
    sync::atomic::{Acquire, Atomic, AtomicFlag, Relaxed, Release},
};

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

/// QPs one peer's queue holds, waiting for a turn or served and not yet run by the kick work
/// (a power of two). A QP that finds the queue full goes without a turn, as if nobody waited:
/// the window is then overrun by two packets per such QP, as without the queue.
const QUEUE_SLOTS: u32 = 32;

/// How long a QP waits for a turn at most before it goes anyway ([`Peers::turn_due`]): turns
/// come with the acknowledgements of the QPs sending, and one of those may be slow to answer
/// (a peer QP gone, its requester retrying at the ACK timeout), which must not hold up the
/// others for long.
const TURN_WAIT_MS: u64 = 2 * PROBE_MS;

/// `now` (ms since boot) as [`PeerShare::waiting_since_ms`] keeps it: its low 32 bits, never 0.
fn stamp(now: u64) -> u32 {
    (now as u32).max(1)
}

/// The ms from `since` (a [`stamp`]) to `now` (ms since boot).
fn waited(since: u32, now: u64) -> u64 {
    u64::from((now as u32).wrapping_sub(since))
}

/// Adds one to `counter` if `may` allows the value it holds, and returns that value; a bounded
/// number of tries, each asking `may` again (the queue's counters, [`PeerWindow`]): a step lost
/// to contention is `None`, which each caller takes as "not now".
fn step_if(counter: &Atomic<u32>, may: impl Fn(u32) -> bool) -> Option<u32> {
    let mut v = counter.load(Relaxed);
    for _ in 0..8 {
        if !may(v) {
            return None;
        }
        match counter.cmpxchg(v, v.wrapping_add(1), Relaxed) {
            Ok(_) => return Some(v),
            Err(seen) => v = seen,
        }
    }
    None
}

/// One peer's window.
///
/// # Invariants
///
/// The queue's tickets are ordered `woken <= served <= issued` (modulo 2^32) and
/// `issued - woken <= QUEUE_SLOTS`: ticket `t` was issued to the QP whose number is written to
/// `queue[t % QUEUE_SLOTS]` after the ticket is issued. A number the kick work takes is a hint:
/// 0 once taken, or the QP of an earlier ticket whose number came after it was taken; a hint
/// that is wrong runs a requester that finds nothing to do, and a QP whose number was missed
/// finds its turn at the tick.
struct PeerWindow {
    /// Units of the PSNs the QPs to the peer have unacknowledged together: the sum of their
    /// [`PeerShare::share`]s.
    in_flight: Atomic<u32>,
    /// The window's state ([`Cwnd::pack`]).
    cwnd: Atomic<u64>,
    /// Tickets issued to QPs waiting for a turn.
    issued: Atomic<u32>,
    /// Tickets served: their QPs' turn came.
    served: Atomic<u32>,
    /// Tickets served whose QP the kick work took to run.
    woken: Atomic<u32>,
    /// The QP number of each ticket not yet woken.
    queue: [Atomic<u32>; QUEUE_SLOTS as usize],
}

impl PeerWindow {
    const fn new() -> Self {
        PeerWindow {
            in_flight: Atomic::new(0),
            cwnd: Atomic::new(Cwnd::INIT.pack()),
            issued: Atomic::new(0),
            served: Atomic::new(0),
            woken: Atomic::new(0),
            queue: [const { Atomic::new(0) }; QUEUE_SLOTS as usize],
        }
    }

    /// QPs waiting for a turn (tickets issued and not served).
    fn waiting(&self) -> u32 {
        self.issued
            .load(Relaxed)
            .wrapping_sub(self.served.load(Relaxed))
    }

    /// Whether ticket `t` was served.
    fn is_served(&self, t: u32) -> bool {
        (self.served.load(Relaxed).wrapping_sub(t) as i32) > 0
    }

    /// A ticket for QP `qpn`, if the queue has a slot free (a QP that loses every race for one
    /// goes without a turn).
    fn enqueue(&self, qpn: u32) -> Option<u32> {
        let t = step_if(&self.issued, |t| {
            t.wrapping_sub(self.woken.load(Relaxed)) < QUEUE_SLOTS
        })?;
        // The slot's previous ticket was woken (the invariant), so its number was taken; should
        // the kick work take this ticket before the store, the number stays for a later one,
        // which kicks this QP once more, and this QP's turn is found by the tick
        // ([`PeerShare::queued`]).
        if let Some(slot) = self.queue.get((t % QUEUE_SLOTS) as usize) {
            slot.store(qpn, Relaxed);
        }
        Some(t)
    }

    /// Whether a QP was given its turn and the kick work has not taken it to run yet.
    fn starting(&self) -> bool {
        self.woken.load(Relaxed) != self.served.load(Relaxed)
    }

    /// Gives the first waiting QP its turn; whether one was given (a turn lost to contention is
    /// given by a later settlement).
    fn serve(&self) -> bool {
        step_if(&self.served, |s| s != self.issued.load(Relaxed)).is_some()
    }

    /// The number of the next QP served and not yet woken, taking it off the queue; `Some(0)`
    /// for a ticket whose number was taken before.
    fn take_served(&self) -> Option<u32> {
        let w = step_if(&self.woken, |w| w != self.served.load(Relaxed))?;
        let slot = self.queue.get((w % QUEUE_SLOTS) as usize)?;
        Some(slot.xchg(0, Relaxed))
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
///
/// # Invariants
///
/// `slots` holds [`PEER_SLOTS`] windows.
pub(crate) struct Peers {
    key: HashKey,
    /// On the heap: with their queues the windows take some 10 KiB, too much for the stack
    /// the device's data is built on.
    slots: KVec<PeerWindow>,
    /// A QP was served and not yet woken: the kick work looks at every slot.
    any_served: AtomicFlag,
}

/// A QP's part in its peer's window, in its send state (`SqState::peer`): changed only under
/// the QP's `sq_state` lock, so that the QP's share is added to and taken from its slot's sum
/// exactly once.
pub(crate) struct PeerShare {
    /// The slot of the peer the share is counted in; `None`: no share (not an RC QP to another
    /// host).
    slot: Option<u8>,
    /// The units counted in the slot's `in_flight`.
    share: u32,
    /// The completer's expected PSN at the last settlement: acknowledgements since then grow
    /// the window.
    acked_to: Psn,
    /// Whether the last packet sent asks for a response that will come (see
    /// `proto::cwnd::admit`): false after a retransmission, which the responder may leave
    /// unanswered (a duplicate).
    asked: bool,
    /// When the QP began to wait for the window (ms since boot as [`stamp`] keeps it; 0:
    /// not waiting). Waits are the wrapping difference ([`waited`]): 32 bits keep the
    /// QP's send state, which QP creation builds on the stack, small.
    waiting_since_ms: u32,
    /// The tick let the waiting QP send one packet past the window ([`PeerShare::probe_due`]).
    probe: bool,
    /// The QP probed and nothing has been acknowledged since: one probe per PSN it waits at.
    probed: bool,
    /// A loss was seen since the last settlement (a sequence NAK or an ACK timeout).
    lost: bool,
    /// The QP is being destroyed: it counts no share any more, whatever a stage still running
    /// for it settles.
    closed: bool,
    /// The QP waits for a turn in its peer's queue (since `waiting_since_ms`), with `ticket`.
    queued: bool,
    /// The QP's ticket in its peer's queue, while `queued`.
    ticket: u32,
    /// The tick found the QP's turn come, or its wait too long ([`Peers::turn_due`]): it goes
    /// at its next packet.
    granted: bool,
    /// Units left of the QP's turn: while other QPs wait for one, it stops when none are left.
    turn_left: u16,
    /// The units one PSN of the QP's last packet counts for (`proto::mtu::Pmtu::wire_units` of
    /// its size): its unacknowledged PSNs and its acknowledgements are counted so.
    units: u8,
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
            queued: false,
            ticket: 0,
            granted: false,
            turn_left: 0,
            units: 1,
        }
    }

    /// Whether the QP waits for a turn in its peer's queue: it stays on the device's tick,
    /// which gives the turn ([`Peers::settle`] with nothing in flight) and runs its requester
    /// when it came ([`Peers::turn_due`]), should its wake-up have been missed (a ticket the
    /// kick work took before the QP's number was in its slot) or its requester have nothing
    /// left to send, or when it waited [`TURN_WAIT_MS`].
    pub(crate) fn queued(&self) -> bool {
        self.queued
    }

    /// The QP's requester sent a packet taking `psns` PSNs of `units` units each; `asked`: it
    /// asks for a response that will come.
    pub(crate) fn sent(&mut self, asked: bool, psns: u32, units: u32) {
        self.asked = asked;
        self.waiting_since_ms = 0;
        self.units = u8::try_from(units.clamp(1, 4)).unwrap_or(1);
        let used = psns.saturating_mul(units);
        self.turn_left = self
            .turn_left
            .saturating_sub(u16::try_from(used).unwrap_or(u16::MAX));
    }

    /// Whether the QP has waited for the window for [`PROBE_MS`] by `now` (ms since boot): then
    /// it may send one packet past the window, and the device's tick runs its requester. The
    /// response the QP waits for may be lost, or its request: a later packet makes the
    /// responder NAK the gap (IBA 9.7.5.1.3), instead of the ACK timer finding it. Once per
    /// PSN the QP waits at: a responder NAKs a gap once and drops what follows silently, so if
    /// that NAK was lost, more probes would only add packets, and the ACK timer recovers.
    pub(crate) fn probe_due(&mut self, now: u64) -> bool {
        // A QP waiting for a turn has no response coming ([`Peers::turn_due`]).
        if self.queued
            || self.waiting_since_ms == 0
            || waited(self.waiting_since_ms, now) < PROBE_MS
        {
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
    pub(crate) fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(PEER_SLOTS, GFP_KERNEL)?;
        for _ in 0..PEER_SLOTS {
            slots
                .push_within_capacity(PeerWindow::new())
                .map_err(|_| ENOMEM)?;
        }
        Ok(Peers {
            key: HashKey::new(),
            slots,
            any_served: AtomicFlag::new(false),
        })
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

    /// Whether the QP holding `ps`, number `qpn`, may send its next packet now
    /// (`proto::cwnd::admit`), at `now` (ms since boot); a QP with no share (loopback, UC, UD)
    /// always may, and so does one without an ACK timer (`timed` false: a lost response would
    /// leave it waiting for good) and one the tick let probe. A QP told to wait for a turn
    /// takes a ticket in the peer's queue; with the queue full it goes.
    pub(crate) fn admit(
        &self,
        ps: &mut PeerShare,
        qpn: u32,
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
            ps.queued = false;
            return Admit::Go { ack_req: true };
        }
        let window = Cwnd::unpack(w.cwnd.load(Relaxed)).window;
        let turn = Turn {
            others_wait: ps.queued || w.waiting() > 0,
            served: core::mem::take(&mut ps.granted) || (ps.queued && w.is_served(ps.ticket)),
            used: ps.turn_left == 0,
        };
        let a = match admit(window, w.in_flight.load(Relaxed), ps.share, ps.asked, turn) {
            Admit::Queue if !ps.queued => match w.enqueue(qpn) {
                Some(t) => {
                    ps.queued = true;
                    ps.ticket = t;
                    ps.waiting_since_ms = stamp(now);
                    counters.inc(Counter::PeerWindowTurns);
                    Admit::Queue
                }
                // With the queue full, it goes as if nobody waited.
                None => Admit::Go { ack_req: false },
            },
            a => a,
        };
        if a == Admit::Queue {
            // No response of its own is coming: no probe; its turn comes from the others'
            // acknowledgements, from the tick's settlement once nothing is in flight, or after
            // `TURN_WAIT_MS` (`turn_due`).
            counters.inc(Counter::PeerWindowWaits);
            return Admit::Wait;
        }
        if a == Admit::Wait {
            counters.inc(Counter::PeerWindowWaits);
            if ps.waiting_since_ms == 0 {
                ps.waiting_since_ms = stamp(now);
            }
        } else if ps.share == 0 {
            // A turn begins.
            ps.queued = false;
            ps.turn_left = u16::try_from(turn_room(window)).unwrap_or(u16::MAX);
        }
        a
    }

    /// Whether the turn of the QP holding `ps`, waiting in its peer's queue, came by `now`
    /// (ms since boot), or it waited [`TURN_WAIT_MS`]: then it leaves the queue, goes at its
    /// next packet, and the tick runs its requester.
    pub(crate) fn turn_due(&self, ps: &mut PeerShare, now: u64) -> bool {
        let Some(w) = ps.slot.and_then(|s| self.window(s)).filter(|_| ps.queued) else {
            return false;
        };
        if !w.is_served(ps.ticket) && waited(ps.waiting_since_ms, now) < TURN_WAIT_MS {
            return false;
        }
        ps.queued = false;
        ps.waiting_since_ms = 0;
        ps.granted = true;
        true
    }

    /// The QPs whose turn came and whom no run of the kick work took yet: calls `f` with each
    /// one's number, at most [`QUEUE_SLOTS`] per peer. Called by the kick work, which runs
    /// their requesters.
    pub(crate) fn take_served(&self, mut f: impl FnMut(u32)) {
        // Acquire: pairs with `serve`'s Release, after the ticket was served.
        if !self.any_served.xchg(false, Acquire) {
            return;
        }
        for w in &self.slots {
            for _ in 0..QUEUE_SLOTS {
                match w.take_served() {
                    Some(0) => {}
                    Some(qpn) => f(qpn),
                    None => break,
                }
            }
        }
    }

    /// Brings the QP's share up to date: `slot` is its peer now, `psns` the PSNs it has
    /// unacknowledged, `expected` its completer's expected PSN; the share and the acknowledgements
    /// count the units of the QP's last packet ([`PeerShare::sent`]). Applies the acknowledgements
    /// and the loss seen since the last settlement to the window. Called under the QP's `sq_state`
    /// lock after each requester step, completer batch and tick; `slot` `None` and `psns` 0 take
    /// the QP's share back (reset, destroy). Returns whether it gave a waiting QP its turn: then
    /// the caller kicks the device, whose kick work runs that QP's requester
    /// ([`Peers::take_served`]).
    #[must_use]
    pub(crate) fn settle(
        &self,
        ps: &mut PeerShare,
        slot: Option<u8>,
        psns: u32,
        expected: Psn,
        counters: &Counters,
    ) -> bool {
        let units = u32::from(ps.units);
        let (slot, share) = if ps.closed {
            (None, 0)
        } else {
            (slot, psns.saturating_mul(units))
        };
        let mut served = false;
        if ps.slot != slot {
            // A new peer, or none (reset, destroy): the share moves, and nothing of a wait or
            // a loss is left over from the old one. The room it leaves may be a turn.
            self.take_back(ps);
            if let Some(old) = ps.slot {
                // A ticket it leaves behind may be served for nobody: a turn more.
                served |= self.serve(old, ps.share > 0 || ps.queued || ps.granted);
            }
            *ps = PeerShare {
                slot,
                acked_to: expected,
                closed: ps.closed,
                ..PeerShare::new()
            };
        }
        let Some((s, w)) = slot.and_then(|s| Some((s, self.window(s)?))) else {
            return served;
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
            let acked = (acked as u32).saturating_mul(units);
            w.update(|c| c.on_acked(acked, in_flight >= c.window / 2));
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
        served | self.serve(s, acked > 0)
    }

    /// Gives the first QP waiting at `slot` its turn if the window allows (`proto::cwnd::
    /// may_serve`; `acked`: PSNs were acknowledged, or a QP left the peer), for the kick work
    /// to wake; whether it did.
    fn serve(&self, slot: u8, acked: bool) -> bool {
        let Some(w) = self.window(slot) else {
            return false;
        };
        let window = Cwnd::unpack(w.cwnd.load(Relaxed)).window;
        let in_flight = w.in_flight.load(Relaxed);
        if !may_serve(window, in_flight, w.waiting(), acked, w.starting()) || !w.serve() {
            return false;
        }
        self.any_served.store(true, Release);
        true
    }

    /// Takes the QP's share out of its slot's sum.
    fn take_back(&self, ps: &PeerShare) {
        if let Some(w) = ps.slot.and_then(|s| self.window(s)) {
            w.in_flight.add(0u32.wrapping_sub(ps.share), Relaxed);
        }
    }
}
