// SPDX-License-Identifier: GPL-2.0

//! Probe (Kbuild): `pin_init` has `raw_try_init`, the entry point to run an initialiser in place.

pub use pin_init::raw_try_init;
