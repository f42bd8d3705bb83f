// SPDX-License-Identifier: GPL-2.0

//! An interrupt-safe spinlock: [`SpinLockIrq`] and [`new_spinlock_irq!`].
//!
//! Where the `kernel` crate has them (probe `spinlock_irq`), they are its own. Elsewhere they
//! are a [`Lock`] over [`IrqSaveBackend`]: `spin_lock_irqsave` on lock, `spin_unlock_irqrestore`
//! with the saved flags on unlock, so a guard may be taken in any context, interrupts disabled
//! or not, as with the crate's type. The crate's `SpinLockIrq` guard may also be taken anywhere;
//! the rest of roxe uses only `new_spinlock_irq!`, `lock()` and the guard, which both offer.
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h).

#[cfg(roxe_spinlock_irq)]
pub use kernel::{new_spinlock_irq, sync::SpinLockIrq};

#[cfg(not(roxe_spinlock_irq))]
pub use fallback::SpinLockIrq;

#[cfg(not(roxe_spinlock_irq))]
mod fallback {
    use kernel::{
        bindings::{lock_class_key, spinlock_t},
        ffi::{c_char, c_int, c_ulong},
        sync::lock::{Backend, Lock},
    };

    // rust/helpers/sync.c: `spin_lock_irqsave` and its kin are macros.
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
        fn roxe_helper_spin_lock_irqsave(lock: *mut spinlock_t) -> c_ulong;
        fn roxe_helper_spin_unlock_irqrestore(lock: *mut spinlock_t, flags: c_ulong);
        fn roxe_helper_spin_trylock_irqsave(lock: *mut spinlock_t, flags: *mut c_ulong) -> c_int;
        fn roxe_helper_spin_assert_is_held(lock: *mut spinlock_t);
    }

    /// A spinlock taken with interrupts disabled and the previous state restored on unlock.
    pub type SpinLockIrq<T> = Lock<T, IrqSaveBackend>;

    /// The [`Backend`] of [`SpinLockIrq`]: a `spinlock_t` taken with `spin_lock_irqsave`.
    pub struct IrqSaveBackend;

    // SAFETY: The `spinlock_t` gives mutual exclusion between `lock` and `unlock`; the guard state
    // is the interrupt flags `lock` saved, handed back to `unlock`, and `relock` (the default)
    // takes the lock the same way.
    unsafe impl Backend for IrqSaveBackend {
        type State = spinlock_t;
        type GuardState = c_ulong;

        unsafe fn init(ptr: *mut Self::State, name: *const c_char, key: *mut lock_class_key) {
            // SAFETY: The caller gives a `ptr` valid for writes and `name` and `key` valid for
            // ever.
            unsafe { roxe_helper_spin_lock_init(ptr, name, key) }
        }

        unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
            // SAFETY: The caller has initialised the lock at `ptr`.
            unsafe { roxe_helper_spin_lock_irqsave(ptr) }
        }

        unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
            let mut flags: c_ulong = 0;
            // SAFETY: The caller has initialised the lock at `ptr`; `flags` is a local.
            let got = unsafe { roxe_helper_spin_trylock_irqsave(ptr, &mut flags) };
            (got != 0).then_some(flags)
        }

        unsafe fn unlock(ptr: *mut Self::State, guard_state: &Self::GuardState) {
            // SAFETY: The caller owns the lock, taken by `lock` or `try_lock`, which returned
            // these flags.
            unsafe { roxe_helper_spin_unlock_irqrestore(ptr, *guard_state) }
        }

        unsafe fn assert_is_held(ptr: *mut Self::State) {
            // SAFETY: The caller has initialised the lock at `ptr`.
            unsafe { roxe_helper_spin_assert_is_held(ptr) }
        }
    }
}

/// Creates a [`SpinLockIrq`] initialiser with the given name and a new lock class.
#[cfg(not(roxe_spinlock_irq))]
#[macro_export]
macro_rules! new_spinlock_irq {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::compat::sync::SpinLockIrq::new(
            $inner,
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}

#[cfg(not(roxe_spinlock_irq))]
pub use crate::new_spinlock_irq;
