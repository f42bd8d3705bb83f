// SPDX-License-Identifier: GPL-2.0

//! Error codes that not every kernel's `kernel::error::code` declares.
//!
//! An [`Error`] cannot be made in a `const` outside the `kernel` crate, so these are functions;
//! each returns the same value on every kernel.

use kernel::{bindings, error::Error};

/// `-EOPNOTSUPP`: operation not supported.
pub fn eopnotsupp() -> Error {
    Error::from_errno(-(bindings::EOPNOTSUPP as i32))
}

/// `-ENOBUFS`: no buffer space available.
pub fn enobufs() -> Error {
    Error::from_errno(-(bindings::ENOBUFS as i32))
}

/// `-EAFNOSUPPORT`: address family not supported.
pub fn eafnosupport() -> Error {
    Error::from_errno(-(bindings::EAFNOSUPPORT as i32))
}

/// `-EADDRINUSE`: address already in use.
pub fn eaddrinuse() -> Error {
    Error::from_errno(-(bindings::EADDRINUSE as i32))
}
