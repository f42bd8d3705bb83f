// SPDX-License-Identifier: GPL-2.0

//! A spinlock that also disables bottom halves (`spin_lock_bh`).
//!
//! State that the softirq data path and process-context verbs both touch must be locked with
//! softirqs off on the process side, or a softirq that interrupts the lock holder on the same CPU
//! deadlocks on it. The kernel crate offers plain and IRQ-disabling spinlocks; this is the
//! BH-disabling one, with the same `Lock` front end.
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h)

use super::bindings;
use kernel::sync::lock::{Backend, Guard, Lock};

/// A spinlock taken with bottom halves disabled. Use [`new_spinlock_bh!`] to create one.
pub type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// A guard of a [`SpinLockBh`]: softirqs stay disabled on this CPU while it lives.
pub type SpinLockBhGuard<'a, T> = Guard<'a, T, SpinLockBhBackend>;

/// The backend of [`SpinLockBh`].
pub struct SpinLockBhBackend;

/// Creates a [`SpinLockBh`] initialiser with a lockdep class of its own for this call site.
#[macro_export]
macro_rules! new_spinlock_bh {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::rdma::sync::SpinLockBh::new(
            $inner, ::kernel::optional_name!($($name)?), ::kernel::static_lock_class!())
    };
}

// SAFETY: `spin_lock_bh` gives mutual exclusion like `spin_lock`; unlocking with
// `spin_unlock_bh` by the owner re-enables bottom halves in the matching order. `relock` uses the
// default implementation, which takes the lock the same way.
unsafe impl Backend for SpinLockBhBackend {
    type State = kernel::bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut kernel::bindings::lock_class_key,
    ) {
        // SAFETY: The caller guarantees `ptr` is valid for writes and `name`/`key` live forever.
        unsafe { kernel::bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: The caller guarantees the lock is initialised; both binding crates describe the
        // same `spinlock_t`.
        unsafe { bindings::roxe_helper_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        // SAFETY: As in `lock`.
        (unsafe { bindings::roxe_helper_spin_trylock_bh(ptr.cast()) }).then_some(())
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: The caller owns the lock, taken by `lock` or `try_lock` with BHs disabled.
        unsafe { bindings::roxe_helper_spin_unlock_bh(ptr.cast()) }
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: The caller guarantees the lock is initialised.
        unsafe { kernel::bindings::spin_assert_is_held(ptr) }
    }
}
