// SPDX-License-Identifier: GPL-2.0

//! The responder resources (IBA 9.7.5.2.7): the READ and atomic requests a QP keeps for
//! duplicates, and how many READ responses a request takes.

use super::*;

/// The number of PSNs, and so of response packets, an RDMA READ of `len` bytes takes: one per
/// MTU, and one for a zero-length READ (IBA 9.7.1: a READ request consumes a PSN per response
/// packet).
pub const fn read_response_count(len: u32, mtu: Pmtu) -> u32 {
    if len == 0 {
        1
    } else {
        len.div_ceil(mtu.bytes())
    }
}

/// An RDMA READ request kept for replay (rxe: `struct resp_res`), or another request that must
/// execute at most once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// An RDMA READ: its PSN range and the original RETH.
    Read {
        /// PSN of the request, and of its first response.
        first_psn: Psn,
        /// PSN of its last response.
        last_psn: Psn,
        /// The RETH's virtual address.
        va: u64,
        /// The RETH's R_Key.
        rkey: u32,
        /// The RETH's DMA length.
        len: u32,
    },
    /// A compare and swap or fetch and add that executed, with the value it returned. A
    /// duplicate gets this value again and never runs the atomic twice (IBA 9.4.5).
    Atomic {
        /// PSN of the request.
        psn: Psn,
        /// The remote value before the atomic.
        original: u64,
    },
    /// An ATOMIC WRITE that executed (annex A19: replayed without executing again).
    AtomicWrite {
        /// PSN of the request.
        psn: Psn,
    },
    /// A FLUSH that executed (annex A19: replayed without flushing again).
    Flush {
        /// PSN of the request.
        psn: Psn,
    },
}

impl Resource {
    /// The first PSN the request took.
    pub const fn first_psn(&self) -> Psn {
        match *self {
            Resource::Read { first_psn, .. } => first_psn,
            Resource::Atomic { psn, .. }
            | Resource::AtomicWrite { psn }
            | Resource::Flush { psn } => psn,
        }
    }

    /// The last PSN the request took.
    pub const fn last_psn(&self) -> Psn {
        match *self {
            Resource::Read { last_psn, .. } => last_psn,
            Resource::Atomic { psn, .. }
            | Resource::AtomicWrite { psn }
            | Resource::Flush { psn } => psn,
        }
    }

    /// Whether `psn` is one of the request's PSNs.
    pub const fn contains(&self, psn: Psn) -> bool {
        psn.diff(self.first_psn()) >= 0 && self.last_psn().diff(psn) >= 0
    }
}

/// The responder resources (`max_dest_rd_atomic` of them; rxe: `qp->resp.resources`): a
/// ring of the last RDMA READ, atomic, ATOMIC WRITE and FLUSH requests, in which duplicates are
/// looked up. `N` is the most it can hold; the QP's `max_dest_rd_atomic`, clamped to `N`, is how
/// many it does hold. The kernel should pick `N` no smaller than the device's
/// `max_qp_rd_atom`: a READ the requester may still retry and the ring forgot can only be
/// dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponderResources<const N: usize> {
    slots: [Option<Resource>; N],
    /// The slot the next record takes (the oldest one once the ring is full).
    next: usize,
    capacity: usize,
}

impl<const N: usize> ResponderResources<N> {
    /// An empty ring holding up to `max_dest_rd_atomic` entries (at most `N`).
    pub const fn new(max_dest_rd_atomic: u32) -> Self {
        ResponderResources {
            slots: [None; N],
            next: 0,
            capacity: Self::clamp(max_dest_rd_atomic),
        }
    }

    const fn clamp(max_dest_rd_atomic: u32) -> usize {
        let wanted = max_dest_rd_atomic as usize;
        if wanted < N {
            wanted
        } else {
            N
        }
    }

    /// Empties the ring and sets its capacity, when modify QP changes `max_dest_rd_atomic` or
    /// the QP is reset (rxe frees and reallocates the resources then).
    pub fn reset(&mut self, max_dest_rd_atomic: u32) {
        // In place: a new ring built beside this one would be a few kilobytes of stack, in
        // modify QP and in the stages' reset.
        self.slots.iter_mut().for_each(|s| *s = None);
        self.next = 0;
        self.capacity = Self::clamp(max_dest_rd_atomic);
    }

    /// How many entries the ring holds at most.
    pub const fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records a request, overwriting the oldest entry when the ring is full. With a capacity of
    /// 0 nothing is kept ([`check_resource`] refuses such requests anyway).
    pub fn record(&mut self, resource: Resource) {
        if self.capacity == 0 {
            return;
        }
        if let Some(slot) = self.slots.get_mut(self.next) {
            *slot = Some(resource);
        }
        self.next = (self.next + 1) % self.capacity;
    }

    /// The most recent entry whose PSNs include `psn` (the newest wins: after the 24-bit PSN
    /// space wraps, an old entry can alias a new one).
    pub fn find(&self, psn: Psn) -> Option<Resource> {
        let cap = self.capacity;
        (1..=cap)
            .map(|back| (self.next + cap - back) % cap)
            .filter_map(|i| self.slots.get(i).copied().flatten())
            .find(|r| r.contains(psn))
    }
}
