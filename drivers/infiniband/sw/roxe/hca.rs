// SPDX-License-Identifier: GPL-2.0

//! What every file of the driver shares about the HCA, and nothing else: the driver type
//! `Roxe` (its verbs are in `verbs/`, its per-object types in `device.rs`), the one port, and
//! the kernel errno of a pure-logic rejection. Imports nothing of the driver.

#![deny(unsafe_code)]

use crate::compat::errno;
use crate::proto::qp_state::Errno;
use kernel::prelude::*;

/// The roxe driver type: its verbs, link type and netdev event handling.
pub(crate) struct Roxe;

/// The one port of a roxe device (IB numbers ports from 1).
pub(crate) const PORT: u32 = 1;

/// The kernel error for a pure-logic rejection.
pub(crate) fn errno(e: Errno) -> Error {
    match e {
        Errno::Inval => EINVAL,
        Errno::OpNotSupp => errno::eopnotsupp(),
    }
}
