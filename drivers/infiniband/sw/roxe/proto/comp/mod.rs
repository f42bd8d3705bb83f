// SPDX-License-Identifier: GPL-2.0

//! Completer logic (IBA 9.7.5 and rxe's rxe_comp.c, as pure decisions): what an ACK, NAK, RNR NAK, read response or atomic acknowledge means for the oldest outstanding send WQEs, retransmission and the retry counters, and the completion status of each WQE.
//!
//! The completer of an RC QP keeps a [`CompState`]: the PSN of the next response it expects,
//! the retry counters and whether a retry is under way. For each received response packet the
//! kernel fills an [`AckFacts`] ([`AckFacts::from_packet`]) and asks [`on_response`] what it
//! means for the oldest send WQE that has started ([`Outstanding`]); when the retransmission
//! timer fires it asks [`on_ack_timeout`]. Both update the state and answer a [`CompAction`].
//!
//! Acknowledgements are cumulative: a response for PSN `n` tells that the responder executed
//! every request before `n` (it executes them in order), so one packet may complete several
//! WQEs. The answer [`CompAction::CompleteAndRecheck`] says so: complete the oldest WQE, then
//! ask again with the same packet for the next one.
//!
//! UC and UD have no completer: their WQEs complete once sent ([`completes_without_ack`]).

mod order;
mod response;
mod retry;

pub use order::*;
pub use response::*;
pub use retry::*;

use core::cmp::Ordering;

use super::cqe::WcStatus;
use super::mtu::Pmtu;
use super::opcode::{ExtHeader, Opcode, Operation, Transport};
use super::packet::{Aeth, NakCode, Packet, Syndrome};
use super::psn::Psn;
use super::qp_state::{ack_timeout_ns, rnr_retry_is_infinite, rnr_timer_us};
use super::req::{is_local_op, psns_of, read_request_size, ReqConfig, WqeProgress};
use super::wqe::{QpType, SendOpcode, SendWqe};

/// The completer's state for one RC QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompState {
    /// The PSN of the next response expected: every PSN before it is acknowledged. Retries
    /// start from it.
    pub expected_psn: Psn,
    /// The requester's segment (`Pmtu`), which sizes RDMA READ response packets.
    pub mtu: Pmtu,
    /// The retry counters.
    pub counters: RetryCounters,
    /// A retry was started and no response has shown progress since. Further NAKs and
    /// implicit NAKs are then ignored, so that one loss starts one retry; only a timeout starts
    /// another (the retransmission itself may be lost).
    pub retry_pending: bool,
}

impl CompState {
    /// The state of a QP entering RTS with send PSN `sq_psn`.
    pub const fn new(sq_psn: Psn, mtu: Pmtu, retry_cnt: u8, rnr_retry: u8) -> CompState {
        CompState {
            expected_psn: sq_psn,
            mtu,
            counters: RetryCounters::new(retry_cnt, rnr_retry),
            retry_pending: false,
        }
    }

    /// A response showed progress: refill the counters and end any retry.
    fn progress(&mut self) {
        self.counters.reset();
        self.retry_pending = false;
    }

    /// Acknowledges every PSN before `psn`.
    fn acknowledge_before(&mut self, psn: Psn) {
        if psn.diff(self.expected_psn) > 0 {
            self.expected_psn = psn;
        }
    }

    /// Starts a transport retry from the expected PSN, unless one is under way (`forced`: a
    /// timeout, which retries regardless).
    fn start_retry(&mut self, forced: bool) -> CompAction {
        if self.retry_pending && !forced {
            return CompAction::Ignore;
        }
        match self.counters.on_timeout() {
            TimeoutVerdict::Retry => {
                self.retry_pending = true;
                CompAction::Retry {
                    from_psn: self.expected_psn,
                }
            }
            TimeoutVerdict::Exhausted => CompAction::Error {
                status: WcStatus::RetryExcErr,
            },
        }
    }
}

/// What the kernel does with a response packet or a timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompAction {
    /// Drop the packet: a duplicate or stale response, one for a PSN not sent yet, one the
    /// oldest WQE cannot use yet (READ response data past a gap already asked for again), or
    /// nothing is outstanding.
    Ignore,
    /// The packet acknowledged part of the oldest WQE; nothing completes.
    Progress,
    /// The packet acknowledged the oldest WQE: complete it successfully. Done with the packet.
    Complete,
    /// The packet acknowledged the oldest WQE implicitly (its PSN is beyond the WQE's): complete
    /// it successfully, then ask [`on_response`] again with the same packet for the next WQE.
    CompleteAndRecheck,
    /// Place the payload at `offset` of the RDMA READ's local buffers (IBA 9.7.4.1.3: response
    /// packet `k` carries bytes from `k * mtu`). If that fails, complete the WQE with
    /// `IB_WC_LOC_PROT_ERR` and move the QP to the error state. Then, if `completes`, complete
    /// the WQE successfully.
    ReadData {
        /// Offset in the message.
        offset: u32,
        /// Bytes to place (the whole payload).
        len: u32,
        /// The packet is the last of the response.
        completes: bool,
    },
    /// Store the original value of the atomic into the WQE's 8-byte buffer (in host order), then
    /// complete it successfully (`IB_WC_LOC_PROT_ERR` if the store fails).
    AtomicResult {
        /// The value before the atomic operation.
        orig: u64,
    },
    /// Retransmit from `from_psn`: the WQE holding it resumes there and later WQEs restart.
    Retry {
        /// The first PSN to send again.
        from_psn: Psn,
    },
    /// The responder had no receive WQE: wait `delay_us`, then retransmit from `from_psn`.
    RnrWait {
        /// The delay the RNR NAK asked for (IBA 9.7.5.2.8).
        delay_us: u32,
        /// The first PSN to send again.
        from_psn: Psn,
    },
    /// Complete the oldest WQE with `status` and move the QP to the error state (the other
    /// WQEs then flush with `IB_WC_WR_FLUSH_ERR`).
    Error {
        /// The completion status.
        status: WcStatus,
    },
}

// Last: tools/deps.py reads a file only up to its test module, and must see the imports above.
#[cfg(test)]
mod tests;
