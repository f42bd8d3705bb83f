// SPDX-License-Identifier: GPL-2.0

//! Fuzzes the receive path's view of a packet: [`Packet::new_checked`] and every getter, a
//! rebuild of the same packet through the setters, the opcode sequence check and the ICRC.
//!
//! The input is a UDP payload (BTH first). Panics, including the overflow checks this build keeps
//! on, and the assertions below are the failures libFuzzer reports.

#![no_main]

use libfuzzer_sys::fuzz_target;
use roxe_proto::proto::{
    icrc::{self, Icrc, IpHeader, SoftCrc32, ICRC_LEN},
    opcode::{check_op_sequence, ExtHeader, Opcode, Position, SeqCheck},
    packet::Packet,
};

fuzz_target!(|data: &[u8]| {
    parse_and_rebuild(data);
    sequence(data);
    checksum(data);
});

/// Parses `data`; if it is accepted, reads every field and builds the same packet again through
/// the setters, which must read back identically.
fn parse_and_rebuild(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let info = p.info();
    assert_eq!(p.opcode().info(), Some(info));
    assert_eq!(
        p.header_len() + p.payload_len() + usize::from(p.pad_count()) + ICRC_LEN,
        data.len()
    );
    assert_eq!(p.payload().len(), p.payload_len());
    assert!(info.has_payload() || p.payload_len() == 0);
    for h in ExtHeader::ALL {
        if let Some(off) = info.offset(h) {
            assert!(off + h.size() <= info.header_len());
        }
    }

    let mut buf = vec![0xa5u8; data.len()];
    let mut b =
        Packet::build(&mut buf[..], p.opcode(), p.pad_count()).expect("a parsed layout builds");
    b.set_solicited_event(p.solicited_event());
    b.set_mig_req(p.mig_req());
    b.set_pkey(p.pkey());
    b.set_fecn(p.fecn());
    b.set_becn(p.becn());
    b.set_dest_qpn(p.dest_qpn());
    b.set_ack_req(p.ack_req());
    b.set_psn(p.psn());
    // Each setter works exactly when the getter found the header.
    assert_eq!(
        p.reth().map(|h| b.set_reth(&h).is_ok()),
        info.has(ExtHeader::Reth).then_some(true)
    );
    assert_eq!(
        p.aeth().map(|h| b.set_aeth(&h).is_ok()),
        info.has(ExtHeader::Aeth).then_some(true)
    );
    assert_eq!(
        p.atomic_eth().map(|h| b.set_atomic_eth(&h).is_ok()),
        info.has(ExtHeader::AtomicEth).then_some(true)
    );
    assert_eq!(
        p.atomic_ack_eth().map(|h| b.set_atomic_ack_eth(&h).is_ok()),
        info.has(ExtHeader::AtomicAckEth).then_some(true)
    );
    assert_eq!(
        p.deth().map(|h| b.set_deth(&h).is_ok()),
        info.has(ExtHeader::Deth).then_some(true)
    );
    assert_eq!(
        p.imm_data().map(|h| b.set_imm_data(h).is_ok()),
        info.has(ExtHeader::ImmDt).then_some(true)
    );
    assert_eq!(
        p.ieth().map(|h| b.set_ieth(&h).is_ok()),
        info.has(ExtHeader::Ieth).then_some(true)
    );
    assert_eq!(
        p.feth().map(|h| b.set_feth(&h).is_ok()),
        info.has(ExtHeader::Feth).then_some(true)
    );
    b.payload_mut().copy_from_slice(p.payload());
    b.set_icrc(p.icrc());

    let q = Packet::new_checked(&buf[..]).expect("a built packet parses");
    assert_eq!(q.opcode(), p.opcode());
    assert_eq!(
        (
            q.solicited_event(),
            q.mig_req(),
            q.pad_count(),
            q.pkey(),
            q.fecn(),
            q.becn()
        ),
        (
            p.solicited_event(),
            p.mig_req(),
            p.pad_count(),
            p.pkey(),
            p.fecn(),
            p.becn()
        )
    );
    assert_eq!(
        (q.dest_qpn(), q.ack_req(), q.psn()),
        (p.dest_qpn(), p.ack_req(), p.psn())
    );
    assert_eq!(
        (q.reth(), q.aeth(), q.atomic_eth(), q.atomic_ack_eth()),
        (p.reth(), p.aeth(), p.atomic_eth(), p.atomic_ack_eth())
    );
    assert_eq!(
        (q.deth(), q.imm_data(), q.ieth(), q.feth()),
        (p.deth(), p.imm_data(), p.ieth(), p.feth())
    );
    assert_eq!((q.payload(), q.icrc()), (p.payload(), p.icrc()));
    // Outside reserved bits and pad bytes, which the builder zeroes, the bytes are the same.
    for (i, (&a, &z)) in data.iter().zip(&buf).enumerate() {
        let reserved = match i {
            4 => 0x3f,
            8 => 0x7f,
            _ => 0,
        };
        let in_pad =
            i >= data.len() - ICRC_LEN - usize::from(p.pad_count()) && i < data.len() - ICRC_LEN;
        let in_deth_reserved = info.offset(ExtHeader::Deth).is_some_and(|o| i == o + 4);
        let in_feth_reserved = info
            .offset(ExtHeader::Feth)
            .is_some_and(|o| i >= o && i < o + 3);
        if !in_pad && !in_deth_reserved && !in_feth_reserved {
            let feth_low = info.offset(ExtHeader::Feth).is_some_and(|o| i == o + 3);
            let mask = if feth_low { 0x3f } else { !reserved };
            assert_eq!(a & mask, z & mask, "byte {i}");
        }
    }
}

/// Reads `data` as a stream of opcodes and checks each verdict of the sequence check against
/// its definition.
fn sequence(data: &[u8]) {
    let mut prev = None;
    for &raw in data.iter().take(64) {
        let next = Opcode::new(raw);
        let in_progress = prev
            .and_then(Opcode::info)
            .is_some_and(|p| matches!(p.position(), Position::First | Position::Middle));
        let continues = next
            .info()
            .is_some_and(|n| matches!(n.position(), Position::Middle | Position::Last));
        match check_op_sequence(prev, next) {
            SeqCheck::Ok => assert_eq!(in_progress, continues),
            SeqCheck::MissingFirst => assert!(!in_progress && continues),
            SeqCheck::MissingLast => assert!(in_progress),
        }
        // A responder remembers the last opcode it accepted in sequence.
        if check_op_sequence(prev, next).is_ok() {
            prev = Some(next);
        }
    }
}

/// The IPv4 and UDP headers the seeds' ICRCs were computed for, with lengths for `len` bytes of
/// UDP payload.
fn ipv4_udp(len: usize) -> ([u8; 20], [u8; 8]) {
    let mut ip = [
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 0x40, 0x11, 0xff, 0xff, 192, 168, 0, 1, 192, 168, 0, 2,
    ];
    let mut udp = [0xc0, 0x00, 0x12, 0xb7, 0, 0, 0, 0];
    ip[2..4].copy_from_slice(&((20 + 8 + len) as u16).to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
    (ip, udp)
}

/// Computes ICRCs: over the synthesized headers (streaming and one-shot must agree, the variant
/// fields must not matter), and over headers cut from the input (must not panic).
fn checksum(data: &[u8]) {
    let e = SoftCrc32;
    if data.len() >= 12 && data.len() < usize::from(u16::MAX) - 64 {
        let (ip, udp) = ipv4_udp(data.len());
        let whole = icrc::icrc_ipv4(&e, &ip, &udp, data).expect("well-formed headers");
        let split = 12 + usize::from(data[0]) % (data.len() - 11);
        let mut state =
            Icrc::begin(&e, IpHeader::V4(&ip), &udp, &data[..split]).expect("well-formed headers");
        state.update(&data[split..]);
        assert_eq!(state.finish(), whole);
        let (mut ip2, mut udp2) = (ip, udp);
        ip2[8] = data[1]; // TTL
        ip2[1] = data[2]; // TOS
        udp2[6] = data[3]; // checksum
        let mut t2 = data.to_vec();
        t2[4] ^= data[5]; // FECN, BECN, reserved
        assert_eq!(icrc::icrc_ipv4(&e, &ip2, &udp2, &t2), Ok(whole));
        if let Ok(p) = Packet::new_checked(data) {
            let (ip, udp) = ipv4_udp(data.len());
            let _ = p.icrc_matches(&e, IpHeader::V4(&ip), &udp);
        }
    }
    // Arbitrary header shapes: errors are fine, panics are not.
    if let Some((&sel, rest)) = data.split_first() {
        let ip_len = usize::from(sel & 0x3f).min(rest.len());
        let (ip, rest) = rest.split_at(ip_len);
        let udp_len = usize::from(sel >> 6) * 3 % 11;
        let (udp, rest) = rest.split_at(udp_len.min(rest.len()));
        let hdr = if sel & 1 == 0 {
            IpHeader::V4(ip)
        } else {
            IpHeader::V6(ip)
        };
        let _ = icrc::icrc(&e, hdr, udp, rest);
    }
}
