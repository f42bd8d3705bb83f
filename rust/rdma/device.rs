// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`): the device a driver registers, what the rest of the kernel
//! and the driver can ask of it, and the types of the driver data its objects carry.
//!
//! The RDMA core allocates the device and the objects hung off it (user contexts, later PDs,
//! CQs, QPs...). A driver's per-object data lives right after the C object in the same
//! allocation, as in C's `INIT_RDMA_OBJ_SIZE`: [`Device<T>`] is `#[repr(C)]` with the
//! `ib_device` first and `T::Data` after it. The verbs themselves are in `driver.rs`, their
//! C trampolines in `ops/`, registration in `link.rs`.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{bindings, netdev::NetDevice};
use core::{ffi::CStr, marker::PhantomData, ops::Deref, ptr::NonNull};
use kernel::{prelude::*, sync::aref::ARef, types::Opaque};

/// The types of a driver's per-object data: what the RDMA core's objects of its devices carry
/// after the C object (see [`Object`](super::object::Object)). The base of the verbs trait
/// ([`Driver`](super::driver::Driver)), apart from it so that devices and objects can name
/// these types without depending on the verbs.
pub trait DriverTypes: Sized + Send + Sync + 'static {
    /// Per-device driver data, initialised in place at device creation, dropped when the core
    /// frees the device.
    type Data: Send + Sync;

    /// Per-user-context driver data.
    type UContext: Send + Sync;

    /// Per-protection-domain driver data.
    type Pd: Send + Sync;

    /// Per-completion-queue driver data.
    type Cq: Send + Sync;

    /// Per-queue-pair driver data.
    type Qp: Send + Sync;

    /// Per-shared-receive-queue driver data.
    type Srq: Send + Sync;

    /// Per-address-handle driver data.
    type Ah: Send + Sync;

    /// Per-memory-region driver data.
    type Mr: Send + Sync;

    /// Per-memory-window driver data.
    type Mw: Send + Sync;
}

/// Asynchronous port events (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortEvent {
    /// The port became active.
    Active,
    /// The port went down.
    Error,
}

/// An RDMA device created by driver `T`.
///
/// # Invariants
///
/// - `ibdev` was allocated by `_ib_alloc_device` with the size of `Self`, and `data` is
///   initialised for as long as the device's ops are `Adapter::<T>`'s (from `register` until
///   `dealloc_driver`).
/// - A `&Device<T>` is only handed out while the holder owns a reference on the device or runs in
///   one of its ops, during which the core keeps it alive.
#[repr(C)]
pub struct Device<T: DriverTypes> {
    pub(super) ibdev: Opaque<bindings::ib_device>,
    pub(super) data: T::Data,
}

// SAFETY: The core synchronises the `ib_device` itself; `T::Data` is `Send + Sync`.
unsafe impl<T: DriverTypes> Send for Device<T> {}
// SAFETY: See above.
unsafe impl<T: DriverTypes> Sync for Device<T> {}

impl<T: DriverTypes> Device<T> {
    /// # Safety
    ///
    /// `ibdev` was created by [`Device::<T>::register`] and is alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ibdev: *mut bindings::ib_device) -> &'a Self {
        // CAST: `ibdev` is the first field of the `#[repr(C)]` `Device<T>`.
        // SAFETY: By the function's safety requirements.
        unsafe { &*ibdev.cast::<Self>() }
    }

    /// The device whose data is at `data` (`container_of`).
    ///
    /// # Safety
    ///
    /// `data` points to the `data` field of a `Device<T>` alive for `'a`.
    pub(crate) unsafe fn from_data<'a>(data: *const T::Data) -> &'a Self {
        let offset = core::mem::offset_of!(Self, data);
        // SAFETY: By the function's contract, stepping back `offset` bytes reaches the device.
        unsafe { &*data.cast::<u8>().sub(offset).cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ibdev.get()
    }

    /// The driver's data of this device.
    pub fn data(&self) -> &T::Data {
        &self.data
    }

    /// The device's name, e.g. `roxe0`.
    pub fn name(&self) -> &CStr {
        // SAFETY: The device is alive (type invariant); its name is a NUL-terminated array that
        // only changes under the core's rename lock, always to a complete new name.
        let name = unsafe { &(*self.as_raw()).name };
        // SAFETY: `c_char` and `u8` have the same layout; the slice covers the same array.
        let bytes = unsafe { core::slice::from_raw_parts(name.as_ptr().cast::<u8>(), name.len()) };
        CStr::from_bytes_until_nul(bytes).unwrap_or(c"?")
    }

    /// The netdev bound to `port`, with a reference held, or `None` once it is gone.
    pub fn netdev(&self, port: u32) -> Option<ARef<NetDevice>> {
        // SAFETY: The device is alive; `ib_device_get_netdev` returns a held netdev or NULL.
        let ndev = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        let ndev = NonNull::new(ndev)?;
        // SAFETY: We own the reference `ib_device_get_netdev` took.
        Some(unsafe { ARef::from_raw(ndev.cast::<NetDevice>()) })
    }

    /// The port's speed and width from the netdev's link settings (`ib_get_eth_speed`).
    ///
    /// Takes RTNL: must not be called from a netdev notifier.
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: The device is alive; the out-pointers are valid locals.
        kernel::error::to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Reports an asynchronous event on `port` to the core and user space.
    pub fn dispatch_port_event(&self, port: u32, event: PortEvent) {
        let mut ev = bindings::ib_event {
            device: self.as_raw(),
            event: match event {
                PortEvent::Active => bindings::ib_event_type_IB_EVENT_PORT_ACTIVE,
                PortEvent::Error => bindings::ib_event_type_IB_EVENT_PORT_ERR,
            },
            ..Default::default()
        };
        ev.element.port_num = port;
        // SAFETY: The device is alive and `ev` is a complete event; the core copies what it keeps.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }

    /// Schedules the unregistration of the device (`ib_unregister_device_queued`), for contexts
    /// that hold locks the unregistration needs, such as RTNL in a netdev notifier.
    pub fn unregister_queued(&self) {
        // SAFETY: The device is alive and registered with a `dealloc_driver` op.
        unsafe { bindings::ib_unregister_device_queued(self.as_raw()) };
    }
}

/// A reference-counted handle to a [`Device<T>`]. Drops its reference (`ib_device_put`).
///
/// # Invariants
///
/// `dev` is a device created by `register`, on which this handle owns a reference.
pub struct DeviceRef<T: DriverTypes> {
    pub(super) dev: NonNull<Device<T>>,
    pub(super) _t: PhantomData<T>,
}

impl<T: DriverTypes> Deref for DeviceRef<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: By the type invariant the device is alive while the handle exists.
        unsafe { self.dev.as_ref() }
    }
}

impl<T: DriverTypes> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: We own a reference (type invariant).
        unsafe { bindings::ib_device_put(self.dev.as_ptr().cast()) };
    }
}

/// Nanoseconds of the monotonic clock, for short intervals. Any context.
pub fn now_ns() -> u64 {
    // SAFETY: Reads the clock; no precondition.
    unsafe { bindings::roxe_helper_ktime_ns() }
}

/// Milliseconds since boot, from the jiffies clock.
pub fn now_ms() -> u64 {
    // SAFETY: Reads the jiffies counter.
    unsafe { bindings::roxe_helper_jiffies_ms() }
}
