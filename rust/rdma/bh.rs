// SPDX-License-Identifier: GPL-2.0

//! Bottom-half masking: code that must not be interrupted by softirqs on its CPU, or preempted,
//! while it holds a claim other contexts wait on.
//!
//! C header: [`include/linux/bottom_half.h`](srctree/include/linux/bottom_half.h).

use super::bindings;

/// Softirqs are off on this CPU (and the task cannot be preempted) while this lives; dropping
/// it turns them back on and runs any that were raised meanwhile.
///
/// # Invariants
///
/// Created by [`disable`], which called `local_bh_disable` once; `Drop` makes the matching
/// `local_bh_enable` on the same CPU (the guard is neither `Send` nor `Sync`, and the task
/// cannot migrate while bottom halves are off).
pub struct BhGuard {
    _not_send: core::marker::PhantomData<*mut ()>,
}

/// Turns softirqs off on this CPU until the guard is dropped. Process or softirq context (it
/// nests); not in hard interrupt context or with interrupts disabled, where the enable at the
/// end would be invalid.
pub fn disable() -> BhGuard {
    // SAFETY: Callable from process and softirq context; the guard's drop balances it.
    unsafe { bindings::roxe_helper_local_bh_disable() };
    BhGuard {
        _not_send: core::marker::PhantomData,
    }
}

impl Drop for BhGuard {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, `local_bh_disable` was called once for this guard on
        // this CPU, with interrupts enabled.
        unsafe { bindings::roxe_helper_local_bh_enable() };
    }
}
