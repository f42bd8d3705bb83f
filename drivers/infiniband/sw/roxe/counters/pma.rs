// SPDX-License-Identifier: GPL-2.0

//! The port's performance-management agent (`process_mad`): answers PerfMgt queries for the
//! port counters (`/sys/class/infiniband/roxe0/ports/1/counters/`, `perfquery`) from the
//! hardware counters. The MAD layout is in `proto::pma`; `Documentation/counters.md` says which
//! hardware counter each port counter shows.

#![deny(unsafe_code)]

use crate::counters::{Counter, Counters};
use crate::hca::PORT;
use crate::proto::pma::{self, Answer, PortCounts};
use crate::rdma::driver::{MadResult, MAD_SIZE};

/// The device's port as a MAD's 8-bit PortSelect.
const PORT_SELECT: u8 = PORT as u8;
const _: () = assert!(PORT <= u8::MAX as u32);

/// Answers MAD `input` for `port` of the device with `counters` into `output` (see
/// [`pma::answer`]).
pub(crate) fn process_mad(
    counters: &Counters,
    port: u32,
    input: &[u8; MAD_SIZE],
    output: &mut [u8; MAD_SIZE],
) -> MadResult {
    if port != PORT {
        return MadResult::Failure;
    }
    match pma::answer(PORT_SELECT, input, output, &port_counts(counters)) {
        Answer::Pass => MadResult::Pass,
        Answer::Reply => MadResult::Reply,
    }
}

/// The port counters' sources among the hardware counters.
fn port_counts(c: &Counters) -> PortCounts {
    PortCounts {
        xmit_octets: c.get(Counter::SentBytes),
        rcv_octets: c.get(Counter::RcvdBytes),
        xmit_packets: c.get(Counter::SentPkts),
        rcv_packets: c.get(Counter::RcvdPkts),
        rcv_errors: c.get(Counter::RcvdIcrcErr),
        xmit_discards: c.get(Counter::SendErr),
        link_downed: c.get(Counter::LinkDowned),
    }
}
