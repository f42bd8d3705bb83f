// SPDX-License-Identifier: GPL-2.0

//! Host tests of the requester logic.

#![cfg(test)]

use super::*;
use crate::proto::mtu::IbMtu;
use crate::proto::opcode::{check_op_sequence, SeqCheck};
use crate::proto::wqe::Payload;
use std::vec::Vec;

fn cfg(qp_type: QpType, mtu: IbMtu) -> ReqConfig {
    ReqConfig {
        qp_type,
        mtu: Pmtu::of(mtu),
        qp_num: 0x11,
        dest_qp_num: 0x22,
        qkey: 0x1234,
        pkey: 0xffff,
        max_rd_atomic: 2,
    }
}

#[test]
fn reg_mr_wr_carries_the_iova_and_length_at_posting() {
    // The kernel post path's layout (`kpost::post_send`): index, key, access, then the
    // MR's IOVA and length, which a consumer may have set anew after mapping.
    let mut wr = [0u8; 32];
    wr[0..8].copy_from_slice(&7u64.to_ne_bytes());
    wr[8..12].copy_from_slice(&0x0700_0042u32.to_ne_bytes());
    wr[12..16].copy_from_slice(&6u32.to_ne_bytes());
    wr[16..24].copy_from_slice(&0x5eed_0001_8401_a000u64.to_ne_bytes());
    wr[24..32].copy_from_slice(&8192u64.to_ne_bytes());
    assert_eq!(
        RegMrWr::decode(&wr),
        RegMrWr {
            mr_index: 7,
            key: 0x0700_0042,
            access: 6,
            iova: 0x5eed_0001_8401_a000,
            length: 8192,
        }
    );
}

fn wqe(opcode: SendOpcode, length: u32) -> SendWqe {
    SendWqe {
        wr_id: 1,
        opcode,
        flags: 0,
        ex: 0,
        wr: [0; 32],
        length,
        payload: Payload::Sges { num: 1 },
    }
}

fn union(fields: &[(usize, &[u8])]) -> [u8; 32] {
    let mut wr = [0u8; 32];
    for (off, bytes) in fields {
        wr[*off..*off + bytes.len()].copy_from_slice(bytes);
    }
    wr
}

/// Every packet of `w` from `first`, in order.
fn packets(w: &SendWqe, c: &ReqConfig, first: Psn) -> Vec<PacketDesc> {
    let mut p = WqeProgress::start(first);
    let mut out = Vec::new();
    loop {
        match next_packet(w, &p, c) {
            PacketPlan::Packet(d) => {
                p = d.after;
                out.push(d);
            }
            PacketPlan::Done => return out,
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn send_10000_bytes_at_4096() {
    let c = cfg(QpType::Rc, IbMtu::Mtu4096);
    let w = wqe(SendOpcode::Send, 10_000);
    let p = packets(&w, &c, Psn::new(100));
    let ops: Vec<_> = p.iter().map(|d| d.opcode).collect();
    assert_eq!(
        ops,
        [
            Opcode::RC_SEND_FIRST,
            Opcode::RC_SEND_MIDDLE,
            Opcode::RC_SEND_LAST
        ]
    );
    assert_eq!(
        p.iter().map(|d| d.payload_len).collect::<Vec<_>>(),
        [4096, 4096, 1808]
    );
    assert_eq!(
        p.iter().map(|d| d.payload_offset).collect::<Vec<_>>(),
        [0, 4096, 8192]
    );
    assert_eq!(p.iter().map(|d| d.pad).collect::<Vec<_>>(), [0, 0, 0]);
    assert_eq!(
        p.iter().map(|d| d.psn.get()).collect::<Vec<_>>(),
        [100, 101, 102]
    );
    assert_eq!(
        p.iter().map(|d| d.ack_req).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert_eq!(
        p.iter().map(|d| d.last_of_wqe).collect::<Vec<_>>(),
        [false, false, true]
    );
    assert!(p
        .iter()
        .all(|d| d.dest_qpn == 0x22 && d.headers == ExtValues::default()));
    assert_eq!(psns_of(&w, &c), 3);
    assert_eq!(p[2].after.next_psn(), Psn::new(103));
    assert_eq!(
        WqeProgress::start(Psn::new(100)).last_psn(&w, &c),
        Psn::new(102)
    );
    // The packet length: BTH + payload + pad + ICRC.
    assert_eq!(p[2].packet_len(), 12 + 1808 + 4);
}

#[test]
fn five_byte_send_only_pads_to_eight() {
    let c = cfg(QpType::Uc, IbMtu::Mtu1024);
    let mut w = wqe(SendOpcode::SendWithImm, 5);
    w.ex = u32::from_ne_bytes([0xca, 0xfe, 0xba, 0xbe]);
    w.flags = send_flags::SOLICITED;
    let p = packets(&w, &c, Psn::new(7));
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].opcode, Opcode::UC_SEND_ONLY_WITH_IMMEDIATE);
    assert_eq!(
        (p[0].payload_len, p[0].pad, p[0].ack_req, p[0].solicited),
        (5, 3, false, true)
    );
    assert_eq!(p[0].headers.imm, Some([0xca, 0xfe, 0xba, 0xbe]));
    assert_eq!(p[0].packet_len(), 12 + 4 + 5 + 3 + 4);
}

#[test]
fn empty_send_is_one_packet() {
    let c = cfg(QpType::Rc, IbMtu::Mtu256);
    let p = packets(&wqe(SendOpcode::Send, 0), &c, Psn::new(0));
    assert_eq!(p.len(), 1);
    assert_eq!(
        (p[0].opcode, p[0].payload_len, p[0].pad),
        (Opcode::RC_SEND_ONLY, 0, 0)
    );
}

#[test]
fn write_with_imm_puts_reth_first_and_imm_last() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let mut w = wqe(SendOpcode::RdmaWriteWithImm, 2048);
    w.wr = union(&[
        (0, &0x1000_0000u64.to_ne_bytes()),
        (8, &0x77u32.to_ne_bytes()),
    ]);
    w.ex = 0x0102_0304;
    w.flags = send_flags::SOLICITED;
    let p = packets(&w, &c, Psn::new(1));
    assert_eq!(p.len(), 2);
    assert_eq!(p[0].opcode, Opcode::RC_RDMA_WRITE_FIRST);
    assert_eq!(
        p[0].headers.reth,
        Some(Reth {
            va: 0x1000_0000,
            rkey: 0x77,
            dma_len: 2048
        })
    );
    assert_eq!(p[0].headers.imm, None);
    assert!(!p[0].solicited);
    assert_eq!(p[1].opcode, Opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE);
    assert_eq!(p[1].headers.reth, None);
    assert_eq!(p[1].headers.imm, Some(0x0102_0304u32.to_ne_bytes()));
    assert!(p[1].solicited);
}

#[test]
fn read_of_9000_bytes_at_1024_takes_9_psns() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let mut w = wqe(SendOpcode::RdmaRead, 9000);
    w.wr = union(&[(0, &0xaaaa_0000u64.to_ne_bytes()), (8, &5u32.to_ne_bytes())]);
    assert_eq!(psns_of(&w, &c), 9);
    let p = packets(&w, &c, Psn::new(0xff_fffe));
    assert_eq!(p.len(), 1);
    let r = p[0];
    assert_eq!(
        (r.opcode, r.psn, r.psn_count, r.payload_len),
        (Opcode::RC_RDMA_READ_REQUEST, Psn::new(0xff_fffe), 9, 0)
    );
    assert!(r.ack_req && r.last_of_wqe);
    assert_eq!(
        r.headers.reth,
        Some(Reth {
            va: 0xaaaa_0000,
            rkey: 5,
            dma_len: 9000
        })
    );
    // The PSNs wrap: 0xfffffe + 9 = 7.
    assert_eq!(r.after.next_psn(), Psn::new(7));
    assert_eq!(
        WqeProgress::start(Psn::new(0xff_fffe)).last_psn(&w, &c),
        Psn::new(6)
    );
    // A read of 0 or of exactly one MTU still takes one PSN.
    assert_eq!(psns_of(&wqe(SendOpcode::RdmaRead, 0), &c), 1);
    assert_eq!(psns_of(&wqe(SendOpcode::RdmaRead, 1024), &c), 1);
    assert_eq!(psns_of(&wqe(SendOpcode::RdmaRead, 1025), &c), 2);
}

#[test]
fn resumed_read_asks_for_the_rest() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let mut w = wqe(SendOpcode::RdmaRead, 9000);
    w.wr = union(&[(0, &0xaaaa_0000u64.to_ne_bytes()), (8, &5u32.to_ne_bytes())]);
    let first = Psn::new(0xff_fffe);
    // Three response packets arrived (PSNs 0xfffffe, 0xffffff, 0); retry from PSN 1.
    let p = WqeProgress::resume_at(&w, first, Psn::new(1), &c).unwrap();
    assert_eq!((p.psns_used, p.offset(&w, &c)), (3, 3072));
    let PacketPlan::Packet(r) = next_packet(&w, &p, &c) else {
        panic!()
    };
    assert_eq!(
        (r.psn, r.psn_count, r.payload_offset),
        (Psn::new(1), 6, 3072)
    );
    assert_eq!(
        r.headers.reth,
        Some(Reth {
            va: 0xaaaa_0000 + 3072,
            rkey: 5,
            dma_len: 9000 - 3072
        })
    );
    assert_eq!(r.after.next_psn(), Psn::new(7));
    assert_eq!(WqeProgress::resume_at(&w, first, Psn::new(7), &c), None);
    assert_eq!(
        WqeProgress::resume_at(&w, first, Psn::new(0xff_fffd), &c),
        None
    );
}

#[test]
fn resumed_send_continues_with_middle_and_last() {
    let c = cfg(QpType::Rc, IbMtu::Mtu256);
    let w = wqe(SendOpcode::SendWithInv, 1000);
    let p = WqeProgress::resume_at(&w, Psn::new(10), Psn::new(12), &c).unwrap();
    let PacketPlan::Packet(d) = next_packet(&w, &p, &c) else {
        panic!()
    };
    assert_eq!(
        (d.opcode, d.payload_offset, d.payload_len),
        (Opcode::RC_SEND_MIDDLE, 512, 256)
    );
    let PacketPlan::Packet(d) = next_packet(&w, &d.after, &c) else {
        panic!()
    };
    assert_eq!(
        (d.opcode, d.payload_offset, d.payload_len, d.pad),
        (Opcode::RC_SEND_LAST_WITH_INVALIDATE, 768, 232, 0)
    );
    assert_eq!(next_packet(&w, &d.after, &c), PacketPlan::Done);
}

#[test]
fn atomics() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let wr = union(&[
        (0, &0x8000u64.to_ne_bytes()),
        (8, &3u64.to_ne_bytes()),
        (16, &9u64.to_ne_bytes()),
        (24, &0x42u32.to_ne_bytes()),
    ]);
    let mut cas = wqe(SendOpcode::CmpAndSwp, 8);
    cas.wr = wr;
    let p = packets(&cas, &c, Psn::new(3));
    assert_eq!(
        (p.len(), p[0].opcode, p[0].payload_len, p[0].ack_req),
        (1, Opcode::RC_COMPARE_SWAP, 0, true)
    );
    assert_eq!(
        p[0].headers.atomic_eth,
        Some(AtomicEth {
            va: 0x8000,
            rkey: 0x42,
            swap_add: 9,
            compare: 3
        })
    );
    let mut faa = wqe(SendOpcode::FetchAndAdd, 8);
    faa.wr = wr;
    let p = packets(&faa, &c, Psn::new(3));
    assert_eq!(
        p[0].headers.atomic_eth,
        Some(AtomicEth {
            va: 0x8000,
            rkey: 0x42,
            swap_add: 3,
            compare: 0
        })
    );
}

#[test]
fn flush_and_atomic_write() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let mut f = wqe(SendOpcode::Flush, 4096);
    f.wr = union(&[
        (0, &0x2000u64.to_ne_bytes()),
        (12, &0x9u32.to_ne_bytes()),
        (16, &[2, 1]),
    ]);
    let p = packets(&f, &c, Psn::new(0));
    assert_eq!(
        (p.len(), p[0].opcode, p[0].payload_len),
        (1, Opcode::RC_FLUSH, 0)
    );
    assert_eq!(
        p[0].headers.feth,
        Some(Feth {
            selectivity_level: 1,
            placement_type: 2
        })
    );
    assert_eq!(
        p[0].headers.reth,
        Some(Reth {
            va: 0x2000,
            rkey: 9,
            dma_len: 4096
        })
    );

    let mut a = wqe(SendOpcode::AtomicWrite, 8);
    a.payload = Payload::Inline { len: 8 };
    a.wr = union(&[(0, &0x3000u64.to_ne_bytes()), (8, &0x8u32.to_ne_bytes())]);
    let p = packets(&a, &c, Psn::new(0));
    assert_eq!(
        (p.len(), p[0].opcode, p[0].payload_len, p[0].pad),
        (1, Opcode::RC_ATOMIC_WRITE, 8, 0)
    );
    assert_eq!(
        p[0].headers.reth,
        Some(Reth {
            va: 0x3000,
            rkey: 8,
            dma_len: 8
        })
    );
}

#[test]
fn datagrams() {
    let mut c = cfg(QpType::Ud, IbMtu::Mtu1024);
    let mut w = wqe(SendOpcode::Send, 1024);
    w.wr = union(&[
        (0, &0x0100_0005u32.to_ne_bytes()),
        (4, &0x55u32.to_ne_bytes()),
        (12, &3u32.to_ne_bytes()),
    ]);
    assert_eq!(
        UdWr::decode(&w.wr),
        UdWr {
            remote_qpn: 0x0100_0005,
            remote_qkey: 0x55,
            pkey_index: 0,
            ah_num: 3
        }
    );
    let p = packets(&w, &c, Psn::new(0));
    assert_eq!(
        (p.len(), p[0].opcode, p[0].ack_req),
        (1, Opcode::UD_SEND_ONLY, false)
    );
    // The destination QP is cut to 24 bits.
    assert_eq!(p[0].dest_qpn, 5);
    assert_eq!(
        p[0].headers.deth,
        Some(Deth {
            qkey: 0x55,
            src_qpn: 0x11
        })
    );
    // A Q_Key with bit 31 set means the QP's own.
    w.wr = union(&[(4, &0x8000_0055u32.to_ne_bytes())]);
    let p = packets(&w, &c, Psn::new(0));
    assert_eq!(
        p[0].headers.deth,
        Some(Deth {
            qkey: 0x1234,
            src_qpn: 0x11
        })
    );
    // GSI always sends the well-known Q_Key.
    c.qp_type = QpType::Gsi;
    let p = packets(&w, &c, Psn::new(0));
    assert_eq!(p[0].headers.deth.map(|d| d.qkey), Some(GSI_QKEY));
    // Over the MTU: nothing is sent, one PSN is used.
    let big = wqe(SendOpcode::SendWithImm, 1025);
    let plan = next_packet(&big, &WqeProgress::start(Psn::new(9)), &c);
    assert_eq!(
        plan,
        PacketPlan::DiscardDatagram {
            after: WqeProgress {
                first_psn: Psn::new(9),
                psns_used: 1
            }
        }
    );
    // UD cannot read.
    assert_eq!(
        next_packet(
            &wqe(SendOpcode::RdmaRead, 8),
            &WqeProgress::start(Psn::new(0)),
            &c
        ),
        PacketPlan::Error(WcStatus::LocQpOpErr)
    );
}

#[test]
fn uc_has_no_send_with_invalidate() {
    let c = cfg(QpType::Uc, IbMtu::Mtu1024);
    let plan = next_packet(
        &wqe(SendOpcode::SendWithInv, 8),
        &WqeProgress::start(Psn::new(0)),
        &c,
    );
    assert_eq!(plan, PacketPlan::Error(WcStatus::LocQpOpErr));
    let p = packets(&wqe(SendOpcode::RdmaWrite, 3000), &c, Psn::new(0));
    let ops: Vec<_> = p.iter().map(|d| d.opcode).collect();
    assert_eq!(
        ops,
        [
            Opcode::UC_RDMA_WRITE_FIRST,
            Opcode::UC_RDMA_WRITE_MIDDLE,
            Opcode::UC_RDMA_WRITE_LAST
        ]
    );
    assert!(p.iter().all(|d| !d.ack_req));
}

#[test]
fn finished_wqes_complete_in_posting_order() {
    // Nothing before it: out at once, whatever its status.
    assert_eq!(finished(false, WcStatus::Success), Finished::CompleteNow);
    assert_eq!(finished(false, WcStatus::MwBindErr), Finished::CompleteNow);
    // Behind an unacknowledged WQE: held until it is the oldest; a failure also stops the
    // requester, so that nothing posted after it starts before the QP goes to error.
    assert_eq!(finished(true, WcStatus::Success), Finished::HoldAndGoOn);
    assert_eq!(finished(true, WcStatus::MwBindErr), Finished::HoldAndStop);
    assert_eq!(finished(true, WcStatus::LocQpOpErr), Finished::HoldAndStop);
    assert_eq!(finished(true, WcStatus::LocProtErr), Finished::HoldAndStop);
}

#[test]
fn local_ops() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let mut inv = wqe(SendOpcode::LocalInv, 0);
    inv.ex = 0xabcd;
    assert_eq!(
        next_packet(&inv, &WqeProgress::start(Psn::new(0)), &c),
        PacketPlan::Local(LocalOp::Invalidate { rkey: 0xabcd })
    );
    assert_eq!(psns_of(&inv, &c), 0);
    let mut bind = wqe(SendOpcode::BindMw, 0);
    bind.wr = union(&[
        (0, &0x1000u64.to_ne_bytes()),
        (8, &0x2000u64.to_ne_bytes()),
        (16, &1u32.to_ne_bytes()),
        (20, &2u32.to_ne_bytes()),
        (24, &3u32.to_ne_bytes()),
        (28, &4u32.to_ne_bytes()),
    ]);
    let PacketPlan::Local(op) = next_packet(&bind, &WqeProgress::start(Psn::new(0)), &c) else {
        panic!()
    };
    assert_eq!(
        op,
        LocalOp::BindMw(MwWr {
            addr: 0x1000,
            length: 0x2000,
            mr_lkey: 1,
            mw_rkey: 2,
            rkey: 3,
            access: 4
        })
    );
    assert_eq!(op.failure_status(), WcStatus::MwBindErr);
}

#[test]
fn ack_req_every_64_packets() {
    let c = cfg(QpType::Rc, IbMtu::Mtu256);
    let w = wqe(SendOpcode::RdmaWrite, 256 * 200);
    let p = packets(&w, &c, Psn::new(0));
    assert_eq!(p.len(), 200);
    let asked: Vec<usize> = p
        .iter()
        .enumerate()
        .filter(|(_, d)| d.ack_req)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(asked, [63, 127, 191, 199]);
    let mut prev = None;
    for d in &p {
        assert_eq!(check_op_sequence(prev, d.opcode), SeqCheck::Ok);
        prev = Some(d.opcode);
    }
}

#[test]
fn headers_land_in_the_packet() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let mut w = wqe(SendOpcode::RdmaWriteWithImm, 5);
    w.wr = union(&[
        (0, &0x0102_0304_0506_0708u64.to_ne_bytes()),
        (8, &0x1122_3344u32.to_ne_bytes()),
    ]);
    w.ex = u32::from_ne_bytes([9, 8, 7, 6]);
    let PacketPlan::Packet(d) = next_packet(&w, &WqeProgress::start(Psn::new(0xabcdef)), &c) else {
        panic!()
    };
    let mut buf = std::vec![0u8; d.packet_len()];
    let mut p = Packet::build(&mut buf[..], d.opcode, d.pad).unwrap();
    d.write_headers(&mut p).unwrap();
    p.payload_mut().copy_from_slice(b"hello");
    let bth_reth_imm = [
        0x0b, 0x70, 0xff, 0xff, 0x00, 0x00, 0x00, 0x22, 0x80, 0xab, 0xcd,
        0xef, // BTH: MigReq, pad 3
        1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 5, // RETH
        9, 8, 7, 6, // ImmDt
    ];
    assert_eq!(&buf[..32], &bth_reth_imm);
    assert_eq!(&buf[32..40], b"hello\0\0\0");
    // A packet built for another opcode is refused.
    let mut other = std::vec![0u8; 12 + 4 + 8];
    let mut q = Packet::build(&mut other[..], Opcode::RC_SEND_ONLY, 0).unwrap();
    assert_eq!(d.write_headers(&mut q), Err(NoSuchHeader));
}

/// Nothing in flight, nothing pending.
fn idle() -> InFlight {
    InFlight {
        oldest_unacked_psn: Psn::new(0),
        next_psn: Psn::new(0),
        rd_atomic_in_flight: 0,
        earlier_wqes_pending: false,
    }
}

/// `n` PSNs outstanding across the PSN wrap, no READ or atomic credit held.
fn outstanding(n: u32) -> InFlight {
    InFlight {
        oldest_unacked_psn: Psn::new(0xff_fff0),
        next_psn: Psn::new(0xff_fff0).add(n),
        rd_atomic_in_flight: 0,
        earlier_wqes_pending: n > 0,
    }
}

#[test]
fn start_rules() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let idle = idle();
    let read = wqe(SendOpcode::RdmaRead, 8);
    assert_eq!(
        may_start(&read, false, &idle, &c),
        StartVerdict::Go { takes_credit: true }
    );
    assert_eq!(
        may_start(&read, true, &idle, &c),
        StartVerdict::Go {
            takes_credit: false
        }
    );
    let busy = InFlight {
        rd_atomic_in_flight: 2,
        earlier_wqes_pending: true,
        ..idle
    };
    assert_eq!(
        may_start(&read, false, &busy, &c),
        StartVerdict::WaitRdAtomicCredit
    );
    let mut fenced = wqe(SendOpcode::Send, 8);
    fenced.flags = send_flags::FENCE;
    assert_eq!(
        may_start(&fenced, false, &busy, &c),
        StartVerdict::WaitFence
    );
    assert_eq!(
        may_start(&fenced, true, &busy, &c),
        StartVerdict::Go {
            takes_credit: false
        }
    );
    assert_eq!(
        may_start(&fenced, false, &idle, &c),
        StartVerdict::Go {
            takes_credit: false
        }
    );
    assert_eq!(
        may_start(&wqe(SendOpcode::LocalInv, 0), false, &busy, &c),
        StartVerdict::WaitEarlierWqes
    );
    assert_eq!(
        may_start(&wqe(SendOpcode::BindMw, 0), false, &busy, &c),
        StartVerdict::Go {
            takes_credit: false
        }
    );
    let no_depth = ReqConfig {
        max_rd_atomic: 0,
        ..c
    };
    assert_eq!(
        may_start(&wqe(SendOpcode::FetchAndAdd, 8), false, &idle, &no_depth),
        StartVerdict::Refuse(WcStatus::LocQpOpErr)
    );
}

#[test]
fn psn_window_rules() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let read = wqe(SendOpcode::RdmaRead, 8);
    // The window: 127 PSNs ahead is open, 128 is not, across the wrap too.
    let at = |next: u32| InFlight {
        oldest_unacked_psn: Psn::new(0xff_ffc0),
        next_psn: Psn::new(next),
        ..idle()
    };
    let send = wqe(SendOpcode::Send, 8);
    assert_eq!(
        may_start(&send, false, &at(0x3f), &c),
        StartVerdict::Go {
            takes_credit: false
        }
    );
    assert_eq!(
        may_start(&send, false, &at(0x40), &c),
        StartVerdict::WaitPsnWindow
    );
    assert_eq!(
        may_start(&read, false, &at(0x40), &c),
        StartVerdict::WaitPsnWindow
    );
    assert_eq!(
        may_continue(&send, &at(0x40), &c),
        StartVerdict::WaitPsnWindow
    );
    assert_eq!(
        may_continue(&send, &at(0x3f), &c),
        StartVerdict::Go {
            takes_credit: false
        }
    );
    assert_eq!(
        may_continue(&send, &at(0x40), &cfg(QpType::Uc, IbMtu::Mtu1024)),
        StartVerdict::Go {
            takes_credit: false
        }
    );
    // A READ's next request waits for every response before it.
    assert_eq!(
        may_continue(&read, &at(0x3f), &c),
        StartVerdict::WaitPsnWindow
    );
    assert_eq!(
        may_continue(&read, &at(0xff_ffc0), &c),
        StartVerdict::Go {
            takes_credit: false
        }
    );
    assert_eq!(
        may_continue(&read, &at(0xff_ffbf), &c),
        StartVerdict::Go {
            takes_credit: false
        }
    );
}

#[test]
fn reads_start_within_the_read_response_window() {
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    // 64 KiB: 64 response PSNs, one request; the next may start once half of the last
    // one's responses have arrived.
    let read64k = wqe(SendOpcode::RdmaRead, 64 * 1024);
    assert_eq!(
        may_start(&read64k, false, &outstanding(0), &c),
        StartVerdict::Go { takes_credit: true }
    );
    assert_eq!(
        may_start(&read64k, false, &outstanding(32), &c),
        StartVerdict::Go { takes_credit: true }
    );
    assert_eq!(
        may_start(&read64k, false, &outstanding(33), &c),
        StartVerdict::WaitPsnWindow
    );
    assert_eq!(
        may_start(&read64k, false, &outstanding(64), &c),
        StartVerdict::WaitPsnWindow
    );
    // Small READs fill the window up to SINGLE_REQUEST_READ_WINDOW PSNs.
    let small = wqe(SendOpcode::RdmaRead, 8);
    let full = SINGLE_REQUEST_READ_WINDOW;
    assert_eq!(
        may_start(&small, false, &outstanding(full - 1), &c),
        StartVerdict::Go { takes_credit: true }
    );
    assert_eq!(
        may_start(&small, false, &outstanding(full), &c),
        StartVerdict::WaitPsnWindow
    );
    // A READ of several requests starts only if its first fits within READ_RESPONSE_WINDOW,
    // or when nothing is outstanding.
    let long = wqe(SendOpcode::RdmaRead, 300 * 1024);
    assert_eq!(
        may_start(&long, false, &outstanding(0), &c),
        StartVerdict::Go { takes_credit: true }
    );
    assert_eq!(
        may_start(&long, false, &outstanding(1), &c),
        StartVerdict::WaitPsnWindow
    );
    let two_requests = wqe(SendOpcode::RdmaRead, 65 * 1024);
    assert_eq!(
        may_start(&two_requests, false, &outstanding(1), &c),
        StartVerdict::WaitPsnWindow
    );
    // Other requests and other transports are not held by it.
    assert_eq!(
        may_start(&wqe(SendOpcode::RdmaWrite, 8), false, &outstanding(100), &c),
        StartVerdict::Go {
            takes_credit: false
        }
    );
}

#[test]
fn long_read_is_asked_for_in_window_sized_requests() {
    // 300 KiB at MTU 1024: 300 PSNs, asked for as 64 + 64 + 64 + 64 + 44.
    let c = cfg(QpType::Rc, IbMtu::Mtu1024);
    let mut w = wqe(SendOpcode::RdmaRead, 300 * 1024);
    w.wr = union(&[(0, &0x10_0000u64.to_ne_bytes()), (8, &7u32.to_ne_bytes())]);
    let mut p = WqeProgress::start(Psn::new(1000));
    let mut seen = Vec::new();
    while let PacketPlan::Packet(d) = next_packet(&w, &p, &c) {
        let reth = d.headers.reth.unwrap();
        seen.push((
            d.psn.get(),
            d.psn_count,
            reth.va,
            reth.dma_len,
            d.payload_offset,
            d.last_of_wqe,
        ));
        p = d.after;
    }
    assert_eq!(
        seen,
        [
            (1000, 64, 0x10_0000, 64 * 1024, 0, false),
            (1064, 64, 0x10_0000 + 64 * 1024, 64 * 1024, 64 * 1024, false),
            (
                1128,
                64,
                0x10_0000 + 128 * 1024,
                64 * 1024,
                128 * 1024,
                false
            ),
            (
                1192,
                64,
                0x10_0000 + 192 * 1024,
                64 * 1024,
                192 * 1024,
                false
            ),
            (
                1256,
                44,
                0x10_0000 + 256 * 1024,
                44 * 1024,
                256 * 1024,
                true
            ),
        ]
    );
    // A retry from PSN 1130 asks for the rest of the third request only (its part of the
    // responder's cached request), then the fourth.
    let r = WqeProgress::resume_at(&w, Psn::new(1000), Psn::new(1130), &c).unwrap();
    let PacketPlan::Packet(d) = next_packet(&w, &r, &c) else {
        panic!()
    };
    assert_eq!(
        (d.psn.get(), d.psn_count, d.headers.reth.unwrap().dma_len),
        (1130, 62, 62 * 1024)
    );
    // A short last part is not rounded up to the MTU.
    let mut odd = w;
    odd.length = 128 * 1024 + 5;
    let PacketPlan::Packet(d) = next_packet(
        &odd,
        &WqeProgress {
            first_psn: Psn::new(0),
            psns_used: 128,
        },
        &c,
    ) else {
        panic!()
    };
    assert_eq!(
        (d.psn_count, d.headers.reth.unwrap().dma_len, d.last_of_wqe),
        (1, 5, true)
    );
}

#[test]
fn windows_bound_bytes_on_jumbo_paths() {
    let send = wqe(SendOpcode::Send, 64 * 1024);
    let go = StartVerdict::Go {
        takes_credit: false,
    };
    // 128 KiB in flight from MTU 1024 up: 128 PSNs of 1 KiB, 64 of 2 KiB, 32 of 4 KiB; smaller
    // MTUs and a local path keep 128 PSNs.
    for (mtu, window) in [
        (IbMtu::Mtu256, 128),
        (IbMtu::Mtu1024, 128),
        (IbMtu::Mtu2048, 64),
        (IbMtu::Mtu4096, 32),
    ] {
        let c = cfg(QpType::Rc, mtu);
        assert_eq!(psn_window(c.mtu), window);
        assert_eq!(may_start(&send, false, &outstanding(window - 1), &c), go);
        assert_eq!(
            may_start(&send, false, &outstanding(window), &c),
            StartVerdict::WaitPsnWindow
        );
        assert_eq!(may_continue(&send, &outstanding(window - 1), &c), go);
    }
    assert_eq!(psn_window(Pmtu::LOCAL), MAX_UNACKED_PSNS);
    // A message that a packet of 1 KiB holds counts one unit a PSN on any path: 128 PSNs.
    let c = cfg(QpType::Rc, IbMtu::Mtu4096);
    let small = wqe(SendOpcode::Send, 64);
    assert_eq!(may_start(&small, false, &outstanding(127), &c), go);
    assert_eq!(
        may_start(&small, false, &outstanding(128), &c),
        StartVerdict::WaitPsnWindow
    );
    assert_eq!(may_continue(&small, &outstanding(127), &c), go);
    // 2 KiB messages at MTU 4096: two units a PSN, 64 PSNs.
    let two_k = wqe(SendOpcode::Send, 2048);
    assert_eq!(may_start(&two_k, false, &outstanding(63), &c), go);
    assert_eq!(
        may_start(&two_k, false, &outstanding(64), &c),
        StartVerdict::WaitPsnWindow
    );
    // Small READs at MTU 4096 start beside up to 96 outstanding, as at 1024.
    let read8 = wqe(SendOpcode::RdmaRead, 8);
    assert_eq!(
        may_start(&read8, false, &outstanding(95), &c),
        StartVerdict::Go { takes_credit: true }
    );
    assert_eq!(
        may_start(&read8, false, &outstanding(96), &c),
        StartVerdict::WaitPsnWindow
    );
    // READs at MTU 4096: requests of 16 PSNs (64 KiB), a one-request READ starting beside 24
    // outstanding at most, a longer one beside 16.
    assert_eq!(read_request_size(c.mtu), 16);
    let read64k = wqe(SendOpcode::RdmaRead, 64 * 1024);
    assert_eq!(
        may_start(&read64k, false, &outstanding(8), &c),
        StartVerdict::Go { takes_credit: true }
    );
    assert_eq!(
        may_start(&read64k, false, &outstanding(9), &c),
        StartVerdict::WaitPsnWindow
    );
    let read128k = wqe(SendOpcode::RdmaRead, 128 * 1024);
    assert_eq!(
        may_start(&read128k, false, &outstanding(1), &c),
        StartVerdict::WaitPsnWindow
    );
    // A 1 MiB READ is asked for in 16 requests of 16 PSNs, each asking for 64 KiB.
    let big = wqe(SendOpcode::RdmaRead, 1 << 20);
    let mut p = WqeProgress::start(Psn::new(0));
    let mut requests = 0;
    while let PacketPlan::Packet(d) = next_packet(&big, &p, &c) {
        assert_eq!(d.after.next_psn().diff(d.psn), 16);
        requests += 1;
        p = d.after;
    }
    assert_eq!(requests, 16);
}

#[test]
fn ack_req_every_64_kib_within_a_message() {
    for (mtu, every) in [(IbMtu::Mtu1024, 64), (IbMtu::Mtu4096, 16)] {
        let c = cfg(QpType::Rc, mtu);
        let w = wqe(SendOpcode::RdmaWrite, 1 << 20);
        let mut p = WqeProgress::start(Psn::new(0));
        let mut asks = Vec::new();
        let mut i = 0;
        while let PacketPlan::Packet(d) = next_packet(&w, &p, &c) {
            if d.ack_req {
                asks.push(i);
            }
            i += 1;
            p = d.after;
        }
        let n = (1 << 20) / mtu.bytes();
        assert_eq!(i, n);
        let want: Vec<u32> = (1..=n / every).map(|k| k * every - 1).collect();
        assert_eq!(asks, want);
    }
}
