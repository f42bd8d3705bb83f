// SPDX-License-Identifier: GPL-2.0

//! On-demand paging: page faults of the data path. Counterpart of rxe's `rxe_odp.c`.
//!
//! The engines run in softirq, where faulting memory in (`hmm_range_fault`) is impossible: it
//! sleeps. When a copy finds an ODP page missing (`MemError::NotPresent`), the engine queues a
//! fault here and deals with the packet in a way that needs nothing from it until the fault is
//! done:
//!
//! - the responder of an RC QP answers with an RNR NAK (as ConnectX HCAs do on an ODP fault),
//!   without consuming anything; the requester sends again after the RNR timer;
//! - the requester leaves the WQE where it is and queues a kick of its QP after the fault;
//! - the completer treats the response as lost: the requester's retry asks again (the requester
//!   faults READ and atomic destinations in before asking, so this is the rare case of an
//!   invalidation in between);
//! - the responder of a UD QP, which has no NAK, defers the packet: a copy is queued after the
//!   fault and handed to the responder again from process context.
//!
//! Jobs run in order in the device's process work ([`next_stage_job`], which hands kicks and
//! redeliveries back to the stages' caller), so a kick or a redelivery queued after a fault runs
//! after it.

#![deny(unsafe_code)]

use crate::rdma::device::Device;
use crate::{
    hca::Roxe,
    mem::mr::RoxeMr,
    mem::SgeList,
    net::source::Source,
    proto::{
        mtt::{Access, MemKey},
        packet::Packet,
    },
};
use kernel::prelude::*;

/// Most jobs queued per device. Faults are deduplicated, so this bounds memory under a flood of
/// misses (a peer writing to pages that were never touched); past it a miss is handled as a
/// lost packet and the peer's retry tries again.
const MAX_JOBS: usize = 512;

/// Most pages one fault brings in: the rest of a long message faults in on the next miss.
const MAX_FAULT_PAGES: usize = 512;

/// Work for the device's process work.
pub(crate) enum Job {
    /// Fault in pages `first..first + count` of the MR with key index `index`, if it still has
    /// key `key`.
    Fault {
        index: u32,
        key: u32,
        first: usize,
        count: usize,
    },
    /// Work of a stage, which the process work hands to it ([`next_stage_job`]).
    Stage(StageJob),
}

/// A job for a stage of the pipeline, queued behind the faults it waits for.
pub(crate) enum StageJob {
    /// Run QP `qpn`'s requester.
    Kick { qpn: u32 },
    /// Hand a deferred request packet from `src` to QP `qpn`'s responder again.
    Redeliver {
        qpn: u32,
        bytes: KVec<u8>,
        src: Source,
    },
}

fn push(dev: &Device<Roxe>, job: Job) -> bool {
    {
        let mut jobs = dev.data().odp_jobs.lock();
        let dup = jobs.iter().any(|j| match (j, &job) {
            (
                Job::Fault {
                    index,
                    key,
                    first,
                    count,
                },
                Job::Fault {
                    index: i2,
                    key: k2,
                    first: f2,
                    count: c2,
                },
            ) => index == i2 && key == k2 && *first <= *f2 && f2 + c2 <= first + count,
            (Job::Stage(StageJob::Kick { qpn }), Job::Stage(StageJob::Kick { qpn: q2 })) => {
                qpn == q2
            }
            _ => false,
        });
        if !dup {
            if jobs.len() >= MAX_JOBS || jobs.push(job, GFP_ATOMIC).is_err() {
                return false;
            }
        }
    }
    dev.queue_process_work();
    true
}

/// Queues a fault of the ODP pages behind `[va, va + len)` of `mr` (nothing for other MRs).
/// Any context. Returns whether a fault is queued.
pub(crate) fn fault_mr(dev: &Device<Roxe>, mr: &RoxeMr, va: u64, len: u64) -> bool {
    let Some((first, count)) = mr.odp_pages(va, len, MAX_FAULT_PAGES) else {
        return false;
    };
    let key = mr.key().raw();
    push(
        dev,
        Job::Fault {
            index: MemKey::from_raw(key).index(),
            key,
            first,
            count: count.min(MAX_FAULT_PAGES),
        },
    )
}

/// Queues faults of the ODP pages behind bytes `offset..offset + len` of an SGE list used with
/// `need` rights by a QP of PD `pd_id`. Any context.
/// Returns false if a fault could not be queued.
pub(crate) fn fault_sges(
    dev: &Device<Roxe>,
    pd_id: u64,
    list: &SgeList<'_>,
    offset: u64,
    len: usize,
    need: Access,
) -> bool {
    let mut all = true;
    let _ = list.walk(dev, pd_id, offset, len, need, |mr, va, r| {
        if mr.odp_pages(va, r.len() as u64, 1).is_some() {
            all &= fault_mr(dev, mr, va, r.len() as u64);
        }
        Ok(())
    });
    all
}

/// Queues a run of QP `qpn`'s requester after the faults queued so far. Any context.
pub(crate) fn kick_after(dev: &Device<Roxe>, qpn: u32) -> bool {
    push(dev, Job::Stage(StageJob::Kick { qpn }))
}

/// Times one datagram is handed back to a responder after a fault before it is dropped: a page
/// that is present after its fault needs one; one invalidated again before the redelivery, a
/// second.
pub(crate) const MAX_REDELIVERIES: u8 = 4;

/// Queues a copy of request `pkt` from `src` for QP `qpn`'s responder, after the faults queued
/// so far. Any context. Returns false (the packet is then lost, as on the wire) when out of
/// memory or jobs, or when it was handed back [`MAX_REDELIVERIES`] times already.
pub(crate) fn redeliver_after(
    dev: &Device<Roxe>,
    qpn: u32,
    pkt: &Packet<&[u8]>,
    src: &Source,
) -> bool {
    if src.redeliveries >= MAX_REDELIVERIES {
        return false;
    }
    // The packet's bytes are all of it: only UD redelivers, and a UD packet never leaves its
    // payload in the sender's MR (`req::local_source`).
    let mut bytes = KVec::new();
    if bytes.extend_from_slice(pkt.as_bytes(), GFP_ATOMIC).is_err() {
        return false;
    }
    push(
        dev,
        Job::Stage(StageJob::Redeliver {
            qpn,
            bytes,
            // The process work that hands it over again holds no drainer claim: its responses
            // leave as packets, never through the slot only a drainer empties.
            src: Source {
                local: false,
                payload_in_slot: false,
                redeliveries: src.redeliveries + 1,
                ..*src
            },
        }),
    )
}

/// The device's process work: runs the queued faults in order, up to the first job of a stage,
/// which it hands back for the caller to run; `None` once the queue is empty or `budget` (jobs,
/// faults and stage jobs alike, counted down) is spent. Process context.
pub(crate) fn next_stage_job(dev: &Device<Roxe>, budget: &mut u32) -> Option<StageJob> {
    loop {
        if *budget == 0 {
            return None;
        }
        *budget -= 1;
        // One at a time, so that jobs queued meanwhile (behind the current one) keep their place.
        let job = {
            let mut jobs = dev.data().odp_jobs.lock();
            if jobs.is_empty() {
                return None;
            }
            jobs.remove(0).ok()?
        };
        match job {
            Job::Fault {
                index,
                key,
                first,
                count,
            } => {
                let Some(mr) = dev.data().mrs.get(index) else {
                    continue;
                };
                if mr.key().raw() == key {
                    // A failure marks the pages failed: the next access reports an error.
                    let _ = mr.odp_fault(first, count);
                }
            }
            Job::Stage(s) => return Some(s),
        }
    }
}
