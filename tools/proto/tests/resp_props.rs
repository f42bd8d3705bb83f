// SPDX-License-Identifier: GPL-2.0

//! Property tests of the responder logic: arbitrary packet streams never panic and move the
//! expected PSN only by what was accepted, PSN verdicts follow the 24-bit ordering, READ
//! responses cover their length exactly, atomics execute at most once, and the responder
//! resources stay within their capacity.

use proptest::prelude::*;
use roxe_proto::proto::{
    mtt::Access,
    mtu::{IbMtu, Pmtu},
    opcode::{check_op_sequence, Opcode, OpcodeInfo, Position},
    packet::{AtomicEth, Feth, Reth},
    psn::Psn,
    qp_state::{qp_access, QpType},
    resp::*,
};

/// Every path MTU's segment, and the loopback segment.
const MTUS: [Pmtu; 6] = [
    Pmtu::of(IbMtu::Mtu256),
    Pmtu::of(IbMtu::Mtu512),
    Pmtu::of(IbMtu::Mtu1024),
    Pmtu::of(IbMtu::Mtu2048),
    Pmtu::of(IbMtu::Mtu4096),
    Pmtu::LOCAL,
];

fn opcodes() -> Vec<&'static OpcodeInfo> {
    Opcode::all().collect()
}

fn config() -> impl Strategy<Value = RespConfig> {
    (0..3usize, any::<u32>(), 0..6usize, 0..6u8, 0..32u8).prop_map(|(t, access, mtu, rd, rnr)| {
        RespConfig {
            qp_type: [QpType::Rc, QpType::Uc, QpType::Ud][t],
            // Mostly everything allowed, sometimes arbitrary bits.
            access_flags: if access & 1 == 0 {
                qp_access::REMOTE_WRITE
                    | qp_access::REMOTE_READ
                    | qp_access::REMOTE_ATOMIC
                    | qp_access::FLUSH_GLOBAL
            } else {
                access
            },
            mtu: MTUS[mtu],
            max_dest_rd_atomic: rd,
            min_rnr_timer: rnr,
        }
    })
}

/// One packet of a stream, relative to the responder's state so that streams exercise
/// in-sequence traffic, duplicates and gaps, whole messages and broken ones.
#[derive(Clone, Debug)]
struct Pkt {
    /// Mostly an opcode the QP receives, sometimes any opcode of the table.
    opcode: usize,
    any_opcode: bool,
    psn_delta: i32,
    /// 0: `payload` as is; 1: one MTU; 2: what completes the WRITE in progress (else a short
    /// payload); 3: eight bytes.
    payload_kind: u8,
    payload: u32,
    ack_req: bool,
    dma_len: u32,
    va: u64,
    rkey_ok: bool,
    recv_ready: bool,
    recv_len: u32,
}

fn pkt() -> impl Strategy<Value = Pkt> {
    let psn_delta = prop_oneof![6 => Just(0i32), 1 => -3..4i32];
    let dma = prop_oneof![
        Just(0u32),
        Just(8),
        Just(256),
        Just(700),
        Just(2048),
        0..20_000u32,
        Just(MAX_DMA_LEN + 1)
    ];
    (
        (
            0..64usize,
            prop::bool::weighted(0.1),
            psn_delta,
            0..4u8,
            0..5000u32,
        ),
        (
            prop::bool::weighted(0.3),
            dma,
            0..0x1_0000u64,
            any::<u8>(),
            0..10_000u32,
        ),
    )
        .prop_map(
            |(
                (opcode, any_opcode, psn_delta, payload_kind, payload),
                (ack_req, dma_len, va, flags, recv_len),
            )| Pkt {
                opcode,
                any_opcode,
                psn_delta,
                payload_kind,
                payload,
                ack_req,
                dma_len,
                va,
                rkey_ok: flags & 0x0f != 0,
                recv_ready: flags & 0x30 != 0,
                recv_len: if flags & 0x40 != 0 { recv_len } else { 1 << 20 },
            },
        )
}

/// The kernel's side of the responder, reduced to what the checks need: a receive WQE that is
/// held or not, one MR, and one 64-bit word for atomics.
struct Sim {
    cfg: RespConfig,
    st: RespState,
    cache: ResponderResources<16>,
    holds_wqe: bool,
    word: u64,
}

impl Sim {
    fn new(cfg: RespConfig, start: Psn) -> Sim {
        Sim {
            cfg,
            st: RespState::new(start),
            cache: ResponderResources::new(u32::from(cfg.max_dest_rd_atomic)),
            holds_wqe: false,
            word: 0,
        }
    }

    fn request(&self, table: &[&'static OpcodeInfo], p: &Pkt) -> Request {
        let fitting: Vec<_> = table
            .iter()
            .copied()
            .filter(|i| request_fits_qp(self.cfg.qp_type, i))
            .collect();
        let info = if p.any_opcode {
            table[p.opcode % table.len()]
        } else {
            fitting[p.opcode % fitting.len()]
        };
        let psn = Psn::new(
            self.st
                .expected_psn()
                .get()
                .wrapping_add(p.psn_delta as u32),
        );
        let mtu = self.cfg.mtu.bytes();
        let payload = match p.payload_kind {
            0 => p.payload,
            1 => mtu,
            2 => match self.st.message() {
                Message::Write { remaining, .. } => remaining.min(mtu),
                _ if info.is_write() && info.starts_message() => p.dma_len.min(mtu),
                _ => p.payload % mtu + 1,
            },
            _ => 8,
        };
        let mut r = Request::new(info, psn, if info.has_payload() { payload } else { 0 });
        r.ack_req = p.ack_req;
        if info.has(roxe_proto::proto::opcode::ExtHeader::Reth) {
            r.reth = Some(Reth {
                va: p.va,
                rkey: 0x100,
                dma_len: p.dma_len,
            });
        }
        if info.is_atomic() {
            r.atomic = Some(AtomicEth {
                va: if p.va % 16 == 1 { p.va } else { p.va & !7 },
                rkey: 0x100,
                swap_add: 1,
                compare: 0,
            });
        }
        if info.is_flush() {
            r.feth = Some(Feth {
                selectivity_level: (p.va & 1) as u8,
                placement_type: Feth::PLACEMENT_GLOBAL,
            });
        }
        r
    }

    /// Runs one packet through the responder as the kernel does; returns whether it was
    /// committed.
    fn step(&mut self, r: &Request, p: &Pkt) -> bool {
        let before = self.st;
        match check_psn(&mut self.st, &self.cfg, r) {
            PsnVerdict::Expected | PsnVerdict::Resync => {}
            PsnVerdict::Duplicate => {
                assert_eq!(self.cfg.qp_type, QpType::Rc);
                if let Response::Read(reply) = handle_duplicate(&self.st, &self.cache, &self.cfg, r)
                {
                    let n = reply.packets(self.cfg.mtu).map(|s| s.len).sum::<u32>();
                    assert_eq!(n, reply.len);
                }
                assert_eq!(self.st.expected_psn(), before.expected_psn());
                return false;
            }
            PsnVerdict::SequenceNak { expected } => {
                assert_eq!(expected, self.st.expected_psn());
                return false;
            }
            PsnVerdict::Drop => return false,
        }
        match self.checks(r, p) {
            Ok(()) => {
                let original = self.word;
                if r.info.is_atomic() {
                    self.word = self.word.wrapping_add(1);
                }
                let done = commit(&mut self.st, &mut self.cache, &self.cfg, r, original);
                if done.recv.is_some() {
                    self.holds_wqe = false;
                }
                if let Response::Read(reply) = done.response {
                    let segs: Vec<_> = reply.packets(self.cfg.mtu).collect();
                    assert_eq!(
                        segs.len() as u32,
                        read_response_count(reply.len, self.cfg.mtu)
                    );
                    assert_eq!(
                        segs.last().map(|s| s.psn.next()),
                        Some(self.st.expected_psn())
                    );
                }
                true
            }
            Err(e) => {
                let action = self.st.fail(&self.cfg, e);
                if self.cfg.qp_type != QpType::Rc {
                    assert_eq!(action.reply, None);
                }
                if let RecvWqeFate::Complete(_) = action.recv_wqe {
                    self.holds_wqe = false;
                }
                if action.qp_error {
                    // A real QP stops here; the model starts over in sequence.
                    *self = Sim::new(self.cfg, self.st.expected_psn());
                }
                false
            }
        }
    }

    fn checks(&mut self, r: &Request, p: &Pkt) -> Result<(), RespError> {
        check_opcode(&mut self.st, &self.cfg, r)?;
        check_op_allowed(&self.cfg, r)?;
        check_resource(&self.cfg, r, self.holds_wqe || p.recv_ready)?;
        if r.info.needs_recv_wqe() {
            self.holds_wqe = true;
        }
        let recv_len = if self.holds_wqe { p.recv_len } else { 0 };
        match check_length(&self.st, &self.cfg, r, recv_len)? {
            Placement::Nothing | Placement::Recv { .. } => Ok(()),
            Placement::Remote(access) => {
                let mr = KeyTarget {
                    key: if p.rkey_ok { 0x100 } else { 0x101 },
                    same_pd: true,
                    valid: true,
                    qp_matches: true,
                    access: Access::from_bits(0xffff),
                    bounds: KeyBounds::Range {
                        start: 0,
                        length: 0x2_0000,
                    },
                };
                check_rkey(Some(&mr), &access)
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Arbitrary streams: no panic; RC moves the expected PSN only in commit, by the PSNs the
    /// accepted request took; UC only to an accepted packet's PSN (+1 once committed); the cache
    /// stays within its capacity; a WRITE cursor never exceeds its length.
    #[test]
    fn streams_keep_the_invariants(cfg in config(), start in 0u32..(1 << 24), pkts in prop::collection::vec(pkt(), 1..80)) {
        let table = opcodes();
        let mut sim = Sim::new(cfg, Psn::new(start));
        for p in &pkts {
            let r = sim.request(&table, p);
            let old = sim.st.expected_psn();
            let committed = sim.step(&r, p);
            let new = sim.st.expected_psn();
            let took = if r.info.is_read() {
                read_response_count(r.reth.map_or(0, |h| h.dma_len), cfg.mtu)
            } else {
                1
            };
            match cfg.qp_type {
                QpType::Rc if committed => {
                    prop_assert_eq!(r.psn, old);
                    prop_assert_eq!(new, old.add(took));
                }
                QpType::Rc => prop_assert_eq!(new, old),
                QpType::Uc if committed => prop_assert_eq!(new, r.psn.next()),
                QpType::Uc => prop_assert!(new == old || new == r.psn),
                _ => prop_assert!(!committed || new == r.psn.next()),
            }
            prop_assert!(sim.cache.len() <= sim.cache.capacity());
            prop_assert!(sim.cache.capacity() <= usize::from(cfg.max_dest_rd_atomic));
            if let Message::Write { remaining, length, .. } = sim.st.message() {
                prop_assert!(remaining <= length && remaining > 0);
            }
        }
    }

    /// RC verdicts follow the sign of the 24-bit distance; UC accepts the expected PSN or a new
    /// message; UD accepts everything.
    #[test]
    fn psn_verdicts_follow_the_ordering(expected in 0u32..(1 << 24), psn in 0u32..(1 << 24), op in 0..64usize, nak_sent in any::<bool>()) {
        let table = opcodes();
        let info = table[op % table.len()];
        let (expected, psn) = (Psn::new(expected), Psn::new(psn));
        for qp_type in [QpType::Rc, QpType::Uc, QpType::Ud] {
            let cfg = RespConfig { qp_type, access_flags: 0, mtu: Pmtu::of(IbMtu::Mtu1024), max_dest_rd_atomic: 1, min_rnr_timer: 0 };
            let mut st = RespState::new(expected);
            let r = Request::new(info, psn, 0);
            if nak_sent {
                // Open a gap first.
                let _ = check_psn(&mut st, &cfg, &Request::new(info, expected.add(5), 0));
            }
            let v = check_psn(&mut st, &cfg, &r);
            if !request_fits_qp(qp_type, info) {
                prop_assert_eq!(v, PsnVerdict::Drop);
                continue;
            }
            let d = psn.diff(expected);
            match qp_type {
                QpType::Rc => match v {
                    PsnVerdict::Expected => prop_assert_eq!(d, 0),
                    PsnVerdict::Duplicate => prop_assert!(d < 0),
                    PsnVerdict::SequenceNak { expected: e } => prop_assert!(d > 0 && e == expected && !nak_sent),
                    PsnVerdict::Drop => prop_assert!(d > 0 && nak_sent),
                    PsnVerdict::Resync => prop_assert!(false, "RC never resyncs"),
                },
                QpType::Uc => match v {
                    PsnVerdict::Expected => prop_assert!(psn == expected && !nak_sent),
                    PsnVerdict::Resync => prop_assert!(info.starts_message() && st.expected_psn() == psn),
                    PsnVerdict::Drop => prop_assert!(!info.starts_message()),
                    other => prop_assert!(false, "UC verdict {:?}", other),
                },
                _ => prop_assert_eq!(v, PsnVerdict::Expected),
            }
        }
    }

    /// READ responses: at most an MTU each, exactly the MTU but in the last, contiguous offsets
    /// and consecutive PSNs covering the length, a legal opcode sequence, an AETH on all but
    /// MIDDLEs.
    #[test]
    fn read_responses_cover_the_length(len in prop_oneof![0u32..10_000, 0u32..(1 << 20)], mtu in 0..6usize, first in 0u32..(1 << 24), resumes in any::<bool>()) {
        let mtu = MTUS[mtu];
        let reply = ReadReply { first_psn: Psn::new(first), va: 0, rkey: 0, len, resumes };
        let segs: Vec<_> = reply.packets(mtu).collect();
        prop_assert_eq!(segs.len(), reply.packets(mtu).len());
        if resumes && len == 0 {
            prop_assert!(segs.is_empty());
            return Ok(());
        }
        if !resumes {
            prop_assert_eq!(segs.len() as u32, read_response_count(len, mtu));
        }
        let mut prev = if resumes { Some(Opcode::RC_RDMA_READ_RESPONSE_FIRST) } else { None };
        let mut offset = 0u32;
        for (i, s) in segs.iter().enumerate() {
            prop_assert_eq!(s.psn, Psn::new(first).add(i as u32));
            prop_assert_eq!(s.offset, offset);
            prop_assert!(s.len <= mtu.bytes());
            let info = s.opcode.info().unwrap();
            prop_assert!(info.is_read_response());
            prop_assert!(check_op_sequence(prev, s.opcode).is_ok());
            prop_assert_eq!(s.has_aeth, info.position() != Position::Middle);
            if i + 1 < segs.len() {
                prop_assert_eq!(s.len, mtu.bytes());
            } else {
                prop_assert!(info.ends_message());
            }
            offset += s.len;
            prev = Some(s.opcode);
        }
        prop_assert_eq!(offset, len);
    }

    /// A duplicate atomic returns the value its first execution returned and never runs again,
    /// as long as the cache still holds it.
    #[test]
    fn duplicate_atomics_are_not_reexecuted(n in 1usize..40, cap in 1u8..20, dups in prop::collection::vec(any::<u16>(), 0..60), start in 0u32..(1 << 24)) {
        let cfg = RespConfig { qp_type: QpType::Rc, access_flags: qp_access::REMOTE_ATOMIC, mtu: Pmtu::of(IbMtu::Mtu1024), max_dest_rd_atomic: cap, min_rnr_timer: 0 };
        let mut st = RespState::new(Psn::new(start));
        let mut cache = ResponderResources::<16>::new(u32::from(cap));
        let mut word = 0u64;
        let mut executions = Vec::new();
        let fetch_add = Opcode::RC_FETCH_ADD.info().unwrap();
        for i in 0..n {
            let mut r = Request::new(fetch_add, st.expected_psn(), 0);
            r.atomic = Some(AtomicEth { va: 0, rkey: 1, swap_add: 3, compare: 0 });
            prop_assert_eq!(check_psn(&mut st, &cfg, &r), PsnVerdict::Expected);
            let original = word;
            word += 3;
            executions.push((r.psn, original));
            let done = commit(&mut st, &mut cache, &cfg, &r, original);
            prop_assert_eq!(done.response, Response::AtomicAck { psn: r.psn, original });
            prop_assert_eq!(i as u64 * 3, original);
        }
        let kept = usize::from(cap).min(16);
        for d in dups {
            let (psn, original) = executions[usize::from(d) % executions.len()];
            let r = Request::new(fetch_add, psn, 0);
            prop_assert_eq!(check_psn(&mut st, &cfg, &r), PsnVerdict::Duplicate);
            let age = n - 1 - executions.iter().position(|e| e.0 == psn).unwrap();
            match handle_duplicate(&st, &cache, &cfg, &r) {
                Response::AtomicAck { psn: p, original: o } => {
                    prop_assert!(age < kept);
                    prop_assert_eq!((p, o), (psn, original));
                }
                Response::None => prop_assert!(age >= kept),
                other => prop_assert!(false, "{:?}", other),
            }
        }
        // Duplicates never touched the word.
        prop_assert_eq!(word, n as u64 * 3);
    }

    /// The ring never holds more than its capacity, keeps exactly the newest entries, and
    /// finds each of them.
    #[test]
    fn cache_stays_within_capacity(cap in 0u32..40, psns in prop::collection::vec(0u32..(1 << 24), 0..100)) {
        let mut cache = ResponderResources::<16>::new(cap);
        let capacity = (cap as usize).min(16);
        prop_assert_eq!(cache.capacity(), capacity);
        for (i, &p) in psns.iter().enumerate() {
            cache.record(Resource::Atomic { psn: Psn::new(p), original: i as u64 });
            prop_assert!(cache.len() <= capacity);
            prop_assert_eq!(cache.len(), (i + 1).min(capacity));
            if capacity > 0 {
                prop_assert_eq!(cache.find(Psn::new(p)), Some(Resource::Atomic { psn: Psn::new(p), original: i as u64 }));
            } else {
                prop_assert_eq!(cache.find(Psn::new(p)), None);
            }
        }
    }

    /// check_rkey's range test agrees with exact arithmetic.
    #[test]
    fn rkey_range_matches_a_wide_model(start in any::<u64>(), length in any::<u64>(), va in any::<u64>(), len in any::<u64>(), atomic in any::<bool>()) {
        let target = KeyTarget { key: 5, same_pd: true, valid: true, qp_matches: true, access: Access::REMOTE, bounds: KeyBounds::Range { start, length } };
        let access = RemoteAccess { rkey: 5, va, len, needed: Access::REMOTE_READ, whole_region: false, atomic };
        let inside = u128::from(va) >= u128::from(start) && u128::from(va) + u128::from(len) <= u128::from(start) + u128::from(length);
        let expected = if !inside {
            Err(RespError::RemoteAccess)
        } else if atomic && va % 8 != 0 {
            Err(RespError::MisalignedAtomic)
        } else {
            Ok(())
        };
        prop_assert_eq!(check_rkey(Some(&target), &access), expected);
    }

    /// A replayed READ only ever sends PSNs and bytes of the original request.
    #[test]
    fn read_replays_stay_inside_the_original(len in 1u32..5000, mtu in 0..6usize, first in 0u32..(1 << 24), at in 0u32..30, va_shift in 0u64..6000, dma in 0u32..6000, rkey_ok in any::<bool>()) {
        let cfg = RespConfig { qp_type: QpType::Rc, access_flags: qp_access::REMOTE_READ, mtu: MTUS[mtu], max_dest_rd_atomic: 2, min_rnr_timer: 0 };
        let mut st = RespState::new(Psn::new(first));
        let mut cache = ResponderResources::<2>::new(2);
        let read = Opcode::RC_RDMA_READ_REQUEST.info().unwrap();
        let mut r = Request::new(read, Psn::new(first), 0);
        r.reth = Some(Reth { va: 0x10_0000, rkey: 7, dma_len: len });
        commit(&mut st, &mut cache, &cfg, &r, 0);
        let count = read_response_count(len, cfg.mtu);
        let dup_psn = Psn::new(first).add(at % count);
        let mut d = Request::new(read, dup_psn, 0);
        d.reth = Some(Reth { va: 0x10_0000 + va_shift, rkey: if rkey_ok { 7 } else { 8 }, dma_len: dma });
        prop_assert_eq!(check_psn(&mut st, &cfg, &d), PsnVerdict::Duplicate);
        if let Response::Read(reply) = handle_duplicate(&st, &cache, &cfg, &d) {
            prop_assert_eq!(reply.resumes, dup_psn != Psn::new(first));
            let last = Psn::new(first).add(count - 1);
            for s in reply.packets(cfg.mtu) {
                prop_assert!(s.psn.diff(Psn::new(first)) >= 0 && last.diff(s.psn) >= 0);
                let start = reply.va + u64::from(s.offset);
                prop_assert!(s.len == 0 || (start >= 0x10_0000 && start + u64::from(s.len) <= 0x10_0000 + u64::from(len)));
            }
            prop_assert!(reply.len == 0 || reply.rkey == 7);
        }
    }
}
