// SPDX-License-Identifier: GPL-2.0

//! Retransmission: the retry counters ([`RetryCounters`]: transport and RNR retries), the local
//! ACK timeout ([`ack_timeout_ms`]) and what its timer firing does ([`on_ack_timeout`]).

use super::*;

/// What a transport retry (ACK timeout, PSN sequence error NAK, implicit NAK) may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutVerdict {
    /// Retransmit; one retry was used.
    Retry,
    /// No retry is left: the WQE completes with `IB_WC_RETRY_EXC_ERR`.
    Exhausted,
}

/// What an RNR NAK may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RnrVerdict {
    /// Wait for the RNR timer, then retransmit.
    Wait,
    /// No RNR retry is left: the WQE completes with `IB_WC_RNR_RETRY_EXC_ERR`.
    Exhausted,
}

/// The two retry counters of an RC requester (IBA 9.7.6.1.3 and 9.7.5.2.8): transport retries
/// and RNR retries, each counting down from the QP's `retry_cnt` and `rnr_retry` attributes.
/// Both go back to their attribute values whenever a response shows progress (IBA 9.7.5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryCounters {
    retry_cnt: u8,
    rnr_retry: u8,
    retries_left: u8,
    rnr_retries_left: u8,
}

impl RetryCounters {
    /// Counters for the attributes `retry_cnt` and `rnr_retry` (3-bit values; higher ones are
    /// cut to 7, which `check_retry_cnt` and `check_rnr_retry` refuse anyway).
    pub const fn new(retry_cnt: u8, rnr_retry: u8) -> RetryCounters {
        let retry_cnt = if retry_cnt > 7 { 7 } else { retry_cnt };
        let rnr_retry = if rnr_retry > 7 { 7 } else { rnr_retry };
        RetryCounters {
            retry_cnt,
            rnr_retry,
            retries_left: retry_cnt,
            rnr_retries_left: rnr_retry,
        }
    }

    /// Transport retries left.
    pub const fn retries_left(&self) -> u8 {
        self.retries_left
    }

    /// RNR retries left (meaningless when the attribute is 7, "retry forever").
    pub const fn rnr_retries_left(&self) -> u8 {
        self.rnr_retries_left
    }

    /// Uses a transport retry. Timeouts, PSN sequence error NAKs and implicit NAKs all count.
    /// Unlike rxe, which never decrements a `retry_cnt` of 7, 7 means seven retries: only the
    /// RNR retry count has an "infinite" value (IBA 9.7.5.2.8).
    pub fn on_timeout(&mut self) -> TimeoutVerdict {
        match self.retries_left.checked_sub(1) {
            Some(left) => {
                self.retries_left = left;
                TimeoutVerdict::Retry
            }
            None => TimeoutVerdict::Exhausted,
        }
    }

    /// Uses an RNR retry; an `rnr_retry` of 7 never runs out.
    pub fn on_rnr_nak(&mut self) -> RnrVerdict {
        if rnr_retry_is_infinite(self.rnr_retry) {
            return RnrVerdict::Wait;
        }
        match self.rnr_retries_left.checked_sub(1) {
            Some(left) => {
                self.rnr_retries_left = left;
                RnrVerdict::Wait
            }
            None => RnrVerdict::Exhausted,
        }
    }

    /// Refills both counters: a response made progress.
    pub fn reset(&mut self) {
        self.retries_left = self.retry_cnt;
        self.rnr_retries_left = self.rnr_retry;
    }
}

/// The least time, in ms, roxe waits for an acknowledgement before a transport retry.
///
/// IBA 9.7.6.1.3 makes 4.096 us * 2^timeout the least time before a retry, not the most: a soft
/// HCA may be far slower than the consumer assumed (a debug kernel under emulation takes
/// hundreds of ms over a 100 KB message), and an early retry only adds duplicates to a busy
/// responder and spends the retry count without a loss.
pub const MIN_ACK_TIMEOUT_MS: u64 = 500;

/// The local ACK timeout in ms for the QP attribute `timeout` (0: no timer, IBA 9.7.6.1.3),
/// never below [`MIN_ACK_TIMEOUT_MS`]. The device's tick checks timers every 10 ms, so
/// finer values would mean nothing.
pub const fn ack_timeout_ms(timeout: u8) -> u64 {
    match ack_timeout_ns(timeout) {
        None => 0,
        Some(ns) => {
            let ms = ns / 1_000_000;
            if ms < MIN_ACK_TIMEOUT_MS {
                MIN_ACK_TIMEOUT_MS
            } else {
                ms
            }
        }
    }
}

/// The retransmission timer fired (IBA 9.7.6.1.3: no response within the local ACK timeout).
/// Retries from the expected PSN, even while another retry is under way, unless nothing is
/// outstanding: no started WQE (`oldest` is `None`) or every PSN sent below `psn_limit` is
/// acknowledged. The answer is [`CompAction::Ignore`], [`CompAction::Retry`] or
/// [`CompAction::Error`] with `IB_WC_RETRY_EXC_ERR` for the oldest WQE.
pub fn on_ack_timeout(
    state: &mut CompState,
    oldest: Option<&Outstanding>,
    psn_limit: Psn,
) -> CompAction {
    if oldest.is_none() || state.expected_psn.diff(psn_limit) >= 0 {
        return CompAction::Ignore;
    }
    state.start_retry(true)
}
