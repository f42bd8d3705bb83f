// SPDX-License-Identifier: GPL-2.0

//! Plain values that readers use under RCU until their owner revokes them, ending with an
//! expedited grace period.
//!
//! The CQ, QP and SRQ notifiers hold their raw C object, which the core frees once the destroy op
//! returns. The kernel's `Revocable` waits a normal grace period when revoked, several scheduler
//! ticks; a consumer destroys a QP and its CQs per connection (rping, RTRS, a process's exit), and
//! those waits were a large share of a connection's setup and teardown. The values here are
//! `Copy` and never dropped, so revoking is clearing a flag and waiting for the readers that saw
//! it set.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h)

use core::sync::atomic::{AtomicBool, Ordering};
use kernel::sync::rcu;

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

    /// Revokes the value and waits until no reader uses it: an expedited RCU grace period after
    /// the flag is cleared (an interrupt per online CPU rather than several scheduler ticks).
    /// Returns whether this call revoked it. Process context; sleeps.
    pub fn revoke(&self) -> bool {
        let was_available = self.available.swap(false, Ordering::AcqRel);
        if was_available {
            crate::compat::rcu::synchronize_rcu_expedited();
        }
        was_available
    }
}
