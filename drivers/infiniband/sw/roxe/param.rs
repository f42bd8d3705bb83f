// SPDX-License-Identifier: GPL-2.0

//! Device limits and identifiers.
//!
//! The limits are the ones the rxe ABI advertises (rxe's `rxe_param.h`), so that programs tuned
//! for Soft-RoCE see the same device. rdma-core's tests recognise the rxe ABI by the vendor id.

/// Vendor id of software RoCE devices (`RXE_VENDOR_ID`).
pub(crate) const VENDOR_ID: u32 = 0x00ff_ffff;

/// Largest value most object counts take (rxe's `DEFAULT_MAX_VALUE`).
const DEFAULT_MAX: u32 = 1 << 20;

pub(crate) const MAX_QP: u32 = 0x10000;
pub(crate) const MAX_QP_WR: u32 = DEFAULT_MAX;
pub(crate) const MAX_SGE: u32 = 32;
pub(crate) const MAX_SGE_RD: u32 = 32;
pub(crate) const MAX_CQ: u32 = 16384;
pub(crate) const MAX_LOG_CQE: u32 = 15;
/// MR and MW keys share one 2^20 index space, half each (rxe's `RXE_MAX_MR`, `RXE_MAX_MW`).
pub(crate) const MAX_MR: u32 = (DEFAULT_MAX >> 1) - 1;
pub(crate) const MAX_MW: u32 = (DEFAULT_MAX >> 1) - 1;
pub(crate) const MAX_PD: u32 = DEFAULT_MAX;
pub(crate) const MAX_QP_RD_ATOM: u32 = 128;
pub(crate) const MAX_RES_RD_ATOM: u32 = 0x3f000;
pub(crate) const MAX_QP_INIT_RD_ATOM: u32 = 128;
pub(crate) const MAX_MCAST_GRP: u32 = 8192;
pub(crate) const MAX_MCAST_QP_ATTACH: u32 = 56;
pub(crate) const MAX_TOT_MCAST_QP_ATTACH: u32 = 0x70000;
pub(crate) const MAX_AH: u32 = 0x7fff;
pub(crate) const MAX_SRQ: u32 = DEFAULT_MAX;
pub(crate) const MAX_SRQ_WR: u32 = DEFAULT_MAX;
pub(crate) const MAX_SRQ_SGE: u32 = 27;
pub(crate) const MAX_FMR_PAGE_LIST_LEN: u32 = 512;
pub(crate) const MAX_PKEYS: u16 = 64;
pub(crate) const LOCAL_CA_ACK_DELAY: u8 = 15;
/// Page sizes an MR may use: every power of two from 4 KiB up.
pub(crate) const PAGE_SIZE_CAP: u64 = 0xffff_f000;

/// GID table length of the port.
pub(crate) const PORT_GID_TBL_LEN: i32 = 1024;
/// Largest message (IBA allows 2^31; rxe and we advertise 8 MiB).
pub(crate) const PORT_MAX_MSG_SZ: u32 = 0x80_0000;
/// P_Key table length: only the default partition.
pub(crate) const PORT_PKEY_TBL_LEN: u16 = 1;
/// The default, full-membership P_Key (IBA 10.9.1.2).
pub(crate) const DEFAULT_PKEY: u16 = 0xffff;

/// Object number ranges (rxe's `rxe_param.h`): numbers below 16 are reserved for special QPs
/// (QP1 is the GSI QP); SRQ numbers start above the MR key range, as in rxe.
pub(crate) const QP_INDEX_MIN: u32 = 16;
pub(crate) const QP_INDEX_MAX: u32 = QP_INDEX_MIN + MAX_QP - 1;
/// The GSI QP's number (IBA 3.5.10: QP1 on every port).
pub(crate) const GSI_QPN: u32 = 1;
pub(crate) const SRQ_INDEX_MIN: u32 = 0x0002_0001;
pub(crate) const SRQ_INDEX_MAX: u32 = DEFAULT_MAX;
pub(crate) const AH_INDEX_MIN: u32 = 1;
pub(crate) const AH_INDEX_MAX: u32 = MAX_AH;

/// Largest inline payload of a send WQE: the SGE area of a WQE with `MAX_SGE` entries
/// (rxe's `RXE_MAX_INLINE_DATA`).
pub(crate) const MAX_INLINE_DATA: u32 = MAX_SGE * 16;

/// On-demand paging: the range, as (numerator, denominator) of the machine's RAM, that all
/// processes together may register on one device, implicit MRs' 2 MiB children included. The
/// RDMA core allocates `rdma::odp::TABLE_BYTES_PER_PAGE` (24) bytes per page of range at
/// registration, pinned or not, so four times RAM of range costs about 2.4 % of RAM in tables
/// (`Documentation/security.md`); past it, registrations are `ENOMEM`.
pub(crate) const ODP_DEVICE_RAM_SHARE: (u64, u64) = (4, 1);
/// On-demand paging: the range one process (user context) may register, as above: twice RAM
/// (ODP exists to register more than is resident, but not without bound).
pub(crate) const ODP_PROCESS_RAM_SHARE: (u64, u64) = (2, 1);
