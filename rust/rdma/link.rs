// SPDX-License-Identifier: GPL-2.0

//! RDMA link types: `rdma link add NAME type TYPE netdev DEV` and `rdma link delete NAME`.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)

use super::{
    bindings,
    device::{Device, Driver},
    netdev::NetDevice,
};
use core::{ffi::CStr, marker::PhantomData};
use kernel::{error::from_result, ffi, prelude::*, types::Opaque};

/// A software RDMA driver that creates devices on netdevs.
pub trait Link: Driver {
    /// The link type users name in `rdma link add ... type TYPE`.
    const TYPE: &'static CStr;

    /// The driver's link operations table (a `static` of the driver). Devices point to it, which
    /// is also how a device is recognised as this driver's.
    fn link_ops() -> &'static LinkOps<Self>;

    /// Creates and registers a device called `name` on `netdev`.
    ///
    /// Process context; the core serialises link operations.
    fn newlink(name: &CStr, netdev: &NetDevice) -> Result;

    /// Called by `rdma link delete` before the core unregisters `dev`.
    fn dellink(_dev: &Device<Self>) -> Result {
        Ok(())
    }
}

/// The link operations of a driver: a `static` of the driver, like C's `struct rdma_link_ops`.
///
/// # Invariants
///
/// The wrapped `rdma_link_ops` has `type` = `T::TYPE` and the callbacks of `T`. The core links
/// it into its list (mutating `list`) only between [`LinkRegistration`]'s register and
/// unregister calls.
pub struct LinkOps<T: Link> {
    ops: Opaque<bindings::rdma_link_ops>,
    _t: PhantomData<T>,
}

// SAFETY: The core serialises all access to the ops (its link-ops lock).
unsafe impl<T: Link> Sync for LinkOps<T> {}

impl<T: Link> LinkOps<T> {
    /// Creates the operations table.
    pub const fn new() -> Self {
        Self {
            ops: Opaque::new(bindings::rdma_link_ops {
                list: bindings::list_head {
                    next: core::ptr::null_mut(),
                    prev: core::ptr::null_mut(),
                },
                type_: kernel::str::as_char_ptr_in_const_context(T::TYPE).cast(),
                newlink: Some(Self::newlink_callback),
                dellink: Some(Self::dellink_callback),
            }),
            _t: PhantomData,
        }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::rdma_link_ops {
        self.ops.get()
    }

    /// `rdma_link_ops.newlink`.
    ///
    /// # Safety
    ///
    /// Only the RDMA core calls this, through the `rdma_link_ops` of a registered
    /// `LinkRegistration<T>`: `name` is a NUL-terminated string and `ndev` a net device the core
    /// holds a reference on, both valid for the call.
    unsafe extern "C" fn newlink_callback(
        name: *const ffi::c_char,
        ndev: *mut bindings::net_device,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The core passes a NUL-terminated name valid for the call.
            let name = unsafe { CStr::from_char_ptr(name) };
            // SAFETY: The core holds a reference on `ndev` for the duration of the call.
            let netdev = unsafe { NetDevice::from_raw(ndev) };
            T::newlink(name, netdev)?;
            Ok(0)
        })
    }

    /// `rdma_link_ops.dellink`.
    ///
    /// # Safety
    ///
    /// Only the RDMA core calls this, through the `rdma_link_ops` of a registered
    /// `LinkRegistration<T>`, with `ibdev` a live device of `T` that a link created.
    unsafe extern "C" fn dellink_callback(ibdev: *mut bindings::ib_device) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The core calls `dellink` only for devices whose `link_ops` are ours, which
            // `Device::<T>::register` sets only on devices it created; the core holds a reference.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            T::dellink(dev)?;
            Ok(0)
        })
    }
}

impl<T: Link> Default for LinkOps<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// A registered link type. Unregisters on drop; no new device can be created after that.
///
/// # Invariants
///
/// `ops` is registered with `rdma_link_register` while this object lives.
pub struct LinkRegistration<T: Link> {
    ops: &'static LinkOps<T>,
}

impl<T: Link> LinkRegistration<T> {
    /// Registers `ops` with the RDMA core.
    pub fn new(ops: &'static LinkOps<T>) -> Self {
        // SAFETY: `ops` is a static table that outlives the registration.
        unsafe { bindings::rdma_link_register(ops.as_raw()) };
        // INVARIANT: Registered above.
        Self { ops }
    }
}

impl<T: Link> Drop for LinkRegistration<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `ops` is registered.
        unsafe { bindings::rdma_link_unregister(self.ops.as_raw()) };
    }
}
