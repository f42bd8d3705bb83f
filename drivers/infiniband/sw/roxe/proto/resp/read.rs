// SPDX-License-Identifier: GPL-2.0

//! The READ replies of a QP: one reply built at a time, paced in bursts, and the responses of a
//! reply segmented by path MTU.

use super::*;

/// The most RDMA READ responses the responder sends in one go; the rest of a longer reply
/// follows in further bursts ([`ReadReply::rest_after`]). A requester may ask for a whole READ
/// in one request (rxe asks for 4096 responses for 4 MiB at MTU 1024): sent at once, such a
/// reply overflows the egress queue (a tail-dropped burst only makes the requester ask again for
/// another) and keeps the CPU in one softirq for as long as it takes to build and checksum every
/// packet. Four times roxe's own request size at MTU 1024 ([`super::req::READ_REQUEST_PSNS`];
/// 16 times at 4096, [`super::req::read_request_size`]), so that roxe's requests are answered
/// in one go. It counts packets, not bytes: at MTU 4096 a whole-READ request's reply leaves in
/// bursts of 1 MiB.
pub const READ_REPLY_BURST: u32 = 256;

/// How long the responder waits before sending the next burst of a long READ reply, in ms.
/// rdma_rxe's requester ignores every response after a gap until its retransmission timer
/// (67 ms for the usual `timeout` of 14) asks again from the gap; what the responder sends
/// meanwhile is wasted, and on a slow host building it delays the replay that matters. A
/// burst every 50 ms keeps the waste to about one burst per loss, and a loss-free reply still
/// flows (5 MiB/s at MTU 1024 for the parts past the first burst).
pub const READ_REPLY_INTERVAL_MS: u64 = 50;

/// The READ reply a responder QP is sending, and when it may send the next burst of it: the
/// pacing of READ responses, so that what one received packet costs is bounded.
///
/// A new READ is answered at once, a burst of at most [`READ_REPLY_BURST`] responses (the data
/// it asked for); what is left of a longer reply follows a burst per interval. A duplicate READ
/// (IBA 9.7.5.1.3) restarts the reply from where it asks. Replays share a budget of
/// [`READ_REPLAY_BUDGET`] responses per interval: within it a replay is answered at once, so a
/// requester that lost responses and asks again for every READ it has outstanding gets them
/// without delay; past it the replay waits for the next interval, and further duplicates
/// neither displace it nor add to it. A peer replaying one small request at full speed thus
/// gets at most the budget and one burst per interval, however many requests it sends. The
/// interval is [`READ_REPLY_INTERVAL_MS`], or [`READ_REPLY_DUTY`] times what the last burst
/// took to build if that is longer, so that a stream never keeps a slow CPU (a debug kernel, an
/// emulated one) busy for more than a fraction of its time.
/// Bursts are built outside the responder's lock ([`ReadStream::take_burst`], then
/// [`ReadStream::finish_burst`]); a reply replaced meanwhile (a replay, a reset) makes the
/// built burst's rest stale, which the generation number detects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStream {
    /// What is left to send.
    pending: Option<ReadReply>,
    /// When the next burst may go (ms since boot); 0: at once.
    next_ms: u64,
    /// A burst of `pending` is being built and sent; nobody else starts one.
    busy: bool,
    /// Bumped on every change of `pending` that is not the end of a burst.
    pub(super) generation: u32,
    /// `pending` is a replay held back for want of budget: later duplicates leave it be.
    held_replay: bool,
    /// Start of the current replay window (ms since boot).
    window_ms: u64,
    /// Length of the current window: the interval as of its start.
    window_len_ms: u64,
    /// Responses replays may still send at once in the current window.
    replay_left: u32,
    /// The interval the last burst asks for ([`READ_REPLY_INTERVAL_MS`] at least).
    interval_ms: u64,
}

/// A burst to build: the reply to send from, and the stream's generation when it was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadBurst {
    /// The reply, from its next response on.
    pub reply: ReadReply,
    /// [`ReadStream`]'s generation, for [`ReadStream::finish_burst`].
    pub generation: u32,
}

impl ReadStream {
    /// Whether responses are still to go out (or going out): a later request's response would
    /// overtake them (IBA 9.5: responses in request order).
    pub const fn active(&self) -> bool {
        self.pending.is_some() || self.busy
    }

    /// Forgets the reply (modify QP `rq_psn`, RESET).
    pub fn clear(&mut self) {
        self.pending = None;
        self.held_replay = false;
        self.generation = self.generation.wrapping_add(1);
    }

    /// A new READ's reply: due at once.
    pub fn start(&mut self, reply: ReadReply) {
        self.pending = Some(reply);
        self.held_replay = false;
        self.next_ms = 0;
        self.generation = self.generation.wrapping_add(1);
    }

    /// A reply whose first burst went out another way (the loopback drainer delivers it): the
    /// rest follows an interval after `now_ms`.
    pub fn start_later(&mut self, rest: ReadReply, now_ms: u64) {
        self.pending = Some(rest);
        self.held_replay = false;
        self.next_ms = now_ms.saturating_add(self.interval_ms.max(READ_REPLY_INTERVAL_MS));
        self.generation = self.generation.wrapping_add(1);
    }

    /// A duplicate READ's replay at `now_ms`, whose first burst is `responses` long: it
    /// replaces what is left of the reply, unless a replay is held back already. Returns
    /// whether its burst goes now (the stream is idle and the window's budget covers it);
    /// otherwise the device tick sends it when it is due.
    pub fn replay(&mut self, reply: ReadReply, responses: u32, now_ms: u64) -> bool {
        if now_ms >= self.window_ms.saturating_add(self.window_len_ms) {
            self.window_ms = now_ms;
            self.window_len_ms = self.interval_ms.max(READ_REPLY_INTERVAL_MS);
            self.replay_left = READ_REPLAY_BUDGET;
        }
        if self.held_replay && self.pending.is_some() {
            // The earliest held replay keeps its place: the requester asks again for the rest.
            return false;
        }
        self.pending = Some(reply);
        self.generation = self.generation.wrapping_add(1);
        let cost = responses.clamp(1, READ_REPLY_BURST);
        if !self.busy && self.replay_left >= cost {
            self.replay_left -= cost;
            self.held_replay = false;
            self.next_ms = 0;
            true
        } else {
            self.held_replay = true;
            self.next_ms = self
                .next_ms
                .max(self.window_ms.saturating_add(self.window_len_ms));
            false
        }
    }

    /// Whether a reply (or the rest of one) waits to be sent: the device tick must keep
    /// visiting the QP.
    pub const fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Whether a burst is due at `now_ms` (the device tick asks).
    pub const fn due(&self, now_ms: u64) -> bool {
        self.pending.is_some() && !self.busy && now_ms >= self.next_ms
    }

    /// Claims the next burst to build, if one is pending and nobody builds one.
    pub fn take_burst(&mut self) -> Option<ReadBurst> {
        if self.busy {
            return None;
        }
        let reply = self.pending?;
        self.busy = true;
        self.held_replay = false;
        Some(ReadBurst {
            reply,
            generation: self.generation,
        })
    }

    /// The burst claimed as `generation` was built, which took `took_ms`: `rest` is what
    /// follows it (`None`: the reply is complete, or it failed and the requester asks again).
    /// What is left may go an interval after `now_ms`. A reply replaced since the claim keeps
    /// its place. The stream stays busy until [`ReadStream::sent`], so that nothing overtakes
    /// the burst on its way out.
    pub fn finish_burst(
        &mut self,
        generation: u32,
        rest: Option<ReadReply>,
        now_ms: u64,
        took_ms: u64,
    ) {
        self.interval_ms = READ_REPLY_INTERVAL_MS.max(took_ms.saturating_mul(READ_REPLY_DUTY));
        if self.generation == generation {
            self.pending = rest;
            self.next_ms = now_ms.saturating_add(self.interval_ms);
        } else {
            // A replay replaced the reply meanwhile: held, it goes when its window allows.
            self.next_ms = self.next_ms.max(now_ms.saturating_add(self.interval_ms));
        }
    }

    /// The burst has been handed to the network.
    pub fn sent(&mut self) {
        self.busy = false;
    }
}

/// Responses that replays of duplicate READs may send at once per interval, on one QP: one
/// burst, more than roxe's requester ever has outstanding
/// ([`super::req::single_request_read_window`]).
pub const READ_REPLAY_BUDGET: u32 = READ_REPLY_BURST;

/// The least time between two bursts of a READ reply, as a multiple of the time the first of
/// them took to build: at most a fifth of a CPU goes to one reply stream.
pub const READ_REPLY_DUTY: u64 = 4;

/// A stream of RDMA READ responses to send: new, or replayed for a duplicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadReply {
    /// PSN of the first response.
    pub first_psn: Psn,
    /// Address of the first byte to send.
    pub va: u64,
    /// The R_Key to read through.
    pub rkey: u32,
    /// Bytes to send.
    pub len: u32,
    /// A replay that starts inside the original response stream: it continues with MIDDLE and
    /// LAST responses, as the requester's read in progress expects (rxe `read_reply` does the
    /// same; a requester accepts a restart at FIRST only at the READ's first PSN).
    pub resumes: bool,
}

impl ReadReply {
    /// The responses, with their opcodes, PSNs, offsets from [`ReadReply::va`] and lengths.
    pub fn packets(&self, mtu: Pmtu) -> ReadResponses {
        ReadResponses {
            next_psn: self.first_psn,
            offset: 0,
            remaining: self.len,
            mtu: mtu.bytes(),
            continuing: self.resumes,
            done: self.resumes && self.len == 0,
        }
    }

    /// How many responses the reply takes (one for an empty READ).
    pub const fn responses(&self, mtu: Pmtu) -> u32 {
        let mtu = mtu.bytes();
        if self.len == 0 {
            1
        } else {
            self.len.div_ceil(mtu)
        }
    }

    /// The part of the reply after its first `sent` responses, which continues with MIDDLE and
    /// LAST responses; `None` when the reply has no more than `sent` responses.
    pub fn rest_after(&self, mtu: Pmtu, sent: u32) -> Option<ReadReply> {
        let seg = self.packets(mtu).nth(sent as usize)?;
        Some(ReadReply {
            first_psn: seg.psn,
            va: self.va.wrapping_add(u64::from(seg.offset)),
            rkey: self.rkey,
            len: self.len.saturating_sub(seg.offset),
            resumes: true,
        })
    }

    /// The key check the data needs. A replay checks the key again, since the MR may have been
    /// invalidated or deregistered since the original READ (rxe: `rxe_recheck_mr`). `None` for
    /// a zero-length READ, which reads nothing.
    pub const fn access(&self) -> Option<RemoteAccess> {
        if self.len == 0 {
            return None;
        }
        Some(RemoteAccess {
            rkey: self.rkey,
            va: self.va,
            len: self.len as u64,
            needed: Access::REMOTE_READ,
            whole_region: false,
            atomic: false,
        })
    }
}

/// One RDMA READ response packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadResponseSegment {
    /// RDMA READ RESPONSE FIRST, MIDDLE, LAST or ONLY.
    pub opcode: Opcode,
    /// The BTH PSN.
    pub psn: Psn,
    /// Offset of the payload from the reply's first byte.
    pub offset: u32,
    /// Payload bytes: the MTU, except in a LAST or ONLY.
    pub len: u32,
    /// Whether it carries an AETH: FIRST, LAST and ONLY do, MIDDLE does not (IBA 9.2, the
    /// opcode table).
    pub has_aeth: bool,
}

/// Iterator over the packets of a [`ReadReply`], from [`ReadReply::packets`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadResponses {
    next_psn: Psn,
    offset: u32,
    remaining: u32,
    mtu: u32,
    /// A response was already sent (or the reply resumes a stream): the next is a MIDDLE or LAST.
    continuing: bool,
    done: bool,
}

impl Iterator for ReadResponses {
    type Item = ReadResponseSegment;

    fn next(&mut self) -> Option<ReadResponseSegment> {
        if self.done {
            return None;
        }
        let last = self.remaining <= self.mtu;
        let len = if last { self.remaining } else { self.mtu };
        let opcode = match (self.continuing, last) {
            (false, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
            (false, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
            (true, false) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
            (true, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
        };
        let segment = ReadResponseSegment {
            opcode,
            psn: self.next_psn,
            offset: self.offset,
            len,
            has_aeth: opcode.info().is_some_and(|i| i.has(ExtHeader::Aeth)),
        };
        self.next_psn = self.next_psn.next();
        self.offset = self.offset.wrapping_add(len);
        self.remaining -= len;
        self.continuing = true;
        self.done = last;
        Some(segment)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = if self.done {
            0
        } else {
            self.remaining.div_ceil(self.mtu).max(1) as usize
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for ReadResponses {}

impl core::iter::FusedIterator for ReadResponses {}
