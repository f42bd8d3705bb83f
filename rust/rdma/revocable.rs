// SPDX-License-Identifier: GPL-2.0

//! Plain values that readers use under RCU until their owner revokes them, ending with a grace
//! period, expedited within a budget ([`grace_period`]).
//!
//! The CQ, QP and SRQ notifiers hold their raw C object, which the core frees once the destroy op
//! returns. The kernel's `Revocable` waits a normal grace period when revoked, several scheduler
//! ticks; a consumer destroys a QP and its CQs per connection (rping, RTRS, a process's exit), and
//! those waits were a large share of a connection's setup and teardown. The values here are
//! `Copy` and never dropped, so revoking is clearing a flag and waiting for the readers that saw
//! it set.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h)

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::sync::rcu;

/// Most expedited grace periods [`grace_period`] starts per second, for the whole module.
pub const EXPEDITED_PER_SECOND: u64 = 100;

/// When the next expedited grace period may start (`device::now_ns`).
static NEXT_EXPEDITED_NS: AtomicU64 = AtomicU64::new(0);

/// Waits for an RCU grace period: an expedited one (an interrupt per busy CPU, ending within
/// microseconds), at most [`EXPEDITED_PER_SECOND`] a second, else a normal one (several
/// scheduler ticks, no interrupt). A consumer's teardown (a few destroy verbs per connection)
/// gets the quick kind; a process that loops over cheap create/destroy pairs gets the slow one
/// past the budget, so that it cannot make the kernel interrupt every CPU at its own rate.
/// Process context; sleeps.
pub fn grace_period() {
    let now = super::device::now_ns();
    let next = NEXT_EXPEDITED_NS.load(Ordering::Relaxed);
    let due = now >= next
        && NEXT_EXPEDITED_NS
            .compare_exchange(
                next,
                now + 1_000_000_000 / EXPEDITED_PER_SECOND,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok();
    if due {
        crate::compat::rcu::synchronize_rcu_expedited();
    } else {
        crate::compat::rcu::synchronize_rcu();
    }
}

/// A value readable under RCU until [`RcuRevocable::revoke`] returns.
///
/// # Invariants
///
/// `available` goes from true to false once and never back; a reader uses `value` only after
/// loading `available` as true inside an RCU read-side critical section that it has not left.
pub struct RcuRevocable<T: Copy> {
    available: AtomicBool,
    value: T,
}

impl<T: Copy> RcuRevocable<T> {
    /// A value readers may use until it is revoked.
    pub const fn new(value: T) -> Self {
        Self {
            available: AtomicBool::new(true),
            value,
        }
    }

    /// Calls `f` with the value unless it was revoked. `f` runs inside an RCU read-side critical
    /// section, so a `revoke` that began after the check does not return before `f` does; `f`
    /// must not sleep. Any context.
    pub fn try_access_with<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        let _guard = rcu::read_lock();
        if self.available.load(Ordering::Acquire) {
            Some(f(&self.value))
        } else {
            None
        }
    }

    /// Revokes the value and waits until no reader uses it: a grace period after the flag is
    /// cleared ([`grace_period`]: expedited within its budget). Returns whether this call
    /// revoked it. Process context; sleeps.
    pub fn revoke(&self) -> bool {
        let was_available = self.available.swap(false, Ordering::AcqRel);
        if was_available {
            grace_period();
        }
        was_available
    }
}
