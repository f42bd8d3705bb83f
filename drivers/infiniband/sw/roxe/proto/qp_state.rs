// SPDX-License-Identifier: GPL-2.0

//! The QP state machine (IBA 10.3.1; the attribute lists of Modify QP, IBA 11.2.5.2): legal
//! transitions and the required and optional attributes of each, per QP type, plus the value
//! checks of each attribute.
//!
//! Everything here works on plain numbers as the verbs ABI carries them (`enum ib_qp_state`,
//! `enum ib_qp_type`, `enum ib_qp_attr_mask`), so the driver copies `struct ib_qp_attr` fields in
//! and maps the result to an errno. The transition table is the one of IBA 11.2.5.2 (Modify QP)
//! as the kernel's `ib_modify_qp_is_ok` encodes it; the value checks are rxe's
//! (`rxe_qp_chk_attr`) plus the few range checks IBA implies and rxe leaves out.

use super::mtu::IbMtu;
use super::psn::Psn;

/// The Linux error a rejected verb returns. The numeric values differ between architectures
/// (`EOPNOTSUPP` is not 95 everywhere), so the driver maps these to `kernel::error::code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// `EINVAL`: a bad value or a bad combination of values.
    Inval,
    /// `EOPNOTSUPP`: a valid request this device does not implement.
    OpNotSupp,
}

/// A QP state (IBA 10.3.1); the discriminants are the values of `enum ib_qp_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum QpState {
    /// Reset: no work is processed, posting fails.
    Reset = 0,
    /// Initialized: receives may be posted but are not processed.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drain: no new send WQEs are started.
    Sqd = 4,
    /// Send queue error (UC/UD only): the SQ is flushed, the RQ still works.
    Sqe = 5,
    /// Error: both queues are flushed.
    Err = 6,
}

impl QpState {
    /// Every state, in `enum ib_qp_state` order.
    pub const ALL: [QpState; 7] = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];

    /// Parses an `enum ib_qp_state` value; anything above `IB_QPS_ERR` is `None` (uverbs'
    /// `modify_qp` answers `EINVAL` to those before the driver sees them).
    pub const fn from_raw(raw: u32) -> Option<QpState> {
        Some(match raw {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            _ => return None,
        })
    }

    /// The `enum ib_qp_state` value.
    pub const fn as_raw(self) -> u32 {
        self as u32
    }
}

/// A QP transport type; `from_raw`/`as_raw` use the values of `enum ib_qp_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// General services interface (QP1).
    Gsi,
    /// Subnet management interface (QP0).
    Smi,
}

impl QpType {
    /// Every type the state table knows.
    pub const ALL: [QpType; 5] = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi, QpType::Smi];

    /// Parses an `enum ib_qp_type` value. Raw packet, raw IPv6/Ethertype, XRC and driver types
    /// are `None`: the driver refuses to create them, as rxe does.
    pub const fn from_raw(raw: u32) -> Option<QpType> {
        Some(match raw {
            0 => QpType::Smi,
            1 => QpType::Gsi,
            2 => QpType::Rc,
            3 => QpType::Uc,
            4 => QpType::Ud,
            _ => return None,
        })
    }

    /// The `enum ib_qp_type` value.
    pub const fn as_raw(self) -> u32 {
        match self {
            QpType::Smi => 0,
            QpType::Gsi => 1,
            QpType::Rc => 2,
            QpType::Uc => 3,
            QpType::Ud => 4,
        }
    }

    /// Whether the driver creates QPs of this type. A RoCE port has no subnet manager and so no
    /// QP0 (IBA annex A16/A17 keep only the GSI); rxe's `rxe_qp_chk_init` answers `EOPNOTSUPP`
    /// to SMI like to every other type outside RC, UC, UD and GSI.
    pub const fn create_supported(self) -> bool {
        !matches!(self, QpType::Smi)
    }
}

/// A set of `enum ib_qp_attr_mask` bits: which fields of `struct ib_qp_attr` a modify carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AttrMask(u32);

impl AttrMask {
    /// No attributes.
    pub const EMPTY: AttrMask = AttrMask(0);
    /// `qp_state`: the state to move to.
    pub const STATE: AttrMask = AttrMask(1 << 0);
    /// `cur_qp_state`: the state the consumer believes the QP is in.
    pub const CUR_STATE: AttrMask = AttrMask(1 << 1);
    /// `en_sqd_async_notify`: raise an event when the SQ has drained.
    pub const EN_SQD_ASYNC_NOTIFY: AttrMask = AttrMask(1 << 2);
    /// `qp_access_flags`: which remote operations the responder allows.
    pub const ACCESS_FLAGS: AttrMask = AttrMask(1 << 3);
    /// `pkey_index`.
    pub const PKEY_INDEX: AttrMask = AttrMask(1 << 4);
    /// `port_num`.
    pub const PORT: AttrMask = AttrMask(1 << 5);
    /// `qkey`.
    pub const QKEY: AttrMask = AttrMask(1 << 6);
    /// `ah_attr`: the primary path (address vector).
    pub const AV: AttrMask = AttrMask(1 << 7);
    /// `path_mtu`.
    pub const PATH_MTU: AttrMask = AttrMask(1 << 8);
    /// `timeout`: the local ACK timeout exponent.
    pub const TIMEOUT: AttrMask = AttrMask(1 << 9);
    /// `retry_cnt`.
    pub const RETRY_CNT: AttrMask = AttrMask(1 << 10);
    /// `rnr_retry`.
    pub const RNR_RETRY: AttrMask = AttrMask(1 << 11);
    /// `rq_psn`: the next PSN the responder expects.
    pub const RQ_PSN: AttrMask = AttrMask(1 << 12);
    /// `max_rd_atomic`: RDMA READ/atomic requests outstanding as initiator.
    pub const MAX_QP_RD_ATOMIC: AttrMask = AttrMask(1 << 13);
    /// `alt_ah_attr` and friends: the alternate path (automatic path migration).
    pub const ALT_PATH: AttrMask = AttrMask(1 << 14);
    /// `min_rnr_timer`: the RNR NAK timer this QP advertises as responder.
    pub const MIN_RNR_TIMER: AttrMask = AttrMask(1 << 15);
    /// `sq_psn`: the first PSN the requester sends.
    pub const SQ_PSN: AttrMask = AttrMask(1 << 16);
    /// `max_dest_rd_atomic`: RDMA READ/atomic requests accepted as responder.
    pub const MAX_DEST_RD_ATOMIC: AttrMask = AttrMask(1 << 17);
    /// `path_mig_state`.
    pub const PATH_MIG_STATE: AttrMask = AttrMask(1 << 18);
    /// `cap`: queue sizes. No transition of the table allows it, so resizing a QP through modify
    /// always fails with `EINVAL` (rxe checks the sizes but never applies them).
    pub const CAP: AttrMask = AttrMask(1 << 19);
    /// `dest_qp_num`.
    pub const DEST_QPN: AttrMask = AttrMask(1 << 20);
    /// `rate_limit` (raw packet QPs only, and outside [`AttrMask::STANDARD`]).
    pub const RATE_LIMIT: AttrMask = AttrMask(1 << 25);
    /// `IB_QP_ATTR_STANDARD_BITS` (bits 0..=20): rxe answers `EOPNOTSUPP` to any bit outside,
    /// before looking at anything else (`rxe_modify_qp`).
    pub const STANDARD: AttrMask = AttrMask((1 << 21) - 1);

    /// A mask from its raw `int attr_mask` bits, any bits allowed.
    pub const fn from_bits(bits: u32) -> AttrMask {
        AttrMask(bits)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every bit of `other` is set in `self`.
    pub const fn contains(self, other: AttrMask) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether `self` and `other` share a bit.
    pub const fn intersects(self, other: AttrMask) -> bool {
        self.0 & other.0 != 0
    }

    /// The bits in either.
    pub const fn union(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 | other.0)
    }

    /// The bits in both.
    pub const fn intersection(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 & other.0)
    }

    /// The bits of `self` that are not in `other`.
    pub const fn difference(self, other: AttrMask) -> AttrMask {
        AttrMask(self.0 & !other.0)
    }
}

impl core::ops::BitOr for AttrMask {
    type Output = AttrMask;

    fn bitor(self, rhs: AttrMask) -> AttrMask {
        self.union(rhs)
    }
}

/// What a legal transition asks of the attribute mask (besides [`AttrMask::STATE`], which is
/// always allowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransitionAttrs {
    /// Attributes the mask must carry.
    pub required: AttrMask,
    /// Attributes the mask may carry.
    pub optional: AttrMask,
}

/// Why a modify QP was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModifyError {
    /// Mask bits outside [`AttrMask::STANDARD`] (the listed ones): `EOPNOTSUPP`.
    UnsupportedAttrs(AttrMask),
    /// `qp_state` or `cur_qp_state` above `IB_QPS_ERR`.
    BadStateValue,
    /// `cur_qp_state` differs from the state the QP is really in.
    CurStateMismatch,
    /// The state table has no such transition for this QP type.
    IllegalTransition,
    /// The transition requires these attributes and the mask lacks them.
    MissingAttrs(AttrMask),
    /// The transition neither requires nor allows these attributes.
    UnexpectedAttrs(AttrMask),
    /// A state change out of SQD before the send queue finished draining (other than to ERR).
    SqDraining,
    /// `port_num` is not the device's one port.
    BadPort,
    /// `pkey_index` is past the end of the P_Key table.
    BadPkeyIndex,
    /// `qp_access_flags` has bits the device does not know.
    BadAccessFlags,
    /// `path_mtu` is not an `enum ib_mtu` value, or above the port's maximum.
    BadPathMtu,
    /// `timeout` above 31.
    BadTimeout,
    /// `retry_cnt` above 7.
    BadRetryCount,
    /// `rnr_retry` above 7.
    BadRnrRetry,
    /// `min_rnr_timer` above 31.
    BadMinRnrTimer,
    /// `max_rd_atomic` above the device's limit.
    TooManyRdAtomic,
    /// `max_dest_rd_atomic` above the device's limit.
    TooManyDestRdAtomic,
    /// An alternate path: RoCE has no automatic path migration.
    AltPathUnsupported,
}

impl ModifyError {
    /// The errno the verb returns.
    pub const fn errno(self) -> Errno {
        match self {
            ModifyError::UnsupportedAttrs(_) => Errno::OpNotSupp,
            _ => Errno::Inval,
        }
    }
}

// Attribute sets shared by several cells of the table.
const PKEY_PORT_QKEY: AttrMask =
    AttrMask(AttrMask::PKEY_INDEX.0 | AttrMask::PORT.0 | AttrMask::QKEY.0);
const PKEY_PORT_ACCESS: AttrMask =
    AttrMask(AttrMask::PKEY_INDEX.0 | AttrMask::PORT.0 | AttrMask::ACCESS_FLAGS.0);
const PKEY_QKEY: AttrMask = AttrMask(AttrMask::PKEY_INDEX.0 | AttrMask::QKEY.0);
const CUR_QKEY: AttrMask = AttrMask(AttrMask::CUR_STATE.0 | AttrMask::QKEY.0);
/// What a connected QP may change on its way back to (or while in) RTS.
const CUR_ACCESS_ALT_MIG: AttrMask = AttrMask(
    AttrMask::CUR_STATE.0
        | AttrMask::ACCESS_FLAGS.0
        | AttrMask::ALT_PATH.0
        | AttrMask::PATH_MIG_STATE.0,
);
const CUR_ACCESS_ALT_MIG_RNR: AttrMask = AttrMask(CUR_ACCESS_ALT_MIG.0 | AttrMask::MIN_RNR_TIMER.0);
/// The path a connected QP needs before it can receive.
const UC_RTR_REQUIRED: AttrMask =
    AttrMask(AttrMask::AV.0 | AttrMask::PATH_MTU.0 | AttrMask::DEST_QPN.0 | AttrMask::RQ_PSN.0);
/// RC adds the responder's side of RDMA READ/atomics and of RNR NAKs.
const RC_RTR_REQUIRED: AttrMask =
    AttrMask(UC_RTR_REQUIRED.0 | AttrMask::MAX_DEST_RD_ATOMIC.0 | AttrMask::MIN_RNR_TIMER.0);
const CONNECTED_RTR_OPTIONAL: AttrMask =
    AttrMask(AttrMask::ALT_PATH.0 | AttrMask::ACCESS_FLAGS.0 | AttrMask::PKEY_INDEX.0);
/// RC's requester needs its ACK timeout, retry counts and initiator depth to send.
const RC_RTS_REQUIRED: AttrMask = AttrMask(
    AttrMask::TIMEOUT.0
        | AttrMask::RETRY_CNT.0
        | AttrMask::RNR_RETRY.0
        | AttrMask::SQ_PSN.0
        | AttrMask::MAX_QP_RD_ATOMIC.0,
);
const UC_SQD_OPTIONAL: AttrMask = AttrMask(
    AttrMask::AV.0
        | AttrMask::ALT_PATH.0
        | AttrMask::ACCESS_FLAGS.0
        | AttrMask::PKEY_INDEX.0
        | AttrMask::PATH_MIG_STATE.0,
);
/// In SQD an RC QP may change almost everything about its path and its requester.
const RC_SQD_OPTIONAL: AttrMask = AttrMask(
    UC_SQD_OPTIONAL.0
        | AttrMask::PORT.0
        | AttrMask::TIMEOUT.0
        | AttrMask::RETRY_CNT.0
        | AttrMask::RNR_RETRY.0
        | AttrMask::MAX_QP_RD_ATOMIC.0
        | AttrMask::MAX_DEST_RD_ATOMIC.0
        | AttrMask::MIN_RNR_TIMER.0,
);

/// Shorthand for a table cell.
const fn attrs(required: AttrMask, optional: AttrMask) -> Option<TransitionAttrs> {
    Some(TransitionAttrs { required, optional })
}

/// A legal transition with nothing to give but the new state.
const BARE: Option<TransitionAttrs> = attrs(AttrMask::EMPTY, AttrMask::EMPTY);

/// The attributes transition `cur` -> `next` requires and allows for `qp_type`, or `None` when
/// the transition is illegal (IBA 10.3.1 state diagram; attribute lists of IBA 11.2.5.2, as the
/// kernel's `qp_state_table` in `drivers/infiniband/core/verbs.c` has them).
///
/// Every state may go to RESET and to ERR except RESET itself, which may only stay in RESET or
/// go to INIT: a QP that never left RESET has nothing to flush. Staying in a state is legal only
/// in RESET, INIT, RTS, SQD and ERR. SQE -> RTS is listed for RC too, with nothing allowed,
/// although an RC QP never enters SQE (a send error moves it to ERR).
pub const fn transition_attrs(
    cur: QpState,
    next: QpState,
    qp_type: QpType,
) -> Option<TransitionAttrs> {
    use QpState::*;
    use QpType::*;
    const EMPTY: AttrMask = AttrMask::EMPTY;
    match (cur, next) {
        (Reset, Reset) => BARE,
        (Reset, Init) => match qp_type {
            Ud => attrs(PKEY_PORT_QKEY, EMPTY),
            Uc | Rc => attrs(PKEY_PORT_ACCESS, EMPTY),
            Gsi | Smi => attrs(PKEY_QKEY, EMPTY),
        },
        (Reset, _) => None,

        (Init, Reset) | (Init, Err) => BARE,
        (Init, Init) => match qp_type {
            Ud => attrs(EMPTY, PKEY_PORT_QKEY),
            Uc | Rc => attrs(EMPTY, PKEY_PORT_ACCESS),
            Gsi | Smi => attrs(EMPTY, PKEY_QKEY),
        },
        (Init, Rtr) => match qp_type {
            Uc => attrs(UC_RTR_REQUIRED, CONNECTED_RTR_OPTIONAL),
            Rc => attrs(RC_RTR_REQUIRED, CONNECTED_RTR_OPTIONAL),
            Ud | Gsi | Smi => attrs(EMPTY, PKEY_QKEY),
        },
        (Init, _) => None,

        (Rtr, Reset) | (Rtr, Err) => BARE,
        (Rtr, Rts) => match qp_type {
            Rc => attrs(RC_RTS_REQUIRED, CUR_ACCESS_ALT_MIG_RNR),
            Uc => attrs(AttrMask::SQ_PSN, CUR_ACCESS_ALT_MIG),
            Ud | Gsi | Smi => attrs(AttrMask::SQ_PSN, CUR_QKEY),
        },
        (Rtr, _) => None,

        (Rts, Reset) | (Rts, Err) => BARE,
        (Rts, Rts) | (Sqd, Rts) => match qp_type {
            Rc => attrs(EMPTY, CUR_ACCESS_ALT_MIG_RNR),
            Uc => attrs(EMPTY, CUR_ACCESS_ALT_MIG),
            Ud | Gsi | Smi => attrs(EMPTY, CUR_QKEY),
        },
        (Rts, Sqd) => attrs(EMPTY, AttrMask::EN_SQD_ASYNC_NOTIFY),
        (Rts, _) => None,

        (Sqd, Reset) | (Sqd, Err) => BARE,
        (Sqd, Sqd) => match qp_type {
            Rc => attrs(EMPTY, RC_SQD_OPTIONAL),
            Uc => attrs(EMPTY, UC_SQD_OPTIONAL),
            Ud | Gsi | Smi => attrs(EMPTY, PKEY_QKEY),
        },
        (Sqd, _) => None,

        (Sqe, Reset) | (Sqe, Err) => BARE,
        (Sqe, Rts) => match qp_type {
            Rc => BARE,
            Uc => attrs(
                EMPTY,
                AttrMask(AttrMask::CUR_STATE.0 | AttrMask::ACCESS_FLAGS.0),
            ),
            Ud | Gsi | Smi => attrs(EMPTY, CUR_QKEY),
        },
        (Sqe, _) => None,

        (Err, Reset) | (Err, Err) => BARE,
        (Err, _) => None,
    }
}

/// Checks a modify QP's attribute mask against the state table, with the semantics of the
/// kernel's `ib_modify_qp_is_ok` (for a RoCE port, where no extra Ethernet attributes exist).
///
/// `cur` is the state the QP is in. `next` is the state asked for; it only counts when `mask`
/// carries [`AttrMask::STATE`]: without it the QP stays where it is, and the mask is checked
/// against the `cur` -> `cur` cell (so, e.g., changing the QKey of an RTS UD QP is an RTS -> RTS
/// transition, and a bare change in RTR is refused since RTR -> RTR is not in the table).
///
/// Bits outside [`AttrMask::STANDARD`] fail first with `EOPNOTSUPP`, as in `rxe_modify_qp`.
/// Then the transition must exist, carry every required bit, and carry nothing beyond the
/// required and optional bits and `STATE`. [`AttrMask::CUR_STATE`] is optional exactly in the
/// transitions into RTS from RTR, RTS, SQD and SQE (not SQE -> RTS on RC); whether its value is
/// right is [`check_modify_request`]'s business.
pub const fn check_modify(
    cur: QpState,
    next: QpState,
    qp_type: QpType,
    mask: AttrMask,
) -> Result<(), ModifyError> {
    let unsupported = mask.difference(AttrMask::STANDARD);
    if !unsupported.is_empty() {
        return Err(ModifyError::UnsupportedAttrs(unsupported));
    }
    let next = if mask.contains(AttrMask::STATE) {
        next
    } else {
        cur
    };
    let Some(cell) = transition_attrs(cur, next, qp_type) else {
        return Err(ModifyError::IllegalTransition);
    };
    let missing = cell.required.difference(mask);
    if !missing.is_empty() {
        return Err(ModifyError::MissingAttrs(missing));
    }
    let unexpected = mask.difference(cell.required.union(cell.optional).union(AttrMask::STATE));
    if !unexpected.is_empty() {
        return Err(ModifyError::UnexpectedAttrs(unexpected));
    }
    Ok(())
}

/// The state fields of a modify QP, raw as user space wrote them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ModifyRequest {
    /// `attr_mask`.
    pub mask: AttrMask,
    /// `qp_state`, read only under [`AttrMask::STATE`].
    pub qp_state: u32,
    /// `cur_qp_state`, read only under [`AttrMask::CUR_STATE`].
    pub cur_qp_state: u32,
}

/// The whole state check of a modify QP: decodes the raw states, checks the mask with
/// [`check_modify`], and returns the state the QP ends in.
///
/// `real` is the QP's state under the driver's state lock; `sq_draining` whether it is in SQD
/// with send WQEs still outstanding.
///
/// - A raw state above `IB_QPS_ERR` is `EINVAL` (uverbs' `modify_qp` makes the same check).
/// - `cur_qp_state`, when given, must equal `real`. rxe (like mlx4/mlx5) instead checks the
///   transition from the claimed state; requiring the truth gives the same answer whenever the
///   consumer is right, and refuses a stale claim (the QP went to SQE or ERR behind the
///   consumer's back) instead of applying a transition from a state the QP is not in.
/// - Leaving SQD for anything but ERR while the SQ still drains is `EINVAL`, as in rxe's
///   `__qp_chk_state`: IBA 10.3.1 lets a drained SQD QP be modified, not a draining one.
pub const fn check_modify_request(
    real: QpState,
    qp_type: QpType,
    sq_draining: bool,
    req: &ModifyRequest,
) -> Result<QpState, ModifyError> {
    let mask = req.mask;
    let unsupported = mask.difference(AttrMask::STANDARD);
    if !unsupported.is_empty() {
        return Err(ModifyError::UnsupportedAttrs(unsupported));
    }
    let next = if mask.contains(AttrMask::STATE) {
        match QpState::from_raw(req.qp_state) {
            Some(s) => s,
            None => return Err(ModifyError::BadStateValue),
        }
    } else {
        real
    };
    if mask.contains(AttrMask::CUR_STATE) {
        match QpState::from_raw(req.cur_qp_state) {
            Some(claimed) => {
                if claimed as u32 != real as u32 {
                    return Err(ModifyError::CurStateMismatch);
                }
            }
            None => return Err(ModifyError::BadStateValue),
        }
    }
    if let Err(e) = check_modify(real, next, qp_type, mask) {
        return Err(e);
    }
    if mask.contains(AttrMask::STATE)
        && matches!(real, QpState::Sqd)
        && sq_draining
        && !matches!(next, QpState::Err)
    {
        return Err(ModifyError::SqDraining);
    }
    Ok(next)
}

/// The one port of a roxe device (IB numbers ports from 1).
pub const PORT_NUM: u32 = 1;

/// `qp_access_flags` bits (`enum ib_access_flags`, shared with MRs, see `super::mtt::Access`).
pub mod qp_access {
    /// Local write: meaningless on a QP, but consumers pass their MR flags and rxe accepts it.
    pub const LOCAL_WRITE: u32 = 1 << 0;
    /// Allow incoming RDMA WRITE.
    pub const REMOTE_WRITE: u32 = 1 << 1;
    /// Allow incoming RDMA READ.
    pub const REMOTE_READ: u32 = 1 << 2;
    /// Allow incoming atomics.
    pub const REMOTE_ATOMIC: u32 = 1 << 3;
    /// Memory window binding.
    pub const MW_BIND: u32 = 1 << 4;
    /// On-demand paging.
    pub const ON_DEMAND: u32 = 1 << 6;
    /// Allow incoming FLUSH to global visibility.
    pub const FLUSH_GLOBAL: u32 = 1 << 8;
    /// Allow incoming FLUSH to persistence.
    pub const FLUSH_PERSISTENT: u32 = 1 << 9;
    /// `IB_UVERBS_ACCESS_OPTIONAL_RANGE` (bits 20..=29): hints a device may ignore.
    pub const OPTIONAL_RANGE: u32 = 0x3ff0_0000;
    /// What a QP accepts: rxe's `RXE_ACCESS_SUPPORTED_QP` (its MR set, optional hints
    /// included). A narrower set would refuse flags that programs tested on rxe pass.
    pub const SUPPORTED: u32 = LOCAL_WRITE
        | REMOTE_WRITE
        | REMOTE_READ
        | REMOTE_ATOMIC
        | MW_BIND
        | ON_DEMAND
        | FLUSH_GLOBAL
        | FLUSH_PERSISTENT
        | OPTIONAL_RANGE;
}

/// `port_num` must name the device's one port (rxe: `rdma_is_port_valid`).
pub const fn check_port(port_num: u32) -> Result<(), ModifyError> {
    if port_num == PORT_NUM {
        Ok(())
    } else {
        Err(ModifyError::BadPort)
    }
}

/// `pkey_index` must index the port's P_Key table of `table_len` entries (IBA 10.9.2). rxe
/// leaves this to the core's security hooks; a hardware HCA checks it.
pub const fn check_pkey_index(pkey_index: u16, table_len: u16) -> Result<(), ModifyError> {
    if pkey_index < table_len {
        Ok(())
    } else {
        Err(ModifyError::BadPkeyIndex)
    }
}

/// `qp_access_flags` may only carry [`qp_access::SUPPORTED`] bits (rxe_qp_chk_attr). Access
/// flags on a UD or GSI QP never get here: no transition allows them.
pub const fn check_qp_access_flags(flags: u32) -> Result<(), ModifyError> {
    if flags & !qp_access::SUPPORTED == 0 {
        Ok(())
    } else {
        Err(ModifyError::BadAccessFlags)
    }
}

/// `path_mtu` must be an `enum ib_mtu` value (256..4096 bytes, IBA 7.7.1) no larger than the
/// port's maximum. rxe only checks the upper bound and would take 0 (an `ib_mtu_enum_to_int`
/// of -1); we refuse it.
pub const fn check_path_mtu(raw: u32, port_max: IbMtu) -> Result<IbMtu, ModifyError> {
    match IbMtu::from_raw(raw) {
        Some(mtu) if mtu.as_raw() <= port_max.as_raw() => Ok(mtu),
        _ => Err(ModifyError::BadPathMtu),
    }
}

/// The local ACK timeout is a 5-bit exponent (IBA 9.7.6.1.3): above 31 is `EINVAL` (rxe).
pub const fn check_timeout(timeout: u8) -> Result<(), ModifyError> {
    if timeout <= 31 {
        Ok(())
    } else {
        Err(ModifyError::BadTimeout)
    }
}

/// The transport retry count is 3 bits (IBA 9.7.6.1.3, 11.2.5.2). rxe stores any byte and
/// uses it whole; a hardware HCA has a 3-bit field, so we refuse what it cannot hold.
pub const fn check_retry_cnt(retry_cnt: u8) -> Result<(), ModifyError> {
    if retry_cnt <= 7 {
        Ok(())
    } else {
        Err(ModifyError::BadRetryCount)
    }
}

/// The RNR retry count is 3 bits, 7 meaning "retry forever" (IBA 9.7.5.2.8, 11.2.5.2).
pub const fn check_rnr_retry(rnr_retry: u8) -> Result<(), ModifyError> {
    if rnr_retry <= 7 {
        Ok(())
    } else {
        Err(ModifyError::BadRnrRetry)
    }
}

/// Whether `rnr_retry` means unlimited RNR retries (IBA 9.7.5.2.8).
pub const fn rnr_retry_is_infinite(rnr_retry: u8) -> bool {
    rnr_retry == 7
}

/// The minimum RNR NAK timer is the 5-bit code of [`rnr_timer_us`] (IBA 9.7.5.2.8).
pub const fn check_min_rnr_timer(min_rnr_timer: u8) -> Result<(), ModifyError> {
    if min_rnr_timer <= 31 {
        Ok(())
    } else {
        Err(ModifyError::BadMinRnrTimer)
    }
}

/// `max_rd_atomic` (initiator depth) may not exceed the device's `max_qp_init_rd_atom`. rxe
/// compares it with `max_qp_rd_atom`; both are 128 on rxe and roxe.
pub const fn check_max_rd_atomic(max_rd_atomic: u8, limit: u32) -> Result<(), ModifyError> {
    if max_rd_atomic as u32 <= limit {
        Ok(())
    } else {
        Err(ModifyError::TooManyRdAtomic)
    }
}

/// `max_dest_rd_atomic` (responder resources) may not exceed the device's `max_qp_rd_atom`.
/// rxe does not check it and sizes its resource array from it; we hold it to what we advertise.
pub const fn check_max_dest_rd_atomic(
    max_dest_rd_atomic: u8,
    limit: u32,
) -> Result<(), ModifyError> {
    if max_dest_rd_atomic as u32 <= limit {
        Ok(())
    } else {
        Err(ModifyError::TooManyDestRdAtomic)
    }
}

/// The number of RDMA READ/atomic slots to provision for a depth of `n`: rxe rounds up to a
/// power of two (0 stays 0), and reports the rounded value back through query QP.
pub const fn rd_atomic_slots(n: u8) -> u32 {
    if n == 0 {
        0
    } else {
        (n as u32).next_power_of_two()
    }
}

/// The PSN a `sq_psn`/`rq_psn` attribute sets. The core's `_ib_modify_qp` masks both to 24
/// bits (with a warning) before the driver sees them, and rxe masks again: values are masked,
/// never refused.
pub const fn psn_from_attr(raw: u32) -> Psn {
    Psn::new(raw)
}

/// Device and port limits the value checks compare against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttrLimits {
    /// Entries in the port's P_Key table.
    pub pkey_table_len: u16,
    /// `max_qp_init_rd_atom`.
    pub max_rd_atomic: u32,
    /// `max_qp_rd_atom`.
    pub max_dest_rd_atomic: u32,
    /// The port's `max_mtu`.
    pub port_max_mtu: IbMtu,
}

/// The numeric fields of `struct ib_qp_attr` the value checks look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AttrValues {
    /// `port_num`.
    pub port_num: u32,
    /// `pkey_index`.
    pub pkey_index: u16,
    /// `qp_access_flags`.
    pub qp_access_flags: u32,
    /// `path_mtu` (raw `enum ib_mtu`).
    pub path_mtu: u32,
    /// `timeout`.
    pub timeout: u8,
    /// `retry_cnt`.
    pub retry_cnt: u8,
    /// `rnr_retry`.
    pub rnr_retry: u8,
    /// `min_rnr_timer`.
    pub min_rnr_timer: u8,
    /// `max_rd_atomic`.
    pub max_rd_atomic: u8,
    /// `max_dest_rd_atomic`.
    pub max_dest_rd_atomic: u8,
}

/// Runs the value check of every attribute `mask` carries. QKey, PSNs, destination QPN, path
/// migration state and the SQD notify flag take any value (the core refuses a QKey with the
/// controlled bit 31 set to unprivileged users before the driver is called). The address
/// vector is checked where it is resolved. An alternate path is refused: RoCE has no automatic
/// path migration, and the core already refuses it on RoCE ports (`_ib_modify_qp`).
pub const fn check_attr_values(
    mask: AttrMask,
    v: &AttrValues,
    limits: &AttrLimits,
) -> Result<(), ModifyError> {
    if mask.contains(AttrMask::PORT) {
        if let Err(e) = check_port(v.port_num) {
            return Err(e);
        }
    }
    if mask.contains(AttrMask::PKEY_INDEX) {
        if let Err(e) = check_pkey_index(v.pkey_index, limits.pkey_table_len) {
            return Err(e);
        }
    }
    if mask.contains(AttrMask::ACCESS_FLAGS) {
        if let Err(e) = check_qp_access_flags(v.qp_access_flags) {
            return Err(e);
        }
    }
    if mask.contains(AttrMask::ALT_PATH) {
        return Err(ModifyError::AltPathUnsupported);
    }
    if mask.contains(AttrMask::PATH_MTU) {
        if let Err(e) = check_path_mtu(v.path_mtu, limits.port_max_mtu) {
            return Err(e);
        }
    }
    if mask.contains(AttrMask::TIMEOUT) {
        if let Err(e) = check_timeout(v.timeout) {
            return Err(e);
        }
    }
    if mask.contains(AttrMask::RETRY_CNT) {
        if let Err(e) = check_retry_cnt(v.retry_cnt) {
            return Err(e);
        }
    }
    if mask.contains(AttrMask::RNR_RETRY) {
        if let Err(e) = check_rnr_retry(v.rnr_retry) {
            return Err(e);
        }
    }
    if mask.contains(AttrMask::MIN_RNR_TIMER) {
        if let Err(e) = check_min_rnr_timer(v.min_rnr_timer) {
            return Err(e);
        }
    }
    if mask.contains(AttrMask::MAX_QP_RD_ATOMIC) {
        if let Err(e) = check_max_rd_atomic(v.max_rd_atomic, limits.max_rd_atomic) {
            return Err(e);
        }
    }
    if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
        if let Err(e) = check_max_dest_rd_atomic(v.max_dest_rd_atomic, limits.max_dest_rd_atomic) {
            return Err(e);
        }
    }
    Ok(())
}

/// The local ACK timeout in nanoseconds: 4.096 us * 2^`timeout` (IBA 9.7.6.1.3), `None` for 0,
/// which disables the timer. Exponents past what a u64 holds saturate.
pub const fn ack_timeout_ns(timeout: u8) -> Option<u64> {
    if timeout == 0 {
        return None;
    }
    // 4096 ns is 2^12, so 2^12 << 51 is the last shift that fits.
    if timeout as u32 > 51 {
        return Some(u64::MAX);
    }
    Some(4096u64 << timeout)
}

/// RNR NAK timer values in microseconds, by 5-bit code (IBA 9.7.5.2.8, table 45). Code 0 is
/// the longest, 655.36 ms; codes 1 to 31 grow from 10 us to 491.52 ms.
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// The RNR NAK delay in microseconds for a timer code. The code travels in the low 5 bits of
/// the AETH syndrome, so only those bits count.
pub fn rnr_timer_us(code: u8) -> u32 {
    // The mask keeps the index below 32; the fallback is unreachable.
    RNR_TIMER_US
        .get(usize::from(code & 0x1f))
        .copied()
        .unwrap_or(655_360)
}

/// What happens to a work request posted in a given state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostVerdict {
    /// Accept it; it is processed when the state allows.
    Queue,
    /// Accept it and complete it with `IB_WC_WR_FLUSH_ERR`.
    FlushWithError,
    /// Refuse the post with `EINVAL` (an immediate error, nothing is queued).
    Reject,
}

/// The verdict for a send posted in `state` (IBA 10.3.1 and 11.4.1.1).
///
/// RESET, INIT and RTR refuse it (rxe: `EINVAL`, "qp not ready to send"). RTS queues it; so
/// does SQD, which holds new WQEs until the QP is back in RTS. SQE and ERR accept it and flush
/// it: the send queue is in error.
pub const fn send_verdict(state: QpState) -> PostVerdict {
    match state {
        QpState::Reset | QpState::Init | QpState::Rtr => PostVerdict::Reject,
        QpState::Rts | QpState::Sqd => PostVerdict::Queue,
        QpState::Sqe | QpState::Err => PostVerdict::FlushWithError,
    }
}

/// The verdict for a receive posted in `state` (IBA 10.3.1 and 11.4.1.2).
///
/// RESET refuses it (rxe cites IBA C10-97.2.1). From INIT on receives are queued, even though
/// nothing consumes them before RTR; SQE only affects the send queue. ERR accepts and flushes.
pub const fn recv_verdict(state: QpState) -> PostVerdict {
    match state {
        QpState::Reset => PostVerdict::Reject,
        QpState::Init | QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe => {
            PostVerdict::Queue
        }
        QpState::Err => PostVerdict::FlushWithError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    type M = AttrMask;

    #[test]
    fn raw_values_match_the_kernel_enums() {
        for (i, s) in QpState::ALL.iter().enumerate() {
            assert_eq!(s.as_raw(), i as u32);
            assert_eq!(QpState::from_raw(i as u32), Some(*s));
        }
        assert_eq!(QpState::from_raw(7), None);
        assert_eq!(QpType::from_raw(0), Some(QpType::Smi));
        assert_eq!(QpType::from_raw(1), Some(QpType::Gsi));
        assert_eq!(QpType::from_raw(2), Some(QpType::Rc));
        assert_eq!(QpType::from_raw(3), Some(QpType::Uc));
        assert_eq!(QpType::from_raw(4), Some(QpType::Ud));
        // RAW_IPV6, RAW_ETHERTYPE, RAW_PACKET, XRC_INI, XRC_TGT, DRIVER.
        for raw in [5, 6, 8, 9, 10, 0xff] {
            assert_eq!(QpType::from_raw(raw), None);
        }
        assert_eq!(M::DEST_QPN.bits(), 0x10_0000);
        assert_eq!(M::STANDARD.bits(), 0x1f_ffff);
        assert_eq!(M::RATE_LIMIT.bits(), 0x200_0000);
    }

    /// The kernel's `qp_state_table`, written out row by row from reading it, independently of
    /// the `match` above: (from, to, type, required, optional).
    fn kernel_table() -> Vec<(QpState, QpState, QpType, M, M)> {
        use QpState::*;
        use QpType::*;
        let mut rows = Vec::new();
        let e = M::EMPTY;
        for t in QpType::ALL {
            rows.push((Reset, Reset, t, e, e));
            for from in [Init, Rtr, Rts, Sqd, Sqe, Err] {
                rows.push((from, Reset, t, e, e));
                rows.push((from, Err, t, e, e));
            }
            rows.push((Rts, Sqd, t, e, M::EN_SQD_ASYNC_NOTIFY));
        }
        let cur_qkey = M::CUR_STATE | M::QKEY;
        for t in [Ud, Gsi, Smi] {
            let pkey_qkey = M::PKEY_INDEX | M::QKEY;
            let init = if t == Ud {
                pkey_qkey | M::PORT
            } else {
                pkey_qkey
            };
            rows.push((Reset, Init, t, init, e));
            rows.push((Init, Init, t, e, init));
            rows.push((Init, Rtr, t, e, pkey_qkey));
            rows.push((Rtr, Rts, t, M::SQ_PSN, cur_qkey));
            rows.push((Rts, Rts, t, e, cur_qkey));
            rows.push((Sqd, Rts, t, e, cur_qkey));
            rows.push((Sqd, Sqd, t, e, pkey_qkey));
            rows.push((Sqe, Rts, t, e, cur_qkey));
        }
        for t in [Uc, Rc] {
            let init = M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS;
            rows.push((Reset, Init, t, init, e));
            rows.push((Init, Init, t, e, init));
            let rtr = M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN;
            let rtr = if t == Rc {
                rtr | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER
            } else {
                rtr
            };
            rows.push((
                Init,
                Rtr,
                t,
                rtr,
                M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
            ));
            let back_to_rts = M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE;
            let back_to_rts = if t == Rc {
                back_to_rts | M::MIN_RNR_TIMER
            } else {
                back_to_rts
            };
            let rts_req = if t == Rc {
                M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC
            } else {
                M::SQ_PSN
            };
            rows.push((Rtr, Rts, t, rts_req, back_to_rts));
            rows.push((Rts, Rts, t, e, back_to_rts));
            rows.push((Sqd, Rts, t, e, back_to_rts));
        }
        rows.push((
            Sqd,
            Sqd,
            Uc,
            e,
            M::AV | M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PATH_MIG_STATE,
        ));
        rows.push((
            Sqd,
            Sqd,
            Rc,
            e,
            M::PORT
                | M::AV
                | M::TIMEOUT
                | M::RETRY_CNT
                | M::RNR_RETRY
                | M::MAX_QP_RD_ATOMIC
                | M::MAX_DEST_RD_ATOMIC
                | M::ALT_PATH
                | M::ACCESS_FLAGS
                | M::PKEY_INDEX
                | M::MIN_RNR_TIMER
                | M::PATH_MIG_STATE,
        ));
        rows.push((Sqe, Rts, Uc, e, M::CUR_STATE | M::ACCESS_FLAGS));
        rows.push((Sqe, Rts, Rc, e, e));
        rows
    }

    #[test]
    fn table_matches_the_kernel_exhaustively() {
        let rows = kernel_table();
        let mut seen = 0;
        for cur in QpState::ALL {
            for next in QpState::ALL {
                for t in QpType::ALL {
                    let want: Vec<_> = rows
                        .iter()
                        .filter(|r| r.0 == cur && r.1 == next && r.2 == t)
                        .collect();
                    assert!(want.len() <= 1, "duplicate row {cur:?}->{next:?} {t:?}");
                    let got = transition_attrs(cur, next, t);
                    match want.first() {
                        Some(r) => {
                            seen += 1;
                            assert_eq!(
                                got,
                                Some(TransitionAttrs {
                                    required: r.3,
                                    optional: r.4
                                }),
                                "{cur:?}->{next:?} {t:?}"
                            );
                        }
                        None => assert_eq!(got, None, "{cur:?}->{next:?} {t:?} should be illegal"),
                    }
                }
            }
        }
        assert_eq!(seen, rows.len());
    }

    #[test]
    fn reset_cannot_go_to_err_but_everything_else_can() {
        for t in QpType::ALL {
            assert_eq!(
                check_modify(QpState::Reset, QpState::Err, t, M::STATE),
                Err(ModifyError::IllegalTransition)
            );
            for s in QpState::ALL {
                assert_eq!(check_modify(s, QpState::Reset, t, M::STATE), Ok(()));
                if s != QpState::Reset {
                    assert_eq!(check_modify(s, QpState::Err, t, M::STATE), Ok(()));
                }
            }
        }
    }

    #[test]
    fn rc_bring_up() {
        let rc = QpType::Rc;
        let init = M::STATE | M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS;
        assert_eq!(
            check_modify(QpState::Reset, QpState::Init, rc, init),
            Ok(())
        );
        assert_eq!(
            check_modify(
                QpState::Reset,
                QpState::Init,
                rc,
                M::STATE | M::PKEY_INDEX | M::PORT
            ),
            Err(ModifyError::MissingAttrs(M::ACCESS_FLAGS))
        );
        assert_eq!(
            check_modify(QpState::Reset, QpState::Init, rc, init | M::QKEY),
            Err(ModifyError::UnexpectedAttrs(M::QKEY))
        );
        let rtr = M::STATE
            | M::AV
            | M::PATH_MTU
            | M::DEST_QPN
            | M::RQ_PSN
            | M::MAX_DEST_RD_ATOMIC
            | M::MIN_RNR_TIMER;
        assert_eq!(check_modify(QpState::Init, QpState::Rtr, rc, rtr), Ok(()));
        let rts =
            M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC;
        assert_eq!(check_modify(QpState::Rtr, QpState::Rts, rc, rts), Ok(()));
        assert_eq!(
            check_modify(QpState::Rtr, QpState::Rts, rc, rts | M::CUR_STATE),
            Ok(())
        );
        assert_eq!(
            check_modify(QpState::Init, QpState::Rts, rc, rts),
            Err(ModifyError::IllegalTransition)
        );
    }

    #[test]
    fn mask_without_state_checks_the_stay_cell() {
        // QKey change on an RTS UD QP, next ignored.
        assert_eq!(
            check_modify(QpState::Rts, QpState::Reset, QpType::Ud, M::QKEY),
            Ok(())
        );
        // RTR -> RTR does not exist.
        assert_eq!(
            check_modify(QpState::Rtr, QpState::Rts, QpType::Rc, M::EMPTY),
            Err(ModifyError::IllegalTransition)
        );
        assert_eq!(
            check_modify(QpState::Reset, QpState::Init, QpType::Rc, M::EMPTY),
            Ok(())
        );
    }

    #[test]
    fn cap_and_nonstandard_bits() {
        assert_eq!(
            check_modify(QpState::Rts, QpState::Rts, QpType::Rc, M::STATE | M::CAP),
            Err(ModifyError::UnexpectedAttrs(M::CAP))
        );
        let e = check_modify(QpState::Rts, QpState::Rts, QpType::Rc, M::RATE_LIMIT).unwrap_err();
        assert_eq!(e, ModifyError::UnsupportedAttrs(M::RATE_LIMIT));
        assert_eq!(e.errno(), Errno::OpNotSupp);
        assert_eq!(ModifyError::IllegalTransition.errno(), Errno::Inval);
    }

    #[test]
    fn cur_state_only_into_rts() {
        for cur in QpState::ALL {
            for next in QpState::ALL {
                for t in QpType::ALL {
                    let ok = check_modify(cur, next, t, M::STATE | M::CUR_STATE).is_ok();
                    let into_rts = next == QpState::Rts
                        && matches!(cur, QpState::Rts | QpState::Sqd | QpState::Sqe)
                        && !(cur == QpState::Sqe && t == QpType::Rc);
                    assert_eq!(ok, into_rts, "{cur:?}->{next:?} {t:?}");
                }
            }
        }
    }

    #[test]
    fn request_decoding() {
        let req = |mask: M, qp_state: u32, cur_qp_state: u32| ModifyRequest {
            mask,
            qp_state,
            cur_qp_state,
        };
        let ud = QpType::Ud;
        assert_eq!(
            check_modify_request(QpState::Rtr, ud, false, &req(M::STATE | M::SQ_PSN, 3, 0)),
            Ok(QpState::Rts)
        );
        assert_eq!(
            check_modify_request(QpState::Rtr, ud, false, &req(M::STATE, 7, 0)),
            Err(ModifyError::BadStateValue)
        );
        assert_eq!(
            check_modify_request(
                QpState::Rtr,
                ud,
                false,
                &req(M::STATE | M::SQ_PSN | M::CUR_STATE, 3, 2)
            ),
            Ok(QpState::Rts)
        );
        assert_eq!(
            check_modify_request(
                QpState::Err,
                ud,
                false,
                &req(M::STATE | M::SQ_PSN | M::CUR_STATE, 3, 2)
            ),
            Err(ModifyError::CurStateMismatch)
        );
        assert_eq!(
            check_modify_request(QpState::Rts, ud, false, &req(M::STATE | M::CUR_STATE, 3, 9)),
            Err(ModifyError::BadStateValue)
        );
        // No STATE bit: stays put.
        assert_eq!(
            check_modify_request(QpState::Rts, ud, false, &req(M::QKEY, 99, 0)),
            Ok(QpState::Rts)
        );
        // SQD while draining: only ERR.
        assert_eq!(
            check_modify_request(QpState::Sqd, ud, true, &req(M::STATE, 3, 0)),
            Err(ModifyError::SqDraining)
        );
        assert_eq!(
            check_modify_request(QpState::Sqd, ud, true, &req(M::STATE, 0, 0)),
            Err(ModifyError::SqDraining)
        );
        assert_eq!(
            check_modify_request(QpState::Sqd, ud, true, &req(M::STATE, 6, 0)),
            Ok(QpState::Err)
        );
        assert_eq!(
            check_modify_request(QpState::Sqd, ud, false, &req(M::STATE, 3, 0)),
            Ok(QpState::Rts)
        );
        assert_eq!(
            check_modify_request(QpState::Rts, ud, false, &req(M::from_bits(1 << 30), 0, 0)),
            Err(ModifyError::UnsupportedAttrs(M::from_bits(1 << 30)))
        );
    }

    const LIMITS: AttrLimits = AttrLimits {
        pkey_table_len: 1,
        max_rd_atomic: 128,
        max_dest_rd_atomic: 128,
        port_max_mtu: IbMtu::Mtu4096,
    };

    #[test]
    fn value_checks() {
        assert_eq!(check_port(1), Ok(()));
        assert_eq!(check_port(0), Err(ModifyError::BadPort));
        assert_eq!(check_port(2), Err(ModifyError::BadPort));
        assert_eq!(check_pkey_index(0, 1), Ok(()));
        assert_eq!(check_pkey_index(1, 1), Err(ModifyError::BadPkeyIndex));
        assert_eq!(
            check_path_mtu(0, IbMtu::Mtu4096),
            Err(ModifyError::BadPathMtu)
        );
        assert_eq!(check_path_mtu(5, IbMtu::Mtu4096), Ok(IbMtu::Mtu4096));
        assert_eq!(
            check_path_mtu(6, IbMtu::Mtu4096),
            Err(ModifyError::BadPathMtu)
        );
        assert_eq!(
            check_path_mtu(4, IbMtu::Mtu1024),
            Err(ModifyError::BadPathMtu)
        );
        assert_eq!(check_timeout(31), Ok(()));
        assert_eq!(check_timeout(32), Err(ModifyError::BadTimeout));
        assert_eq!(check_retry_cnt(7), Ok(()));
        assert_eq!(check_retry_cnt(8), Err(ModifyError::BadRetryCount));
        assert_eq!(check_rnr_retry(8), Err(ModifyError::BadRnrRetry));
        assert!(rnr_retry_is_infinite(7));
        assert_eq!(check_min_rnr_timer(32), Err(ModifyError::BadMinRnrTimer));
        assert_eq!(check_max_rd_atomic(128, 128), Ok(()));
        assert_eq!(
            check_max_rd_atomic(129, 128),
            Err(ModifyError::TooManyRdAtomic)
        );
        assert_eq!(
            check_max_dest_rd_atomic(129, 128),
            Err(ModifyError::TooManyDestRdAtomic)
        );
        let all_known = qp_access::LOCAL_WRITE
            | qp_access::REMOTE_WRITE
            | qp_access::REMOTE_READ
            | qp_access::REMOTE_ATOMIC;
        assert_eq!(check_qp_access_flags(all_known | (1 << 20)), Ok(()));
        assert_eq!(
            check_qp_access_flags(1 << 5),
            Err(ModifyError::BadAccessFlags)
        );
        assert_eq!(
            check_qp_access_flags(1 << 30),
            Err(ModifyError::BadAccessFlags)
        );
        assert_eq!(psn_from_attr(0x1ab_cdef).get(), 0xab_cdef);
        assert_eq!(rd_atomic_slots(0), 0);
        assert_eq!(rd_atomic_slots(3), 4);
        assert_eq!(rd_atomic_slots(255), 256);
    }

    #[test]
    fn attr_values_only_checks_the_masked_fields() {
        let bad = AttrValues {
            port_num: 9,
            path_mtu: 0,
            timeout: 200,
            retry_cnt: 9,
            ..AttrValues::default()
        };
        assert_eq!(
            check_attr_values(M::QKEY | M::SQ_PSN, &bad, &LIMITS),
            Ok(())
        );
        assert_eq!(
            check_attr_values(M::PORT, &bad, &LIMITS),
            Err(ModifyError::BadPort)
        );
        assert_eq!(
            check_attr_values(M::TIMEOUT, &bad, &LIMITS),
            Err(ModifyError::BadTimeout)
        );
        assert_eq!(
            check_attr_values(M::ALT_PATH, &AttrValues::default(), &LIMITS),
            Err(ModifyError::AltPathUnsupported)
        );
        let good = AttrValues {
            port_num: 1,
            path_mtu: 3,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            ..AttrValues::default()
        };
        let mask = M::PORT
            | M::PKEY_INDEX
            | M::PATH_MTU
            | M::TIMEOUT
            | M::RETRY_CNT
            | M::RNR_RETRY
            | M::MIN_RNR_TIMER;
        assert_eq!(check_attr_values(mask, &good, &LIMITS), Ok(()));
    }

    #[test]
    fn timers() {
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(1), Some(8192));
        assert_eq!(ack_timeout_ns(14), Some(67_108_864)); // ~67 ms
        assert_eq!(ack_timeout_ns(31), Some(4096 << 31));
        assert_eq!(ack_timeout_ns(51), Some(1 << 63));
        assert_eq!(ack_timeout_ns(52), Some(u64::MAX));
        assert_eq!(ack_timeout_ns(255), Some(u64::MAX));
        assert_eq!(rnr_timer_us(0), 655_360);
        assert_eq!(rnr_timer_us(1), 10);
        assert_eq!(rnr_timer_us(12), 640);
        assert_eq!(rnr_timer_us(31), 491_520);
        assert_eq!(rnr_timer_us(32), 655_360);
        // Non-decreasing from code 1 on.
        for c in 1..31u8 {
            assert!(rnr_timer_us(c) < rnr_timer_us(c + 1));
        }
    }

    #[test]
    fn post_verdicts() {
        use PostVerdict::*;
        let send: Vec<_> = QpState::ALL.iter().map(|s| send_verdict(*s)).collect();
        assert_eq!(
            send,
            [
                Reject,
                Reject,
                Reject,
                Queue,
                Queue,
                FlushWithError,
                FlushWithError
            ]
        );
        let recv: Vec<_> = QpState::ALL.iter().map(|s| recv_verdict(*s)).collect();
        assert_eq!(
            recv,
            [Reject, Queue, Queue, Queue, Queue, Queue, FlushWithError]
        );
    }
}
