// SPDX-License-Identifier: GPL-2.0

//! The order a QP's responses leave in: one context at a time sends them, the others queue
//! theirs behind it, so that they reach the stack in the order they were made (IBA 9.5).
//!
//! Three kinds of context send a QP's responses to the network: the responder (on a request, and
//! the paced bursts of a READ reply), the requester, whose batch takes the ACK the responder held
//! back, and the end of a receive pass, the short timer or a QP state change, which send an ACK
//! nobody took. Each sends outside the QP's locks, so without a turn a held ACK taken into the
//! requester's batch could leave after READ responses the responder made later; a requester in the
//! middle of that READ would see an ACK older than what it has (rdma_rxe's completer then takes the
//! rest of the READ for a protocol error and moves the QP to the error state). Responses to a
//! requester on the same device do not pass here: the loopback drainer delivers them right after
//! the request (`device::LocalResponse`).

use super::super::psn::Psn;
use core::cmp::Ordering;

/// Most groups of responses that wait for the turn on one QP ([`ResponseTx::offer`]).
pub const QUEUED_GROUPS: usize = 8;

/// Most responses (packets) that wait for the turn on one QP: one READ reply's burst and the
/// answers of a round of requests fit. Past it what another context makes is dropped and
/// counted, as a full transmit queue drops, and the peer's retransmission asks again.
pub const QUEUED_PACKETS: usize = 2 * super::READ_REPLY_BURST as usize;

/// Most queued groups one turn sends; the rest stays queued for the next context with
/// responses, or the short timer ([`Next::Park`]), so that a peer flooding the responder cannot
/// keep one context sending for good.
pub const TURN_GROUPS: u32 = 16;

/// A QP's outgoing responses: whose turn it is to send them, a positive ACK held back for the
/// requester's next batch or the end of the receive pass (`H`), and the groups of responses
/// (`T`) that wait for the turn.
///
/// # Invariants
///
/// Groups wait only behind a turn or, after a turn parked them, until the next one. An ACK is
/// held only while nobody sends and nothing waits, and a turn starts by taking it: a held ACK
/// is never older than anything queued, and comes first.
#[derive(Debug)]
pub struct ResponseTx<H, T, const N: usize> {
    sending: bool,
    /// Groups this turn sent from the queue.
    turn_groups: u32,
    held: Option<(Psn, H)>,
    queue: [Option<(usize, T)>; N],
    head: usize,
    len: usize,
    /// Packets queued, the sum of the groups' weights.
    packets: usize,
}

/// The answer to [`ResponseTx::hold`].
#[derive(Debug, PartialEq, Eq)]
pub enum Hold<H> {
    /// Held. `superseded` is the older held ACK it replaced, to free; `started`: none was held
    /// (an ACK held for the requester starts the short timer).
    Held {
        superseded: Option<H>,
        started: bool,
    },
    /// Held already is a later one: this one is to free.
    Older(H),
    /// A context sends, or responses wait: the ACK goes through [`ResponseTx::offer`].
    Busy(H),
}

/// The answer to [`ResponseTx::offer`].
#[derive(Debug, PartialEq, Eq)]
pub enum Offer<H, T> {
    /// Queued behind the context whose turn it is.
    Queued,
    /// No room: the group is to free, its packets counted as lost.
    Full(T),
    /// The caller has the turn: it sends `held`, then `group`, then asks
    /// [`ResponseTx::next`] until the turn is over. With groups waiting from a parked turn
    /// (`unparked`) the caller's group queues behind them (`group` is `None`), or is lost
    /// (`dropped`: to free, its packets counted) if they fill the queue.
    Send {
        held: Option<H>,
        group: Option<T>,
        unparked: bool,
        dropped: Option<T>,
    },
}

/// The answer to [`ResponseTx::claim`]: the caller has the turn; it sends `held` (if any),
/// then asks [`ResponseTx::next`] until the turn is over. `unparked`: groups were waiting with
/// no turn (the short timer need not run for them any more).
#[derive(Debug, PartialEq, Eq)]
pub struct Claim<H> {
    pub held: Option<H>,
    pub unparked: bool,
}

/// The answer to [`ResponseTx::next`].
#[derive(Debug, PartialEq, Eq)]
pub enum Next<T> {
    /// Send this group, then ask again.
    Again(T),
    /// Nothing waits: the turn is over.
    Done,
    /// The turn sent [`TURN_GROUPS`] groups and is over; the rest waits for the next context
    /// with responses or the short timer (which must run).
    Park,
}

impl<H, T, const N: usize> Default for ResponseTx<H, T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<H, T, const N: usize> ResponseTx<H, T, N> {
    /// A new QP's: nobody sending, nothing held or queued.
    pub const fn new() -> Self {
        ResponseTx {
            sending: false,
            turn_groups: 0,
            held: None,
            queue: [const { None }; N],
            head: 0,
            len: 0,
            packets: 0,
        }
    }

    /// Whether a context has the turn.
    pub const fn sending(&self) -> bool {
        self.sending
    }

    /// Whether an ACK is held.
    pub const fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// The held ACK, if any.
    pub const fn held(&self) -> Option<&H> {
        match &self.held {
            Some((_, h)) => Some(h),
            None => None,
        }
    }

    /// Groups waiting.
    pub const fn queued(&self) -> usize {
        self.len
    }

    /// Holds back `ack`, a lone positive ACK of PSN `psn`, for the requester's next batch, the end
    /// of the receive pass or the short timer. Of two held ACKs the later is kept: an ACK
    /// acknowledges every request before its PSN too (IBA 9.7.5.1.2).
    pub fn hold(&mut self, psn: Psn, ack: H) -> Hold<H> {
        if self.sending || self.len != 0 {
            return Hold::Busy(ack);
        }
        match &mut self.held {
            Some((p, _)) if p.cmp_seq(psn) == Ordering::Greater => Hold::Older(ack),
            Some(held) => {
                let (_, old) = core::mem::replace(held, (psn, ack));
                Hold::Held {
                    superseded: Some(old),
                    started: false,
                }
            }
            None => {
                self.held = Some((psn, ack));
                Hold::Held {
                    superseded: None,
                    started: true,
                }
            }
        }
    }

    /// A context made `group`, `packets` responses: it sends them now, or they wait for the
    /// context whose turn it is.
    pub fn offer(&mut self, group: T, packets: usize) -> Offer<H, T> {
        if self.sending {
            return match self.push(group, packets) {
                Ok(()) => Offer::Queued,
                Err(g) => Offer::Full(g),
            };
        }
        self.start();
        if self.len != 0 {
            // Parked groups go first; this one queues behind them, or is lost if they fill
            // the queue.
            return Offer::Send {
                held: None,
                group: None,
                unparked: true,
                dropped: self.push(group, packets).err(),
            };
        }
        Offer::Send {
            held: self.held.take().map(|(_, h)| h),
            group: Some(group),
            unparked: false,
            dropped: None,
        }
    }

    /// A context would send the held ACK, or groups left waiting by a parked turn: the
    /// requester's batch, the short timer, a QP state change. `None`: nothing waits, or the
    /// context whose turn it is sends it.
    pub fn claim(&mut self) -> Option<Claim<H>> {
        if self.sending || (self.held.is_none() && self.len == 0) {
            return None;
        }
        self.start();
        Some(Claim {
            held: self.held.take().map(|(_, h)| h),
            unparked: self.len != 0,
        })
    }

    /// The context whose turn it is sent what it had: the next group to send, or the end of
    /// the turn.
    pub fn next(&mut self) -> Next<T> {
        if self.len == 0 {
            self.sending = false;
            return Next::Done;
        }
        if self.turn_groups >= TURN_GROUPS {
            self.sending = false;
            return Next::Park;
        }
        self.turn_groups += 1;
        match self.pop() {
            Some(g) => Next::Again(g),
            None => {
                self.sending = false;
                Next::Done
            }
        }
    }

    fn start(&mut self) {
        self.sending = true;
        self.turn_groups = 0;
    }

    fn push(&mut self, group: T, packets: usize) -> Result<(), T> {
        if self.len >= N || self.packets + packets > QUEUED_PACKETS {
            return Err(group);
        }
        let Some(slot) = self.queue.get_mut((self.head + self.len) % N) else {
            return Err(group);
        };
        *slot = Some((packets, group));
        self.len += 1;
        self.packets += packets;
        Ok(())
    }

    fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let (packets, group) = self.queue.get_mut(self.head)?.take()?;
        self.head = (self.head + 1) % N;
        self.len -= 1;
        self.packets = self.packets.saturating_sub(packets);
        Some(group)
    }
}
