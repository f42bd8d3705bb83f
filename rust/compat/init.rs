// SPDX-License-Identifier: GPL-2.0

//! Running a pin-initialiser in place, at a raw pointer.
//!
//! `pin_init` offers `raw_try_init` where the probe `pin_init_raw_try_init` compiles; elsewhere
//! the trait's own method, `PinInit::__pinned_init`, does the same.

use kernel::prelude::*;

/// Runs `init` on `slot`.
///
/// # Safety
///
/// `slot` is valid for writes and uninitialised, and will not move until its value is dropped;
/// on `Err` the caller does not touch it except to free it.
pub unsafe fn raw_try_init<T, E>(slot: *mut T, init: impl PinInit<T, E>) -> Result<(), E> {
    #[cfg(roxe_pin_init_raw_try_init)]
    // SAFETY: The caller gives `raw_try_init`'s own contract.
    let r = unsafe { pin_init::raw_try_init(slot, init) };
    #[cfg(not(roxe_pin_init_raw_try_init))]
    // SAFETY: The caller gives `__pinned_init`'s contract, which is the same.
    let r = unsafe { init.__pinned_init(slot) };
    r
}
