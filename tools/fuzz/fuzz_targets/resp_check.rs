// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the responder: drives a [`RespState`] and its responder resources with an arbitrary
//! stream of request packets, through the checks in the order the kernel calls them, and checks
//! the invariants after each packet.
//!
//! The first four bytes pick the QP's configuration; every following 12 bytes are one packet
//! (opcode, PSN relative to the expected one, payload length, RDMA length and address, flags).
//! Panics, overflow checks included, and the assertions below are the failures libFuzzer
//! reports.

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use roxe_proto::proto::{
    mtt::Access,
    mtu::{IbMtu, Pmtu},
    opcode::{check_op_sequence, ExtHeader, Opcode, OpcodeInfo, Position},
    packet::{AtomicEth, Feth, Reth},
    psn::Psn,
    qp_state::QpType,
    resp::*,
};

/// Packets per input: few enough that READs (at most 2^16 bytes here) never wrap the 24-bit
/// PSN space, so an atomic's PSN is never legitimately expected twice.
const MAX_PACKETS: usize = 256;
const PACKET_BYTES: usize = 12;
const MR_START: u64 = 0x1000;
const MR_LEN: u64 = 0x2_0000;
const RKEY: u32 = 0x1234;

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let cfg = RespConfig {
        qp_type: [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi][usize::from(head[0] & 3)],
        access_flags: if head[0] & 4 == 0 {
            0x30f
        } else {
            u32::from(head[1]) | u32::from(head[0] >> 4) << 8
        },
        // The five path MTUs, and the loopback segment.
        mtu: IbMtu::from_raw(u32::from(head[2] % 6) + 1).map_or(Pmtu::LOCAL, Pmtu::of),
        max_dest_rd_atomic: head[3] % 20,
        min_rnr_timer: head[1] & 0x1f,
    };
    let start = Psn::new(u32::from_le_bytes([head[1], head[2], head[3], head[0]]));
    let mut sim = Sim::new(cfg, start);
    let table: Vec<&'static OpcodeInfo> = Opcode::all().collect();
    let fitting: Vec<&'static OpcodeInfo> = table
        .iter()
        .copied()
        .filter(|i| request_fits_qp(cfg.qp_type, i))
        .collect();
    for chunk in rest.chunks_exact(PACKET_BYTES).take(MAX_PACKETS) {
        let Ok(bytes) = <[u8; PACKET_BYTES]>::try_from(chunk) else {
            return;
        };
        let p = Pkt(bytes);
        let info = if p.byte(0) & 0x80 != 0 {
            table[usize::from(p.byte(0)) % table.len()]
        } else {
            fitting[usize::from(p.byte(0)) % fitting.len()]
        };
        let r = sim.request(info, &p);
        sim.step(&r, &p);
    }
});

/// One packet's 12 bytes.
struct Pkt([u8; PACKET_BYTES]);

impl Pkt {
    fn byte(&self, i: usize) -> u8 {
        self.0[i]
    }

    fn u16(&self, i: usize) -> u16 {
        u16::from_le_bytes([self.0[i], self.0[i + 1]])
    }

    fn flag(&self, bit: u32) -> bool {
        u32::from_le_bytes([self.0[4], self.0[7], 0, 0]) & (1 << bit) != 0
    }
}

/// The kernel's side, reduced to what the checks need: a held receive WQE or not, one MR, and
/// one 64-bit word for atomics.
struct Sim {
    cfg: RespConfig,
    st: RespState,
    cache: ResponderResources<16>,
    holds_wqe: bool,
    word: u64,
    /// PSN of every atomic executed, with the value it returned.
    atomics: HashMap<u32, u64>,
}

impl Sim {
    fn new(cfg: RespConfig, start: Psn) -> Sim {
        Sim {
            cfg,
            st: RespState::new(start),
            cache: ResponderResources::new(u32::from(cfg.max_dest_rd_atomic)),
            holds_wqe: false,
            word: 0,
            atomics: HashMap::new(),
        }
    }

    fn request(&self, info: &'static OpcodeInfo, p: &Pkt) -> Request {
        // Mostly in sequence; sometimes a little behind or ahead; rarely anywhere.
        let delta = match p.byte(1) {
            0..=159 => 0,
            160..=254 => i32::from(p.byte(1) % 9) - 4,
            255 => i32::from(p.u16(2)),
        };
        let psn = Psn::new(self.st.expected_psn().get().wrapping_add(delta as u32));
        let mtu = self.cfg.mtu.bytes();
        let dma_len = match p.byte(7) >> 5 {
            0 => 0,
            1 => 8,
            2 => MAX_DMA_LEN + u32::from(p.byte(6) & 1),
            _ => u32::from(p.u16(5)),
        };
        let raw = u32::from(p.u16(2));
        let payload = match p.byte(0) & 0x60 {
            0x00 => mtu,
            0x20 => match self.st.message() {
                Message::Write { remaining, .. } => remaining.min(mtu),
                _ if info.is_write() && info.starts_message() => dma_len.min(mtu),
                _ => raw % mtu + 1,
            },
            0x40 => 8,
            _ => raw,
        };
        let mut r = Request::new(info, psn, if info.has_payload() { payload } else { 0 });
        r.ack_req = p.flag(0);
        if p.flag(1) {
            r.pad = p.byte(4) >> 6;
        }
        let va = MR_START
            .wrapping_add(u64::from(p.u16(8)))
            .wrapping_sub(u64::from(p.flag(2)) * 0x800);
        let rkey = if p.flag(3) { RKEY ^ 1 } else { RKEY };
        if info.has(ExtHeader::Reth) {
            r.reth = Some(Reth { va, rkey, dma_len });
        }
        if info.has(ExtHeader::AtomicEth) {
            r.atomic = Some(AtomicEth {
                va,
                rkey,
                swap_add: 1,
                compare: 0,
            });
        }
        if info.has(ExtHeader::Feth) {
            r.feth = Some(Feth {
                selectivity_level: p.byte(9) & 3,
                placement_type: p.byte(9) >> 4,
            });
        }
        r
    }

    fn step(&mut self, r: &Request, p: &Pkt) {
        let old = self.st.expected_psn();
        let verdict = check_psn(&mut self.st, &self.cfg, r);
        match verdict {
            PsnVerdict::Expected | PsnVerdict::Resync => {}
            PsnVerdict::Duplicate => {
                assert_eq!(self.cfg.qp_type, QpType::Rc);
                assert!(r.psn.diff(old) < 0);
                match handle_duplicate(&self.st, &self.cache, &self.cfg, r) {
                    Response::AtomicAck { psn, original } => {
                        // At most once: the saved result, never a new execution.
                        assert_eq!(psn, r.psn);
                        assert_eq!(self.atomics.get(&psn.get()), Some(&original));
                    }
                    Response::Read(reply) => check_segments(&reply, self.cfg.mtu),
                    Response::Ack { psn } => assert!(psn.diff(old) < 0),
                    Response::EmptyRead { psn } => assert_eq!(psn, r.psn),
                    Response::None => {}
                }
                assert_eq!(self.st.expected_psn(), old);
                return;
            }
            PsnVerdict::SequenceNak { expected } => {
                assert_eq!(self.cfg.qp_type, QpType::Rc);
                assert!(r.psn.diff(old) > 0 && expected == old);
                assert_eq!(self.st.expected_psn(), old);
                return;
            }
            PsnVerdict::Drop => {
                // RC and UD never move on a drop; UC keeps its PSN while it drops a message.
                assert_eq!(self.st.expected_psn(), old);
                return;
            }
        }
        if verdict == PsnVerdict::Resync {
            assert_eq!(self.cfg.qp_type, QpType::Uc);
            assert_eq!(self.st.expected_psn(), r.psn);
        } else if matches!(self.cfg.qp_type, QpType::Rc | QpType::Uc) {
            assert_eq!(r.psn, old);
        }
        let before_checks = self.st.expected_psn();
        match self.checks(r, p) {
            Ok(()) => {
                // The checks never move the expected PSN; only commit does.
                assert_eq!(self.st.expected_psn(), before_checks);
                let original = self.word;
                if r.info.is_atomic() {
                    assert!(
                        self.atomics.insert(r.psn.get(), original).is_none(),
                        "atomic at {:?} ran twice",
                        r.psn
                    );
                    self.word = self.word.wrapping_add(1);
                }
                let msn = self.st.msn();
                let done = commit(&mut self.st, &mut self.cache, &self.cfg, r, original);
                let took = if r.info.is_read() {
                    read_response_count(r.reth.map_or(0, |h| h.dma_len), self.cfg.mtu)
                } else {
                    1
                };
                assert_eq!(self.st.expected_psn(), r.psn.add(took));
                assert_eq!(self.st.msn() != msn, r.info.ends_message());
                if done.recv.is_some() {
                    assert!(r.info.completes_recv_wqe() && self.holds_wqe);
                    self.holds_wqe = false;
                }
                match done.response {
                    Response::Read(reply) => {
                        check_segments(&reply, self.cfg.mtu);
                        assert_eq!(
                            reply.packets(self.cfg.mtu).last().map(|s| s.psn.next()),
                            Some(self.st.expected_psn())
                        );
                    }
                    Response::None => assert!(
                        self.cfg.qp_type != QpType::Rc || !(r.ack_req || r.info.ends_message())
                    ),
                    _ => assert_eq!(self.cfg.qp_type, QpType::Rc),
                }
            }
            Err(e) => {
                let action = self.st.fail(&self.cfg, e);
                if self.cfg.qp_type != QpType::Rc {
                    assert_eq!(action.reply, None);
                }
                match e {
                    // A stray packet belongs to no message; an RC RNR keeps the message for the
                    // retry.
                    RespError::WrongTransport => {}
                    RespError::ReceiverNotReady if self.cfg.qp_type == QpType::Rc => {}
                    _ => assert_eq!(self.st.message(), Message::Idle),
                }
                if let RecvWqeFate::Complete(_) = action.recv_wqe {
                    self.holds_wqe = false;
                }
                if action.qp_error {
                    // A real QP stops here; the model goes on from the same PSN with a fresh
                    // state but remembers the atomics, which must still never run twice.
                    let atomics = std::mem::take(&mut self.atomics);
                    let word = self.word;
                    let cache = self.cache;
                    *self = Sim::new(self.cfg, self.st.expected_psn());
                    self.atomics = atomics;
                    self.word = word;
                    self.cache = cache;
                }
            }
        }
        assert!(self.cache.len() <= self.cache.capacity());
        assert!(self.cache.capacity() <= usize::from(self.cfg.max_dest_rd_atomic));
        if let Message::Write {
            remaining,
            length,
            va,
            ..
        } = self.st.message()
        {
            assert!(remaining > 0 && remaining <= length);
            assert!(va.wrapping_sub(r.reth.map_or(va, |h| h.va)) <= u64::from(length));
        }
    }

    fn checks(&mut self, r: &Request, p: &Pkt) -> Result<(), RespError> {
        check_opcode(&mut self.st, &self.cfg, r)?;
        check_op_allowed(&self.cfg, r)?;
        check_resource(&self.cfg, r, self.holds_wqe || p.flag(4))?;
        if r.info.needs_recv_wqe() {
            self.holds_wqe = true;
        }
        let recv_len = if !self.holds_wqe {
            0
        } else if p.flag(5) {
            u32::from(p.u16(10))
        } else {
            1 << 20
        };
        match check_length(&self.st, &self.cfg, r, recv_len)? {
            Placement::Nothing => {
                assert!(
                    r.reth.is_some_and(|h| h.dma_len == 0)
                        || matches!(self.st.message(), Message::Idle)
                );
                Ok(())
            }
            Placement::Recv { offset } => {
                assert!(r.info.is_send());
                assert!(u64::from(offset) + u64::from(r.payload_len) <= u64::from(recv_len));
                Ok(())
            }
            Placement::Remote(access) => {
                assert!(
                    u64::from(r.payload_len) <= access.len
                        || r.info.is_atomic_write()
                        || r.info.is_flush()
                );
                let mr = KeyTarget {
                    key: RKEY,
                    same_pd: !p.flag(6),
                    valid: true,
                    qp_matches: true,
                    access: Access::from_bits(0x3ff),
                    bounds: KeyBounds::Range {
                        start: MR_START,
                        length: MR_LEN,
                    },
                };
                let result = check_rkey(Some(&mr), &access);
                if result.is_ok() && !access.whole_region {
                    assert!(access.va >= MR_START && access.va - MR_START + access.len <= MR_LEN);
                }
                if result.is_ok() && access.atomic {
                    assert_eq!(access.va % 8, 0);
                }
                result
            }
        }
    }
}

/// READ responses cover the reply exactly: MTU-sized but the last, contiguous, consecutive
/// PSNs, a legal opcode sequence, AETH on all but MIDDLEs.
fn check_segments(reply: &ReadReply, mtu: Pmtu) {
    let mut prev = if reply.resumes {
        Some(Opcode::RC_RDMA_READ_RESPONSE_FIRST)
    } else {
        None
    };
    let mut offset = 0u32;
    let mut n = 0u32;
    for s in reply.packets(mtu) {
        let info = s.opcode.info().expect("a table opcode");
        assert!(check_op_sequence(prev, s.opcode).is_ok());
        assert_eq!(s.psn, reply.first_psn.add(n));
        assert_eq!(s.offset, offset);
        assert!(s.len <= mtu.bytes());
        assert!(s.len == mtu.bytes() || info.ends_message());
        assert_eq!(s.has_aeth, info.position() != Position::Middle);
        offset += s.len;
        n += 1;
        prev = Some(s.opcode);
    }
    assert_eq!(offset, reply.len);
    if !reply.resumes {
        assert_eq!(n, read_response_count(reply.len, mtu));
    }
}
