// SPDX-License-Identifier: GPL-2.0

//! Property tests of the QP state machine: the table's required sets are accepted, anything
//! outside required and optional is refused, and no input panics.

use proptest::prelude::*;
use roxe_proto::proto::mtu::IbMtu;
use roxe_proto::proto::qp_state::{
    ack_timeout_ns, check_attr_values, check_modify, check_modify_request, recv_verdict,
    rnr_timer_us, send_verdict, transition_attrs, AttrLimits, AttrMask, AttrValues, ModifyError,
    ModifyRequest, PostVerdict, QpState, QpType,
};

fn state() -> impl Strategy<Value = QpState> {
    proptest::sample::select(QpState::ALL.to_vec())
}

fn qp_type() -> impl Strategy<Value = QpType> {
    proptest::sample::select(QpType::ALL.to_vec())
}

/// A mask of standard bits other than STATE.
fn attr_bits() -> impl Strategy<Value = AttrMask> {
    (0u32..(1 << 21)).prop_map(|b| AttrMask::from_bits(b & !AttrMask::STATE.bits()))
}

const LIMITS: AttrLimits = AttrLimits {
    pkey_table_len: 1,
    max_rd_atomic: 128,
    max_dest_rd_atomic: 128,
    port_max_mtu: IbMtu::Mtu4096,
};

proptest! {
    #[test]
    fn raw_round_trips(raw in any::<u32>()) {
        match QpState::from_raw(raw) {
            Some(s) => prop_assert_eq!(s.as_raw(), raw),
            None => prop_assert!(raw > 6),
        }
        match QpType::from_raw(raw) {
            Some(t) => prop_assert_eq!(t.as_raw(), raw),
            None => prop_assert!(raw > 4),
        }
    }

    #[test]
    fn reset_and_err_are_always_reachable(s in state(), t in qp_type()) {
        prop_assert_eq!(check_modify(s, QpState::Reset, t, AttrMask::STATE), Ok(()));
        let to_err = check_modify(s, QpState::Err, t, AttrMask::STATE);
        if s == QpState::Reset {
            prop_assert_eq!(to_err, Err(ModifyError::IllegalTransition));
        } else {
            prop_assert_eq!(to_err, Ok(()));
        }
    }

    #[test]
    fn required_plus_any_optional_is_accepted(
        cur in state(), next in state(), t in qp_type(), pick in any::<u32>()
    ) {
        if let Some(cell) = transition_attrs(cur, next, t) {
            let optional = AttrMask::from_bits(cell.optional.bits() & pick);
            let mask = AttrMask::STATE | cell.required | optional;
            prop_assert_eq!(check_modify(cur, next, t, mask), Ok(()));
        } else {
            prop_assert_eq!(
                check_modify(cur, next, t, AttrMask::STATE),
                Err(ModifyError::IllegalTransition)
            );
        }
    }

    #[test]
    fn a_missing_required_bit_fails(cur in state(), next in state(), t in qp_type(), bit in 0u32..21) {
        let drop = AttrMask::from_bits(1 << bit);
        if let Some(cell) = transition_attrs(cur, next, t) {
            if cell.required.contains(drop) {
                let mask = (AttrMask::STATE | cell.required | cell.optional).difference(drop);
                prop_assert_eq!(check_modify(cur, next, t, mask), Err(ModifyError::MissingAttrs(drop)));
            }
        }
    }

    #[test]
    fn a_bit_outside_the_cell_fails(
        cur in state(), next in state(), t in qp_type(), bit in 0u32..32, pick in any::<u32>()
    ) {
        let extra = AttrMask::from_bits(1 << bit);
        if let Some(cell) = transition_attrs(cur, next, t) {
            let allowed = AttrMask::STATE | cell.required | cell.optional;
            if !allowed.contains(extra) {
                let optional = AttrMask::from_bits(cell.optional.bits() & pick);
                let mask = AttrMask::STATE | cell.required | optional | extra;
                let want = if AttrMask::STANDARD.contains(extra) {
                    ModifyError::UnexpectedAttrs(extra)
                } else {
                    ModifyError::UnsupportedAttrs(extra)
                };
                prop_assert_eq!(check_modify(cur, next, t, mask), Err(want));
            }
        }
    }

    #[test]
    fn without_state_bit_the_qp_stays(cur in state(), next in state(), t in qp_type(), mask in attr_bits()) {
        prop_assert_eq!(check_modify(cur, next, t, mask), check_modify(cur, cur, t, mask));
    }

    #[test]
    fn request_never_panics_and_ends_in_a_legal_state(
        real in state(), t in qp_type(), draining in any::<bool>(),
        mask in any::<u32>(), qp_state in 0u32..9, cur_qp_state in 0u32..9
    ) {
        let req = ModifyRequest { mask: AttrMask::from_bits(mask), qp_state, cur_qp_state };
        if let Ok(next) = check_modify_request(real, t, draining, &req) {
            prop_assert!(transition_attrs(real, next, t).is_some());
            prop_assert_eq!(check_modify(real, next, t, req.mask), Ok(()));
            if req.mask.contains(AttrMask::CUR_STATE) {
                prop_assert_eq!(cur_qp_state, real.as_raw());
            }
            if !req.mask.contains(AttrMask::STATE) {
                prop_assert_eq!(next, real);
            }
        }
    }

    #[test]
    fn value_checks_never_panic(
        mask in any::<u32>(), port_num in any::<u32>(), pkey_index in any::<u16>(),
        qp_access_flags in any::<u32>(), path_mtu in any::<u32>(), timeout in any::<u8>(),
        retry_cnt in any::<u8>(), rnr_retry in any::<u8>(), min_rnr_timer in any::<u8>(),
        max_rd_atomic in any::<u8>(), max_dest_rd_atomic in any::<u8>()
    ) {
        let v = AttrValues {
            port_num, pkey_index, qp_access_flags, path_mtu, timeout, retry_cnt, rnr_retry,
            min_rnr_timer, max_rd_atomic, max_dest_rd_atomic,
        };
        let mask = AttrMask::from_bits(mask);
        if check_attr_values(mask, &v, &LIMITS).is_ok() {
            if mask.contains(AttrMask::TIMEOUT) {
                prop_assert!(timeout <= 31);
            }
            if mask.contains(AttrMask::PATH_MTU) {
                prop_assert!((1..=5).contains(&path_mtu));
            }
            prop_assert!(!mask.contains(AttrMask::ALT_PATH));
        }
    }

    #[test]
    fn timers_are_total(code in any::<u8>()) {
        prop_assert!(rnr_timer_us(code) >= 10);
        prop_assert_eq!(rnr_timer_us(code), rnr_timer_us(code & 0x1f));
        if code > 0 {
            let ns = ack_timeout_ns(code).unwrap();
            prop_assert!(ns >= 8192);
            prop_assert!(ack_timeout_ns(code.saturating_add(1)).unwrap() >= ns);
        }
    }

    #[test]
    fn only_err_flushes_receives(s in state()) {
        prop_assert_eq!(recv_verdict(s) == PostVerdict::FlushWithError, s == QpState::Err);
        prop_assert_eq!(recv_verdict(s) == PostVerdict::Reject, s == QpState::Reset);
        prop_assert_eq!(send_verdict(s) == PostVerdict::Queue, matches!(s, QpState::Rts | QpState::Sqd));
    }
}
