// SPDX-License-Identifier: GPL-2.0

//! Property tests of the requester and the completer: segmentation covers every message exactly
//! with legal opcode sequences and consecutive PSNs, retries resume where the first transmission
//! was, and the completer takes any response without panicking, never moves backwards and never
//! lets a counter underflow.

use proptest::prelude::*;
use roxe_proto::proto::{
    comp::{
        acked_through, on_ack_timeout, on_response, AckFacts, CompAction, CompState, Outstanding,
        RetryCounters, RnrVerdict, TimeoutVerdict,
    },
    cqe::{Cqe, WcStatus, CQE_LEN},
    mtu::{IbMtu, Pmtu},
    opcode::{check_op_sequence, Opcode, SeqCheck},
    packet::{pad_count_for, Aeth, Msn, Packet, Syndrome},
    psn::Psn,
    req::{
        next_packet, psns_of, read_request_size, PacketDesc, PacketPlan, ReqConfig, WqeProgress,
    },
    wqe::{Payload, QpType, SendOpcode, SendWqe},
};

/// Every path MTU, and the loopback segment.
fn mtu() -> impl Strategy<Value = Pmtu> {
    prop_oneof![
        Just(Pmtu::of(IbMtu::Mtu256)),
        Just(Pmtu::of(IbMtu::Mtu512)),
        Just(Pmtu::of(IbMtu::Mtu1024)),
        Just(Pmtu::of(IbMtu::Mtu2048)),
        Just(Pmtu::of(IbMtu::Mtu4096)),
        Just(Pmtu::LOCAL)
    ]
}

/// A message opcode that segments, with a QP type that has it.
fn segmented() -> impl Strategy<Value = (QpType, SendOpcode)> {
    prop_oneof![
        Just((QpType::Rc, SendOpcode::Send)),
        Just((QpType::Rc, SendOpcode::SendWithImm)),
        Just((QpType::Rc, SendOpcode::SendWithInv)),
        Just((QpType::Rc, SendOpcode::RdmaWrite)),
        Just((QpType::Rc, SendOpcode::RdmaWriteWithImm)),
        Just((QpType::Uc, SendOpcode::Send)),
        Just((QpType::Uc, SendOpcode::SendWithImm)),
        Just((QpType::Uc, SendOpcode::RdmaWrite)),
        Just((QpType::Uc, SendOpcode::RdmaWriteWithImm)),
    ]
}

fn cfg(qp_type: QpType, mtu: Pmtu) -> ReqConfig {
    ReqConfig {
        qp_type,
        mtu,
        qp_num: 3,
        dest_qp_num: 4,
        qkey: 5,
        pkey: 0xffff,
        max_rd_atomic: 4,
    }
}

fn wqe(opcode: SendOpcode, length: u32, wr: [u8; 32], ex: u32, flags: u32) -> SendWqe {
    SendWqe {
        wr_id: 7,
        opcode,
        flags,
        ex,
        wr,
        length,
        payload: Payload::Sges { num: 1 },
    }
}

/// Every packet from `progress` on; `None` if the plan is anything but packets then `Done`, or
/// runs away.
fn drain(w: &SendWqe, mut progress: WqeProgress, c: &ReqConfig) -> Option<Vec<PacketDesc>> {
    let mut out = Vec::new();
    for _ in 0..=(1 << 16) {
        match next_packet(w, &progress, c) {
            PacketPlan::Packet(d) => {
                progress = d.after;
                out.push(d);
            }
            PacketPlan::Done => return Some(out),
            _ => return None,
        }
    }
    None
}

fn any_opcode() -> impl Strategy<Value = Opcode> {
    prop_oneof![
        Just(Opcode::RC_ACKNOWLEDGE),
        Just(Opcode::RC_ATOMIC_ACKNOWLEDGE),
        Just(Opcode::RC_RDMA_READ_RESPONSE_FIRST),
        Just(Opcode::RC_RDMA_READ_RESPONSE_MIDDLE),
        Just(Opcode::RC_RDMA_READ_RESPONSE_LAST),
        Just(Opcode::RC_RDMA_READ_RESPONSE_ONLY),
        any::<u8>().prop_map(Opcode::new),
    ]
}

fn any_send_opcode() -> impl Strategy<Value = SendOpcode> {
    prop_oneof![
        Just(SendOpcode::RdmaWrite),
        Just(SendOpcode::RdmaWriteWithImm),
        Just(SendOpcode::Send),
        Just(SendOpcode::SendWithImm),
        Just(SendOpcode::RdmaRead),
        Just(SendOpcode::CmpAndSwp),
        Just(SendOpcode::FetchAndAdd),
        Just(SendOpcode::LocalInv),
        Just(SendOpcode::BindMw),
        Just(SendOpcode::SendWithInv),
        Just(SendOpcode::Flush),
        Just(SendOpcode::AtomicWrite),
    ]
}

prop_compose! {
    fn any_facts()(
        opcode in any_opcode(),
        psn in any::<u32>(),
        aeth in proptest::option::of((any::<u8>(), any::<u32>())),
        payload_len in prop_oneof![0u32..5000, any::<u32>()],
        atomic_orig in proptest::option::of(any::<u64>()),
    ) -> AckFacts {
        AckFacts {
            opcode,
            psn: Psn::new(psn),
            aeth: aeth.map(|(s, m)| Aeth { syndrome: Syndrome::from_byte(s), msn: Msn::new(m) }),
            payload_len,
            atomic_orig,
        }
    }
}

prop_compose! {
    fn any_outstanding()(
        op in any_send_opcode(),
        first in any::<u32>(),
        span in prop_oneof![0u32..20, any::<u32>()],
        fully_sent in any::<bool>(),
        length in prop_oneof![0u32..20_000, any::<u32>()],
    ) -> Outstanding {
        Outstanding { op, first_psn: Psn::new(first), last_psn: Psn::new(first).add(span), fully_sent, length }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn packets_cover_the_message(
        (qp_type, op) in segmented(),
        mtu in mtu(),
        length in prop_oneof![0u32..20_000, 0u32..(1 << 20)],
        first in any::<u32>(),
        wr in any::<[u8; 32]>(),
        ex in any::<u32>(),
        flags in any::<u32>(),
    ) {
        let c = cfg(qp_type, mtu);
        let w = wqe(op, length, wr, ex, flags);
        let first = Psn::new(first);
        let p = drain(&w, WqeProgress::start(first), &c).expect("packets, then done");
        prop_assert_eq!(p.len() as u32, psns_of(&w, &c));
        prop_assert!(!p.is_empty());
        let mut covered = 0u32;
        let mut prev: Option<Opcode> = None;
        for (i, d) in p.iter().enumerate() {
            let last = i + 1 == p.len();
            // In order, contiguous, at most one MTU, only the last one short.
            prop_assert_eq!(d.payload_offset, covered);
            prop_assert!(d.payload_len <= mtu.bytes());
            if !last {
                prop_assert_eq!(d.payload_len, mtu.bytes());
            }
            covered += d.payload_len;
            prop_assert_eq!(d.pad, pad_count_for(d.payload_len as usize));
            // Consecutive PSNs, one each.
            prop_assert_eq!(d.psn, first.add(i as u32));
            prop_assert_eq!(d.psn_count, 1);
            prop_assert_eq!(d.last_of_wqe, last);
            // A legal opcode sequence that ends the message exactly at the last packet.
            prop_assert_eq!(check_op_sequence(prev, d.opcode), SeqCheck::Ok);
            let info = d.opcode.info().unwrap();
            prop_assert_eq!(info.ends_message(), last);
            prop_assert_eq!(info.starts_message(), i == 0);
            prop_assert!(!last || !matches!(qp_type, QpType::Rc) || d.ack_req);
            prop_assert!(matches!(qp_type, QpType::Rc) || !d.ack_req);
            prev = Some(d.opcode);
            // The description builds a packet of exactly its length.
            let mut buf = vec![0u8; d.packet_len()];
            let mut pkt = Packet::build(&mut buf[..], d.opcode, d.pad).unwrap();
            prop_assert!(d.write_headers(&mut pkt).is_ok());
            prop_assert_eq!(pkt.payload_len(), d.payload_len as usize);
        }
        prop_assert_eq!(covered, length);
        prop_assert_eq!(p.last().unwrap().after.next_psn(), first.add(psns_of(&w, &c)));
    }

    #[test]
    fn resuming_repeats_the_first_transmission(
        (qp_type, op) in segmented(),
        mtu in mtu(),
        length in 0u32..40_000,
        first in any::<u32>(),
        k in any::<u32>(),
    ) {
        let c = cfg(qp_type, mtu);
        let w = wqe(op, length, [0; 32], 0, 0);
        let first = Psn::new(first);
        let all = drain(&w, WqeProgress::start(first), &c).unwrap();
        let k = k % psns_of(&w, &c);
        let resumed = WqeProgress::resume_at(&w, first, first.add(k), &c).unwrap();
        let rest = drain(&w, resumed, &c).unwrap();
        prop_assert_eq!(&all[k as usize..], &rest[..]);
    }

    #[test]
    fn reads_reserve_one_psn_per_response_packet(
        mtu in mtu(),
        // Up to 1 GiB: 4 Mi PSNs at MTU 256, inside the half of the PSN space that PSN
        // comparisons cover (the parser's maximum message size is far smaller).
        length in prop_oneof![0u32..20_000, 0u32..(1 << 30)],
        first in any::<u32>(),
        k in any::<u32>(),
    ) {
        let c = cfg(QpType::Rc, mtu);
        let w = wqe(SendOpcode::RdmaRead, length, [0; 32], 0, 0);
        let n = psns_of(&w, &c);
        prop_assert_eq!(n, std::cmp::max(1, length.div_ceil(mtu.bytes())));
        let first = Psn::new(first);
        let k = k % n;
        let p = drain(&w, WqeProgress::resume_at(&w, first, first.add(k), &c).unwrap(), &c).unwrap();
        // One request per read_request_size-aligned part from k on (64 PSNs at MTU 1024 and
        // below and on a local path, 64 KiB from MTU 1024 up), covering the rest exactly.
        let size = read_request_size(mtu);
        prop_assert_eq!(size * mtu.wire_units(), 64);
        let parts = (n - 1) / size - k / size + 1;
        prop_assert_eq!(p.len() as u32, parts);
        let mut psn = first.add(k);
        let mut offset = std::cmp::min(u64::from(k) * u64::from(mtu.bytes()), u64::from(length));
        for (i, r) in p.iter().enumerate() {
            prop_assert_eq!((r.opcode, r.psn, r.payload_len), (Opcode::RC_RDMA_READ_REQUEST, psn, 0));
            prop_assert!(r.psn_count >= 1 && r.psn_count <= size);
            let reth = r.headers.reth.unwrap();
            prop_assert_eq!(u64::from(r.payload_offset), offset);
            if i + 1 < p.len() {
                // Every part but the last ends on an aligned boundary, in whole MTUs.
                prop_assert_eq!((psn.add(r.psn_count).diff(first) as u32) % size, 0);
                prop_assert_eq!(reth.dma_len, r.psn_count * mtu.bytes());
            }
            offset += u64::from(reth.dma_len);
            psn = psn.add(r.psn_count);
        }
        prop_assert_eq!(offset, u64::from(length));
        prop_assert_eq!(p.last().unwrap().after.next_psn(), first.add(n));
        prop_assert_eq!(psn, first.add(n));
    }

    #[test]
    fn planning_never_panics(
        op in any_send_opcode(),
        qp_type in prop_oneof![Just(QpType::Rc), Just(QpType::Uc), Just(QpType::Ud), Just(QpType::Gsi)],
        mtu in mtu(),
        length in any::<u32>(),
        first in any::<u32>(),
        used in any::<u32>(),
        wr in any::<[u8; 32]>(),
    ) {
        let c = cfg(qp_type, mtu);
        let w = wqe(op, length, wr, 0, 0);
        let progress = WqeProgress { first_psn: Psn::new(first), psns_used: used };
        if let PacketPlan::Packet(d) = next_packet(&w, &progress, &c) {
            prop_assert!(d.payload_len <= mtu.bytes());
            prop_assert!(d.after.psns_used <= psns_of(&w, &c));
            prop_assert!(u64::from(d.payload_offset) + u64::from(d.payload_len) <= u64::from(length));
        }
    }

    #[test]
    fn completer_never_panics_nor_goes_back(
        facts in proptest::collection::vec(any_facts(), 1..8),
        oldest in proptest::option::of(any_outstanding()),
        expected in any::<u32>(),
        limit in any::<u32>(),
        retry_cnt in any::<u8>(),
        rnr_retry in any::<u8>(),
        mtu in mtu(),
        timeouts in any::<u8>(),
    ) {
        let mut s = CompState::new(Psn::new(expected), mtu, retry_cnt, rnr_retry);
        let limit = Psn::new(limit);
        for (i, f) in facts.iter().enumerate() {
            let before = s;
            let action = on_response(&mut s, oldest.as_ref(), f, limit);
            // The expected PSN only moves forward, and never past the PSN after the response's.
            prop_assert!(s.expected_psn.diff(before.expected_psn) >= 0);
            if s.expected_psn != before.expected_psn {
                prop_assert!(s.expected_psn.diff(f.psn) <= 1);
            }
            prop_assert!(s.counters.retries_left() <= retry_cnt.min(7));
            prop_assert!(s.counters.rnr_retries_left() <= rnr_retry.min(7));
            match action {
                CompAction::ReadData { offset, len, .. } => {
                    let o = oldest.unwrap();
                    prop_assert_eq!(o.op, SendOpcode::RdmaRead);
                    prop_assert!(u64::from(offset) + u64::from(len) <= u64::from(o.length));
                }
                CompAction::Retry { from_psn } => prop_assert_eq!(from_psn, s.expected_psn),
                CompAction::Ignore => prop_assert_eq!(s, before),
                _ => {}
            }
            if i % 3 == 0 && timeouts & (1 << (i % 8)) != 0 {
                let _ = on_ack_timeout(&mut s, oldest.as_ref(), limit);
            }
        }
    }

    #[test]
    fn acked_through_follows_psn_order(last in any::<u32>(), step in 0u32..(1 << 23)) {
        let last = Psn::new(last);
        prop_assert!(acked_through(last, last.add(step)));
        if step > 0 {
            prop_assert!(!acked_through(last.add(step), last));
        }
        let other = last.add(step);
        prop_assert_eq!(acked_through(last, other), other.cmp_seq(last) != std::cmp::Ordering::Less);
    }

    #[test]
    fn counters_never_underflow(retry_cnt in any::<u8>(), rnr_retry in any::<u8>(), ops in proptest::collection::vec(0u8..3, 0..64)) {
        let mut c = RetryCounters::new(retry_cnt, rnr_retry);
        let (retry_max, rnr_max) = (retry_cnt.min(7), rnr_retry.min(7));
        for op in ops {
            let (r, n) = (c.retries_left(), c.rnr_retries_left());
            match op {
                0 => match c.on_timeout() {
                    TimeoutVerdict::Retry => prop_assert_eq!(c.retries_left() + 1, r),
                    TimeoutVerdict::Exhausted => prop_assert_eq!((r, c.retries_left()), (0, 0)),
                },
                1 => match c.on_rnr_nak() {
                    RnrVerdict::Wait => prop_assert!(rnr_max == 7 || c.rnr_retries_left() + 1 == n),
                    RnrVerdict::Exhausted => prop_assert!(rnr_max != 7 && n == 0),
                },
                _ => {
                    c.reset();
                    prop_assert_eq!((c.retries_left(), c.rnr_retries_left()), (retry_max, rnr_max));
                }
            }
            prop_assert!(c.retries_left() <= retry_max && c.rnr_retries_left() <= rnr_max);
        }
    }

    #[test]
    fn one_ack_completes_every_wqe_it_covers(
        ops in proptest::collection::vec((prop_oneof![
            Just(SendOpcode::Send), Just(SendOpcode::RdmaWrite), Just(SendOpcode::SendWithImm),
            Just(SendOpcode::Flush), Just(SendOpcode::AtomicWrite),
        ], 0u32..10_000), 1..10),
        mtu in mtu(),
        first in any::<u32>(),
    ) {
        // Send every WQE, then acknowledge only the last PSN: every WQE completes, in order.
        let c = cfg(QpType::Rc, mtu);
        let mut psn = Psn::new(first);
        let mut outstanding = Vec::new();
        for (op, len) in ops {
            let len = if matches!(op, SendOpcode::AtomicWrite) { 8 } else { len };
            let w = wqe(op, len, [0; 32], 0, 0);
            let start = WqeProgress::start(psn);
            let sent = drain(&w, start, &c).unwrap();
            let done = sent.last().unwrap().after;
            outstanding.push(Outstanding::of(&w, &done, &c));
            psn = done.next_psn();
        }
        let mut s = CompState::new(Psn::new(first), mtu, 7, 7);
        let facts = AckFacts {
            opcode: Opcode::RC_ACKNOWLEDGE,
            psn: psn.add(Psn::MASK), // psn - 1: the last PSN sent
            aeth: Some(Aeth { syndrome: Syndrome::Ack { credits: 0x1f }, msn: Msn::new(0) }),
            payload_len: 0,
            atomic_orig: None,
        };
        let n = outstanding.len();
        for (i, o) in outstanding.iter().enumerate() {
            let expect = if i + 1 == n { CompAction::Complete } else { CompAction::CompleteAndRecheck };
            prop_assert_eq!(on_response(&mut s, Some(o), &facts, psn), expect);
        }
        prop_assert_eq!(s.expected_psn, psn);
        prop_assert_eq!(on_response(&mut s, None, &facts, psn), CompAction::Ignore);
    }

    #[test]
    fn read_responses_fill_the_read(mtu in mtu(), length in 0u32..50_000, first in any::<u32>()) {
        let c = cfg(QpType::Rc, mtu);
        let w = wqe(SendOpcode::RdmaRead, length, [0; 32], 0, 0);
        let start = WqeProgress::start(Psn::new(first));
        let done = drain(&w, start, &c).unwrap().last().unwrap().after;
        let o = Outstanding::of(&w, &done, &c);
        let mut s = CompState::new(Psn::new(first), mtu, 7, 7);
        let n = psns_of(&w, &c);
        let mut placed = 0u32;
        let size = read_request_size(mtu);
        for k in 0..n {
            // Each request's responses are FIRST..LAST (or ONLY) of their own.
            let opcode = match (k % size == 0, k + 1 == n || (k + 1) % size == 0) {
                (true, true) => Opcode::RC_RDMA_READ_RESPONSE_ONLY,
                (true, false) => Opcode::RC_RDMA_READ_RESPONSE_FIRST,
                (false, false) => Opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
                (false, true) => Opcode::RC_RDMA_READ_RESPONSE_LAST,
            };
            let len = std::cmp::min(mtu.bytes(), length - placed);
            let aeth = (opcode != Opcode::RC_RDMA_READ_RESPONSE_MIDDLE)
                .then_some(Aeth { syndrome: Syndrome::Ack { credits: 0 }, msn: Msn::new(k) });
            let facts = AckFacts { opcode, psn: Psn::new(first).add(k), aeth, payload_len: len, atomic_orig: None };
            let action = on_response(&mut s, Some(&o), &facts, done.next_psn());
            prop_assert_eq!(action, CompAction::ReadData { offset: placed, len, completes: k + 1 == n });
            placed += len;
        }
        prop_assert_eq!(placed, length);
        prop_assert_eq!(s.expected_psn, done.next_psn());
    }

    #[test]
    fn cqe_bytes_round_trip(wr_id in any::<u64>(), qp in any::<u32>(), len in any::<u32>(), op in any_send_opcode(), status in 0u32..22) {
        let status = WcStatus::from_raw(status).unwrap();
        let w = SendWqe { wr_id, ..wqe(op, len, [0; 32], 0, 0) };
        let b = Cqe::send(&w, status, qp).to_bytes();
        prop_assert_eq!(b.len(), CQE_LEN);
        prop_assert_eq!(u64::from_ne_bytes(b[0..8].try_into().unwrap()), wr_id);
        prop_assert_eq!(u32::from_ne_bytes(b[8..12].try_into().unwrap()), status.as_raw());
        prop_assert_eq!(u32::from_ne_bytes(b[28..32].try_into().unwrap()), qp);
        let byte_len = u32::from_ne_bytes(b[20..24].try_into().unwrap());
        prop_assert_eq!(byte_len, if status.is_success() { len } else { 0 });
        prop_assert_eq!(b[47], 0);
    }

    #[test]
    fn facts_from_any_packet(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        if let Ok(p) = Packet::new_checked(&bytes[..]) {
            let f = AckFacts::from_packet(&p);
            prop_assert_eq!(f.opcode, p.opcode());
            prop_assert_eq!(f.payload_len as usize, p.payload_len());
            let mut s = CompState::new(Psn::new(0), Pmtu::of(IbMtu::Mtu256), 3, 3);
            let o = Outstanding { op: SendOpcode::RdmaRead, first_psn: f.psn, last_psn: f.psn.add(3), fully_sent: true, length: 1000 };
            let _ = on_response(&mut s, Some(&o), &f, Psn::new(1 << 23));
        }
    }
}
