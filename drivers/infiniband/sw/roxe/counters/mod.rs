// SPDX-License-Identifier: GPL-2.0

//! The port's hardware counters, as a NIC has them: read with `rdma statistic show link roxe0/1`
//! or in `/sys/class/infiniband/roxe0/ports/1/hw_counters/`.
//!
//! Rust counterpart of rxe's `rxe_hw_counters.c`. The first counters are rdma_rxe's (Linux 7.3),
//! by its names, in its order and with its meaning, so that what reads rxe's counters reads
//! roxe's; roxe's own follow. `Documentation/counters.md` lists them all with their meaning.

#![deny(unsafe_code)]

pub(crate) mod pma;

use crate::rdma::driver::StatDesc;
use kernel::sync::atomic::{Atomic, Relaxed};

/// One counter of [`Counters`]; the value is its index in [`DESCS`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Counter {
    /// Packets handed to the network (or the loopback queue) successfully.
    SentPkts,
    /// Packets received that passed the header and ICRC checks and reached a device.
    RcvdPkts,
    /// Requests the responder saw again (PSN behind the expected one): retransmissions.
    DuplicateRequest,
    /// Requests ahead of the expected PSN (a packet was lost): answered with a sequence NAK.
    OutOfSeqRequest,
    /// RNR NAKs received by the requester.
    RcvdRnrErr,
    /// RNR NAKs sent by the responder (no receive WQE).
    SendRnrErr,
    /// PSN sequence error NAKs received by the requester.
    RcvdSeqErr,
    /// Responses (ACKs, NAKs, READ responses, atomic acknowledges) handed to a QP's completer.
    /// rxe defers each to its send task and counts it then (`RXE_CNT_SENDER_SCHED`); roxe's
    /// completer handles it on arrival and counts the same packets.
    AckDeferred,
    /// Requests failed with `IBV_WC_RETRY_EXC_ERR`: the transport retries ran out.
    RetryExceededErr,
    /// Requests failed with `IBV_WC_RNR_RETRY_EXC_ERR`: the RNR retries ran out.
    RetryRnrExceededErr,
    /// Retransmissions by the requester (timeouts and sequence NAKs).
    CompleterRetryErr,
    /// Packets built for the network that it did not take: no route, or the IP layer refused
    /// or dropped them, or no memory for the socket buffer a packet built elsewhere is copied
    /// into.
    SendErr,
    /// Transitions of the port to down.
    LinkDowned,
    /// SEND work requests (plain, with immediate, with invalidate) completed by the requester,
    /// with success or an error, signalled or not; flushed ones do not count.
    RdmaSends,
    /// Receive work requests completed successfully: a SEND, or an RDMA WRITE with immediate,
    /// consumed them.
    RdmaRecvs,
    /// Bytes of the packets counted by `sent_pkts`, as IP packets: IP and UDP headers, the
    /// RoCE headers, payload, padding and ICRC.
    SentBytes,
    /// Bytes of the packets counted by `rcvd_pkts`, measured as `sent_bytes` is.
    RcvdBytes,
    /// Received packets dropped because their ICRC did not match (corrupted in flight).
    RcvdIcrcErr,
    /// Received packets dropped for any other reason: too short or malformed headers, an unknown
    /// QP, a multicast group with no member here, or a QP that does not receive (RESET, INIT or
    /// ERR, IBA 10.3.1).
    RcvdDrops,
    /// Received RC or UC packets dropped because their IP source and destination are not the
    /// connected QP's peer and own address (rdma_rxe's `check_addr`): injected or misrouted.
    RcvdPeerMismatch,
    /// Completions that found their CQ full (IBA 11.4.2.1): the CQ reports `IB_EVENT_CQ_ERR`
    /// once and the QP that completed goes to the error state.
    CqOverflow,
    /// On-demand paging registrations (and implicit MRs' children) refused because they would
    /// pass the process's or the device's ODP budget (`param::ODP_PROCESS_RAM_SHARE`). Read
    /// from the device's budget, which counts them.
    OdpRefused,
    /// Times an RC requester waited because the QPs to its peer had the peer's shared send
    /// window full (`peer`): with a response of its own on the way, or for a turn.
    PeerWindowWaits,
    /// Times a peer's shared send window was halved after a loss (a PSN sequence NAK or an ACK
    /// timeout of a QP to that peer; `peer`).
    PeerWindowCuts,
    /// Times an RC requester with nothing unacknowledged joined its peer's queue to wait for a
    /// turn at the shared send window (`peer`).
    PeerWindowTurns,
    /// Packets for the device's own GIDs that went through a socket buffer and the loopback
    /// queue: sent while another delivery was under way, or by a stage other than a requester's
    /// run (READ reply bursts after the first, retransmissions, packets from other contexts).
    LoopbackQueued,
}

/// How many counters there are.
const COUNT: usize = 26;

/// The counters' names, in [`Counter`] order: rdma_rxe's (`rxe_counter_descs`), then roxe's.
pub(crate) static DESCS: [StatDesc; COUNT] = [
    StatDesc::new(c"sent_pkts"),
    StatDesc::new(c"rcvd_pkts"),
    StatDesc::new(c"duplicate_request"),
    StatDesc::new(c"out_of_seq_request"),
    StatDesc::new(c"rcvd_rnr_err"),
    StatDesc::new(c"send_rnr_err"),
    StatDesc::new(c"rcvd_seq_err"),
    StatDesc::new(c"ack_deferred"),
    StatDesc::new(c"retry_exceeded_err"),
    StatDesc::new(c"retry_rnr_exceeded_err"),
    StatDesc::new(c"completer_retry_err"),
    StatDesc::new(c"send_err"),
    StatDesc::new(c"link_downed"),
    StatDesc::new(c"rdma_sends"),
    StatDesc::new(c"rdma_recvs"),
    StatDesc::new(c"sent_bytes"),
    StatDesc::new(c"rcvd_bytes"),
    StatDesc::new(c"rcvd_icrc_err"),
    StatDesc::new(c"rcvd_drops"),
    StatDesc::new(c"rcvd_peer_mismatch"),
    StatDesc::new(c"cq_overflow"),
    StatDesc::new(c"odp_refused"),
    StatDesc::new(c"peer_window_waits"),
    StatDesc::new(c"peer_window_cuts"),
    StatDesc::new(c"peer_window_turns"),
    StatDesc::new(c"loopback_queued"),
];

/// A device's counters. Incremented from any context without a lock.
pub(crate) struct Counters([Atomic<u64>; COUNT]);

impl Counters {
    pub(crate) const fn new() -> Self {
        Counters([const { Atomic::new(0) }; COUNT])
    }

    /// Adds one to `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Adds `n` to `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        if let Some(v) = self.0.get(c as usize) {
            v.add(n, Relaxed);
        }
    }

    /// Counts `n` packets of `bytes` bytes in all, sent successfully.
    pub(crate) fn sent(&self, n: u64, bytes: u64) {
        self.add(Counter::SentPkts, n);
        self.add(Counter::SentBytes, bytes);
    }

    /// Counts a packet of `bytes` bytes received that passed the checks.
    pub(crate) fn received(&self, bytes: u64) {
        self.inc(Counter::RcvdPkts);
        self.add(Counter::RcvdBytes, bytes);
    }

    /// The value of `c`.
    pub(crate) fn get(&self, c: Counter) -> u64 {
        self.0.get(c as usize).map_or(0, |v| v.load(Relaxed))
    }

    /// Copies the values, in [`DESCS`] order, into `out` (as many as fit).
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, v) in out.iter_mut().zip(self.0.iter()) {
            *o = v.load(Relaxed);
        }
    }
}
