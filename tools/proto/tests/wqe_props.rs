// SPDX-License-Identifier: GPL-2.0

//! Property tests of the ring and WQE parsing: hostile bytes never panic and never yield a
//! WQE that breaks the limits.

use proptest::prelude::*;
use roxe_proto::proto::{
    queue::Geometry,
    wqe::{send_layout, Payload, QpType, RecvWqe, SendWqe, SqLimits, SGE_SIZE},
};

const LIMITS: SqLimits = SqLimits {
    max_sge: 8,
    max_inline: 128,
    max_msg: 1 << 23,
};

fn qp_type() -> impl Strategy<Value = QpType> {
    prop_oneof![
        Just(QpType::Rc),
        Just(QpType::Uc),
        Just(QpType::Ud),
        Just(QpType::Gsi)
    ]
}

proptest! {
    #[test]
    fn send_parse_respects_limits(slot in proptest::collection::vec(any::<u8>(), 0..512), qp in qp_type()) {
        if let Ok(w) = SendWqe::parse(&slot, qp, &LIMITS) {
            prop_assert!(w.length <= LIMITS.max_msg);
            prop_assert!(w.opcode.allowed_on(qp));
            match w.payload {
                Payload::Sges { num } => {
                    prop_assert!(num <= LIMITS.max_sge);
                    prop_assert!(send_layout::DMA_DATA + num as usize * SGE_SIZE <= slot.len());
                }
                Payload::Inline { len } => {
                    prop_assert!(len <= LIMITS.max_inline);
                    prop_assert!(send_layout::DMA_DATA + len as usize <= slot.len());
                }
            }
        }
    }

    #[test]
    fn recv_parse_never_panics(slot in proptest::collection::vec(any::<u8>(), 0..512), max in 0u32..64) {
        if let Ok(w) = RecvWqe::parse(&slot, max) {
            prop_assert!(w.num_sge <= max);
        }
    }

    #[test]
    fn ring_offsets_stay_inside(n in 1u32..100_000, elem in 1usize..4096, idx in any::<u32>()) {
        let g = Geometry::new(n, elem, 1 << 20).unwrap();
        prop_assert!(g.capacity() >= n);
        prop_assert!(g.elem_size() >= elem);
        prop_assert!(g.elem_offset(idx) + g.elem_size() <= g.buffer_size());
    }
}
