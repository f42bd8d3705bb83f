// SPDX-License-Identifier: GPL-2.0

//! Device and port attributes, as the verbs `query_device`, `query_port` and
//! `get_port_immutable` report them.
//!
//! These are plain Rust values: a driver fills them in, and the device adapter copies them into
//! the C structures the RDMA core passed in.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::bindings;

/// Device capability flags (`enum ib_device_cap_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCaps(pub u64);

impl DeviceCaps {
    /// Bad P_Key counter supported.
    pub const BAD_PKEY_CNTR: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_BAD_PKEY_CNTR as u64);
    /// Bad Q_Key counter supported.
    pub const BAD_QKEY_CNTR: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_BAD_QKEY_CNTR as u64);
    /// Automatic path migration.
    pub const AUTO_PATH_MIG: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_AUTO_PATH_MIG as u64);
    /// Change of physical port of a QP.
    pub const CHANGE_PHY_PORT: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_CHANGE_PHY_PORT as u64);
    /// UD address vector port enforcement.
    pub const UD_AV_PORT_ENFORCE: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_UD_AV_PORT_ENFORCE as u64);
    /// Port active event generated.
    pub const PORT_ACTIVE_EVENT: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64);
    /// System image GUID supported.
    pub const SYS_IMAGE_GUID: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64);
    /// RC RNR NAK generation.
    pub const RC_RNR_NAK_GEN: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_RC_RNR_NAK_GEN as u64);
    /// SRQ resize.
    pub const SRQ_RESIZE: Self = Self(bindings::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64);
    /// Memory management extensions (fast registration).
    pub const MEM_MGT_EXTENSIONS: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64);
    /// Memory windows.
    pub const MEM_WINDOW: Self = Self(bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64);
    /// Type 2B memory windows.
    pub const MEM_WINDOW_TYPE_2B: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64);
    /// RDMA FLUSH to global visibility.
    pub const FLUSH_GLOBAL: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64);
    /// RDMA FLUSH to persistence.
    pub const FLUSH_PERSISTENT: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_FLUSH_PERSISTENT as u64);
    /// RDMA ATOMIC WRITE.
    pub const ATOMIC_WRITE: Self =
        Self(bindings::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64);

    /// The union of two flag sets.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// Kernel-only capability flags (`enum ib_kernel_cap_flags`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCaps(pub u64);

impl KernelCaps {
    /// `rdma link delete` may unregister the device.
    pub const ALLOW_USER_UNREG: Self =
        Self(bindings::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG as u64);
    /// On-demand paging MRs (`IB_ACCESS_ON_DEMAND`).
    pub const ON_DEMAND_PAGING: Self =
        Self(bindings::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING as u64);

    /// The union of two flag sets.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// On-demand paging capabilities (`struct ib_odp_caps`, `enum ib_odp_general_cap_bits`,
/// `enum ib_odp_transport_cap_bits`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OdpCaps {
    /// `IB_ODP_SUPPORT*` general capabilities.
    pub general: u64,
    /// Per transport: what may use ODP memory.
    pub rc: u32,
    pub uc: u32,
    pub ud: u32,
    pub xrc: u32,
}

#[allow(
    clippy::unnecessary_cast,
    reason = "bindgen gives an enum's constants the enum's C type, which differs between enums \
              and kernels: a cast needless on one kernel is needed on another"
)]
impl OdpCaps {
    /// ODP is supported (explicit MRs).
    pub const SUPPORT: u64 = bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT as u64;
    /// Implicit ODP MRs (the whole address space) are supported.
    pub const SUPPORT_IMPLICIT: u64 =
        bindings::ib_odp_general_cap_bits_IB_ODP_SUPPORT_IMPLICIT as u64;
    /// ODP MRs may be the local memory of SENDs.
    pub const SEND: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND as u32;
    /// ... of receives.
    pub const RECV: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV as u32;
    /// ... the target of RDMA WRITEs.
    pub const WRITE: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE as u32;
    /// ... the source of RDMA READs.
    pub const READ: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ as u32;
    /// ... the target of atomics.
    pub const ATOMIC: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC as u32;
    /// ... of receives through an SRQ.
    pub const SRQ_RECV: u32 = bindings::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV as u32;
}

/// Atomic operation support (`enum ib_atomic_cap`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AtomicCap {
    /// No atomics.
    #[default]
    None,
    /// Atomic within this HCA.
    Hca,
    /// Atomic with respect to all agents.
    Glob,
}

impl AtomicCap {
    fn as_raw(self) -> bindings::ib_atomic_cap {
        match self {
            AtomicCap::None => bindings::ib_atomic_cap_IB_ATOMIC_NONE,
            AtomicCap::Hca => bindings::ib_atomic_cap_IB_ATOMIC_HCA,
            AtomicCap::Glob => bindings::ib_atomic_cap_IB_ATOMIC_GLOB,
        }
    }
}

/// Device attributes (`struct ib_device_attr`), the part a software HCA reports.
#[derive(Clone, Debug, Default)]
pub struct DeviceAttr {
    pub fw_ver: u64,
    /// System image GUID, in wire (big-endian) byte order.
    pub sys_image_guid: [u8; 8],
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub device_cap_flags: DeviceCaps,
    pub kernel_cap_flags: KernelCaps,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub atomic_cap: AtomicCap,
    pub max_mcast_grp: u32,
    pub max_mcast_qp_attach: u32,
    pub max_total_mcast_qp_attach: u32,
    pub max_ah: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_fast_reg_page_list_len: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub max_mw: u32,
    pub odp_caps: OdpCaps,
}

/// A count in the C `ib_device_attr`, which some kernels declare `int` and others `u32`.
trait CCount {
    /// `v`, or the type's largest value if `v` does not fit.
    fn from_count(v: u32) -> Self;
}

impl CCount for u32 {
    fn from_count(v: u32) -> u32 {
        v
    }
}

impl CCount for i32 {
    fn from_count(v: u32) -> i32 {
        i32::try_from(v).unwrap_or(i32::MAX)
    }
}

impl DeviceAttr {
    /// Copies the attributes into the C structure the core passed to `query_device`.
    pub(crate) fn write_to(&self, a: &mut bindings::ib_device_attr) {
        a.fw_ver = self.fw_ver;
        a.sys_image_guid = u64::from_ne_bytes(self.sys_image_guid);
        a.max_mr_size = self.max_mr_size;
        a.page_size_cap = self.page_size_cap;
        a.vendor_id = self.vendor_id;
        a.vendor_part_id = self.vendor_part_id;
        a.hw_ver = self.hw_ver;
        a.max_qp = CCount::from_count(self.max_qp);
        a.max_qp_wr = CCount::from_count(self.max_qp_wr);
        a.device_cap_flags = self.device_cap_flags.0;
        a.kernel_cap_flags = self.kernel_cap_flags.0;
        a.max_send_sge = CCount::from_count(self.max_send_sge);
        a.max_recv_sge = CCount::from_count(self.max_recv_sge);
        a.max_sge_rd = CCount::from_count(self.max_sge_rd);
        a.max_cq = CCount::from_count(self.max_cq);
        a.max_cqe = CCount::from_count(self.max_cqe);
        a.max_mr = CCount::from_count(self.max_mr);
        a.max_pd = CCount::from_count(self.max_pd);
        a.max_qp_rd_atom = CCount::from_count(self.max_qp_rd_atom);
        a.max_res_rd_atom = CCount::from_count(self.max_res_rd_atom);
        a.max_qp_init_rd_atom = CCount::from_count(self.max_qp_init_rd_atom);
        a.atomic_cap = self.atomic_cap.as_raw();
        a.max_mcast_grp = CCount::from_count(self.max_mcast_grp);
        a.max_mcast_qp_attach = CCount::from_count(self.max_mcast_qp_attach);
        a.max_total_mcast_qp_attach = CCount::from_count(self.max_total_mcast_qp_attach);
        a.max_ah = CCount::from_count(self.max_ah);
        a.max_srq = CCount::from_count(self.max_srq);
        a.max_srq_wr = CCount::from_count(self.max_srq_wr);
        a.max_srq_sge = CCount::from_count(self.max_srq_sge);
        a.max_fast_reg_page_list_len = self.max_fast_reg_page_list_len;
        a.max_pkeys = self.max_pkeys;
        a.local_ca_ack_delay = self.local_ca_ack_delay;
        a.max_mw = CCount::from_count(self.max_mw);
        a.odp_caps.general_caps = self.odp_caps.general;
        a.odp_caps.per_transport_caps.rc_odp_caps = self.odp_caps.rc;
        a.odp_caps.per_transport_caps.uc_odp_caps = self.odp_caps.uc;
        a.odp_caps.per_transport_caps.ud_odp_caps = self.odp_caps.ud;
        a.odp_caps.per_transport_caps.xrc_odp_caps = self.odp_caps.xrc;
    }
}

/// Logical port state (`enum ib_port_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PortState {
    /// The link is down.
    #[default]
    Down,
    /// The link is up and the port passes traffic.
    Active,
}

/// Physical port state (IBA 14.2.5.6, `enum ib_port_phys_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PhysState {
    /// Administratively or physically disabled.
    #[default]
    Disabled,
    /// The link is up.
    LinkUp,
}

/// Port capability: the port supports connection management (`IB_PORT_CM_SUP`).
#[allow(clippy::unnecessary_cast, reason = "as for `OdpCaps`")]
pub const PORT_CAP_CM_SUP: u32 = bindings::ib_port_capability_mask_bits_IB_PORT_CM_SUP as u32;

/// Port attributes (`struct ib_port_attr`).
#[derive(Clone, Debug, Default)]
pub struct PortAttr {
    pub state: PortState,
    pub phys_state: PhysState,
    /// Largest supported MTU, as a C `enum ib_mtu` value.
    pub max_mtu: u32,
    /// Active MTU, as a C `enum ib_mtu` value.
    pub active_mtu: u32,
    pub gid_tbl_len: i32,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub pkey_tbl_len: u16,
    pub max_vl_num: u8,
    pub active_width: u8,
    pub active_speed: u16,
}

impl PortAttr {
    /// Copies the attributes into the C structure the core passed to `query_port` (which the core
    /// has zeroed first).
    pub(crate) fn write_to(&self, a: &mut bindings::ib_port_attr) {
        a.state = match self.state {
            PortState::Down => bindings::ib_port_state_IB_PORT_DOWN,
            PortState::Active => bindings::ib_port_state_IB_PORT_ACTIVE,
        };
        a.phys_state = match self.phys_state {
            PhysState::Disabled => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED as u8,
            PhysState::LinkUp => bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP as u8,
        };
        a.max_mtu = self.max_mtu;
        a.active_mtu = self.active_mtu;
        a.gid_tbl_len = self.gid_tbl_len;
        a.port_cap_flags = self.port_cap_flags;
        a.max_msg_sz = self.max_msg_sz;
        a.pkey_tbl_len = self.pkey_tbl_len;
        a.max_vl_num = self.max_vl_num;
        a.active_width = self.active_width;
        a.active_speed = self.active_speed;
    }
}

/// Port attributes that never change while the device is registered (`struct ib_port_immutable`).
#[derive(Clone, Debug, Default)]
pub struct PortImmutable {
    pub pkey_tbl_len: i32,
    pub gid_tbl_len: i32,
    pub core_cap_flags: u32,
    pub max_mad_size: u32,
}

/// Core capability: RoCE v2, i.e. IB transport over UDP/IP (`RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP`).
pub const CORE_CAP_ROCE_UDP_ENCAP: u32 = bindings::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;

/// Size of an IB management datagram (`IB_MGMT_MAD_SIZE`).
pub const MGMT_MAD_SIZE: u32 = bindings::IB_MGMT_MAD_SIZE;

impl PortImmutable {
    pub(crate) fn write_to(&self, a: &mut bindings::ib_port_immutable) {
        a.pkey_tbl_len = self.pkey_tbl_len;
        a.gid_tbl_len = self.gid_tbl_len;
        a.core_cap_flags = self.core_cap_flags;
        a.max_mad_size = self.max_mad_size;
    }
}
