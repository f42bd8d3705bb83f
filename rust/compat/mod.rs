// SPDX-License-Identifier: GPL-2.0

//! What roxe needs from the `kernel` crate where Rust-enabled kernels differ.
//!
//! The `kernel` crate has no stable API, so an out-of-tree module either follows one kernel or
//! adapts. roxe adapts here, and only here: the build compiles the probes of `rust/probe/`
//! against the target tree (`Kbuild`), and each item below is chosen by a `roxe_<probe>` cfg, a
//! feature found, never a kernel version. Where one form works on every kernel (a C function
//! called through the kernel's bindings or a roxe helper), it is used everywhere and needs no
//! probe. The rest of the
//! crate uses these items instead of the `kernel` crate's.

pub mod errno;
pub mod init;
#[cfg(not(roxe_spinlock_irq))]
pub mod irq_nest;
pub mod module;
pub mod rcu;
pub mod sync;
pub mod task;
