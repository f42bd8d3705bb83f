// SPDX-License-Identifier: GPL-2.0

//! Property tests of the packet views, the opcode sequence check and the ICRC: hostile bytes
//! never panic, whatever the builder writes the parser reads back, well-formed message streams
//! pass the sequence check and broken ones do not, and the ICRC ignores exactly the variant
//! fields.

use proptest::prelude::*;
use proptest::sample::select;
use roxe_proto::proto::{
    icrc::{icrc, Icrc, IpHeader, SoftCrc32, ICRC_LEN},
    opcode::{check_op_sequence, Opcode, OpcodeInfo, Position, SeqCheck},
    packet::{
        pad_count_for, Aeth, AtomicAckEth, AtomicEth, Deth, Feth, Ieth, Msn, Packet, PacketError,
        Reth, Syndrome,
    },
    psn::Psn,
};

fn known_opcodes() -> Vec<Opcode> {
    Opcode::all().map(OpcodeInfo::opcode).collect()
}

fn opcode() -> impl Strategy<Value = Opcode> {
    select(known_opcodes())
}

/// Calls every getter; checks the layout arithmetic of an accepted packet.
fn exercise(bytes: &[u8]) -> Result<(), TestCaseError> {
    match Packet::new_checked(bytes) {
        Ok(p) => {
            let info = p.info();
            prop_assert_eq!(p.opcode().get(), bytes[0]);
            prop_assert_eq!(p.tver(), 0);
            let _ = (
                p.solicited_event(),
                p.mig_req(),
                p.pkey(),
                p.fecn(),
                p.becn(),
                p.ack_req(),
            );
            prop_assert!(p.dest_qpn() < 1 << 24);
            prop_assert!(p.psn().get() < 1 << 24);
            prop_assert_eq!(
                p.reth().is_some(),
                info.offset(roxe_proto::proto::opcode::ExtHeader::Reth)
                    .is_some()
            );
            let _ = (
                p.aeth(),
                p.atomic_eth(),
                p.atomic_ack_eth(),
                p.deth(),
                p.imm_data(),
                p.ieth(),
                p.feth(),
            );
            prop_assert_eq!(
                p.header_len() + p.payload_len() + usize::from(p.pad_count()) + ICRC_LEN,
                bytes.len()
            );
            prop_assert_eq!(p.payload().len(), p.payload_len());
            prop_assert!(info.has_payload() || p.payload_len() == 0);
            prop_assert_eq!(p.icrc_covered().len(), bytes.len() - ICRC_LEN);
            let _ = p.icrc();
        }
        Err(e) => {
            let _ = e.name();
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        exercise(&bytes)?;
    }

    /// Arbitrary bytes behind a known opcode and version 0, to get past the first checks.
    #[test]
    fn parsing_plausible_packets_never_panics(
        op in opcode(),
        flags in any::<u8>(),
        rest in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        let mut bytes = vec![op.get(), flags & 0xf0];
        bytes.extend_from_slice(&rest);
        exercise(&bytes)?;
    }

    #[test]
    fn every_opcode_byte_is_total(raw in any::<u8>(), prev in proptest::option::of(any::<u8>())) {
        let op = Opcode::new(raw);
        let _ = (op.transport(), op.operation_bits(), op.info());
        let _ = check_op_sequence(prev.map(Opcode::new), op);
    }
}

/// Field values for every header a packet may carry.
#[derive(Clone, Debug)]
struct Fields {
    se: bool,
    mig: bool,
    pkey: u16,
    fecn: bool,
    becn: bool,
    qpn: u32,
    ack_req: bool,
    psn: u32,
    reth: Reth,
    aeth: (u8, u32),
    atomic: AtomicEth,
    atomic_ack: u64,
    deth: Deth,
    imm: [u8; 4],
    ieth: u32,
    feth: (u8, u8),
}

fn fields() -> impl Strategy<Value = Fields> {
    let bth = (
        any::<bool>(),
        any::<bool>(),
        any::<u16>(),
        any::<bool>(),
        any::<bool>(),
        any::<u32>(),
        any::<bool>(),
        any::<u32>(),
    );
    let reth = (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(va, rkey, dma_len)| Reth {
        va,
        rkey,
        dma_len,
    });
    let atomic = (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()).prop_map(
        |(va, rkey, swap_add, compare)| AtomicEth {
            va,
            rkey,
            swap_add,
            compare,
        },
    );
    let deth = (any::<u32>(), 0u32..1 << 24).prop_map(|(qkey, src_qpn)| Deth { qkey, src_qpn });
    let ext = (
        reth,
        (any::<u8>(), 0u32..1 << 24),
        atomic,
        any::<u64>(),
        deth,
        any::<[u8; 4]>(),
        any::<u32>(),
        (0u8..4, 0u8..16),
    );
    (bth, ext).prop_map(
        |(
            (se, mig, pkey, fecn, becn, qpn, ack_req, psn),
            (reth, aeth, atomic, atomic_ack, deth, imm, ieth, feth),
        )| {
            Fields {
                se,
                mig,
                pkey,
                fecn,
                becn,
                qpn,
                ack_req,
                psn,
                reth,
                aeth,
                atomic,
                atomic_ack,
                deth,
                imm,
                ieth,
                feth,
            }
        },
    )
}

proptest! {
    #[test]
    fn built_headers_parse_back(
        op in opcode(),
        f in fields(),
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        junk in any::<u8>(),
    ) {
        let info = op.info().unwrap();
        let payload: &[u8] = if info.has_payload() { &payload } else { &[] };
        let pad = pad_count_for(payload.len());
        // Start from junk so that the builder has to clear what it does not set.
        let mut buf = vec![junk; info.header_len() + payload.len() + usize::from(pad) + ICRC_LEN];
        let mut b = Packet::build(&mut buf[..], op, pad).unwrap();
        b.set_solicited_event(f.se);
        b.set_mig_req(f.mig);
        b.set_pkey(f.pkey);
        b.set_fecn(f.fecn);
        b.set_becn(f.becn);
        b.set_dest_qpn(f.qpn);
        b.set_ack_req(f.ack_req);
        b.set_psn(Psn::new(f.psn));
        let aeth = Aeth { syndrome: Syndrome::from_byte(f.aeth.0), msn: Msn::new(f.aeth.1) };
        let feth = Feth { selectivity_level: f.feth.0, placement_type: f.feth.1 };
        // Each setter succeeds exactly when the opcode has the header.
        prop_assert_eq!(b.set_reth(&f.reth).is_ok(), info.offset(roxe_proto::proto::opcode::ExtHeader::Reth).is_some());
        let _ = b.set_aeth(&aeth);
        let _ = b.set_atomic_eth(&f.atomic);
        let _ = b.set_atomic_ack_eth(&AtomicAckEth { orig: f.atomic_ack });
        let _ = b.set_deth(&f.deth);
        let _ = b.set_imm_data(f.imm);
        let _ = b.set_ieth(&Ieth { rkey: f.ieth });
        let _ = b.set_feth(&feth);
        b.payload_mut().copy_from_slice(payload);
        b.set_icrc(0x1234_5678);

        let p = Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(p.opcode(), op);
        prop_assert_eq!(
            (p.solicited_event(), p.mig_req(), p.pkey(), p.fecn(), p.becn(), p.ack_req()),
            (f.se, f.mig, f.pkey, f.fecn, f.becn, f.ack_req)
        );
        prop_assert_eq!(p.dest_qpn(), f.qpn & 0xff_ffff);
        prop_assert_eq!(p.psn(), Psn::new(f.psn));
        prop_assert_eq!(p.pad_count(), pad);
        use roxe_proto::proto::opcode::ExtHeader as H;
        let has = |h| info.has(h);
        prop_assert_eq!(p.reth(), has(H::Reth).then_some(f.reth));
        prop_assert_eq!(p.aeth(), has(H::Aeth).then_some(aeth));
        prop_assert_eq!(p.atomic_eth(), has(H::AtomicEth).then_some(f.atomic));
        prop_assert_eq!(p.atomic_ack_eth(), has(H::AtomicAckEth).then_some(AtomicAckEth { orig: f.atomic_ack }));
        prop_assert_eq!(p.deth(), has(H::Deth).then_some(f.deth));
        prop_assert_eq!(p.imm_data(), has(H::ImmDt).then_some(f.imm));
        prop_assert_eq!(p.ieth(), has(H::Ieth).then_some(Ieth { rkey: f.ieth }));
        prop_assert_eq!(p.feth(), has(H::Feth).then_some(feth));
        prop_assert_eq!(p.payload(), payload);
        prop_assert_eq!(p.icrc(), 0x1234_5678);
        // Reserved bits go out as zero, and so do the pad bytes.
        prop_assert_eq!(buf[4] & 0x3f, 0);
        prop_assert_eq!(buf[8] & 0x7f, 0);
        let pad_start = buf.len() - ICRC_LEN - usize::from(pad);
        prop_assert!(buf[pad_start..buf.len() - ICRC_LEN].iter().all(|&b| b == 0));
    }

    #[test]
    fn too_short_buffers_are_refused(op in opcode(), cut in 1usize..8) {
        let info = op.info().unwrap();
        let len = (info.header_len() + ICRC_LEN).saturating_sub(cut);
        let mut buf = vec![0u8; len];
        let err = Packet::build(&mut buf[..], op, 0).err();
        prop_assert!(matches!(err, Some(PacketError::TooShort | PacketError::Truncated)));
        buf.resize(len.max(2), 0);
        buf[0] = op.get();
        buf[1] = 0;
        prop_assert!(Packet::new_checked(&buf[..]).is_err());
    }
}

/// The opcodes of one message of a multi-packet family: `n_middle` MIDDLEs between FIRST and
/// LAST, or an ONLY when `single`.
fn message(
    family: &[&'static OpcodeInfo],
    single: bool,
    n_middle: usize,
    last_variant: usize,
) -> Vec<Opcode> {
    let pick = |pos: Position, i: usize| {
        let candidates: Vec<_> = family.iter().filter(|o| o.position() == pos).collect();
        candidates[i % candidates.len()].opcode()
    };
    if single {
        return vec![pick(Position::Only, last_variant)];
    }
    let mut ops = vec![pick(Position::First, 0)];
    ops.extend(std::iter::repeat_n(pick(Position::Middle, 0), n_middle));
    ops.push(pick(Position::Last, last_variant));
    ops
}

/// A stream of whole messages on one transport: (stream, indices of FIRSTs of multi-packet
/// messages, indices of LASTs of multi-packet messages).
fn stream() -> impl Strategy<Value = (Vec<Opcode>, Vec<usize>, Vec<usize>)> {
    let msgs = proptest::collection::vec(
        (0usize..3, any::<bool>(), 0usize..4, 0usize..4, 0usize..8),
        1..8,
    );
    (any::<bool>(), msgs).prop_map(|(uc, msgs)| {
        let transport = if uc {
            roxe_proto::proto::opcode::Transport::Uc
        } else {
            roxe_proto::proto::opcode::Transport::Rc
        };
        let mut out = Vec::new();
        let mut firsts = Vec::new();
        let mut lasts = Vec::new();
        for (kind, single, n_middle, variant, other) in msgs {
            // Interleave a packet that is not part of a multi-packet family now and then.
            if other == 0 && !uc {
                out.push(Opcode::RC_RDMA_READ_REQUEST);
            }
            let family: Vec<&'static OpcodeInfo> = Opcode::all()
                .filter(|o| o.transport() == transport && o.is_request())
                .filter(|o| match kind {
                    0 | 2 => o.is_send(),
                    _ => o.is_write(),
                })
                .collect();
            let ops = message(&family, single, n_middle, variant);
            if !single {
                firsts.push(out.len());
                lasts.push(out.len() + ops.len() - 1);
            }
            out.extend(ops);
        }
        (out, firsts, lasts)
    })
}

fn all_ok(ops: &[Opcode]) -> bool {
    let mut prev = None;
    for &op in ops {
        if check_op_sequence(prev, op) != SeqCheck::Ok {
            return false;
        }
        prev = Some(op);
    }
    true
}

proptest! {
    #[test]
    fn well_formed_streams_pass((ops, _, _) in stream()) {
        prop_assert!(all_ok(&ops));
    }

    #[test]
    fn losing_a_first_is_detected((ops, firsts, _) in stream(), which in any::<usize>()) {
        prop_assume!(!firsts.is_empty());
        let mut broken = ops.clone();
        broken.remove(firsts[which % firsts.len()]);
        prop_assert!(!all_ok(&broken));
    }

    #[test]
    fn losing_a_last_before_another_message_is_detected((ops, _, lasts) in stream(), which in any::<usize>()) {
        let lasts: Vec<_> = lasts.into_iter().filter(|&i| i + 1 < ops.len()).collect();
        prop_assume!(!lasts.is_empty());
        let mut broken = ops.clone();
        broken.remove(lasts[which % lasts.len()]);
        prop_assert!(!all_ok(&broken));
    }

    #[test]
    fn sequence_verdicts_are_explained(prev in proptest::option::of(opcode()), next in opcode()) {
        let in_progress =
            prev.and_then(Opcode::info).is_some_and(|p| matches!(p.position(), Position::First | Position::Middle));
        let continues = matches!(next.info().unwrap().position(), Position::Middle | Position::Last);
        match check_op_sequence(prev, next) {
            SeqCheck::Ok => prop_assert!(in_progress == continues),
            SeqCheck::MissingFirst => prop_assert!(!in_progress && continues),
            SeqCheck::MissingLast => prop_assert!(in_progress),
        }
        if !in_progress && !continues {
            prop_assert_eq!(check_op_sequence(prev, next), SeqCheck::Ok);
        }
    }
}

fn ipv4_header() -> impl Strategy<Value = Vec<u8>> {
    (any::<[u8; 20]>()).prop_map(|mut h| {
        h[0] = 0x45;
        h.to_vec()
    })
}

fn ipv6_header() -> impl Strategy<Value = Vec<u8>> {
    (any::<[u8; 40]>()).prop_map(|mut h| {
        h[0] = 0x60 | (h[0] & 0x0f);
        h.to_vec()
    })
}

proptest! {
    #[test]
    fn icrc_ignores_variant_fields(
        ip in ipv4_header(),
        ip6 in ipv6_header(),
        udp in any::<[u8; 8]>(),
        transport in proptest::collection::vec(any::<u8>(), 12..80),
        noise in any::<[u8; 8]>(),
    ) {
        let e = SoftCrc32;
        let base = icrc(&e, IpHeader::V4(&ip), &udp, &transport).unwrap();
        let mut ip2 = ip.clone();
        ip2[1] = noise[0];
        ip2[8] = noise[1];
        ip2[10] = noise[2];
        ip2[11] = noise[3];
        let mut udp2 = udp;
        udp2[6] = noise[4];
        udp2[7] = noise[5];
        let mut t2 = transport.clone();
        t2[4] = noise[6];
        prop_assert_eq!(icrc(&e, IpHeader::V4(&ip2), &udp2, &t2).unwrap(), base);

        let base6 = icrc(&e, IpHeader::V6(&ip6), &udp, &transport).unwrap();
        let mut v = ip6.clone();
        v[0] = 0x60 | (noise[0] & 0x0f);
        v[1] = noise[1];
        v[2] = noise[2];
        v[3] = noise[3];
        v[7] = noise[4];
        prop_assert_eq!(icrc(&e, IpHeader::V6(&v), &udp, &transport).unwrap(), base6);
    }

    #[test]
    fn icrc_sees_every_covered_bit(
        ip in ipv4_header(),
        udp in any::<[u8; 8]>(),
        transport in proptest::collection::vec(any::<u8>(), 12..80),
        at in any::<usize>(),
        bit in 0u8..8,
    ) {
        let e = SoftCrc32;
        let base = icrc(&e, IpHeader::V4(&ip), &udp, &transport).unwrap();
        // A CRC detects every single-bit error; pick a bit outside the masked BTH byte.
        let covered: Vec<usize> = (0..transport.len()).filter(|&i| i != 4).collect();
        let mut t2 = transport.clone();
        t2[covered[at % covered.len()]] ^= 1 << bit;
        prop_assert_ne!(icrc(&e, IpHeader::V4(&ip), &udp, &t2).unwrap(), base);
    }

    #[test]
    fn icrc_streams_in_any_pieces(
        ip in ipv4_header(),
        udp in any::<[u8; 8]>(),
        transport in proptest::collection::vec(any::<u8>(), 12..200),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let e = SoftCrc32;
        let whole = icrc(&e, IpHeader::V4(&ip), &udp, &transport).unwrap();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| 12 + c % (transport.len() - 11)).collect();
        cuts.push(transport.len());
        cuts.sort_unstable();
        let mut state = Icrc::begin(&e, IpHeader::V4(&ip), &udp, &transport[..cuts[0]]).unwrap();
        for w in cuts.windows(2) {
            state.update(&transport[w[0]..w[1]]);
        }
        prop_assert_eq!(state.finish(), whole);
    }

    #[test]
    fn icrc_of_arbitrary_headers_never_panics(
        ip in proptest::collection::vec(any::<u8>(), 0..70),
        udp in proptest::collection::vec(any::<u8>(), 0..10),
        transport in proptest::collection::vec(any::<u8>(), 0..20),
        v6 in any::<bool>(),
    ) {
        let hdr = if v6 { IpHeader::V6(&ip) } else { IpHeader::V4(&ip) };
        let _ = icrc(&SoftCrc32, hdr, &udp, &transport);
    }
}

/// The fuzzer's seed packets (`tools/fuzz/seeds.hex`) are valid packets, and their ICRCs (made
/// with Python's zlib) are right for the IPv4/UDP headers the fuzz target synthesizes.
#[test]
fn fuzz_seeds_parse_and_check() {
    let text = include_str!("../../fuzz/seeds.hex");
    let mut count = 0;
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let hex: String = line.split_whitespace().collect();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let p = Packet::new_checked(&bytes[..]).unwrap_or_else(|e| panic!("seed {line}: {e:?}"));
        let mut ip = [
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 0x40, 0x11, 0xff, 0xff, 192, 168, 0, 1, 192, 168, 0, 2,
        ];
        let mut udp = [0xc0, 0x00, 0x12, 0xb7, 0, 0, 0, 0];
        ip[2..4].copy_from_slice(&((20 + 8 + bytes.len()) as u16).to_be_bytes());
        udp[4..6].copy_from_slice(&((8 + bytes.len()) as u16).to_be_bytes());
        assert_eq!(
            p.icrc_matches(&SoftCrc32, IpHeader::V4(&ip), &udp),
            Ok(true),
            "seed {line}"
        );
        count += 1;
    }
    assert!(count >= 8, "only {count} seeds");
}
