// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's CRNG, for values a peer or another process must not be
//! able to predict (the key byte of a memory key).
//!
//! C header: [`include/linux/random.h`](srctree/include/linux/random.h)

use super::bindings;

/// A random `u32` from the kernel's CRNG. Any context (it never sleeps or fails).
pub fn u32() -> u32 {
    // SAFETY: `get_random_u32` may be called from any context and has no preconditions.
    unsafe { bindings::get_random_u32() }
}
