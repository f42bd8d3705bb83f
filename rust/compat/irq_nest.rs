// SPDX-License-Identifier: GPL-2.0

//! The interrupt-safe spinlock of kernels whose `kernel` crate has none: a [`Lock`] over
//! [`IrqNestBackend`], with interrupts disabled from the first lock a CPU takes to the last
//! unlock, whatever the order the guards drop in.
//!
//! Also compiled into the harness self-test module (`qemu/selftest/`), which checks that order on
//! every kernel, the ones whose crate has its own type included.
//!
//! C: `rust/helpers/irq_nest.c`; [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h).

use kernel::{
    bindings::{lock_class_key, spinlock_t},
    ffi::{c_char, c_int},
    sync::lock::{Backend, Lock},
};

// rust/helpers/irq_nest.c: `spin_lock_irqsave` and its kin are macros, and the nesting count
// is a per-CPU variable.
#[allow(
    improper_ctypes,
    reason = "lock_class_key has no fields without lockdep; only pointers to it cross"
)]
extern "C" {
    fn roxe_helper_spin_lock_init(
        lock: *mut spinlock_t,
        name: *const c_char,
        key: *mut lock_class_key,
    );
    fn roxe_helper_spin_lock_irq_nest(lock: *mut spinlock_t);
    fn roxe_helper_spin_unlock_irq_nest(lock: *mut spinlock_t);
    fn roxe_helper_spin_trylock_irq_nest(lock: *mut spinlock_t) -> c_int;
    fn roxe_helper_spin_assert_is_held(lock: *mut spinlock_t);
    fn roxe_helper_irqs_disabled() -> bool;
    fn roxe_helper_preempt_rt() -> bool;
}

/// A spinlock whose guards keep interrupts disabled on their CPU (except on PREEMPT_RT, where
/// `spinlock_t` sleeps and interrupt handlers are threads), as the crate's `SpinLockIrq`.
pub type SpinLockIrqNest<T> = Lock<T, IrqNestBackend>;

/// The [`Backend`] of [`SpinLockIrqNest`]: a `spinlock_t`, and a per-CPU count of the locks
/// held with it: the first lock saves the interrupt flags and disables interrupts, the last
/// unlock restores them. A guard carries no flags, so two guards may drop in any order.
pub struct IrqNestBackend;

// SAFETY: The `spinlock_t` gives mutual exclusion between `lock` and `unlock`; interrupts stay
// disabled from a CPU's first `lock` to its last `unlock` (the C side's count), so no guard's
// drop turns them on while another guard of this backend is held; `relock` (the default) takes
// the lock the same way.
unsafe impl Backend for IrqNestBackend {
    type State = spinlock_t;
    type GuardState = ();

    unsafe fn init(ptr: *mut Self::State, name: *const c_char, key: *mut lock_class_key) {
        // SAFETY: The caller gives a `ptr` valid for writes and `name` and `key` valid for ever.
        unsafe { roxe_helper_spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller has initialised the lock at `ptr`.
        unsafe { roxe_helper_spin_lock_irq_nest(ptr) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: The caller has initialised the lock at `ptr`.
        let got = unsafe { roxe_helper_spin_trylock_irq_nest(ptr) };
        (got != 0).then_some(())
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The caller owns the lock, taken by `lock` or `try_lock` on this CPU (interrupts
        // have been off since, so the task has not migrated).
        unsafe { roxe_helper_spin_unlock_irq_nest(ptr) }
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: The caller has initialised the lock at `ptr`.
        unsafe { roxe_helper_spin_assert_is_held(ptr) }
    }
}

/// Whether hard interrupts are disabled on this CPU (`irqs_disabled`).
pub fn irqs_disabled() -> bool {
    // SAFETY: Reads this CPU's interrupt flag; callable in any context.
    unsafe { roxe_helper_irqs_disabled() }
}

/// Whether the kernel is PREEMPT_RT, where [`SpinLockIrqNest`] leaves interrupts enabled.
pub fn preempt_rt() -> bool {
    // SAFETY: Returns a constant of the kernel's configuration; callable in any context.
    unsafe { roxe_helper_preempt_rt() }
}
