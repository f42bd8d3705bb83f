// SPDX-License-Identifier: GPL-2.0

//! Property tests of the order a QP's responses leave in (`ResponseTx`): whatever the
//! interleaving of the responder, the requester that takes a held ACK into its batch and the
//! short timer, each sending outside the lock, responses reach the stack in the order the
//! responder made them; each is sent, lost to a full queue, or superseded by a later held ACK;
//! and nothing waits once the contexts have finished their turns and the timer has run. The
//! driver of each context follows `net/ack.rs`: under the lock it holds, offers, claims or asks
//! for the next group; sending is a separate step that another context may overtake.

use proptest::prelude::*;
use roxe_proto::proto::{
    psn::Psn,
    resp::{Hold, Next, Offer, ResponseTx, QUEUED_GROUPS, QUEUED_PACKETS, TURN_GROUPS},
};

type Tx = ResponseTx<u32, Vec<u32>, QUEUED_GROUPS>;

/// What one context is doing.
#[derive(Clone, Debug)]
enum Ctx {
    Idle,
    /// Took these under the lock, not yet handed to the stack.
    Sending(Vec<u32>),
    /// Handed what it took to the stack; asks for the next group.
    Ending,
}

#[derive(Default)]
struct Qp {
    tx: Tx,
    wire: Vec<u32>,
    lost: Vec<u32>,
    superseded: Vec<u32>,
    made: u32,
    /// QPs waiting for the short timer, as `held_acks.count` counts them.
    waiting: i32,
}

impl Qp {
    fn make(&mut self, n: u32) -> Vec<u32> {
        let v = (self.made..self.made + n).collect();
        self.made += n;
        v
    }

    /// One step of context `i` (0: the responder, the others: the requester and the timer).
    /// An idle responder makes a lone ACK when `holdable`, else `count` responses.
    fn step(&mut self, ctxs: &mut [Ctx], i: usize, holdable: bool, count: u32) {
        let next = match core::mem::replace(&mut ctxs[i], Ctx::Idle) {
            Ctx::Idle if i == 0 && holdable => {
                let ack = self.make(1)[0];
                match self.tx.hold(Psn::new(ack), ack) {
                    Hold::Held {
                        superseded,
                        started,
                    } => {
                        self.superseded.extend(superseded);
                        self.waiting += i32::from(started);
                        Ctx::Idle
                    }
                    Hold::Older(a) => {
                        self.superseded.push(a);
                        Ctx::Idle
                    }
                    Hold::Busy(a) => self.offer(vec![a]),
                }
            }
            Ctx::Idle if i == 0 => {
                let group = self.make(count);
                self.offer(group)
            }
            Ctx::Idle => match self.tx.claim() {
                Some(c) => {
                    self.waiting -= i32::from(c.held.is_some()) + i32::from(c.unparked);
                    Ctx::Sending(c.held.into_iter().collect())
                }
                None => Ctx::Idle,
            },
            Ctx::Sending(taken) => {
                self.wire.extend(taken);
                Ctx::Ending
            }
            Ctx::Ending => match self.tx.next() {
                Next::Again(g) => Ctx::Sending(g),
                Next::Done => Ctx::Idle,
                Next::Park => {
                    self.waiting += 1;
                    Ctx::Idle
                }
            },
        };
        ctxs[i] = next;
        assert!(
            !(self.tx.sending() && self.tx.holds()),
            "an ACK held during a turn"
        );
        assert!(
            !(self.tx.holds() && self.tx.queued() != 0),
            "an ACK held with responses waiting"
        );
    }

    fn offer(&mut self, group: Vec<u32>) -> Ctx {
        let n = group.len();
        match self.tx.offer(group, n) {
            Offer::Queued => Ctx::Idle,
            Offer::Full(g) => {
                self.lost.extend(g);
                Ctx::Idle
            }
            Offer::Send {
                held,
                group,
                unparked,
                dropped,
            } => {
                self.waiting -= i32::from(held.is_some()) + i32::from(unparked);
                self.lost.extend(dropped.into_iter().flatten());
                let mut taken: Vec<u32> = held.into_iter().collect();
                taken.extend(group.into_iter().flatten());
                Ctx::Sending(taken)
            }
        }
    }

    /// Every context finishes its turn.
    fn settle(&mut self, ctxs: &mut [Ctx]) {
        while let Some(i) = ctxs.iter().position(|c| !matches!(c, Ctx::Idle)) {
            self.step(ctxs, i, false, 1);
        }
    }
}

proptest! {
    #[test]
    fn responses_leave_in_order(
        steps in prop::collection::vec((0..3usize, any::<bool>(), 1..300u32), 0..300),
    ) {
        let mut qp = Qp::default();
        let mut ctxs = vec![Ctx::Idle, Ctx::Idle, Ctx::Idle];
        for (i, holdable, count) in steps {
            qp.step(&mut ctxs, i, holdable, count % 4 + if count > 250 { 250 } else { 0 });
        }
        qp.settle(&mut ctxs);
        // The short timer runs while anything waits (`hold_timer_expired`).
        let mut timer_runs = 0;
        while qp.waiting > 0 {
            prop_assert!(qp.tx.holds() || qp.tx.queued() != 0, "counted as waiting, but nothing waits");
            qp.step(&mut ctxs, 2, false, 1);
            qp.settle(&mut ctxs);
            timer_runs += 1;
            prop_assert!(timer_runs <= QUEUED_GROUPS + 2);
        }
        prop_assert_eq!(qp.waiting, 0);
        prop_assert!(!qp.tx.holds() && qp.tx.queued() == 0, "left waiting with no timer");
        prop_assert!(qp.wire.windows(2).all(|w| w[0] < w[1]), "reordered: {:?}", qp.wire);
        let mut all: Vec<u32> = qp.wire.iter().chain(&qp.lost).chain(&qp.superseded).copied().collect();
        all.sort_unstable();
        prop_assert_eq!(all, (0..qp.made).collect::<Vec<_>>());
    }
}

/// The interleaving this prevents: the requester takes the held ACK into its batch; before its
/// batch leaves, the responder makes READ responses to a later request. They wait for the
/// requester's turn and leave after the ACK.
#[test]
fn read_responses_wait_for_the_taken_ack() {
    let mut qp = Qp::default();
    let mut ctxs = vec![Ctx::Idle, Ctx::Idle];
    qp.step(&mut ctxs, 0, true, 1); // ACK 0 held
    assert!(qp.tx.holds());
    qp.step(&mut ctxs, 1, false, 1); // the requester takes it
    qp.step(&mut ctxs, 0, false, 3); // READ responses 1..=3: queued
    assert_eq!(qp.tx.queued(), 1);
    assert!(qp.wire.is_empty());
    qp.step(&mut ctxs, 1, false, 1); // the requester's batch leaves
    qp.settle(&mut ctxs);
    assert_eq!(qp.wire, vec![0, 1, 2, 3]);
    assert!(!qp.tx.sending());
    assert_eq!(qp.waiting, 0);
}

/// A turn whose queue fills again while it sends parks after `TURN_GROUPS` groups; the next
/// offer sends the parked groups before its own.
#[test]
fn a_turn_is_bounded() {
    let mut tx = Tx::new();
    let mut made = 0u32;
    let mut group = || {
        made += 1;
        vec![made]
    };
    assert!(matches!(
        tx.offer(group(), 1),
        Offer::Send {
            unparked: false,
            ..
        }
    ));
    let mut sent = 0;
    loop {
        assert_eq!(tx.offer(group(), 1), Offer::Queued);
        match tx.next() {
            Next::Again(_) => sent += 1,
            Next::Park => break,
            Next::Done => panic!("the queue was not empty"),
        }
    }
    assert_eq!(sent, TURN_GROUPS);
    assert!(!tx.sending());
    assert_eq!(tx.queued(), 1);
    // No ACK is held while responses wait.
    assert!(matches!(tx.hold(Psn::new(100), 100), Hold::Busy(100)));
    match tx.offer(group(), 1) {
        Offer::Send {
            held: None,
            group: None,
            unparked: true,
            dropped: None,
        } => {}
        o => panic!("unexpected {o:?}"),
    }
    assert!(matches!(tx.next(), Next::Again(_)));
    assert!(matches!(tx.next(), Next::Again(_)));
    assert_eq!(tx.next(), Next::Done);
    assert!(tx.claim().is_none());
}

/// The queue holds at most `QUEUED_GROUPS` groups and `QUEUED_PACKETS` packets.
#[test]
fn the_queue_is_bounded() {
    let mut tx = Tx::new();
    assert!(matches!(tx.offer(vec![0], 1), Offer::Send { .. }));
    assert_eq!(tx.offer(vec![1], QUEUED_PACKETS), Offer::Queued);
    assert_eq!(tx.offer(vec![2], 1), Offer::Full(vec![2]));
    assert!(matches!(tx.next(), Next::Again(_)));
    for i in 0..QUEUED_GROUPS as u32 {
        assert_eq!(tx.offer(vec![i], 1), Offer::Queued);
    }
    assert_eq!(tx.offer(vec![99], 1), Offer::Full(vec![99]));
}

/// Of two held ACKs the later is kept, across the PSN wrap.
#[test]
fn the_later_ack_is_held() {
    let mut tx = Tx::new();
    let top = (1 << 24) - 1;
    assert!(matches!(
        tx.hold(Psn::new(top), 1),
        Hold::Held {
            superseded: None,
            started: true
        }
    ));
    assert!(matches!(
        tx.hold(Psn::new(2), 2),
        Hold::Held {
            superseded: Some(1),
            started: false
        }
    ));
    assert!(matches!(tx.hold(Psn::new(top), 3), Hold::Older(3)));
    let c = tx.claim().expect("an ACK is held");
    assert_eq!(c.held, Some(2));
    assert_eq!(tx.next(), Next::Done);
}
