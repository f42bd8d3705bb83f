// SPDX-License-Identifier: GPL-2.0

//! Control probe (Kbuild): uses only what every `kernel` crate roxe supports has, so it compiles
//! wherever the toolchain and the flags are the kernel's. When it does not, the build stops: a
//! feature probe that fails for that reason would otherwise pick a fallback without a word.

use kernel::prelude::*;

/// A fallible function of the crate's prelude types.
pub fn control(v: u32) -> Result<u32> {
    v.checked_add(1).ok_or(EINVAL)
}
