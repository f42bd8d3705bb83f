// SPDX-License-Identifier: GPL-2.0

//! An interrupt-safe spinlock: [`SpinLockIrq`] and [`new_spinlock_irq!`].
//!
//! Where the `kernel` crate has them (probe `spinlock_irq`), they are its own. Elsewhere they
//! are a [`Lock`](kernel::sync::lock::Lock) over [`super::irq_nest::IrqNestBackend`], which
//! counts the locks each CPU holds, so that interrupts come back on only with the last unlock,
//! whatever order the guards drop in, as with the crate's type; a guard may be taken in any
//! context, interrupts disabled or not, as the crate's may. The rest of roxe uses only
//! `new_spinlock_irq!`, `lock()` and the guard, which both offer.
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h).

#[cfg(roxe_spinlock_irq)]
pub use kernel::{new_spinlock_irq, sync::SpinLockIrq};

/// Where the crate has none: interrupts counted per CPU, see [`super::irq_nest`].
#[cfg(not(roxe_spinlock_irq))]
pub type SpinLockIrq<T> = super::irq_nest::SpinLockIrqNest<T>;

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

/// The guard of a [`SpinLockIrq`].
#[cfg(roxe_spinlock_irq)]
pub type SpinLockIrqGuard<'a, T> =
    kernel::sync::lock::Guard<'a, T, kernel::sync::lock::spinlock::SpinLockIrqBackend>;

/// The guard of a [`SpinLockIrq`].
#[cfg(not(roxe_spinlock_irq))]
pub type SpinLockIrqGuard<'a, T> =
    kernel::sync::lock::Guard<'a, T, super::irq_nest::IrqNestBackend>;

/// Interrupts are disabled on this CPU for `'a`, so neither hard interrupts nor bottom halves
/// can run on it (on PREEMPT_RT, where an interrupt-safe spinlock leaves interrupts on, softirqs
/// run in threads that block on a held `spinlock_t` like any task). Split from the guard of an
/// interrupt-safe lock by [`irqs_off`], so that code under that lock can take a bottom-half
/// lock without masking bottom halves again (which would unmask them with interrupts off).
///
/// # Invariants
///
/// Only made by [`irqs_off`], from a guard that stays borrowed for `'a`.
#[derive(Clone, Copy)]
pub struct IrqOff<'a> {
    _guard: core::marker::PhantomData<&'a ()>,
    _not_send: core::marker::PhantomData<*mut ()>,
}

/// The data under an interrupt-safe lock's guard, and the proof that interrupts stay off for as
/// long as either is borrowed.
pub fn irqs_off<'a, T: Unpin>(guard: &'a mut SpinLockIrqGuard<'_, T>) -> (&'a mut T, IrqOff<'a>) {
    // INVARIANT: `guard` holds the lock, with interrupts off, and stays mutably borrowed for 'a.
    (
        &mut **guard,
        IrqOff {
            _guard: core::marker::PhantomData,
            _not_send: core::marker::PhantomData,
        },
    )
}
