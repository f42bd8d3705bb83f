// SPDX-License-Identifier: GPL-2.0

//! Probe (Kbuild): the kernel crate has an interrupt-safe spinlock, `SpinLockIrq`.

pub use kernel::new_spinlock_irq;
pub use kernel::sync::SpinLockIrq;
