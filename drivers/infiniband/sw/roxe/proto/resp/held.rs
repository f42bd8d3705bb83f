// SPDX-License-Identifier: GPL-2.0

//! Requests held behind a READ reply: the RDMA READ and atomic requests that arrive in sequence
//! while the responses of an earlier READ are still going out wait here, in order, and execute
//! once those responses are out.

use super::*;

/// The most requests a QP holds behind a READ reply. A requester keeps at most its initiator
/// depth of READ and atomic requests outstanding (IBA 9.7.5.2.7: no more than the responder's
/// `max_dest_rd_atomic`), and one of them is the READ being answered: the hold takes at most
/// `max_dest_rd_atomic - 1`. Sixteen covers the usual depths (rdma-core's and perftest's 16;
/// ULPs use 4 to 16) and keeps the hold at about 1.5 KiB per QP; a request past it is dropped,
/// and the requester's retry asks again.
pub const HELD_SLOTS: usize = 16;

/// The longest request packet held: BTH, AtomicETH and ICRC (44 bytes; a READ request, a
/// FLUSH and an ATOMIC WRITE are shorter).
pub const HELD_BYTES: usize = 48;

/// Whether requests of this operation wait behind a READ reply rather than being dropped: the
/// ones that hold a responder resource (IBA 9.7.5.2.7), whose answers are responses of their
/// own and carry no payload worth more than a few bytes.
pub const fn holds_behind_read(op: Operation) -> bool {
    matches!(
        op,
        Operation::RdmaReadRequest
            | Operation::CompareSwap
            | Operation::FetchAdd
            | Operation::AtomicWrite
            | Operation::Flush
    )
}

/// What becomes of a request that arrives while a READ reply is going out, or while requests
/// wait behind one ([`HeldRequests::verdict`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldVerdict {
    /// The next request in sequence, and one that may wait: hold it ([`HeldRequests::push`]).
    Hold,
    /// In sequence, but it may not wait (a SEND or WRITE, whose ACK would overtake the READ's
    /// responses, or the hold is full), or past the next PSN (a PSN sequence NAK would overtake
    /// them too, and acknowledge requests not yet answered): drop it; the requester sends it
    /// again.
    Drop,
    /// A request already held (the requester sent it again): nothing to do.
    AlreadyHeld,
    /// A duplicate of an executed request, or not an RC request: the usual PSN check decides.
    Check,
}

/// One held request: a copy of its packet, the PSNs it takes and where it came from.
#[derive(Clone, Copy, Debug)]
pub struct HeldRequest<S: Copy> {
    bytes: [u8; HELD_BYTES],
    len: u8,
    psns: u32,
    /// Where the packet came from.
    pub src: S,
}

impl<S: Copy> HeldRequest<S> {
    /// The packet as it arrived.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The PSNs the request takes: a READ's responses, or one.
    pub const fn psns(&self) -> u32 {
        self.psns
    }
}

/// The requests an RC responder holds behind the READ reply it is sending (rxe keeps every
/// request queued behind a READ until its responses are out: `resp_pkts`). Responses leave in
/// request order (IBA 9.5), so a request behind a READ cannot be answered before the READ's
/// last response; holding it instead of dropping it answers a requester's pipelined READs and
/// atomics without a retry. Only requests that wait for a response of their own are held
/// ([`holds_behind_read`]); the first request to arrive in sequence behind the hold is the
/// next one's PSN, the PSN after everything held.
///
/// One held request runs at a time ([`HeldRequests::take_next`] until
/// [`HeldRequests::done_running`]): its answer leaves after the responder's lock is released,
/// and no later request may be answered before it, whichever CPU that request reaches.
#[derive(Clone, Copy, Debug)]
pub struct HeldRequests<S: Copy> {
    slots: [Option<HeldRequest<S>>; HELD_SLOTS],
    head: usize,
    len: usize,
    /// PSNs the held requests take, in all.
    psns: u32,
    /// A request taken from the hold is running: its answer is not out yet.
    running: bool,
    /// Bumped by [`HeldRequests::clear`], so that the end of a run taken before it is not
    /// taken for the end of a later one ([`HeldRequests::done_running`]).
    generation: u32,
}

impl<S: Copy> Default for HeldRequests<S> {
    fn default() -> Self {
        HeldRequests {
            slots: [None; HELD_SLOTS],
            head: 0,
            len: 0,
            psns: 0,
            running: false,
            generation: 0,
        }
    }
}

impl<S: Copy> HeldRequests<S> {
    /// Whether nothing is held.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether nothing is held and no held request is running: a request that arrives may be
    /// answered at once, as far as the hold is concerned.
    pub const fn idle(&self) -> bool {
        self.len == 0 && !self.running
    }

    /// How many requests are held.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// The PSN the next request in sequence has, with `expected` the responder's expected PSN.
    pub const fn next_psn(&self, expected: Psn) -> Psn {
        expected.add(self.psns)
    }

    /// What to do with `req`, which arrived while a READ reply goes out or requests are held;
    /// `expected` is the responder's expected PSN. RC only: the other transports have no READs.
    pub fn verdict(&self, expected: Psn, cfg: &RespConfig, req: &Request) -> HoldVerdict {
        if !cfg.is_rc() || !request_fits_qp(cfg.qp_type, req.info) {
            return HoldVerdict::Check;
        }
        let next = self.next_psn(expected);
        if req.psn.diff(expected) >= 0 && req.psn.diff(next) < 0 {
            return HoldVerdict::AlreadyHeld;
        }
        if req.psn.diff(expected) < 0 {
            // While a held request runs, the answer to a duplicate (an ACK of the latest
            // request executed, which is that one) could leave before that request's own.
            return if self.running {
                HoldVerdict::Drop
            } else {
                HoldVerdict::Check
            };
        }
        if req.psn != next {
            return HoldVerdict::Drop;
        }
        // The READ being answered holds a responder resource too.
        let room = self.len < HELD_SLOTS && self.len + 1 < usize::from(cfg.max_dest_rd_atomic);
        if holds_behind_read(req.info.operation()) && room {
            HoldVerdict::Hold
        } else {
            HoldVerdict::Drop
        }
    }

    /// The PSNs `req` takes: one per READ response, one for anything else.
    pub fn psns_of(cfg: &RespConfig, req: &Request) -> u32 {
        match (req.info.operation(), req.reth) {
            (Operation::RdmaReadRequest, Some(r)) => read_response_count(r.dma_len, cfg.mtu),
            _ => 1,
        }
    }

    /// Holds a copy of `packet` (of `req`, which [`HeldRequests::verdict`] said to hold) from
    /// `src`. Returns `false`, holding nothing, if the hold is full or the packet longer than a
    /// held request can be.
    pub fn push(&mut self, cfg: &RespConfig, req: &Request, packet: &[u8], src: S) -> bool {
        if self.len >= HELD_SLOTS || packet.len() > HELD_BYTES {
            return false;
        }
        let mut bytes = [0u8; HELD_BYTES];
        bytes[..packet.len()].copy_from_slice(packet);
        let psns = Self::psns_of(cfg, req);
        self.slots[(self.head + self.len) % HELD_SLOTS] = Some(HeldRequest {
            bytes,
            len: packet.len() as u8,
            psns,
            src,
        });
        self.len += 1;
        self.psns = self.psns.saturating_add(psns);
        true
    }

    /// The PSNs the oldest held request takes, if one is held.
    pub fn next_psns(&self) -> Option<u32> {
        match self.slots[self.head] {
            Some(h) if self.len > 0 => Some(h.psns),
            _ => None,
        }
    }

    /// Takes the oldest held request, to execute now, with the run's number for
    /// [`HeldRequests::done_running`], unless one is running already (its answer comes first)
    /// or none is held. Until then, the hold is not [idle](HeldRequests::idle).
    pub fn take_next(&mut self) -> Option<(HeldRequest<S>, u32)> {
        if self.len == 0 || self.running {
            return None;
        }
        self.running = true;
        let held = self.slots[self.head].take();
        self.head = (self.head + 1) % HELD_SLOTS;
        self.len -= 1;
        if let Some(h) = &held {
            self.psns = self.psns.saturating_sub(h.psns);
        }
        held.map(|h| (h, self.generation))
    }

    /// The request [`HeldRequests::take_next`] gave as run `run` has been executed and its
    /// answer is on its way. A run from before a [`HeldRequests::clear`] changes nothing.
    pub fn done_running(&mut self, run: u32) {
        if run == self.generation {
            self.running = false;
        }
    }

    /// Forgets every held request (modify QP `rq_psn`, RESET, the QP no longer receiving).
    /// The slots keep their stale contents, which nothing reads again.
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
        self.psns = 0;
        self.running = false;
        self.generation = self.generation.wrapping_add(1);
    }
}
