// SPDX-License-Identifier: GPL-2.0

//! Host tests of the completer logic.

#![cfg(test)]

use super::*;
use crate::proto::mtu::{IbMtu, Pmtu};
use crate::proto::packet::Msn;

const MTU: Pmtu = Pmtu::of(IbMtu::Mtu1024);

fn state(psn: u32) -> CompState {
    CompState::new(Psn::new(psn), MTU, 3, 2)
}

fn out(op: SendOpcode, first: u32, last: u32, length: u32) -> Outstanding {
    Outstanding {
        op,
        first_psn: Psn::new(first),
        last_psn: Psn::new(last),
        fully_sent: true,
        length,
    }
}

fn aeth(syndrome: Syndrome) -> Option<Aeth> {
    Some(Aeth {
        syndrome,
        msn: Msn::new(0),
    })
}

const ACK: Syndrome = Syndrome::Ack { credits: 0x1f };

fn ack(psn: u32, syndrome: Syndrome) -> AckFacts {
    AckFacts {
        opcode: Opcode::RC_ACKNOWLEDGE,
        psn: Psn::new(psn),
        aeth: aeth(syndrome),
        payload_len: 0,
        atomic_orig: None,
    }
}

fn read_resp(opcode: Opcode, psn: u32, len: u32) -> AckFacts {
    let has_aeth = opcode != Opcode::RC_RDMA_READ_RESPONSE_MIDDLE;
    AckFacts {
        opcode,
        psn: Psn::new(psn),
        aeth: if has_aeth { aeth(ACK) } else { None },
        payload_len: len,
        atomic_orig: None,
    }
}

const LIMIT: Psn = Psn::new(1000);

#[test]
fn ack_completes_a_send() {
    let mut s = state(10);
    let w = out(SendOpcode::Send, 10, 12, 3000);
    // A coalesced ACK for the middle packet is progress.
    assert_eq!(
        on_response(&mut s, Some(&w), &ack(11, ACK), LIMIT),
        CompAction::Progress
    );
    assert_eq!(s.expected_psn, Psn::new(12));
    assert_eq!(
        on_response(&mut s, Some(&w), &ack(12, ACK), LIMIT),
        CompAction::Complete
    );
    assert_eq!(s.expected_psn, Psn::new(13));
    // A duplicate of it is stale.
    assert_eq!(
        on_response(&mut s, Some(&w), &ack(11, ACK), LIMIT),
        CompAction::Ignore
    );
}

#[test]
fn cumulative_ack_completes_several_wqes() {
    let mut s = state(10);
    let a = out(SendOpcode::RdmaWrite, 10, 10, 8);
    let b = out(SendOpcode::Send, 11, 11, 8);
    let c = out(SendOpcode::Send, 12, 13, 1500);
    let facts = ack(13, ACK);
    assert_eq!(
        on_response(&mut s, Some(&a), &facts, LIMIT),
        CompAction::CompleteAndRecheck
    );
    assert_eq!(
        on_response(&mut s, Some(&b), &facts, LIMIT),
        CompAction::CompleteAndRecheck
    );
    assert_eq!(
        on_response(&mut s, Some(&c), &facts, LIMIT),
        CompAction::Complete
    );
    assert_eq!(s.expected_psn, Psn::new(14));
    assert_eq!(on_response(&mut s, None, &facts, LIMIT), CompAction::Ignore);
}

#[test]
fn responses_for_unsent_psns_are_dropped() {
    let mut s = state(10);
    let w = out(SendOpcode::Send, 10, 10, 8);
    assert_eq!(
        on_response(&mut s, Some(&w), &ack(11, ACK), Psn::new(11)),
        CompAction::Ignore
    );
    assert_eq!(
        on_response(&mut s, Some(&w), &ack(10, ACK), Psn::new(11)),
        CompAction::Complete
    );
    // Requests are not responses.
    let req = AckFacts {
        opcode: Opcode::RC_SEND_ONLY,
        ..ack(10, ACK)
    };
    assert_eq!(
        on_response(&mut s, Some(&w), &req, LIMIT),
        CompAction::Ignore
    );
}

#[test]
fn read_response_places_data_in_order() {
    // 2500 bytes at MTU 1024: PSNs 20, 21, 22 with 1024, 1024, 452 bytes.
    let mut s = state(20);
    let w = out(SendOpcode::RdmaRead, 20, 22, 2500);
    let first = read_resp(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 20, 1024);
    assert_eq!(
        on_response(&mut s, Some(&w), &first, LIMIT),
        CompAction::ReadData {
            offset: 0,
            len: 1024,
            completes: false
        }
    );
    // A gap (PSN 22 before 21): the READ is asked again from 21, once for the gap.
    let last = read_resp(Opcode::RC_RDMA_READ_RESPONSE_LAST, 22, 452);
    assert_eq!(
        on_response(&mut s, Some(&w), &last, LIMIT),
        CompAction::Retry {
            from_psn: Psn::new(21)
        }
    );
    assert_eq!(
        on_response(&mut s, Some(&w), &last, LIMIT),
        CompAction::Ignore
    );
    let middle = read_resp(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 21, 1024);
    assert_eq!(
        on_response(&mut s, Some(&w), &middle, LIMIT),
        CompAction::ReadData {
            offset: 1024,
            len: 1024,
            completes: false
        }
    );
    assert_eq!(
        on_response(&mut s, Some(&w), &last, LIMIT),
        CompAction::ReadData {
            offset: 2048,
            len: 452,
            completes: true
        }
    );
    assert_eq!(s.expected_psn, Psn::new(23));
}

#[test]
fn read_response_shape_is_checked() {
    let bad = CompAction::Error {
        status: WcStatus::BadRespErr,
    };
    let w = out(SendOpcode::RdmaRead, 20, 22, 2500);
    // A short non-final packet.
    let mut s = state(20);
    assert_eq!(
        on_response(
            &mut s,
            Some(&w),
            &read_resp(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 20, 1000),
            LIMIT
        ),
        bad
    );
    // A MIDDLE where the response must start.
    let mut s = state(20);
    assert_eq!(
        on_response(
            &mut s,
            Some(&w),
            &read_resp(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 20, 1024),
            LIMIT
        ),
        bad
    );
    // An ONLY for a three-packet read.
    let mut s = state(20);
    assert_eq!(
        on_response(
            &mut s,
            Some(&w),
            &read_resp(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 20, 1024),
            LIMIT
        ),
        bad
    );
    // A restarted response (FIRST at PSN 21 after a retry) is fine.
    let mut s = state(21);
    assert_eq!(
        on_response(
            &mut s,
            Some(&w),
            &read_resp(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 21, 1024),
            LIMIT
        ),
        CompAction::ReadData {
            offset: 1024,
            len: 1024,
            completes: false
        }
    );
    // READ data for a SEND.
    let mut s = state(20);
    let send = out(SendOpcode::Send, 20, 20, 8);
    assert_eq!(
        on_response(
            &mut s,
            Some(&send),
            &read_resp(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 20, 8),
            LIMIT
        ),
        bad
    );
    // An empty zero-length read.
    let mut s = state(20);
    let empty = out(SendOpcode::RdmaRead, 20, 20, 0);
    assert_eq!(
        on_response(
            &mut s,
            Some(&empty),
            &read_resp(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 20, 0),
            LIMIT
        ),
        CompAction::ReadData {
            offset: 0,
            len: 0,
            completes: true
        }
    );
}

#[test]
fn implicit_nak_for_an_unanswered_read() {
    let mut s = state(30);
    let read = out(SendOpcode::RdmaRead, 30, 31, 2048);
    // An ACK for a later SEND while the READ's response never came: retry from the READ.
    assert_eq!(
        on_response(&mut s, Some(&read), &ack(32, ACK), LIMIT),
        CompAction::Retry {
            from_psn: Psn::new(30)
        }
    );
    assert_eq!(s.counters.retries_left(), 2);
    // One retry per loss: a second implicit NAK is ignored until progress or a timeout.
    assert_eq!(
        on_response(&mut s, Some(&read), &ack(32, ACK), LIMIT),
        CompAction::Ignore
    );
    assert_eq!(
        on_ack_timeout(&mut s, Some(&read), LIMIT),
        CompAction::Retry {
            from_psn: Psn::new(30)
        }
    );
    assert_eq!(s.counters.retries_left(), 1);
    // A bare ACK inside a READ's PSNs answers nothing.
    assert_eq!(
        on_response(&mut s, Some(&read), &ack(30, ACK), LIMIT),
        CompAction::Ignore
    );
}

#[test]
fn atomic_acknowledge() {
    let mut s = state(5);
    let w = out(SendOpcode::FetchAndAdd, 5, 5, 8);
    let facts = AckFacts {
        opcode: Opcode::RC_ATOMIC_ACKNOWLEDGE,
        atomic_orig: Some(0x1234),
        ..ack(5, ACK)
    };
    assert_eq!(
        on_response(&mut s, Some(&w), &facts, LIMIT),
        CompAction::AtomicResult { orig: 0x1234 }
    );
    assert_eq!(s.expected_psn, Psn::new(6));
    let mut s = state(5);
    let send = out(SendOpcode::Send, 5, 5, 8);
    assert_eq!(
        on_response(&mut s, Some(&send), &facts, LIMIT),
        CompAction::Error {
            status: WcStatus::BadRespErr
        }
    );
}

#[test]
fn flush_and_atomic_write_take_an_empty_read_response() {
    for op in [SendOpcode::Flush, SendOpcode::AtomicWrite] {
        let mut s = state(7);
        let w = out(op, 7, 7, 8);
        let only = read_resp(Opcode::RC_RDMA_READ_RESPONSE_ONLY, 7, 0);
        assert_eq!(
            on_response(&mut s, Some(&w), &only, LIMIT),
            CompAction::Complete
        );
        let mut s = state(7);
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(7, ACK), LIMIT),
            CompAction::Complete
        );
        let mut s = state(7);
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(8, ACK), LIMIT),
            CompAction::CompleteAndRecheck
        );
    }
}

#[test]
fn naks() {
    let w = out(SendOpcode::Send, 40, 41, 2000);
    for (code, status) in [
        (NakCode::InvalidRequest, WcStatus::RemInvReqErr),
        (NakCode::RemoteAccessError, WcStatus::RemAccessErr),
        (NakCode::RemoteOperationalError, WcStatus::RemOpErr),
        (NakCode::Reserved(9), WcStatus::RemOpErr),
    ] {
        let mut s = state(40);
        assert_eq!(
            on_response(&mut s, Some(&w), &ack(41, Syndrome::Nak(code)), LIMIT),
            CompAction::Error { status }
        );
    }
    // A sequence error NAK at 41 acknowledges 40 and retries from 41.
    let mut s = state(40);
    let seq = ack(41, Syndrome::Nak(NakCode::PsnSequenceError));
    assert_eq!(
        on_response(&mut s, Some(&w), &seq, LIMIT),
        CompAction::Retry {
            from_psn: Psn::new(41)
        }
    );
    assert_eq!(s.expected_psn, Psn::new(41));
    assert_eq!(
        on_response(&mut s, Some(&w), &seq, LIMIT),
        CompAction::Ignore
    );
    // A NAK for a later WQE completes the earlier one first.
    let mut s = state(39);
    let before = out(SendOpcode::Send, 39, 39, 8);
    assert_eq!(
        on_response(&mut s, Some(&before), &seq, LIMIT),
        CompAction::CompleteAndRecheck
    );
    // An error NAK for a READ that was partly answered.
    let mut s = state(52);
    let read = out(SendOpcode::RdmaRead, 50, 55, 6000);
    let late = ack(50, Syndrome::Nak(NakCode::RemoteAccessError));
    assert_eq!(
        on_response(&mut s, Some(&read), &late, LIMIT),
        CompAction::Error {
            status: WcStatus::RemAccessErr
        }
    );
    // A reserved syndrome is dropped.
    let mut s = state(40);
    assert_eq!(
        on_response(&mut s, Some(&w), &ack(40, Syndrome::Reserved(0x40)), LIMIT),
        CompAction::Ignore
    );
}

#[test]
fn rnr_naks() {
    let mut s = state(60);
    let w = out(SendOpcode::Send, 60, 60, 8);
    let rnr = ack(60, Syndrome::RnrNak { timer: 14 });
    assert_eq!(
        on_response(&mut s, Some(&w), &rnr, LIMIT),
        CompAction::RnrWait {
            delay_us: 1280,
            from_psn: Psn::new(60)
        }
    );
    assert_eq!(
        on_response(&mut s, Some(&w), &rnr, LIMIT),
        CompAction::RnrWait {
            delay_us: 1280,
            from_psn: Psn::new(60)
        }
    );
    assert_eq!(
        on_response(&mut s, Some(&w), &rnr, LIMIT),
        CompAction::Error {
            status: WcStatus::RnrRetryExcErr
        }
    );
    // 7 retries forever.
    let mut s = CompState::new(Psn::new(60), MTU, 3, 7);
    for _ in 0..100 {
        assert!(matches!(
            on_response(&mut s, Some(&w), &rnr, LIMIT),
            CompAction::RnrWait { .. }
        ));
    }
}

#[test]
fn ack_timeout_has_a_floor() {
    assert_eq!(ack_timeout_ms(0), 0);
    // 4.096 us * 2^14 = 67 ms: raised to the floor.
    assert_eq!(ack_timeout_ms(14), MIN_ACK_TIMEOUT_MS);
    // 4.096 us * 2^18 = 1073 ms.
    assert_eq!(ack_timeout_ms(18), 1073);
    assert_eq!(ack_timeout_ms(31), 8_796_093);
    assert!(ack_timeout_ms(60) > 0);
}

#[test]
fn long_read_responses_come_per_request() {
    // 130 responses at MTU 1024 (PSNs 0..=129): requests of 128 and 2.
    let bad = CompAction::Error {
        status: WcStatus::BadRespErr,
    };
    let w = out(SendOpcode::RdmaRead, 0, 129, 130 * 1024);
    let mut s = state(0);
    s.expected_psn = Psn::new(127);
    // The first request's responses end at 127, the second's start at 128.
    assert_eq!(
        on_response(
            &mut s.clone(),
            Some(&w),
            &read_resp(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 127, 1024),
            LIMIT
        ),
        bad
    );
    assert!(matches!(
        on_response(&mut s, Some(&w), &read_resp(Opcode::RC_RDMA_READ_RESPONSE_LAST, 127, 1024), LIMIT),
        CompAction::ReadData { offset, completes: false, .. } if offset == 127 * 1024
    ));
    assert_eq!(
        on_response(
            &mut s.clone(),
            Some(&w),
            &read_resp(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 128, 1024),
            LIMIT
        ),
        bad
    );
    assert!(matches!(
        on_response(&mut s, Some(&w), &read_resp(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 128, 1024), LIMIT),
        CompAction::ReadData { offset, completes: false, .. } if offset == 128 * 1024
    ));
    assert!(matches!(
        on_response(
            &mut s,
            Some(&w),
            &read_resp(Opcode::RC_RDMA_READ_RESPONSE_LAST, 129, 1024),
            LIMIT
        ),
        CompAction::ReadData {
            completes: true,
            ..
        }
    ));
}

#[test]
fn read_gap_asks_again_once_per_gap() {
    // 5 responses at MTU 1024: PSNs 30..=34.
    let mut s = state(30);
    let w = out(SendOpcode::RdmaRead, 30, 34, 5 * 1024);
    let r = |op, psn| read_resp(op, psn, 1024);
    assert!(matches!(
        on_response(
            &mut s,
            Some(&w),
            &r(Opcode::RC_RDMA_READ_RESPONSE_FIRST, 30),
            LIMIT
        ),
        CompAction::ReadData { .. }
    ));
    // 31 lost: 32 asks again from 31; 33 and 34 of the first transmission change nothing.
    assert_eq!(
        on_response(
            &mut s,
            Some(&w),
            &r(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 32),
            LIMIT
        ),
        CompAction::Retry {
            from_psn: Psn::new(31)
        }
    );
    assert_eq!(
        on_response(
            &mut s,
            Some(&w),
            &r(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 33),
            LIMIT
        ),
        CompAction::Ignore
    );
    assert_eq!(s.counters.retries_left(), 2);
    // The replay from 31 is progress: the counters refill; a new gap asks again.
    assert!(matches!(
        on_response(
            &mut s,
            Some(&w),
            &r(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 31),
            LIMIT
        ),
        CompAction::ReadData { offset: 1024, .. }
    ));
    assert_eq!((s.counters.retries_left(), s.retry_pending), (3, false));
    assert_eq!(
        on_response(
            &mut s,
            Some(&w),
            &r(Opcode::RC_RDMA_READ_RESPONSE_LAST, 34),
            LIMIT
        ),
        CompAction::Retry {
            from_psn: Psn::new(32)
        }
    );
    // A READ whose later requests are not sent yet asks all the same.
    let mut s = state(30);
    let mut w2 = w;
    w2.fully_sent = false;
    assert_eq!(
        on_response(
            &mut s,
            Some(&w2),
            &r(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE, 32),
            LIMIT
        ),
        CompAction::Retry {
            from_psn: Psn::new(30)
        }
    );
    // An atomic's responses have no gap to ask about.
    let mut s = state(30);
    let a = out(SendOpcode::FetchAndAdd, 30, 30, 8);
    assert_eq!(
        on_response(&mut s, Some(&a), &ack(31, ACK), LIMIT),
        CompAction::Retry {
            from_psn: Psn::new(30)
        }
    );
}

#[test]
fn timeouts() {
    let mut s = state(70);
    let w = out(SendOpcode::Send, 70, 70, 8);
    for _ in 0..3 {
        assert_eq!(
            on_ack_timeout(&mut s, Some(&w), LIMIT),
            CompAction::Retry {
                from_psn: Psn::new(70)
            }
        );
    }
    assert_eq!(
        on_ack_timeout(&mut s, Some(&w), LIMIT),
        CompAction::Error {
            status: WcStatus::RetryExcErr
        }
    );
    // Progress refills the counters.
    let mut s = state(70);
    assert_eq!(
        on_ack_timeout(&mut s, Some(&w), LIMIT),
        CompAction::Retry {
            from_psn: Psn::new(70)
        }
    );
    assert_eq!(
        on_response(&mut s, Some(&w), &ack(70, ACK), LIMIT),
        CompAction::Complete
    );
    assert_eq!((s.counters.retries_left(), s.retry_pending), (3, false));
    // Nothing outstanding: nothing to do.
    assert_eq!(on_ack_timeout(&mut s, None, LIMIT), CompAction::Ignore);
    assert_eq!(
        on_ack_timeout(&mut s, Some(&w), Psn::new(71)),
        CompAction::Ignore
    );
}

#[test]
fn retransmitted_wqe_completes_on_the_repeated_ack() {
    let mut s = state(80);
    let mut w = out(SendOpcode::Send, 80, 81, 2000);
    w.fully_sent = false;
    // The ACK of the first transmission arrives while the WQE is being sent again.
    assert_eq!(
        on_response(&mut s, Some(&w), &ack(81, ACK), LIMIT),
        CompAction::Progress
    );
    w.fully_sent = true;
    assert_eq!(
        on_response(&mut s, Some(&w), &ack(81, ACK), LIMIT),
        CompAction::Complete
    );
}

#[test]
fn counters() {
    let mut c = RetryCounters::new(7, 0);
    for _ in 0..7 {
        assert_eq!(c.on_timeout(), TimeoutVerdict::Retry);
    }
    assert_eq!(c.on_timeout(), TimeoutVerdict::Exhausted);
    assert_eq!(c.on_rnr_nak(), RnrVerdict::Exhausted);
    c.reset();
    assert_eq!(c.retries_left(), 7);
    assert_eq!(RetryCounters::new(200, 9).retries_left(), 7);
}

#[test]
fn helpers() {
    assert!(acked_through(Psn::new(5), Psn::new(5)));
    assert!(acked_through(Psn::new(0xff_ffff), Psn::new(2)));
    assert!(!acked_through(Psn::new(2), Psn::new(0xff_ffff)));
    assert!(completes_without_ack(QpType::Ud, SendOpcode::Send));
    assert!(completes_without_ack(QpType::Uc, SendOpcode::RdmaWrite));
    assert!(completes_without_ack(QpType::Rc, SendOpcode::LocalInv));
    assert!(!completes_without_ack(QpType::Rc, SendOpcode::Send));
    let cfg = ReqConfig {
        qp_type: QpType::Rc,
        mtu: MTU,
        qp_num: 1,
        dest_qp_num: 2,
        qkey: 0,
        pkey: 0xffff,
        max_rd_atomic: 1,
    };
    let wqe = SendWqe {
        wr_id: 0,
        opcode: SendOpcode::RdmaRead,
        flags: 0,
        ex: 0,
        wr: [0; 32],
        length: 9000,
        payload: super::super::wqe::Payload::Sges { num: 1 },
    };
    let o = Outstanding::of(
        &wqe,
        &WqeProgress {
            first_psn: Psn::new(0xff_fffc),
            psns_used: 9,
        },
        &cfg,
    );
    assert_eq!(
        o,
        Outstanding {
            op: SendOpcode::RdmaRead,
            first_psn: Psn::new(0xff_fffc),
            last_psn: Psn::new(4),
            fully_sent: true,
            length: 9000
        }
    );
}
