// SPDX-License-Identifier: GPL-2.0

//! What the responder sends and completes for a request: the response to a duplicate
//! ([`handle_duplicate`]) and the commit of an executed request ([`commit`]).

use super::*;

/// What the responder sends back for a request (RC only; UC and UD never answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    /// Nothing: the ACK is coalesced into a later one, or the duplicate is dropped.
    None,
    /// An ACKNOWLEDGE with [`ack_syndrome`] and [`RespState::aeth`], BTH PSN `psn`.
    Ack {
        /// The PSN acknowledged (and all before it).
        psn: Psn,
    },
    /// An ATOMIC ACKNOWLEDGE carrying `original`, with [`ack_syndrome`], BTH PSN `psn`.
    AtomicAck {
        /// The atomic's PSN.
        psn: Psn,
        /// The remote value before the atomic.
        original: u64,
    },
    /// RDMA READ responses; those with an AETH carry [`ack_syndrome`].
    Read(ReadReply),
    /// A zero-length RDMA READ RESPONSE ONLY with [`ack_syndrome`], BTH PSN `psn`: how an
    /// ATOMIC WRITE or a FLUSH is acknowledged (annex A19; rxe `send_read_response_ack`).
    EmptyRead {
        /// The request's PSN.
        psn: Psn,
    },
}

/// The syndrome of a positive acknowledgement. roxe has no end-to-end credits to advertise and
/// sends the "invalid" credit code, as rxe does (`AETH_ACK_UNLIMITED`); requesters then go by
/// their own limits.
pub const fn ack_syndrome() -> Syndrome {
    Syndrome::Ack {
        credits: AETH_CREDITS_INVALID,
    }
}

/// What the responder makes of a retransmitted RC request (rxe `duplicate_request`).
///
/// A SEND or WRITE is not executed again: it gets an ACK of the last SEND, WRITE, atomic, ATOMIC
/// WRITE or FLUSH executed, which covers the duplicate and everything up to the latest request
/// (rxe cites C9-105), unless the last request executed was a READ: then nothing is sent (see
/// below). A READ is replayed from the cache when it names a part of the original
/// (same R_Key, range inside it, responses within the original PSNs); an atomic gets its saved
/// original value; an ATOMIC WRITE or FLUSH its empty read response. A request the cache no
/// longer holds, or that does not match what it holds, is dropped (class D): the
/// requester times out and retries.
///
/// The ACK of a duplicate SEND or WRITE cannot name a READ executed after the last acknowledged
/// request: the requester may not have its responses. With such a READ the ACK would be older
/// than READ responses already sent. A requester should ignore such a stale ACK, but one in
/// the middle of that READ may take it as its end: rdma_rxe's completer does (`check_psn`
/// passes it to `check_ack`, whose ACK case leads to `COMPST_UPDATE_COMP`, which resets
/// `comp.opcode`), then fails the QP on the READ's next MIDDLE response with a WARN
/// (`COMPST_ERROR` with no error status). So the duplicate gets no answer. The READ's responses
/// acknowledge it implicitly (IBA 9.7.5.1.2): the requester has them, or asks for the READ
/// again behind the duplicate, since it retries from its oldest unacknowledged request on, as
/// rdma_rxe and roxe do.
pub fn handle_duplicate<const N: usize>(
    state: &RespState,
    cache: &ResponderResources<N>,
    cfg: &RespConfig,
    req: &Request,
) -> Response {
    if !cfg.is_rc() || !request_fits_qp(cfg.qp_type, req.info) {
        return Response::None;
    }
    let found = cache.find(req.psn);
    match req.info.operation() {
        Operation::Send | Operation::RdmaWrite if state.ack_psn != state.expected_psn => {
            Response::None
        }
        Operation::Send | Operation::RdmaWrite => Response::Ack {
            psn: Psn::new(state.ack_psn.get().wrapping_sub(1)),
        },
        Operation::RdmaReadRequest => match (found, req.reth) {
            (
                Some(Resource::Read {
                    first_psn,
                    last_psn,
                    va,
                    rkey,
                    len,
                }),
                Some(reth),
            ) => {
                let resumes = req.psn != first_psn;
                let count = i64::from(read_response_count(reth.dma_len, cfg.mtu));
                let inside_psns = i64::from(last_psn.diff(req.psn)) >= count - 1;
                let inside_range = reth.va >= va && {
                    let offset = reth.va - va;
                    offset <= u64::from(len) && u64::from(reth.dma_len) <= u64::from(len) - offset
                };
                // A zero-length restart reads nothing, so nothing about it needs to match.
                let empty_restart = reth.dma_len == 0 && !resumes;
                let matches =
                    empty_restart || (reth.rkey == rkey && inside_range && reth.dma_len > 0);
                if matches && inside_psns {
                    Response::Read(ReadReply {
                        first_psn: req.psn,
                        va: reth.va,
                        rkey: reth.rkey,
                        len: reth.dma_len,
                        resumes,
                    })
                } else {
                    Response::None
                }
            }
            _ => Response::None,
        },
        Operation::CompareSwap | Operation::FetchAdd => match found {
            Some(Resource::Atomic { psn, original }) if psn == req.psn => {
                Response::AtomicAck { psn, original }
            }
            _ => Response::None,
        },
        Operation::AtomicWrite => match found {
            Some(Resource::AtomicWrite { psn }) if psn == req.psn => Response::EmptyRead { psn },
            _ => Response::None,
        },
        Operation::Flush => match found {
            Some(Resource::Flush { psn }) if psn == req.psn => Response::EmptyRead { psn },
            _ => Response::None,
        },
        Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge => {
            Response::None
        }
    }
}

/// A successful receive completion owed after [`commit`] (the kernel adds the WQE id, immediate
/// data, invalidated key and source QP from the packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvSuccess {
    /// `byte_len`: the SEND's bytes (a UD SEND's include the GRH), or an RDMA WRITE with
    /// immediate's DMA length.
    pub byte_len: u32,
    /// An RDMA WRITE with immediate (`IB_WC_RECV_RDMA_WITH_IMM`) rather than a SEND
    /// (`IB_WC_RECV`).
    pub rdma_with_imm: bool,
}

/// What [`commit`] asks of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Commit {
    /// Complete the held receive WQE successfully, when the packet ends a SEND or is an RDMA
    /// WRITE with immediate.
    pub recv: Option<RecvSuccess>,
    /// What to send back.
    pub response: Response,
}

/// Records a request the kernel executed: the packet passed every check and its data was placed,
/// its atomic ran (returning `atomic_original`, ignored for other operations), its R_Key was
/// invalidated. Advances the expected PSN by the PSNs the request took (one, or one per READ
/// response), counts a completed message in the MSN, moves the message cursor, and keeps READ,
/// atomic, ATOMIC WRITE and FLUSH requests in `cache` for replay.
///
/// RC answers an atomic with an atomic ACK, a READ with its responses, an ATOMIC WRITE or FLUSH
/// with an empty read response (rxe `acknowledge`), and a SEND or WRITE packet with an ACK when
/// it asks for one (AckReq) or ends its message. rxe answers only AckReq; the requester sets it on
/// every last packet (rxe `rxe_req`), and an ACK at the end of each message keeps a requester
/// that does not from waiting for its timeout.
pub fn commit<const N: usize>(
    state: &mut RespState,
    cache: &mut ResponderResources<N>,
    cfg: &RespConfig,
    req: &Request,
    atomic_original: u64,
) -> Commit {
    let info = req.info;
    let reth = req.reth.unwrap_or_default();
    let psn_count = if info.is_read() {
        read_response_count(reth.dma_len, cfg.mtu)
    } else {
        1
    };
    state.expected_psn = req.psn.add(psn_count);
    if !info.is_read() {
        state.ack_psn = state.expected_psn;
    }
    state.gap = Gap::None;
    state.uc_dropping = false;
    if cfg.is_connected() {
        state.last_opcode = Some(info.opcode());
    }
    if info.ends_message() {
        state.msn = state.msn.next();
    }

    let mut recv = None;
    match info.operation() {
        Operation::Send => recv = commit_send(state, cfg, req),
        Operation::RdmaWrite => recv = commit_write(state, req, &reth),
        Operation::RdmaReadRequest => cache.record(Resource::Read {
            first_psn: req.psn,
            last_psn: req.psn.add(psn_count - 1),
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
        }),
        Operation::CompareSwap | Operation::FetchAdd => cache.record(Resource::Atomic {
            psn: req.psn,
            original: atomic_original,
        }),
        Operation::AtomicWrite => cache.record(Resource::AtomicWrite { psn: req.psn }),
        Operation::Flush => cache.record(Resource::Flush { psn: req.psn }),
        Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge => {}
    }

    let response = commit_response(cfg, req, &reth, atomic_original);
    Commit { recv, response }
}

/// [`commit`] of a SEND packet: moves the message cursor past its payload (a UD SEND's after the
/// GRH); the packet that ends the message completes the receive WQE.
fn commit_send(state: &mut RespState, cfg: &RespConfig, req: &Request) -> Option<RecvSuccess> {
    let info = req.info;
    let payload = req.payload_len;
    let before = if !cfg.is_connected() {
        UD_GRH_LEN
    } else {
        match state.message {
            Message::Send { placed } if !info.starts_message() => placed,
            _ => 0,
        }
    };
    let placed = before.saturating_add(payload);
    if info.ends_message() {
        state.message = Message::Idle;
        return Some(RecvSuccess {
            byte_len: placed,
            rdma_with_imm: false,
        });
    }
    state.message = Message::Send { placed };
    None
}

/// [`commit`] of an RDMA WRITE packet: moves the message cursor past its payload; the packet
/// that ends an RDMA WRITE with immediate completes the receive WQE.
fn commit_write(state: &mut RespState, req: &Request, reth: &Reth) -> Option<RecvSuccess> {
    let info = req.info;
    let payload = req.payload_len;
    let (va, rkey, remaining, length) = match state.message {
        Message::Write {
            va,
            rkey,
            remaining,
            length,
        } if !info.starts_message() => (va, rkey, remaining, length),
        _ => (reth.va, reth.rkey, reth.dma_len, reth.dma_len),
    };
    if info.ends_message() {
        state.message = Message::Idle;
        if info.has_immediate() {
            return Some(RecvSuccess {
                byte_len: length,
                rdma_with_imm: true,
            });
        }
    } else {
        state.message = Message::Write {
            va: va.wrapping_add(u64::from(payload)),
            rkey,
            remaining: remaining.saturating_sub(payload),
            length,
        };
    }
    None
}

/// What [`commit`] sends back for `req`, whose RETH (or its default) is `reth`: nothing on UC and
/// UD; on RC, READ responses, an atomic ACK, an empty read response, or an ACK when the packet
/// asks for one or ends its message.
fn commit_response(cfg: &RespConfig, req: &Request, reth: &Reth, atomic_original: u64) -> Response {
    let info = req.info;
    if !cfg.is_rc() {
        return Response::None;
    }
    match info.operation() {
        Operation::RdmaReadRequest => Response::Read(ReadReply {
            first_psn: req.psn,
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
            resumes: false,
        }),
        Operation::CompareSwap | Operation::FetchAdd => Response::AtomicAck {
            psn: req.psn,
            original: atomic_original,
        },
        Operation::AtomicWrite | Operation::Flush => Response::EmptyRead { psn: req.psn },
        _ if req.ack_req || info.ends_message() => Response::Ack { psn: req.psn },
        _ => Response::None,
    }
}
