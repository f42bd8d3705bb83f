// SPDX-License-Identifier: GPL-2.0

//! Address vectors (`struct rdma_ah_attr`) and address handles (`struct ib_ah`).
//!
//! On RoCE an address vector names the destination by GID (an IPv4-mapped or IPv6 address) and
//! MAC, and the source by a GID table entry; the core resolves the MAC before the driver sees it.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{bindings, device::DriverTypes, object::Object};
use kernel::prelude::*;

/// The network a RoCEv2 address vector routes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    /// IPv4: the GIDs are IPv4-mapped IPv6 addresses.
    Ipv4,
    /// IPv6.
    Ipv6,
}

/// A resolved RoCEv2 address vector: everything the data path needs to address a packet.
#[derive(Clone, Copy, Debug)]
pub struct AddressVector {
    /// Port number (1).
    pub port: u32,
    /// Service level (maps to the Ethernet priority; unused by a soft HCA).
    pub sl: u8,
    /// Source GID (the local address the packets leave from).
    pub sgid: [u8; 16],
    /// Index of the source GID in the port's table.
    pub sgid_index: u8,
    /// Destination GID.
    pub dgid: [u8; 16],
    /// IPv6 flow label (20 bits), also an entropy source for the UDP source port.
    pub flow_label: u32,
    /// IP hop limit / TTL.
    pub hop_limit: u8,
    /// IP traffic class / DSCP+ECN.
    pub traffic_class: u8,
    /// Destination MAC, resolved by the core.
    pub dmac: [u8; 6],
    /// IPv4 or IPv6.
    pub network: Network,
}

/// Whether `gid` is an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
pub fn gid_is_v4_mapped(gid: &[u8; 16]) -> bool {
    gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff
}

impl AddressVector {
    /// Whether the destination is the source GID itself: packets to it never leave the device.
    pub fn leads_to_own_gid(&self) -> bool {
        self.dgid == self.sgid
    }

    /// Reads a RoCE address vector. Fails with `EINVAL` unless it carries a GRH whose source is a
    /// RoCEv2 GID (IPv4 or IPv6), as IBA annex A17 requires for RoCEv2.
    ///
    /// # Safety
    ///
    /// `attr` is a valid `rdma_ah_attr` whose `sgid_attr`, when set, is alive for the call.
    pub(crate) unsafe fn from_raw(attr: *const bindings::rdma_ah_attr) -> Result<AddressVector> {
        // SAFETY: Valid by the safety requirements.
        let attr = unsafe { &*attr };
        if u32::from(attr.ah_flags) & bindings::ib_ah_flags_IB_AH_GRH == 0 {
            return Err(EINVAL);
        }
        let grh = &attr.grh;
        if grh.sgid_attr.is_null() {
            return Err(EINVAL);
        }
        // SAFETY: Non-NULL and alive by the safety requirements.
        let sgid_attr = unsafe { &*grh.sgid_attr };
        if sgid_attr.gid_type != bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP {
            return Err(EINVAL);
        }
        // SAFETY: `ib_gid` is a union of byte arrays and integers, all fully initialised.
        let (sgid, dgid) = unsafe { (sgid_attr.gid.raw, grh.dgid.raw) };
        let network = if gid_is_v4_mapped(&sgid) {
            Network::Ipv4
        } else {
            Network::Ipv6
        };
        // SAFETY: For RoCE attributes the `roce` member of the union is the active one; it is
        // plain bytes either way.
        let dmac = unsafe { attr.__bindgen_anon_1.roce.dmac };
        Ok(AddressVector {
            port: attr.port_num,
            sl: attr.sl,
            sgid,
            sgid_index: grh.sgid_index,
            dgid,
            flow_label: grh.flow_label,
            hop_limit: grh.hop_limit,
            traffic_class: grh.traffic_class,
            dmac,
            network,
        })
    }

    /// Writes the vector back in the form `query_qp`/`query_ah` report it. The source GID
    /// attribute itself is the core's business; only the index is reported.
    pub(crate) fn write_to(&self, attr: &mut bindings::rdma_ah_attr) {
        attr.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        attr.port_num = self.port;
        attr.sl = self.sl;
        attr.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        attr.grh.dgid.raw = self.dgid;
        attr.grh.flow_label = self.flow_label;
        attr.grh.sgid_index = self.sgid_index;
        attr.grh.hop_limit = self.hop_limit;
        attr.grh.traffic_class = self.traffic_class;
        attr.__bindgen_anon_1.roce.dmac = self.dmac;
    }
}

/// An address handle of driver `T`.
pub type Ah<T> = Object<bindings::ib_ah, <T as DriverTypes>::Ah, T>;

/// Creation context of an address handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AhContext {
    /// Created for user space; the driver answers with its response.
    User,
    /// Created by a kernel consumer that may sleep.
    KernelSleepable,
    /// Created by a kernel consumer in atomic context: no sleeping allocations.
    KernelAtomic,
}
