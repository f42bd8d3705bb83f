// SPDX-License-Identifier: GPL-2.0

//! Bottom-half masking: code that must not be interrupted by softirqs on its CPU, or preempted,
//! while it holds a claim other contexts wait on.
//!
//! C header: [`include/linux/bottom_half.h`](srctree/include/linux/bottom_half.h).

use super::bindings;
pub use crate::compat::sync::IrqOff;
use kernel::{
    prelude::*,
    sync::{lock::spinlock::SpinLockGuard, SpinLock},
};

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

/// Proof that bottom halves cannot run on this CPU while the value lives: a [`BhGuard`], or an
/// [`IrqOff`] split from the guard of an interrupt-safe lock. [`BhLock::lock_with`] takes one.
pub trait BhOff: private::Sealed {}

impl BhOff for BhGuard {}
impl BhOff for IrqOff<'_> {}

mod private {
    pub trait Sealed {}
    impl Sealed for super::BhGuard {}
    impl Sealed for super::IrqOff<'_> {}
}

/// A spinlock of data that softirqs use: it is only ever held with bottom halves off on its
/// CPU, so a softirq cannot interrupt a holder and spin on it (lockdep's `{IN-SOFTIRQ-W} ->
/// {SOFTIRQ-ON-W}`), and interrupts stay on under it, so the work done under it (copies of a
/// packet's payload) does not delay them. The rule is kept by the type: [`BhLock::lock`] masks
/// bottom halves for as long as its guard lives, and [`BhLock::lock_with`] takes a proof that
/// they are masked already.
///
/// Created with [`new_bh_lock!`].
#[pin_data]
pub struct BhLock<T> {
    #[pin]
    inner: SpinLock<T>,
}

impl<T> BhLock<T> {
    /// A bottom-half lock over `inner`; use [`new_bh_lock!`], which gives it a name and a class.
    pub fn new(inner: impl PinInit<SpinLock<T>>) -> impl PinInit<Self> {
        pin_init!(Self { inner <- inner }? core::convert::Infallible)
    }

    /// Masks bottom halves, then takes the lock; the guard unlocks, then unmasks them. Process
    /// or softirq context, interrupts on (the unmasking needs them on; under an interrupt-safe
    /// lock use [`BhLock::lock_with`]).
    pub fn lock(&self) -> BhLockGuard<'_, T> {
        let bh = disable();
        BhLockGuard {
            guard: self.inner.lock(),
            _bh: bh,
        }
    }

    /// Takes the lock where bottom halves are masked already, for as long as `_off` lives.
    pub fn lock_with<'a>(&'a self, _off: &'a impl BhOff) -> SpinLockGuard<'a, T> {
        self.inner.lock()
    }
}

/// The guard of [`BhLock::lock`]: the lock's guard and the bottom-half mask, dropped in that
/// order (fields drop in declaration order).
pub struct BhLockGuard<'a, T> {
    guard: SpinLockGuard<'a, T>,
    _bh: BhGuard,
}

impl<T> core::ops::Deref for BhLockGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T: Unpin> core::ops::DerefMut for BhLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// Creates a [`BhLock`] initialiser with the given name and a new lock class.
#[macro_export]
macro_rules! new_bh_lock {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::rdma::bh::BhLock::new(::kernel::new_spinlock!($inner $(, $name)?))
    };
}
pub use crate::new_bh_lock;
