// SPDX-License-Identifier: GPL-2.0

//! Responder errors, the receive completion status they give, and the action each takes
//! (the NAK, the receive WQE's fate, whether the QP moves to the error state).

use super::*;

/// Why the responder refused a request. [`error_action`] maps each to what happens; the error
/// classes (A to J) are the IBA's, as rxe's responder names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RespError {
    /// Not a request of the QP's transport. Dropped on every type (rxe drops these before the
    /// responder, in `check_type_state`).
    WrongTransport,
    /// A MIDDLE or LAST without its FIRST. RC: class C, NAK Invalid Request; UC: the message is
    /// dropped.
    MissingFirst,
    /// A packet that does not continue the message in progress. RC: class C, NAK Invalid
    /// Request; UC: the partial message is abandoned (class D1).
    MissingLast,
    /// The QP's access flags do not allow the operation. RC: NAK Invalid Request (rxe
    /// `check_op_valid`); UC: the WRITE is dropped.
    OperationNotAllowed,
    /// A READ, atomic, ATOMIC WRITE or FLUSH while `max_dest_rd_atomic` is 0: NAK Invalid
    /// Request.
    NoRdAtomicResources,
    /// No receive WQE posted. RC: RNR NAK (class B); UC, UD: dropped (class D).
    ReceiverNotReady,
    /// The kernel could not use the receive WQE it took (too many SGEs, ...). Class A: NAK
    /// Remote Operational Error, `IB_WC_LOC_QP_OP_ERR`, QP to error.
    MalformedRecvWqe,
    /// Placing SEND data hit an L_Key of the receive WQE that is invalid or lacks local write.
    /// Class A: NAK Remote Operational Error, `IB_WC_LOC_PROT_ERR` (rxe reports
    /// `IB_WC_LOC_QP_OP_ERR` for every such copy failure), QP to error.
    RecvProtection,
    /// The payload does not fit the packet's place in the message, the MTU or the RDMA length.
    /// RC: class C, NAK Invalid Request; UC: dropped.
    Length,
    /// A RETH DMA length above [`MAX_DMA_LEN`]. As [`RespError::Length`].
    DmaLengthTooLong,
    /// The SEND is longer than the receive WQE's buffers. RC: NAK Invalid Request and the
    /// receive completes with `IB_WC_LOC_LEN_ERR` (what verbs define for a receive buffer too
    /// small; rxe reports `IB_WC_REM_INV_REQ_ERR`); UC, UD: dropped.
    RecvBufferTooSmall,
    /// R_Key violation: unknown or stale key, other PD, invalid, missing right, out of range
    /// (IBA 9.7.5.2.4). RC: class C, NAK Remote Access Error, QP to error; UC: dropped.
    RemoteAccess,
    /// An atomic or ATOMIC WRITE address that is not 8-byte aligned: NAK Invalid Request.
    MisalignedAtomic,
    /// A SEND with invalidate whose R_Key could not be invalidated. rxe's class J: the message
    /// is acknowledged, the receive completes with `IB_WC_REM_INV_REQ_ERR`, QP to error.
    InvalidateFailed,
    /// The receive CQ overflowed (class G): QP to error, nothing sent.
    CqOverflow,
}

impl RespError {
    /// A short name for logs and counter labels.
    pub const fn name(self) -> &'static str {
        match self {
            RespError::WrongTransport => "wrong_transport",
            RespError::MissingFirst => "missing_first",
            RespError::MissingLast => "missing_last",
            RespError::OperationNotAllowed => "operation_not_allowed",
            RespError::NoRdAtomicResources => "no_rd_atomic_resources",
            RespError::ReceiverNotReady => "receiver_not_ready",
            RespError::MalformedRecvWqe => "malformed_recv_wqe",
            RespError::RecvProtection => "recv_protection",
            RespError::Length => "length",
            RespError::DmaLengthTooLong => "dma_length_too_long",
            RespError::RecvBufferTooSmall => "recv_buffer_too_small",
            RespError::RemoteAccess => "remote_access",
            RespError::MisalignedAtomic => "misaligned_atomic",
            RespError::InvalidateFailed => "invalidate_failed",
            RespError::CqOverflow => "cq_overflow",
        }
    }
}

/// A completion status of a receive WQE ended by an error: the values of `enum ib_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(
    clippy::enum_variant_names,
    reason = "the names of `enum ib_wc_status`; `allow`, not `expect`: the lint fires in roxe.ko \
              but not in tools/proto, whose exported API clippy spares"
)]
pub enum RecvStatus {
    /// `IB_WC_LOC_LEN_ERR`: the message was longer than the receive buffers.
    LocLenErr = 1,
    /// `IB_WC_LOC_QP_OP_ERR`: the receive WQE could not be used.
    LocQpOpErr = 2,
    /// `IB_WC_LOC_PROT_ERR`: the receive buffers failed their L_Key check.
    LocProtErr = 4,
    /// `IB_WC_REM_INV_REQ_ERR`: the request that consumed the WQE was invalid.
    RemInvReqErr = 9,
    /// `IB_WC_REM_ACCESS_ERR`: the request that consumed the WQE violated an R_Key.
    RemAccessErr = 10,
}

impl RecvStatus {
    /// The `enum ib_wc_status` value.
    pub const fn wc_status(self) -> u32 {
        self as u32
    }
}

/// What becomes of a receive WQE the kernel holds for the failed message (nothing, when it holds
/// none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvWqeFate {
    /// Keep it for the next message: a dropped UC or UD message consumes no receive WQE.
    Keep,
    /// Complete it with this status.
    Complete(RecvStatus),
}

/// What the kernel does about a [`RespError`], from [`error_action`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorAction {
    /// RC: the syndrome of the ACKNOWLEDGE to send, with [`RespState::aeth`] and the failed
    /// packet's PSN. `None`: send nothing.
    pub reply: Option<Syndrome>,
    /// What to do with a held receive WQE.
    pub recv_wqe: RecvWqeFate,
    /// Move the QP to the error state (after the reply and the completion), which flushes the
    /// rest of the receive queue.
    pub qp_error: bool,
    /// Raise `IB_EVENT_QP_ACCESS_ERR`, unless a receive WQE is held and completed with the error
    /// instead (rxe cites C9-222.1: the event is for errors no receive completion reports).
    pub qp_access_event: bool,
}

impl ErrorAction {
    /// Drop the packet and carry on.
    pub(super) const DROP: ErrorAction = ErrorAction {
        reply: None,
        recv_wqe: RecvWqeFate::Keep,
        qp_error: false,
        qp_access_event: false,
    };

    /// An error that moves the QP to the error state: NAK (on RC) and complete a held WQE.
    const fn fatal(rc: bool, nak: NakCode, status: RecvStatus) -> ErrorAction {
        ErrorAction {
            reply: if rc { Some(Syndrome::Nak(nak)) } else { None },
            recv_wqe: RecvWqeFate::Complete(status),
            qp_error: true,
            qp_access_event: false,
        }
    }
}

/// What the kernel does about `err` on a QP configured as `cfg` (rxe: the error states of
/// `rxe_receiver`). A pure mapping; [`RespState::fail`] also updates the state.
///
/// RC reports request errors to the requester with a NAK and moves the QP to the error state
/// (class C: Invalid Request or Remote Access Error), except an RNR, which only asks for a retry
/// (class B). Local errors (class A) move every QP type to the error state. UC and UD drop a bad
/// message and keep the receive WQE for the next one.
pub const fn error_action(cfg: &RespConfig, err: RespError) -> ErrorAction {
    let rc = cfg.is_rc();
    match err {
        RespError::WrongTransport => ErrorAction::DROP,
        RespError::CqOverflow => ErrorAction {
            reply: None,
            recv_wqe: RecvWqeFate::Keep,
            qp_error: true,
            qp_access_event: false,
        },
        RespError::MalformedRecvWqe => {
            ErrorAction::fatal(rc, NakCode::RemoteOperationalError, RecvStatus::LocQpOpErr)
        }
        RespError::RecvProtection => {
            ErrorAction::fatal(rc, NakCode::RemoteOperationalError, RecvStatus::LocProtErr)
        }
        RespError::ReceiverNotReady if rc => ErrorAction {
            reply: Some(Syndrome::RnrNak {
                timer: cfg.min_rnr_timer & 0x1f,
            }),
            recv_wqe: RecvWqeFate::Keep,
            qp_error: false,
            qp_access_event: false,
        },
        RespError::InvalidateFailed => ErrorAction {
            reply: if rc { Some(ack_syndrome()) } else { None },
            recv_wqe: RecvWqeFate::Complete(RecvStatus::RemInvReqErr),
            qp_error: true,
            qp_access_event: false,
        },
        RespError::RemoteAccess if rc => ErrorAction {
            reply: Some(Syndrome::Nak(NakCode::RemoteAccessError)),
            recv_wqe: RecvWqeFate::Complete(RecvStatus::RemAccessErr),
            qp_error: true,
            qp_access_event: true,
        },
        RespError::RecvBufferTooSmall if rc => {
            ErrorAction::fatal(true, NakCode::InvalidRequest, RecvStatus::LocLenErr)
        }
        RespError::MissingFirst
        | RespError::MissingLast
        | RespError::OperationNotAllowed
        | RespError::NoRdAtomicResources
        | RespError::Length
        | RespError::DmaLengthTooLong
        | RespError::MisalignedAtomic
            if rc =>
        {
            ErrorAction::fatal(true, NakCode::InvalidRequest, RecvStatus::RemInvReqErr)
        }
        _ => ErrorAction::DROP,
    }
}
