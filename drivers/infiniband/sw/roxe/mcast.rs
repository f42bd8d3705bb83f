// SPDX-License-Identifier: GPL-2.0

//! UD multicast (IBA 10.5.2.1, A17.4.5.2): QPs attached to a group receive every packet sent to
//! the group's GID with destination QPN 0xFFFFFF. Counterpart of rxe's `rxe_mcast.c`.
//!
//! Joining the group at the IP level (IGMP/MLD, so that the IP stack accepts the datagrams) is
//! the connection manager's part (`rdma_join_multicast`); the HCA's part is the Ethernet filter
//! of the netdev and the fan-out of received packets to the attached QPs.
//!
//! The groups are found by a keyed hash of their GID ([`BUCKETS`] buckets, SipHash under a
//! random key), so a received packet costs one bucket's scan however many groups local users
//! attached: with the device's `max_mcast_grp` groups, a few on average, and nobody can choose
//! GIDs that share a bucket without the key.
//!
//! Contexts: attach and detach run in process context (verbs), serialised by a mutex because
//! they also program the netdev's filter; the receive path reads the table in softirq or with
//! bottom halves off ([`McastTable::members`]), and `recv.rs` delivers after dropping it. The
//! table's lock is a bottom-half lock: no hard interrupt context reads it. Lock order:
//! `McastTable::ops` -> `McastTable::groups`; no other lock is taken under either.

#![deny(unsafe_code)]

use crate::rdma::{
    bh::{new_bh_lock, BhLock},
    device::Device,
    qp::Qp,
};
use crate::soft::random::HashKey;
use crate::{
    hca::Roxe,
    param::{MAX_MCAST_GRP, MAX_MCAST_QP_ATTACH},
    proto::{
        mcast::{is_multicast_gid, mac_for_group},
        qp_state::QpType,
    },
};
use kernel::{prelude::*, sync::Mutex};

/// Buckets of the group table (a power of two): with `MAX_MCAST_GRP` groups, 8 a bucket on
/// average.
const BUCKETS: usize = 1024;

/// One group: its GID and the QPNs attached to it.
struct Group {
    mgid: [u8; 16],
    qpns: KVec<u32>,
}

/// The groups, in buckets by the hash of their GID; the buckets are allocated with the first
/// group (the table of a device without multicast stays empty).
struct Groups {
    buckets: KVec<KVec<Group>>,
    count: usize,
}

impl Groups {
    fn bucket(&self, at: usize) -> Option<&KVec<Group>> {
        self.buckets.get(at)
    }

    fn find(&self, at: usize, mgid: &[u8; 16]) -> Option<&Group> {
        self.bucket(at)?.iter().find(|g| &g.mgid == mgid)
    }
}

/// The device's multicast groups.
#[pin_data]
pub(crate) struct McastTable {
    /// Serialises attach and detach with the netdev filter updates they make.
    #[pin]
    ops: Mutex<()>,
    /// The groups; at most `MAX_MCAST_GRP`, each with at most `MAX_MCAST_QP_ATTACH` QPs.
    #[pin]
    groups: BhLock<Groups>,
    /// The key of the buckets' hash.
    key: HashKey,
}

/// Room for the members of one group.
pub(crate) type Members = [u32; MAX_MCAST_QP_ATTACH as usize];

impl McastTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(McastTable {
            ops <- kernel::new_mutex!((), "roxe_mcast_ops"),
            groups <- new_bh_lock!(Groups { buckets: KVec::new(), count: 0 }, "roxe_mcast"),
            key: HashKey::new(),
        }? core::convert::Infallible)
    }

    /// The bucket of group `mgid`.
    fn bucket_of(&self, mgid: &[u8; 16]) -> usize {
        (self.key.hash16(mgid) as usize) & (BUCKETS - 1)
    }

    /// The QPNs attached to group `mgid`, copied into `out` so that the receive path serves
    /// them without the table's lock; `None` when there is no such group. A GID that names no
    /// group at all (a unicast one) is refused before the table is looked at. Context: softirq,
    /// or process context with bottom halves off or not.
    pub(crate) fn members(&self, mgid: &[u8; 16], out: &mut Members) -> Option<usize> {
        if !is_multicast_gid(mgid) {
            return None;
        }
        let at = self.bucket_of(mgid);
        let groups = self.groups.lock();
        let g = groups.find(at, mgid)?;
        let mut n = 0usize;
        for (slot, &q) in out.iter_mut().zip(g.qpns.iter()) {
            *slot = q;
            n += 1;
        }
        Some(n)
    }

    /// Allocates the buckets if the table has none yet. Process context, under `ops`, which
    /// alone adds them.
    fn ensure_buckets(&self) -> Result {
        if !self.groups.lock().buckets.is_empty() {
            return Ok(());
        }
        let mut buckets = KVec::with_capacity(BUCKETS, GFP_KERNEL)?;
        for _ in 0..BUCKETS {
            // An empty vector allocates nothing: the push stays within the capacity.
            buckets.push(KVec::new(), GFP_KERNEL)?;
        }
        self.groups.lock().buckets = buckets;
        Ok(())
    }
}

/// Attaches `qp` to group `mgid`. The first QP of a group adds the group's Ethernet address to
/// the netdev's filter. Errors: `EINVAL` for a non-UD QP or a non-multicast GID, `ENOMEM` past
/// the device's group or per-group limits (`max_mcast_grp`, `max_mcast_qp_attach`).
pub(crate) fn attach(qp: &Qp<Roxe>, mgid: &[u8; 16]) -> Result {
    let this = qp.qp_data();
    if this.qp_type != QpType::Ud {
        return Err(EINVAL);
    }
    let mac = mac_for_group(mgid).ok_or(EINVAL)?;
    let data = qp.device().data();
    let _ops = data.mcast.ops.lock();
    data.mcast.ensure_buckets()?;
    // A new group's QP list is allocated before taking the spinlock; growing the tables under
    // it uses atomic allocations.
    let mut qpns = KVec::with_capacity(4, GFP_KERNEL)?;
    qpns.push(this.qpn, GFP_KERNEL)?;
    let at = data.mcast.bucket_of(mgid);
    let new_group = {
        let mut guard = data.mcast.groups.lock();
        let Groups { buckets, count } = &mut *guard;
        let bucket = buckets.get_mut(at).ok_or(EINVAL)?;
        match bucket.iter_mut().find(|g| g.mgid == *mgid) {
            Some(g) => {
                if g.qpns.contains(&this.qpn) {
                    return Ok(());
                }
                if g.qpns.len() >= MAX_MCAST_QP_ATTACH as usize {
                    return Err(ENOMEM);
                }
                g.qpns.push(this.qpn, GFP_ATOMIC)?;
                false
            }
            None => {
                if *count >= MAX_MCAST_GRP as usize {
                    return Err(ENOMEM);
                }
                bucket.push(Group { mgid: *mgid, qpns }, GFP_ATOMIC)?;
                *count += 1;
                true
            }
        }
    };
    if new_group {
        if let Err(e) = data.netdev.mc_add(&mac) {
            remove_qpn(qp.device(), mgid, this.qpn);
            return Err(e);
        }
    }
    Ok(())
}

/// Detaches `qp` from group `mgid`; the last QP's detach removes the group and its filter
/// entry. `EINVAL` if the QP is not attached.
pub(crate) fn detach(qp: &Qp<Roxe>, mgid: &[u8; 16]) -> Result {
    let data = qp.device().data();
    let _ops = data.mcast.ops.lock();
    match remove_qpn(qp.device(), mgid, qp.qp_data().qpn) {
        Removed::NotAttached => Err(EINVAL),
        Removed::Attached => Ok(()),
        Removed::LastOne => {
            if let Some(mac) = mac_for_group(mgid) {
                // The filter entry was added with the group; failing to drop it only leaves
                // the NIC accepting frames nobody wants.
                let _ = data.netdev.mc_del(&mac);
            }
            Ok(())
        }
    }
}

/// Detaches QP `qpn` from every group (the QP is being destroyed): a bucket at a time, each
/// group found in it with the lock taken anew, so that the lock is held for one bucket's scan.
/// Process context.
pub(crate) fn detach_all(dev: &Device<Roxe>, qpn: u32) {
    let data = dev.data();
    let _ops = data.mcast.ops.lock();
    if data.mcast.groups.lock().count == 0 {
        return;
    }
    for at in 0..BUCKETS {
        loop {
            let found = data
                .mcast
                .groups
                .lock()
                .bucket(at)
                .and_then(|b| b.iter().find(|g| g.qpns.contains(&qpn)))
                .map(|g| g.mgid);
            let Some(mgid) = found else { break };
            if let Removed::LastOne = remove_qpn(dev, &mgid, qpn) {
                if let Some(mac) = mac_for_group(&mgid) {
                    let _ = data.netdev.mc_del(&mac);
                }
            }
        }
    }
}

enum Removed {
    NotAttached,
    Attached,
    LastOne,
}

fn remove_qpn(dev: &Device<Roxe>, mgid: &[u8; 16], qpn: u32) -> Removed {
    let data = dev.data();
    let at = data.mcast.bucket_of(mgid);
    // The emptied group is dropped after the lock (its vector frees memory).
    let dropped;
    {
        let mut guard = data.mcast.groups.lock();
        let Groups { buckets, count } = &mut *guard;
        let Some(bucket) = buckets.get_mut(at) else {
            return Removed::NotAttached;
        };
        let Some(gi) = bucket.iter().position(|g| g.mgid == *mgid) else {
            return Removed::NotAttached;
        };
        let Some(g) = bucket.get_mut(gi) else {
            return Removed::NotAttached;
        };
        let Some(qi) = g.qpns.iter().position(|&q| q == qpn) else {
            return Removed::NotAttached;
        };
        let _ = g.qpns.remove(qi);
        if !g.qpns.is_empty() {
            return Removed::Attached;
        }
        // Order within a bucket does not matter: the last group takes the emptied one's place.
        let last = bucket.len() - 1;
        bucket.swap(gi, last);
        dropped = bucket.pop();
        *count -= 1;
    }
    drop(dropped);
    Removed::LastOne
}
