// SPDX-License-Identifier: GPL-2.0

//! Scheduling points, the same on every kernel: the `kernel` crate has no `cond_resched`.
//!
//! C header: [`include/linux/sched.h`](srctree/include/linux/sched.h).

use core::marker::PhantomData;

// rust/helpers/sync.c: `cond_resched` is a macro (a static call on PREEMPT_DYNAMIC kernels).
extern "C" {
    fn roxe_helper_cond_resched();
}

/// The context of a verb called by a system call or of a work item: process context, no
/// spinlock held, so it may sleep and reschedule.
///
/// Work sized by a user (a ring copied by a resize) takes one and yields the CPU through it
/// between batches. It is neither `Send` nor `Clone`: it stays in the context that made it.
///
/// # Invariants
///
/// It was created, by [`Preemptible::claim`], in a context that may sleep (checked by
/// `might_sleep` on kernels with `CONFIG_DEBUG_ATOMIC_SLEEP`).
pub struct Preemptible(PhantomData<*mut ()>);

impl Preemptible {
    /// Claims the current context may sleep; on debug kernels a wrong claim is reported at once
    /// ("sleeping function called from invalid context").
    #[track_caller]
    pub fn claim() -> Self {
        kernel::task::might_sleep();
        // INVARIANT: `might_sleep` has checked the context where the kernel can.
        Self(PhantomData)
    }

    /// Lets the scheduler run another task if one is due (`cond_resched`).
    pub fn cond_resched(&self) {
        // SAFETY: By the type invariant the context may sleep, and `cond_resched` has no other
        // precondition.
        unsafe { roxe_helper_cond_resched() };
    }
}
