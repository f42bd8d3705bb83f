// SPDX-License-Identifier: GPL-2.0

//! RCU waits, through the kernel's bindings: not every kernel's `kernel::sync::rcu` has them.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h).

use kernel::bindings;

/// Waits for an RCU grace period, driven to its end by interrupting every CPU rather than by
/// waiting for them to pass through quiescent states on their own. Process context; sleeps.
pub fn synchronize_rcu_expedited() {
    // SAFETY: `synchronize_rcu_expedited` has no preconditions beyond a context that may sleep,
    // which a safe caller cannot violate without the kernel's own might_sleep check reporting it.
    unsafe { bindings::synchronize_rcu_expedited() };
}

/// Waits for a normal RCU grace period (several scheduler ticks; no interrupts sent). Process
/// context; sleeps.
pub fn synchronize_rcu() {
    // SAFETY: As for `synchronize_rcu_expedited`: no preconditions beyond a context that may
    // sleep.
    unsafe { bindings::synchronize_rcu() };
}

/// Waits until every RCU callback queued so far has run. Process context; sleeps.
pub fn rcu_barrier() {
    // SAFETY: As for `synchronize_rcu_expedited`: no preconditions beyond a context that may
    // sleep.
    unsafe { bindings::rcu_barrier() };
}
