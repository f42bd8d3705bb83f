// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).
//!
//! The core allocates the PD with `size_ib_pd = size_of::<Pd<T>>()`; the driver's data follows
//! the C object, as for devices.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{bindings, device::{Device, Driver}};
use kernel::types::Opaque;

/// A protection domain of driver `T`.
///
/// # Invariants
///
/// `ib` was allocated by the core with the size of `Self` for a device of driver `T`, and `data`
/// is initialised from `alloc_pd` returning success until `dealloc_pd`.
#[repr(C)]
pub struct Pd<T: Driver> {
    ib: Opaque<bindings::ib_pd>,
    pub(super) data: T::Pd,
}

impl<T: Driver> Pd<T> {
    /// # Safety
    ///
    /// `pd` is a PD of a `Device<T>` whose data is initialised, alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(pd: *mut bindings::ib_pd) -> &'a Self {
        // CAST: `ib` is the first field of the `#[repr(C)]` `Pd<T>`.
        // SAFETY: By the function's safety requirements.
        unsafe { &*pd.cast::<Self>() }
    }

    /// The driver's data of this PD.
    pub fn data(&self) -> &T::Pd {
        &self.data
    }

    /// The device the PD belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: `device` is set by the core before `alloc_pd` and the device outlives its PDs;
        // by the type invariant it is a `Device<T>`.
        unsafe { Device::<T>::from_raw((*self.ib.get()).device) }
    }
}
