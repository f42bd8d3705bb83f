// SPDX-License-Identifier: GPL-2.0

//! How long a responder holds a positive ACK for its requester's answer: the QP's answer time,
//! smoothed over the answers it has measured, and the hold that follows from it, bounded below
//! by the polling process's reaction and above by a small part of the advertised ACK delay.

/// The shortest hold: a process polling for the request runs only after the softirq that
/// delivered it, and under TCG answers later than 50 us (`Documentation/performance.md`,
/// "Held ACKs").
pub const HOLD_MIN_US: u32 = 200;

/// The longest hold, and the longest answer time for which a QP holds at all. The ACK delay the
/// device advertises (`local_ca_ack_delay` 15: 4.096 us * 2^15, 134 ms) bounds what a peer may
/// expect; this stays far inside it, with room for the short timer's slack of one scheduler
/// tick (at most 10 ms), so a held ACK never comes near a peer's retransmission timeout.
pub const HOLD_MAX_US: u32 = 2000;

/// The hold is this many times the smoothed answer time: an answer as late as twice the
/// typical one still takes the ACK with it.
const HOLD_PER_ANSWER: u32 = 2;

/// Whether a QP whose requester sent `gap_ns` after its responder's last lone ACK answers
/// quickly enough to hold its ACKs for the answer.
pub fn answers_quickly(gap_ns: u64) -> bool {
    gap_ns <= u64::from(HOLD_MAX_US) * 1000
}

/// The smoothed answer time (us) after one more answer `gap_ns` after the ACK: an exponential
/// average weighting the new answer by a quarter, so that one late answer moves the hold by
/// little and a lasting change is followed within a few answers. `smoothed_us` 0: no answer
/// measured yet, the new one is taken as it is. Saturates at the longest hold: a later answer
/// does not count for more than one at the bound.
pub fn smoothed_answer_us(smoothed_us: u32, gap_ns: u64) -> u32 {
    let sample = u32::try_from(gap_ns / 1000)
        .unwrap_or(u32::MAX)
        .min(HOLD_MAX_US);
    if smoothed_us == 0 {
        return sample.max(1);
    }
    let old = smoothed_us.min(HOLD_MAX_US);
    ((old * 3 + sample) / 4).max(1)
}

/// How long (us) a QP whose smoothed answer time is `smoothed_us` holds an ACK: twice that,
/// within [`HOLD_MIN_US`] and [`HOLD_MAX_US`].
pub fn hold_us(smoothed_us: u32) -> u32 {
    smoothed_us
        .saturating_mul(HOLD_PER_ANSWER)
        .clamp(HOLD_MIN_US, HOLD_MAX_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_answers_hold_slow_ones_do_not() {
        assert!(answers_quickly(0));
        assert!(answers_quickly(600_000));
        assert!(answers_quickly(u64::from(HOLD_MAX_US) * 1000));
        assert!(!answers_quickly(u64::from(HOLD_MAX_US) * 1000 + 1));
        assert!(!answers_quickly(u64::MAX));
    }

    #[test]
    fn first_answer_is_taken_as_it_is() {
        assert_eq!(smoothed_answer_us(0, 540_000), 540);
        assert_eq!(smoothed_answer_us(0, 10), 1);
    }

    #[test]
    fn later_answers_move_the_average_by_a_quarter() {
        assert_eq!(smoothed_answer_us(400, 800_000), 500);
        assert_eq!(smoothed_answer_us(400, 0), 300);
    }

    #[test]
    fn late_answers_count_at_most_as_the_bound() {
        assert_eq!(smoothed_answer_us(0, u64::MAX), HOLD_MAX_US);
        assert_eq!(smoothed_answer_us(HOLD_MAX_US, u64::MAX), HOLD_MAX_US);
        assert_eq!(smoothed_answer_us(u32::MAX, u64::MAX), HOLD_MAX_US);
    }

    #[test]
    fn average_follows_a_lasting_change() {
        let mut s = smoothed_answer_us(0, 100_000);
        for _ in 0..20 {
            s = smoothed_answer_us(s, 900_000);
        }
        assert!((880..=900).contains(&s), "{s}");
    }

    #[test]
    fn hold_is_twice_the_answer_within_bounds() {
        assert_eq!(hold_us(0), HOLD_MIN_US);
        assert_eq!(hold_us(50), HOLD_MIN_US);
        assert_eq!(hold_us(540), 1080);
        assert_eq!(hold_us(HOLD_MAX_US), HOLD_MAX_US);
        assert_eq!(hold_us(u32::MAX), HOLD_MAX_US);
    }
}
