// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).
//!
//! The core allocates the PD with `size_ib_pd` bytes; the driver's data follows the C object
//! (see [`Object`]).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{bindings, device::DriverTypes, object::Object};

/// A protection domain of driver `T`.
pub type Pd<T> = Object<bindings::ib_pd, <T as DriverTypes>::Pd, T>;
