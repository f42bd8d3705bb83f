// SPDX-License-Identifier: GPL-2.0

//! UD multicast (IBA 10.5.2.1, A17.4.5.2): QPs attached to a group receive every packet sent to
//! the group's GID with destination QPN 0xFFFFFF. Counterpart of rxe's `rxe_mcast.c`.
//!
//! Joining the group at the IP level (IGMP/MLD, so that the IP stack accepts the datagrams) is
//! the connection manager's part (`rdma_join_multicast`); the HCA's part is the Ethernet filter
//! of the netdev and the fan-out of received packets to the attached QPs.
//!
//! Contexts: attach and detach run in process context (verbs), serialised by a mutex because
//! they also program the netdev's filter; the receive path reads the table in softirq under its
//! IRQ-safe spinlock ([`McastTable::members`]), and `recv.rs` delivers after dropping it. Lock
//! order: `McastTable::ops` -> `McastTable::groups`; no other lock is taken under either.

#![deny(unsafe_code)]

use crate::compat::sync::SpinLockIrq;
use crate::rdma::{device::Device, qp::Qp};
use crate::{
    hca::Roxe,
    param::{MAX_MCAST_GRP, MAX_MCAST_QP_ATTACH},
    proto::{mcast::mac_for_group, qp_state::QpType},
};
use kernel::{prelude::*, sync::Mutex};

/// One group: its GID and the QPNs attached to it.
struct Group {
    mgid: [u8; 16],
    qpns: KVec<u32>,
}

/// The device's multicast groups.
#[pin_data]
pub(crate) struct McastTable {
    /// Serialises attach and detach with the netdev filter updates they make.
    #[pin]
    ops: Mutex<()>,
    /// The groups; at most `MAX_MCAST_GRP`, each with at most `MAX_MCAST_QP_ATTACH` QPs.
    #[pin]
    groups: SpinLockIrq<KVec<Group>>,
}

/// Room for the members of one group.
pub(crate) type Members = [u32; MAX_MCAST_QP_ATTACH as usize];

impl McastTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(McastTable {
            ops <- kernel::new_mutex!((), "roxe_mcast_ops"),
            groups <- crate::compat::sync::new_spinlock_irq!(KVec::new(), "roxe_mcast"),
        })
    }

    /// The QPNs attached to group `mgid`, copied into `out` so that the receive path serves
    /// them without the table's lock; `None` when there is no such group. Context: any.
    pub(crate) fn members(&self, mgid: &[u8; 16], out: &mut Members) -> Option<usize> {
        let groups = self.groups.lock();
        let g = groups.iter().find(|g| &g.mgid == mgid)?;
        let mut n = 0usize;
        for (slot, &q) in out.iter_mut().zip(g.qpns.iter()) {
            *slot = q;
            n += 1;
        }
        Some(n)
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
    // A new group's QP list is allocated before taking the spinlock; growing the tables under
    // it uses atomic allocations.
    let mut qpns = KVec::with_capacity(4, GFP_KERNEL)?;
    qpns.push(this.qpn, GFP_KERNEL)?;
    let new_group = {
        let mut groups = data.mcast.groups.lock();
        match groups.iter_mut().find(|g| g.mgid == *mgid) {
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
                if groups.len() >= MAX_MCAST_GRP as usize {
                    return Err(ENOMEM);
                }
                groups.push(Group { mgid: *mgid, qpns }, GFP_ATOMIC)?;
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

/// Detaches QP `qpn` from every group (the QP is being destroyed). Process context.
pub(crate) fn detach_all(dev: &Device<Roxe>, qpn: u32) {
    let data = dev.data();
    let _ops = data.mcast.ops.lock();
    loop {
        let found = data
            .mcast
            .groups
            .lock()
            .iter()
            .find(|g| g.qpns.contains(&qpn))
            .map(|g| g.mgid);
        let Some(mgid) = found else { return };
        if let Removed::LastOne = remove_qpn(dev, &mgid, qpn) {
            if let Some(mac) = mac_for_group(&mgid) {
                let _ = data.netdev.mc_del(&mac);
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
    // The emptied group is dropped after the lock (its vector frees memory).
    let dropped;
    {
        let mut groups = data.mcast.groups.lock();
        let Some(gi) = groups.iter().position(|g| g.mgid == *mgid) else {
            return Removed::NotAttached;
        };
        let Some(g) = groups.get_mut(gi) else {
            return Removed::NotAttached;
        };
        let Some(qi) = g.qpns.iter().position(|&q| q == qpn) else {
            return Removed::NotAttached;
        };
        let _ = g.qpns.remove(qi);
        if !g.qpns.is_empty() {
            return Removed::Attached;
        }
        dropped = groups.remove(gi);
    }
    drop(dropped);
    Removed::LastOne
}
