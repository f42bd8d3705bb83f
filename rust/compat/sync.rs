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
