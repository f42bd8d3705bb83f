// SPDX-License-Identifier: GPL-2.0

//! Host tests of the responder logic.

#![cfg(test)]

use super::*;
use crate::proto::mtu::IbMtu;
use std::vec::Vec;

fn reply(psn: u32, len: u32) -> ReadReply {
    ReadReply {
        first_psn: Psn::new(psn),
        va: 0x1000,
        rkey: 7,
        len,
        resumes: false,
    }
}

#[test]
fn read_stream_new_read_is_due_at_once() {
    let mut s = ReadStream::default();
    assert!(!s.active());
    s.start(reply(10, 1 << 20));
    assert!(s.active() && s.due(0));
    let b = s.take_burst().unwrap();
    assert_eq!(b.reply, reply(10, 1 << 20));
    // Nobody else builds while the burst is out, and later requests wait behind it.
    assert!(s.take_burst().is_none() && !s.due(u64::MAX) && s.active());
    let rest = b
        .reply
        .rest_after(Pmtu::of(IbMtu::Mtu1024), READ_REPLY_BURST);
    s.finish_burst(b.generation, rest, 1000, 0);
    assert!(s.active() && s.take_burst().is_none());
    s.sent();
    assert!(!s.due(1000 + READ_REPLY_INTERVAL_MS - 1));
    assert!(s.due(1000 + READ_REPLY_INTERVAL_MS));
    assert_eq!(s.take_burst().unwrap().reply, rest.unwrap());
}

const MIB_RESPONSES: u32 = (1 << 20) / 1024;

#[test]
fn read_stream_replays_are_paced_not_multiplied() {
    let mut s = ReadStream::default();
    s.start(reply(10, 1 << 20));
    let b = s.take_burst().unwrap();
    s.finish_burst(
        b.generation,
        b.reply
            .rest_after(Pmtu::of(IbMtu::Mtu1024), READ_REPLY_BURST),
        1000,
        0,
    );
    s.sent();
    // The first replay of the window goes at once: the budget covers one burst.
    assert!(s.replay(reply(10, 1 << 20), MIB_RESPONSES, 1000));
    let b = s.take_burst().unwrap();
    s.finish_burst(
        b.generation,
        b.reply
            .rest_after(Pmtu::of(IbMtu::Mtu1024), READ_REPLY_BURST),
        1000,
        0,
    );
    s.sent();
    // A flood of duplicates within the window: none goes, and none displaces the first
    // one held back.
    assert!(!s.replay(reply(10, 1 << 20), MIB_RESPONSES, 1001));
    for t in 1001..1000 + READ_REPLY_INTERVAL_MS {
        assert!(!s.replay(reply(20, 4096), 4, t));
        assert!(!s.due(t));
    }
    let end = 1000 + READ_REPLY_INTERVAL_MS;
    assert!(s.due(end));
    assert_eq!(s.take_burst().map(|b| b.reply), Some(reply(10, 1 << 20)));
    s.finish_burst(s.generation, None, end, 0);
    s.sent();
    assert!(!s.active());
    // A new window: a replay of a finished reply goes at once again.
    assert!(s.replay(reply(10, 1 << 20), MIB_RESPONSES, end));
}

#[test]
fn read_stream_replays_of_many_reads_go_at_once() {
    // A requester that lost responses asks again for each READ it has outstanding: 16
    // READs of 16 responses fit in one window's budget and are all answered at once.
    let mut s = ReadStream::default();
    for i in 0..16u32 {
        let r = reply(100 + 16 * i, 16 * 1024);
        assert!(
            s.replay(r, r.responses(Pmtu::of(IbMtu::Mtu1024)), 5000),
            "replay {i}"
        );
        let b = s.take_burst().unwrap();
        assert_eq!(b.reply, r);
        s.finish_burst(
            b.generation,
            b.reply
                .rest_after(Pmtu::of(IbMtu::Mtu1024), READ_REPLY_BURST),
            5000,
            0,
        );
        s.sent();
        assert!(!s.active());
    }
    // The budget is spent: the next one is held for the next window.
    let r = reply(400, 16 * 1024);
    assert!(!s.replay(r, 16, 5001));
    assert!(s.active() && !s.due(5001) && s.due(5000 + READ_REPLY_INTERVAL_MS));
    // A new READ's first burst does not hold back a replay after it.
    let mut s = ReadStream::default();
    s.start(reply(10, 4096));
    let b = s.take_burst().unwrap();
    s.finish_burst(b.generation, None, 7000, 0);
    s.sent();
    assert!(s.replay(reply(10, 4096), 4, 7001));
}

#[test]
fn read_reply_responses() {
    assert_eq!(reply(0, 0).responses(Pmtu::of(IbMtu::Mtu1024)), 1);
    assert_eq!(reply(0, 1).responses(Pmtu::of(IbMtu::Mtu1024)), 1);
    assert_eq!(reply(0, 1024).responses(Pmtu::of(IbMtu::Mtu1024)), 1);
    assert_eq!(reply(0, 1025).responses(Pmtu::of(IbMtu::Mtu1024)), 2);
    assert_eq!(
        reply(0, u32::MAX).responses(Pmtu::of(IbMtu::Mtu256)),
        u32::MAX.div_ceil(256)
    );
    let r = reply(0, 300_000);
    assert_eq!(
        r.responses(Pmtu::of(IbMtu::Mtu4096)) as usize,
        r.packets(Pmtu::of(IbMtu::Mtu4096)).count()
    );
}

#[test]
fn read_stream_slow_bursts_space_out() {
    let mut s = ReadStream::default();
    s.start(reply(10, 1 << 20));
    let b = s.take_burst().unwrap();
    // A burst that took 100 ms to build: the next one waits four times as long, and so
    // does the replay window that starts after it.
    s.finish_burst(
        b.generation,
        b.reply
            .rest_after(Pmtu::of(IbMtu::Mtu1024), READ_REPLY_BURST),
        1000,
        100,
    );
    s.sent();
    assert!(!s.due(1000 + READ_REPLY_INTERVAL_MS));
    assert!(s.due(1400));
    assert!(s.replay(reply(10, 1 << 20), MIB_RESPONSES, 1400));
    let b = s.take_burst().unwrap();
    s.finish_burst(
        b.generation,
        b.reply
            .rest_after(Pmtu::of(IbMtu::Mtu1024), READ_REPLY_BURST),
        1400,
        100,
    );
    s.sent();
    assert!(!s.replay(reply(10, 1 << 20), MIB_RESPONSES, 1401));
    assert!(!s.due(1799) && s.due(1800));
}

#[test]
fn read_stream_replay_during_a_burst_keeps_its_place() {
    let mut s = ReadStream::default();
    s.start(reply(10, 1 << 20));
    let b = s.take_burst().unwrap();
    // A replay arrives while the burst is being built: not due (busy), and the burst's
    // rest does not overwrite it.
    assert!(!s.replay(reply(300, 4096), 4, 0));
    s.finish_burst(
        b.generation,
        b.reply
            .rest_after(Pmtu::of(IbMtu::Mtu1024), READ_REPLY_BURST),
        5,
        0,
    );
    s.sent();
    assert_eq!(s.take_burst().map(|b| b.reply), Some(reply(300, 4096)));
    // A clear (RESET) while a burst is out: nothing is left afterwards.
    let mut s = ReadStream::default();
    s.start(reply(10, 1 << 20));
    let b = s.take_burst().unwrap();
    s.clear();
    s.finish_burst(
        b.generation,
        b.reply
            .rest_after(Pmtu::of(IbMtu::Mtu1024), READ_REPLY_BURST),
        5,
        0,
    );
    s.sent();
    assert!(!s.active());
}

fn odp_cfg(qp_type: QpType) -> RespConfig {
    RespConfig {
        qp_type,
        access_flags: 0,
        mtu: Pmtu::of(IbMtu::Mtu1024),
        max_dest_rd_atomic: 1,
        min_rnr_timer: 0x2c,
    }
}

#[test]
fn page_fault_on_rc_rnr_naks_and_keeps_the_message() {
    let cfg = odp_cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(7));
    let before = st;
    // The timer is the five-bit code.
    assert_eq!(
        st.page_fault(&cfg),
        PageFaultAction::Reply(Syndrome::RnrNak { timer: 0x0c })
    );
    // Nothing consumed: same expected PSN, MSN, message and opcode sequence.
    assert_eq!(st.expected_psn(), before.expected_psn());
    assert_eq!(st.msn(), before.msn());
    assert_eq!(st.message(), before.message());
    assert_eq!(st.last_opcode, before.last_opcode);
    // Packets behind it are dropped, not sequence-NAKed again.
    let info = Opcode::RC_SEND_MIDDLE.info().unwrap();
    assert_eq!(
        check_psn(&mut st, &cfg, &Request::new(info, Psn::new(8), 1024)),
        PsnVerdict::Drop
    );
    // The resend of the missed PSN goes on.
    let info = Opcode::RC_SEND_ONLY.info().unwrap();
    assert_eq!(
        check_psn(&mut st, &cfg, &Request::new(info, Psn::new(7), 8)),
        PsnVerdict::Expected
    );
}

#[test]
fn page_fault_on_datagrams_redelivers_and_uc_drops() {
    for t in [QpType::Ud, QpType::Gsi] {
        let mut st = RespState::new(Psn::new(0));
        let before = st;
        assert_eq!(st.page_fault(&odp_cfg(t)), PageFaultAction::Redeliver);
        assert_eq!(st, before);
    }
    let mut st = RespState::new(Psn::new(3));
    let before = st;
    assert_eq!(st.page_fault(&odp_cfg(QpType::Uc)), PageFaultAction::Drop);
    assert_eq!(st, before);
}

#[test]
fn read_reply_continues_after_a_burst() {
    let reply = ReadReply {
        first_psn: Psn::new(0xff_fffe),
        va: 0x1000,
        rkey: 9,
        len: 5 * 256 + 3,
        resumes: false,
    };
    let all: Vec<_> = reply.packets(Pmtu::of(IbMtu::Mtu256)).collect();
    assert_eq!(all.len(), 6);
    // The rest after 2 responses is the same stream from the third on.
    let rest = reply.rest_after(Pmtu::of(IbMtu::Mtu256), 2).unwrap();
    assert_eq!(
        rest,
        ReadReply {
            first_psn: Psn::new(0),
            va: 0x1200,
            rkey: 9,
            len: 3 * 256 + 3,
            resumes: true
        }
    );
    let tail: Vec<_> = rest.packets(Pmtu::of(IbMtu::Mtu256)).collect();
    for (a, b) in all[2..].iter().zip(&tail) {
        assert_eq!(
            (a.opcode, a.psn, a.len, a.has_aeth),
            (b.opcode, b.psn, b.len, b.has_aeth)
        );
        assert_eq!(a.offset, b.offset + 0x200);
    }
    assert_eq!(tail.len(), 4);
    assert_eq!(reply.rest_after(Pmtu::of(IbMtu::Mtu256), 6), None);
    assert_eq!(
        ReadReply { len: 0, ..reply }.rest_after(Pmtu::of(IbMtu::Mtu256), 1),
        None
    );
    // A last response alone.
    let last = reply.rest_after(Pmtu::of(IbMtu::Mtu256), 5).unwrap();
    let only: Vec<_> = last.packets(Pmtu::of(IbMtu::Mtu256)).collect();
    assert_eq!(
        (only.len(), only[0].opcode, only[0].len),
        (1, Opcode::RC_RDMA_READ_RESPONSE_LAST, 3)
    );
}

const ALL_ACCESS: u32 = qp_access::REMOTE_WRITE
    | qp_access::REMOTE_READ
    | qp_access::REMOTE_ATOMIC
    | qp_access::FLUSH_GLOBAL
    | qp_access::FLUSH_PERSISTENT;

fn cfg(qp_type: QpType) -> RespConfig {
    RespConfig {
        qp_type,
        access_flags: ALL_ACCESS,
        mtu: Pmtu::of(IbMtu::Mtu256),
        max_dest_rd_atomic: 4,
        min_rnr_timer: 12,
    }
}

fn req(op: Opcode, psn: u32, len: u32) -> Request {
    Request::new(op.info().unwrap(), Psn::new(psn), len)
}

fn with_reth(mut r: Request, va: u64, rkey: u32, dma_len: u32) -> Request {
    r.reth = Some(Reth { va, rkey, dma_len });
    r
}

type Cache = ResponderResources<4>;

/// Runs the whole chain as the kernel would, with a receive WQE of `recv_len` bytes always
/// available and every key valid; returns the commit or the error.
fn run(
    st: &mut RespState,
    cache: &mut Cache,
    c: &RespConfig,
    r: &Request,
) -> Result<Commit, RespError> {
    assert!(check_psn(st, c, r).proceeds());
    check_opcode(st, c, r)?;
    check_op_allowed(c, r)?;
    check_resource(c, r, true)?;
    check_length(st, c, r, 4096)?;
    Ok(commit(st, cache, c, r, 0))
}

#[test]
fn rc_psn_verdicts_and_one_nak_per_gap() {
    let c = cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(100));
    let send = |psn| req(Opcode::RC_SEND_ONLY, psn, 8);
    assert_eq!(check_psn(&mut st, &c, &send(99)), PsnVerdict::Duplicate);
    assert_eq!(
        check_psn(&mut st, &c, &send(102)),
        PsnVerdict::SequenceNak {
            expected: Psn::new(100)
        }
    );
    assert_eq!(check_psn(&mut st, &c, &send(103)), PsnVerdict::Drop);
    assert_eq!(check_psn(&mut st, &c, &send(99)), PsnVerdict::Duplicate);
    assert_eq!(check_psn(&mut st, &c, &send(100)), PsnVerdict::Expected);
    // The gap is filled: a new one is NAKed again.
    assert_eq!(
        check_psn(&mut st, &c, &send(105)),
        PsnVerdict::SequenceNak {
            expected: Psn::new(100)
        }
    );
    // The expected PSN moves in commit only.
    assert_eq!(st.expected_psn(), Psn::new(100));
}

#[test]
fn psn_compare_wraps() {
    let c = cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(Psn::MASK));
    assert_eq!(
        check_psn(&mut st, &c, &req(Opcode::RC_SEND_ONLY, 1, 0)),
        PsnVerdict::SequenceNak {
            expected: Psn::new(Psn::MASK)
        }
    );
    assert_eq!(
        check_psn(&mut st, &c, &req(Opcode::RC_SEND_ONLY, Psn::MASK - 1, 0)),
        PsnVerdict::Duplicate
    );
    let mut cache = Cache::new(4);
    run(
        &mut st,
        &mut cache,
        &c,
        &req(Opcode::RC_SEND_ONLY, Psn::MASK, 0),
    )
    .unwrap();
    assert_eq!(st.expected_psn(), Psn::new(0));
}

#[test]
fn rnr_nak_silences_the_gap_and_keeps_the_write_cursor() {
    let c = cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(0));
    let mut cache = Cache::new(4);
    let first = with_reth(req(Opcode::RC_RDMA_WRITE_FIRST, 0, 256), 0x1000, 7, 300);
    run(&mut st, &mut cache, &c, &first).unwrap();
    let last = req(Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 1, 44);
    assert_eq!(check_psn(&mut st, &c, &last), PsnVerdict::Expected);
    check_opcode(&mut st, &c, &last).unwrap();
    let e = check_resource(&c, &last, false).unwrap_err();
    assert_eq!(e, RespError::ReceiverNotReady);
    let a = st.fail(&c, e);
    assert_eq!(a.reply, Some(Syndrome::RnrNak { timer: 12 }));
    assert!(!a.qp_error);
    // Packets behind the refused one: no sequence NAK.
    assert_eq!(
        check_psn(&mut st, &c, &req(Opcode::RC_SEND_ONLY, 2, 0)),
        PsnVerdict::Drop
    );
    // The retry continues the write where it was.
    let done = run(&mut st, &mut cache, &c, &last).unwrap();
    assert_eq!(
        done.recv,
        Some(RecvSuccess {
            byte_len: 300,
            rdma_with_imm: true
        })
    );
    assert_eq!(done.response, Response::Ack { psn: Psn::new(1) });
    assert_eq!(st.msn(), Msn::new(1));
}

#[test]
fn uc_resyncs_on_a_gap() {
    let c = cfg(QpType::Uc);
    let mut st = RespState::new(Psn::new(10));
    let mut cache = Cache::new(0);
    run(
        &mut st,
        &mut cache,
        &c,
        &req(Opcode::UC_SEND_FIRST, 10, 256),
    )
    .unwrap();
    assert_eq!(st.message(), Message::Send { placed: 256 });
    // PSN 11 lost: the MIDDLE at 12 is dropped with the partial message.
    assert_eq!(
        check_psn(&mut st, &c, &req(Opcode::UC_SEND_MIDDLE, 12, 256)),
        PsnVerdict::Drop
    );
    assert_eq!(st.message(), Message::Idle);
    assert_eq!(
        check_psn(&mut st, &c, &req(Opcode::UC_SEND_LAST, 13, 1)),
        PsnVerdict::Drop
    );
    // A new message starts from its own PSN.
    let only = req(Opcode::UC_SEND_ONLY, 20, 5);
    assert_eq!(check_psn(&mut st, &c, &only), PsnVerdict::Resync);
    check_opcode(&mut st, &c, &only).unwrap();
    let done = commit(&mut st, &mut cache, &c, &only, 0);
    assert_eq!(
        done.recv,
        Some(RecvSuccess {
            byte_len: 5,
            rdma_with_imm: false
        })
    );
    assert_eq!(done.response, Response::None);
    assert_eq!(st.expected_psn(), Psn::new(21));
    // Same PSN, but the sequence lost its LAST: the new FIRST is accepted, the old message
    // abandoned.
    run(
        &mut st,
        &mut cache,
        &c,
        &req(Opcode::UC_SEND_FIRST, 21, 256),
    )
    .unwrap();
    run(
        &mut st,
        &mut cache,
        &c,
        &req(Opcode::UC_SEND_FIRST, 22, 256),
    )
    .unwrap();
    assert_eq!(st.message(), Message::Send { placed: 256 });
}

#[test]
fn uc_errors_drop_the_rest_of_the_message() {
    let mut c = cfg(QpType::Uc);
    c.access_flags = 0;
    let mut st = RespState::new(Psn::new(0));
    let first = with_reth(req(Opcode::UC_RDMA_WRITE_FIRST, 0, 256), 0, 1, 600);
    assert!(check_psn(&mut st, &c, &first).proceeds());
    check_opcode(&mut st, &c, &first).unwrap();
    let e = check_op_allowed(&c, &first).unwrap_err();
    assert_eq!(st.fail(&c, e), ErrorAction::DROP);
    // The expected PSN did not move and the MIDDLE is dropped; the next SEND is fine.
    assert_eq!(
        check_psn(&mut st, &c, &req(Opcode::UC_RDMA_WRITE_MIDDLE, 1, 256)),
        PsnVerdict::Drop
    );
    assert_eq!(
        check_psn(&mut st, &c, &req(Opcode::UC_SEND_ONLY, 3, 1)),
        PsnVerdict::Resync
    );
}

#[test]
fn opcode_must_fit_the_qp() {
    let mut st = RespState::new(Psn::new(0));
    let rc_send = req(Opcode::RC_SEND_ONLY, 0, 0);
    assert_eq!(
        check_opcode(&mut st, &cfg(QpType::Uc), &rc_send),
        Err(RespError::WrongTransport)
    );
    assert_eq!(
        check_psn(&mut st, &cfg(QpType::Uc), &rc_send),
        PsnVerdict::Drop
    );
    let ud = cfg(QpType::Gsi);
    assert_eq!(
        check_opcode(&mut st, &ud, &req(Opcode::UD_SEND_ONLY, 0, 0)),
        Ok(())
    );
    assert_eq!(
        check_opcode(&mut st, &ud, &req(Opcode::UC_SEND_ONLY, 0, 0)),
        Err(RespError::WrongTransport)
    );
    let ack = req(Opcode::RC_ACKNOWLEDGE, 0, 0);
    assert_eq!(
        check_opcode(&mut st, &cfg(QpType::Rc), &ack),
        Err(RespError::WrongTransport)
    );
    assert_eq!(
        check_opcode(
            &mut st,
            &cfg(QpType::Rc),
            &req(Opcode::RC_SEND_MIDDLE, 0, 256)
        ),
        Err(RespError::MissingFirst)
    );
    let a = st.fail(&cfg(QpType::Rc), RespError::MissingFirst);
    assert_eq!(a.reply, Some(Syndrome::Nak(NakCode::InvalidRequest)));
    assert_eq!(a.recv_wqe, RecvWqeFate::Complete(RecvStatus::RemInvReqErr));
    assert!(a.qp_error);
}

#[test]
fn access_flags_gate_rdma() {
    let mut c = cfg(QpType::Rc);
    c.access_flags = qp_access::REMOTE_READ;
    let read = req(Opcode::RC_RDMA_READ_REQUEST, 0, 0);
    assert_eq!(check_op_allowed(&c, &read), Ok(()));
    let write = req(Opcode::RC_RDMA_WRITE_ONLY, 0, 0);
    assert_eq!(
        check_op_allowed(&c, &write),
        Err(RespError::OperationNotAllowed)
    );
    assert_eq!(
        check_op_allowed(&c, &req(Opcode::RC_ATOMIC_WRITE, 0, 8)),
        Err(RespError::OperationNotAllowed)
    );
    assert_eq!(
        check_op_allowed(&c, &req(Opcode::RC_FETCH_ADD, 0, 0)),
        Err(RespError::OperationNotAllowed)
    );
    assert_eq!(
        check_op_allowed(&c, &req(Opcode::RC_SEND_ONLY, 0, 0)),
        Ok(())
    );
    let mut flush = req(Opcode::RC_FLUSH, 0, 0);
    flush.feth = Some(Feth {
        selectivity_level: 0,
        placement_type: Feth::PLACEMENT_PERSISTENT,
    });
    assert_eq!(
        check_op_allowed(&c, &flush),
        Err(RespError::OperationNotAllowed)
    );
    c.access_flags |= qp_access::FLUSH_PERSISTENT;
    assert_eq!(check_op_allowed(&c, &flush), Ok(()));
    let a = error_action(&c, RespError::OperationNotAllowed);
    assert_eq!(a.reply, Some(Syndrome::Nak(NakCode::InvalidRequest)));
}

#[test]
fn resources() {
    let mut c = cfg(QpType::Rc);
    c.max_dest_rd_atomic = 0;
    let read = req(Opcode::RC_RDMA_READ_REQUEST, 0, 0);
    assert_eq!(
        check_resource(&c, &read, true),
        Err(RespError::NoRdAtomicResources)
    );
    assert_eq!(
        check_resource(&c, &req(Opcode::RC_SEND_MIDDLE, 0, 256), false),
        Ok(())
    );
    assert_eq!(
        check_resource(&c, &req(Opcode::RC_SEND_FIRST, 0, 256), false),
        Err(RespError::ReceiverNotReady)
    );
    let ud = cfg(QpType::Ud);
    assert_eq!(
        check_resource(&ud, &req(Opcode::UD_SEND_ONLY, 0, 1), false),
        Err(RespError::ReceiverNotReady)
    );
    let mut st = RespState::new(Psn::new(0));
    assert_eq!(st.fail(&ud, RespError::ReceiverNotReady), ErrorAction::DROP);
}

#[test]
fn packet_lengths_follow_the_mtu() {
    let c = cfg(QpType::Rc);
    let st = RespState::new(Psn::new(0));
    let len = |op: Opcode, n| check_length(&st, &c, &req(op, 0, n), 1 << 20);
    assert_eq!(
        len(Opcode::RC_SEND_ONLY, 256),
        Ok(Placement::Recv { offset: 0 })
    );
    assert_eq!(
        len(Opcode::RC_SEND_ONLY, 0),
        Ok(Placement::Recv { offset: 0 })
    );
    assert_eq!(len(Opcode::RC_SEND_ONLY, 257), Err(RespError::Length));
    assert_eq!(len(Opcode::RC_SEND_FIRST, 255), Err(RespError::Length));
    assert_eq!(
        len(Opcode::RC_SEND_FIRST, 256),
        Ok(Placement::Recv { offset: 0 })
    );
    let mut sending = st;
    sending.message = Message::Send { placed: 512 };
    let mid = check_length(&sending, &c, &req(Opcode::RC_SEND_MIDDLE, 0, 256), 1 << 20);
    assert_eq!(mid, Ok(Placement::Recv { offset: 512 }));
    let last = |n| check_length(&sending, &c, &req(Opcode::RC_SEND_LAST, 0, n), 600);
    assert_eq!(last(0), Err(RespError::Length));
    assert_eq!(last(88), Ok(Placement::Recv { offset: 512 }));
    assert_eq!(last(89), Err(RespError::RecvBufferTooSmall));
    let a = error_action(&c, RespError::RecvBufferTooSmall);
    assert_eq!(a.reply, Some(Syndrome::Nak(NakCode::InvalidRequest)));
    assert_eq!(a.recv_wqe, RecvWqeFate::Complete(RecvStatus::LocLenErr));
    assert_eq!(RecvStatus::LocLenErr.wc_status(), 1);
    // UD: the GRH comes first; no MTU rule.
    let ud = cfg(QpType::Ud);
    let u = req(Opcode::UD_SEND_ONLY, 0, 100);
    assert_eq!(
        check_length(&st, &ud, &u, 140),
        Ok(Placement::Recv { offset: UD_GRH_LEN })
    );
    assert_eq!(
        check_length(&st, &ud, &u, 139),
        Err(RespError::RecvBufferTooSmall)
    );
    assert_eq!(
        error_action(&ud, RespError::RecvBufferTooSmall),
        ErrorAction::DROP
    );
}

#[test]
fn write_lengths_must_add_up() {
    let c = cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(0));
    let mut cache = Cache::new(4);
    let first = with_reth(req(Opcode::RC_RDMA_WRITE_FIRST, 0, 256), 0x1000, 9, 512);
    assert_eq!(
        check_length(&st, &c, &first, 0),
        Ok(Placement::Remote(RemoteAccess {
            rkey: 9,
            va: 0x1000,
            len: 512,
            needed: Access::REMOTE_WRITE,
            whole_region: false,
            atomic: false
        }))
    );
    run(&mut st, &mut cache, &c, &first).unwrap();
    // 256 bytes remain: a MIDDLE would leave nothing for the LAST.
    assert_eq!(
        check_length(&st, &c, &req(Opcode::RC_RDMA_WRITE_MIDDLE, 1, 256), 0),
        Err(RespError::Length)
    );
    assert_eq!(
        check_length(&st, &c, &req(Opcode::RC_RDMA_WRITE_LAST, 1, 200), 0),
        Err(RespError::Length)
    );
    let last = req(Opcode::RC_RDMA_WRITE_LAST, 1, 256);
    match check_length(&st, &c, &last, 0) {
        Ok(Placement::Remote(a)) => assert_eq!((a.va, a.len, a.rkey), (0x1100, 256, 9)),
        other => panic!("{other:?}"),
    }
    let mut badpad = last;
    badpad.pad = 1;
    assert_eq!(check_length(&st, &c, &badpad, 0), Err(RespError::Length));
    let done = run(&mut st, &mut cache, &c, &last).unwrap();
    assert_eq!(
        done,
        Commit {
            recv: None,
            response: Response::Ack { psn: Psn::new(1) }
        }
    );
    // Zero-length writes name no memory (C9-88).
    let empty = with_reth(req(Opcode::RC_RDMA_WRITE_ONLY, 2, 0), 0xdead, 0, 0);
    assert_eq!(check_length(&st, &c, &empty, 0), Ok(Placement::Nothing));
    let huge = with_reth(
        req(Opcode::RC_RDMA_WRITE_FIRST, 2, 256),
        0,
        0,
        MAX_DMA_LEN + 1,
    );
    assert_eq!(
        check_length(&st, &c, &huge, 0),
        Err(RespError::DmaLengthTooLong)
    );
}

#[test]
fn atomic_write_is_exactly_eight_bytes() {
    let c = cfg(QpType::Rc);
    let st = RespState::new(Psn::new(0));
    let aw = with_reth(req(Opcode::RC_ATOMIC_WRITE, 0, 8), 0x40, 1, 8);
    assert!(matches!(
        check_length(&st, &c, &aw, 0),
        Ok(Placement::Remote(RemoteAccess { atomic: true, .. }))
    ));
    let short = with_reth(req(Opcode::RC_ATOMIC_WRITE, 0, 4), 0x40, 1, 8);
    assert_eq!(check_length(&st, &c, &short, 0), Err(RespError::Length));
    let long = with_reth(req(Opcode::RC_ATOMIC_WRITE, 0, 8), 0x40, 1, 16);
    assert_eq!(check_length(&st, &c, &long, 0), Err(RespError::Length));
}

fn mr(key: u32, start: u64, length: u64, access: Access) -> KeyTarget {
    KeyTarget {
        key,
        same_pd: true,
        valid: true,
        qp_matches: true,
        access,
        bounds: KeyBounds::Range { start, length },
    }
}

#[test]
fn rkey_checks() {
    let acc = RemoteAccess {
        rkey: 0x105,
        va: 0x1000,
        len: 0x100,
        needed: Access::REMOTE_WRITE,
        whole_region: false,
        atomic: false,
    };
    let good = mr(
        0x105,
        0x1000,
        0x100,
        Access::REMOTE_WRITE.union(Access::LOCAL_WRITE),
    );
    assert_eq!(check_rkey(Some(&good), &acc), Ok(()));
    assert_eq!(check_rkey(None, &acc), Err(RespError::RemoteAccess));
    for bad in [
        KeyTarget { key: 0x106, ..good },
        KeyTarget {
            same_pd: false,
            ..good
        },
        KeyTarget {
            valid: false,
            ..good
        },
        KeyTarget {
            qp_matches: false,
            ..good
        },
        KeyTarget {
            access: Access::REMOTE_READ,
            ..good
        },
        mr(0x105, 0x1001, 0x100, Access::REMOTE_WRITE),
        mr(0x105, 0x1000, 0xff, Access::REMOTE_WRITE),
    ] {
        assert_eq!(
            check_rkey(Some(&bad), &acc),
            Err(RespError::RemoteAccess),
            "{bad:?}"
        );
    }
    assert_eq!(
        check_rkey(
            Some(&KeyTarget {
                bounds: KeyBounds::All,
                ..good
            }),
            &acc
        ),
        Ok(())
    );
    // No overflow at the top of the address space.
    let top = RemoteAccess {
        va: u64::MAX - 7,
        len: 8,
        ..acc
    };
    assert_eq!(
        check_rkey(
            Some(&mr(0x105, u64::MAX - 15, 16, Access::REMOTE_WRITE)),
            &top
        ),
        Ok(())
    );
    assert_eq!(
        check_rkey(
            Some(&mr(0x105, u64::MAX - 15, 15, Access::REMOTE_WRITE)),
            &top
        ),
        Err(RespError::RemoteAccess)
    );
    // Atomics: the key first, then the alignment.
    let atomic = RemoteAccess {
        va: 0x1004,
        len: 8,
        needed: Access::REMOTE_ATOMIC,
        atomic: true,
        ..acc
    };
    let amr = mr(0x105, 0x1000, 0x100, Access::REMOTE_ATOMIC);
    assert_eq!(
        check_rkey(Some(&amr), &atomic),
        Err(RespError::MisalignedAtomic)
    );
    assert_eq!(
        check_rkey(
            Some(&amr),
            &RemoteAccess {
                va: 0x1008,
                ..atomic
            }
        ),
        Ok(())
    );
    assert_eq!(
        check_rkey(Some(&good), &atomic),
        Err(RespError::RemoteAccess)
    );
    // FLUSH of a whole MR ignores the range.
    let flush = RemoteAccess {
        va: 0,
        len: 0,
        needed: Access::NONE,
        whole_region: true,
        ..acc
    };
    assert_eq!(check_rkey(Some(&good), &flush), Ok(()));
}

#[test]
fn remote_access_errors() {
    let rc = error_action(&cfg(QpType::Rc), RespError::RemoteAccess);
    assert_eq!(rc.reply, Some(Syndrome::Nak(NakCode::RemoteAccessError)));
    assert_eq!(rc.recv_wqe, RecvWqeFate::Complete(RecvStatus::RemAccessErr));
    assert!(rc.qp_error && rc.qp_access_event);
    assert_eq!(
        error_action(&cfg(QpType::Uc), RespError::RemoteAccess),
        ErrorAction::DROP
    );
    let misaligned = error_action(&cfg(QpType::Rc), RespError::MisalignedAtomic);
    assert_eq!(
        misaligned.reply,
        Some(Syndrome::Nak(NakCode::InvalidRequest))
    );
    let wqe = error_action(&cfg(QpType::Ud), RespError::MalformedRecvWqe);
    assert_eq!(wqe.reply, None);
    assert_eq!(wqe.recv_wqe, RecvWqeFate::Complete(RecvStatus::LocQpOpErr));
    assert!(wqe.qp_error);
    let inv = error_action(&cfg(QpType::Rc), RespError::InvalidateFailed);
    assert_eq!(inv.reply, Some(ack_syndrome()));
    assert!(inv.qp_error);
    assert_eq!(RespError::CqOverflow.name(), "cq_overflow");
}

fn segments(reply: ReadReply, mtu: Pmtu) -> Vec<(Opcode, u32, u32, u32, bool)> {
    reply
        .packets(mtu)
        .map(|s| (s.opcode, s.psn.get(), s.offset, s.len, s.has_aeth))
        .collect()
}

#[test]
fn read_response_segmentation() {
    use Opcode as O;
    let reply = |len, resumes| ReadReply {
        first_psn: Psn::new(Psn::MASK),
        va: 0,
        rkey: 1,
        len,
        resumes,
    };
    assert_eq!(
        segments(reply(0, false), Pmtu::of(IbMtu::Mtu256)),
        [(O::RC_RDMA_READ_RESPONSE_ONLY, Psn::MASK, 0, 0, true)]
    );
    assert_eq!(
        segments(reply(256, false), Pmtu::of(IbMtu::Mtu256)),
        [(O::RC_RDMA_READ_RESPONSE_ONLY, Psn::MASK, 0, 256, true)]
    );
    assert_eq!(
        segments(reply(600, false), Pmtu::of(IbMtu::Mtu256)),
        [
            (O::RC_RDMA_READ_RESPONSE_FIRST, Psn::MASK, 0, 256, true),
            (O::RC_RDMA_READ_RESPONSE_MIDDLE, 0, 256, 256, false),
            (O::RC_RDMA_READ_RESPONSE_LAST, 1, 512, 88, true),
        ]
    );
    assert_eq!(
        segments(reply(300, true), Pmtu::of(IbMtu::Mtu256)),
        [
            (O::RC_RDMA_READ_RESPONSE_MIDDLE, Psn::MASK, 0, 256, false),
            (O::RC_RDMA_READ_RESPONSE_LAST, 0, 256, 44, true),
        ]
    );
    assert_eq!(segments(reply(0, true), Pmtu::of(IbMtu::Mtu256)), []);
    assert_eq!(reply(600, false).packets(Pmtu::of(IbMtu::Mtu256)).len(), 3);
    assert_eq!(read_response_count(600, Pmtu::of(IbMtu::Mtu256)), 3);
    assert_eq!(read_response_count(0, Pmtu::of(IbMtu::Mtu4096)), 1);
    assert_eq!(
        read_response_count(MAX_DMA_LEN, Pmtu::of(IbMtu::Mtu256)),
        1 << 23
    );
}

#[test]
fn read_is_served_and_replayed() {
    let c = cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(50));
    let mut cache = Cache::new(4);
    let mut read = with_reth(req(Opcode::RC_RDMA_READ_REQUEST, 50, 0), 0x2000, 3, 700);
    read.ack_req = true;
    let done = run(&mut st, &mut cache, &c, &read).unwrap();
    let original = ReadReply {
        first_psn: Psn::new(50),
        va: 0x2000,
        rkey: 3,
        len: 700,
        resumes: false,
    };
    assert_eq!(done.response, Response::Read(original));
    assert_eq!(st.expected_psn(), Psn::new(53));
    assert_eq!(st.msn(), Msn::new(1));
    assert_eq!(
        cache.find(Psn::new(52)),
        Some(Resource::Read {
            first_psn: Psn::new(50),
            last_psn: Psn::new(52),
            va: 0x2000,
            rkey: 3,
            len: 700
        })
    );
    assert_eq!(original.access().map(|a| a.len), Some(700));
    // The whole request again.
    let dup = |r: &Request| {
        let mut s = st;
        assert_eq!(check_psn(&mut s, &c, r), PsnVerdict::Duplicate);
        handle_duplicate(&s, &cache, &c, r)
    };
    assert_eq!(dup(&read), Response::Read(original));
    // A retry from the second response, as a requester builds it.
    let mid = with_reth(req(Opcode::RC_RDMA_READ_REQUEST, 51, 0), 0x2100, 3, 444);
    let replay = ReadReply {
        first_psn: Psn::new(51),
        va: 0x2100,
        rkey: 3,
        len: 444,
        resumes: true,
    };
    assert_eq!(dup(&mid), Response::Read(replay));
    assert_eq!(
        segments(replay, Pmtu::of(IbMtu::Mtu256))[0].0,
        Opcode::RC_RDMA_READ_RESPONSE_MIDDLE
    );
    // Mismatches are dropped: other key, outside the range, past the original PSNs.
    assert_eq!(dup(&with_reth(read, 0x2000, 4, 700)), Response::None);
    assert_eq!(dup(&with_reth(read, 0x1fff, 3, 700)), Response::None);
    assert_eq!(dup(&with_reth(read, 0x2000, 3, 701)), Response::None);
    assert_eq!(dup(&with_reth(mid, 0x2000, 3, 700)), Response::None);
    // A PSN the cache never saw.
    assert_eq!(
        dup(&with_reth(
            req(Opcode::RC_RDMA_READ_REQUEST, 40, 0),
            0x2000,
            3,
            700
        )),
        Response::None
    );
}

#[test]
fn atomics_execute_once() {
    let c = cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(7));
    let mut cache = Cache::new(4);
    let mut fa = req(Opcode::RC_FETCH_ADD, 7, 0);
    fa.atomic = Some(AtomicEth {
        va: 0x10,
        rkey: 1,
        swap_add: 1,
        compare: 0,
    });
    assert!(check_psn(&mut st, &c, &fa).proceeds());
    check_opcode(&mut st, &c, &fa).unwrap();
    check_op_allowed(&c, &fa).unwrap();
    check_resource(&c, &fa, false).unwrap();
    assert!(matches!(
        check_length(&st, &c, &fa, 0),
        Ok(Placement::Remote(RemoteAccess {
            len: 8,
            atomic: true,
            ..
        }))
    ));
    let done = commit(&mut st, &mut cache, &c, &fa, 41);
    assert_eq!(
        done.response,
        Response::AtomicAck {
            psn: Psn::new(7),
            original: 41
        }
    );
    assert_eq!(check_psn(&mut st, &c, &fa), PsnVerdict::Duplicate);
    assert_eq!(
        handle_duplicate(&st, &cache, &c, &fa),
        Response::AtomicAck {
            psn: Psn::new(7),
            original: 41
        }
    );
    // A READ at an atomic's PSN does not match it.
    let read = with_reth(req(Opcode::RC_RDMA_READ_REQUEST, 7, 0), 0, 1, 8);
    assert_eq!(handle_duplicate(&st, &cache, &c, &read), Response::None);
    // Duplicate SEND: ACK of the latest executed PSN.
    assert_eq!(
        handle_duplicate(&st, &cache, &c, &req(Opcode::RC_SEND_ONLY, 3, 0)),
        Response::Ack { psn: Psn::new(7) }
    );
}

#[test]
fn atomic_write_and_flush_replay_empty_responses() {
    let c = cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(0));
    let mut cache = Cache::new(4);
    let aw = with_reth(req(Opcode::RC_ATOMIC_WRITE, 0, 8), 0x40, 1, 8);
    assert_eq!(
        run(&mut st, &mut cache, &c, &aw).unwrap().response,
        Response::EmptyRead { psn: Psn::new(0) }
    );
    let mut flush = with_reth(req(Opcode::RC_FLUSH, 1, 0), 0, 1, 0);
    flush.feth = Some(Feth {
        selectivity_level: Feth::LEVEL_MR,
        placement_type: Feth::PLACEMENT_GLOBAL,
    });
    assert_eq!(
        run(&mut st, &mut cache, &c, &flush).unwrap().response,
        Response::EmptyRead { psn: Psn::new(1) }
    );
    assert_eq!(
        handle_duplicate(&st, &cache, &c, &aw),
        Response::EmptyRead { psn: Psn::new(0) }
    );
    assert_eq!(
        handle_duplicate(&st, &cache, &c, &flush),
        Response::EmptyRead { psn: Psn::new(1) }
    );
    // A duplicate SEND after them still gets the last PSN.
    assert_eq!(
        handle_duplicate(&st, &cache, &c, &req(Opcode::RC_SEND_ONLY, 0, 0)),
        Response::Ack { psn: Psn::new(1) }
    );
}

#[test]
fn duplicate_send_after_a_read_does_not_ack_the_read() {
    let c = cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(0));
    let mut cache = Cache::new(4);
    run(&mut st, &mut cache, &c, &req(Opcode::RC_SEND_ONLY, 0, 1)).unwrap();
    run(
        &mut st,
        &mut cache,
        &c,
        &with_reth(req(Opcode::RC_RDMA_READ_REQUEST, 1, 0), 0, 1, 1000),
    )
    .unwrap();
    assert_eq!(st.expected_psn(), Psn::new(5));
    // An ACK of PSN 0 would reach the requester after READ responses: no answer (the READ's
    // responses, sent or replayed, acknowledge the SEND).
    let dup_send = req(Opcode::RC_SEND_ONLY, 0, 1);
    assert_eq!(handle_duplicate(&st, &cache, &c, &dup_send), Response::None);
    let dup_write = with_reth(req(Opcode::RC_RDMA_WRITE_ONLY, 0, 8), 0, 1, 8);
    assert_eq!(
        handle_duplicate(&st, &cache, &c, &dup_write),
        Response::None
    );
    // A later SEND executed: duplicates are acknowledged again, with its PSN.
    run(&mut st, &mut cache, &c, &req(Opcode::RC_SEND_ONLY, 5, 1)).unwrap();
    assert_eq!(
        handle_duplicate(&st, &cache, &c, &dup_send),
        Response::Ack { psn: Psn::new(5) }
    );
    // So is a duplicate after modify QP sets a new expected PSN.
    st.set_expected_psn(Psn::new(9));
    assert_eq!(
        handle_duplicate(&st, &cache, &c, &dup_send),
        Response::Ack { psn: Psn::new(8) }
    );
}

#[test]
fn ack_coalescing() {
    let c = cfg(QpType::Rc);
    let mut st = RespState::new(Psn::new(0));
    let mut cache = Cache::new(4);
    let first = run(&mut st, &mut cache, &c, &req(Opcode::RC_SEND_FIRST, 0, 256)).unwrap();
    assert_eq!(
        first,
        Commit {
            recv: None,
            response: Response::None
        }
    );
    let mut middle = req(Opcode::RC_SEND_MIDDLE, 1, 256);
    middle.ack_req = true;
    assert_eq!(
        run(&mut st, &mut cache, &c, &middle).unwrap().response,
        Response::Ack { psn: Psn::new(1) }
    );
    let last = run(&mut st, &mut cache, &c, &req(Opcode::RC_SEND_LAST, 2, 10)).unwrap();
    assert_eq!(last.response, Response::Ack { psn: Psn::new(2) });
    assert_eq!(
        last.recv,
        Some(RecvSuccess {
            byte_len: 522,
            rdma_with_imm: false
        })
    );
    assert_eq!(st.msn(), Msn::new(1));
    assert_eq!(st.aeth(ack_syndrome()).encode(), [0x1f, 0, 0, 1]);
    // UD completes with the GRH counted and never answers.
    let ud = cfg(QpType::Ud);
    let mut ust = RespState::new(Psn::new(0));
    let done = run(
        &mut ust,
        &mut cache,
        &ud,
        &req(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, 77, 60),
    )
    .unwrap();
    assert_eq!(
        done,
        Commit {
            recv: Some(RecvSuccess {
                byte_len: 100,
                rdma_with_imm: false
            }),
            response: Response::None
        }
    );
}

#[test]
fn cache_is_a_bounded_ring() {
    let mut cache = ResponderResources::<3>::new(8);
    assert_eq!(cache.capacity(), 3);
    assert!(cache.is_empty());
    for psn in 0..5 {
        cache.record(Resource::Atomic {
            psn: Psn::new(psn),
            original: u64::from(psn),
        });
        assert!(cache.len() <= 3);
    }
    assert_eq!(cache.find(Psn::new(1)), None);
    assert_eq!(
        cache.find(Psn::new(4)),
        Some(Resource::Atomic {
            psn: Psn::new(4),
            original: 4
        })
    );
    // The newest of two aliasing entries wins.
    cache.record(Resource::Atomic {
        psn: Psn::new(4),
        original: 99,
    });
    assert_eq!(
        cache.find(Psn::new(4)),
        Some(Resource::Atomic {
            psn: Psn::new(4),
            original: 99
        })
    );
    cache.reset(0);
    cache.record(Resource::Flush { psn: Psn::new(0) });
    assert!(cache.is_empty() && cache.capacity() == 0);
    assert_eq!(cache.find(Psn::new(0)), None);
    let wrap = Resource::Read {
        first_psn: Psn::new(Psn::MASK),
        last_psn: Psn::new(1),
        va: 0,
        rkey: 0,
        len: 0,
    };
    assert!(
        wrap.contains(Psn::new(0))
            && wrap.contains(Psn::new(Psn::MASK))
            && !wrap.contains(Psn::new(2))
    );
}

#[test]
fn request_from_a_packet() {
    let reth = Reth {
        va: 0x10,
        rkey: 5,
        dma_len: 3,
    };
    let mut buf = [0u8; 12 + 16 + 4 + 4];
    let mut p = Packet::build(&mut buf[..], Opcode::RC_RDMA_WRITE_ONLY, 1).unwrap();
    p.set_reth(&reth).unwrap();
    p.set_psn(Psn::new(9));
    p.set_ack_req(true);
    let r = Request::from_packet(&Packet::new_checked(&buf[..]).unwrap());
    assert_eq!(
        (r.psn, r.ack_req, r.payload_len, r.pad, r.reth),
        (Psn::new(9), true, 3, 1, Some(reth))
    );
    assert_eq!(r.info.opcode(), Opcode::RC_RDMA_WRITE_ONLY);
}

fn held_read(psn: u32, len: u32) -> Request {
    with_reth(req(Opcode::RC_RDMA_READ_REQUEST, psn, 0), 0x1000, 7, len)
}

#[test]
fn held_requests_take_the_next_psn_in_sequence() {
    let c = cfg(QpType::Rc);
    let mut h = HeldRequests::<u8>::default();
    let expected = Psn::new(100);
    // MTU 256: a READ of 1000 bytes takes 4 PSNs.
    let a = held_read(100, 1000);
    assert_eq!(h.verdict(expected, &c, &a), HoldVerdict::Hold);
    assert!(h.push(&c, &a, &[1, 2, 3], 9));
    assert_eq!(h.next_psn(expected), Psn::new(104));
    // Sent again while held: nothing to do.
    assert_eq!(h.verdict(expected, &c, &a), HoldVerdict::AlreadyHeld);
    assert_eq!(
        h.verdict(expected, &c, &held_read(103, 8)),
        HoldVerdict::AlreadyHeld
    );
    // An atomic next: held, one PSN.
    let mut cas = req(Opcode::RC_COMPARE_SWAP, 104, 0);
    cas.reth = None;
    assert_eq!(h.verdict(expected, &c, &cas), HoldVerdict::Hold);
    assert!(h.push(&c, &cas, &[4; HELD_BYTES], 10));
    // A SEND in sequence behind them would be acknowledged before the READ's responses.
    let send = req(Opcode::RC_SEND_ONLY, 105, 8);
    assert_eq!(h.verdict(expected, &c, &send), HoldVerdict::Drop);
    // Duplicates of executed requests go to the PSN check; a PSN past the hold is dropped (a
    // sequence NAK would overtake the READ's responses).
    assert_eq!(
        h.verdict(expected, &c, &held_read(99, 8)),
        HoldVerdict::Check
    );
    assert_eq!(
        h.verdict(expected, &c, &held_read(106, 8)),
        HoldVerdict::Drop
    );
    // Out in order, with what they carried, one running at a time.
    assert_eq!(h.next_psns(), Some(4));
    let (first, run) = h.take_next().unwrap();
    assert_eq!(
        (first.bytes(), first.src, first.psns()),
        (&[1u8, 2, 3][..], 9, 4)
    );
    assert!(h.take_next().is_none() && !h.idle());
    // Executed: the expected PSN moved past it. A duplicate's answer would overtake its own.
    assert_eq!(h.next_psn(Psn::new(104)), Psn::new(105));
    let dup = req(Opcode::RC_SEND_ONLY, 50, 8);
    assert_eq!(h.verdict(Psn::new(104), &c, &dup), HoldVerdict::Drop);
    h.done_running(run);
    assert_eq!(h.verdict(Psn::new(104), &c, &dup), HoldVerdict::Check);
    let (second, run) = h.take_next().unwrap();
    assert_eq!((second.bytes().len(), second.src), (HELD_BYTES, 10));
    assert!(h.is_empty() && !h.idle());
    // While the last one runs, a request in sequence behind it is held, not answered first.
    assert_eq!(
        h.verdict(Psn::new(105), &c, &held_read(105, 8)),
        HoldVerdict::Hold
    );
    assert_eq!(h.verdict(Psn::new(105), &c, &send), HoldVerdict::Drop);
    h.done_running(run);
    assert!(h.take_next().is_none() && h.idle() && h.next_psns().is_none());
    assert_eq!(h.next_psn(Psn::new(105)), Psn::new(105));
}

#[test]
fn held_requests_are_bounded() {
    // Never more than max_dest_rd_atomic (4 here) less the READ being answered, nor a packet
    // longer than a slot.
    let c = cfg(QpType::Rc);
    let mut h = HeldRequests::<()>::default();
    let mut psn = 0;
    for _ in 0..3 {
        let r = held_read(psn, 8);
        assert_eq!(h.verdict(Psn::new(0), &c, &r), HoldVerdict::Hold);
        assert!(h.push(&c, &r, &[0; 32], ()));
        psn += 1;
    }
    assert_eq!(
        h.verdict(Psn::new(0), &c, &held_read(psn, 8)),
        HoldVerdict::Drop
    );
    let deep = RespConfig {
        max_dest_rd_atomic: 128,
        ..c
    };
    for _ in 3..HELD_SLOTS {
        let r = held_read(psn, 8);
        assert_eq!(h.verdict(Psn::new(0), &deep, &r), HoldVerdict::Hold);
        assert!(h.push(&deep, &r, &[0; 32], ()));
        psn += 1;
    }
    assert_eq!(h.len(), HELD_SLOTS);
    let r = held_read(psn, 8);
    assert_eq!(h.verdict(Psn::new(0), &deep, &r), HoldVerdict::Drop);
    assert!(!h.push(&deep, &r, &[0; 32], ()));
    h.clear();
    assert!(h.is_empty() && !h.push(&c, &r, &[0; HELD_BYTES + 1], ()));
    // UC and UD hold nothing.
    for t in [QpType::Uc, QpType::Ud] {
        assert_eq!(
            h.verdict(Psn::new(0), &cfg(t), &held_read(0, 8)),
            HoldVerdict::Check
        );
    }
}

#[test]
fn held_psns_wrap() {
    let c = cfg(QpType::Rc);
    let mut h = HeldRequests::<()>::default();
    let top = (1 << 24) - 2;
    let r = held_read(top, 1024);
    assert_eq!(h.verdict(Psn::new(top), &c, &r), HoldVerdict::Hold);
    assert!(h.push(&c, &r, &[0; 32], ()));
    assert_eq!(h.next_psn(Psn::new(top)), Psn::new(2));
    assert_eq!(
        h.verdict(Psn::new(top), &c, &held_read(1, 8)),
        HoldVerdict::AlreadyHeld
    );
    assert_eq!(
        h.verdict(Psn::new(top), &c, &held_read(2, 8)),
        HoldVerdict::Hold
    );
}

#[test]
fn a_run_from_before_a_reset_does_not_end_a_later_one() {
    let c = cfg(QpType::Rc);
    let mut h = HeldRequests::<()>::default();
    assert!(h.push(&c, &held_read(0, 8), &[0; 32], ()));
    let (_, old) = h.take_next().unwrap();
    // Modify QP through RESET while it runs, and a new connection's request runs.
    h.clear();
    assert!(h.push(&c, &held_read(0, 8), &[0; 32], ()));
    let (_, new) = h.take_next().unwrap();
    h.done_running(old);
    assert!(!h.idle());
    h.done_running(new);
    assert!(h.idle());
}
