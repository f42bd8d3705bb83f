// SPDX-License-Identifier: GPL-2.0

//! RDMA link types: `rdma link add NAME type TYPE netdev DEV` and `rdma link delete NAME`, and
//! the registration of the devices a link creates.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)

use super::{
    bindings,
    device::{Device, DeviceRef},
    driver::Driver,
    netdev::NetDevice,
    ops::Adapter,
};
use core::{ffi::CStr, marker::PhantomData, mem::size_of, ptr::NonNull};
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
/// The wrapped `rdma_link_ops` has a `type` that lives for the program (`T::TYPE`, or another
/// name for the same link type) and the callbacks of `T`. The core links it into its list
/// (mutating `list`) only between [`LinkRegistration`]'s register and unregister calls.
pub struct LinkOps<T: Link> {
    ops: Opaque<bindings::rdma_link_ops>,
    _t: PhantomData<T>,
}

// SAFETY: The core serialises all access to the ops (its link-ops lock).
unsafe impl<T: Link> Sync for LinkOps<T> {}

impl<T: Link> LinkOps<T> {
    /// Creates the operations table.
    pub const fn new() -> Self {
        Self::with_type(T::TYPE)
    }

    /// Creates an operations table that answers to `ty` instead of `T::TYPE`, for a driver that
    /// stands in for another's link type. The devices it creates are `T`'s as any others:
    /// they point to [`Link::link_ops`], which `rdma link delete` goes through.
    pub const fn with_type(ty: &'static CStr) -> Self {
        Self {
            ops: Opaque::new(bindings::rdma_link_ops {
                list: bindings::list_head {
                    next: core::ptr::null_mut(),
                    prev: core::ptr::null_mut(),
                },
                type_: kernel::str::as_char_ptr_in_const_context(ty).cast(),
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

impl<T: Link> Device<T> {
    /// The device of this driver bound to `netdev`, if any, with a reference held.
    pub fn get_by_netdev(netdev: &NetDevice) -> Option<DeviceRef<T>> {
        // SAFETY: `netdev` is alive; the call returns a held device or NULL.
        let ibdev =
            unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), T::DRIVER_ID.as_raw()) };
        let ibdev = NonNull::new(ibdev)?;
        // Another driver may use the same driver id (the in-tree one for the rxe ABI): only a
        // device pointing to our link ops was created by `register` as a `Device<T>`.
        // SAFETY: The device is alive (we hold a reference); `link_ops` is set before
        // registration and never changes.
        let link_ops = unsafe { (*ibdev.as_ptr()).link_ops };
        let ours = core::ptr::eq(link_ops, T::link_ops().as_raw());
        if !ours {
            // SAFETY: We own the reference taken above.
            unsafe { bindings::ib_device_put(ibdev.as_ptr()) };
            return None;
        }
        // INVARIANT: A held reference on a device created by `register`.
        Some(DeviceRef {
            dev: ibdev.cast(),
            _t: PhantomData,
        })
    }

    /// Allocates, initialises and registers a device called `name` on `netdev`. The RDMA core
    /// owns it from then on; it is freed after unregistration (`rdma link delete`,
    /// [`Device::unregister_queued`], or [`unregister_all`] at module unload).
    ///
    /// `node_guid` is in wire (big-endian) byte order.
    pub fn register(
        module: &'static ThisModule,
        name: &CStr,
        netdev: &NetDevice,
        node_guid: [u8; 8],
        node_desc: &CStr,
        data: impl PinInit<T::Data, Error>,
    ) -> Result {
        // SAFETY: `init_net` lives as long as the kernel. The size covers `Device<T>`, whose first
        // field is the `ib_device` (`_ib_alloc_device` requires this, like INIT_RDMA_OBJ_SIZE).
        let ibdev = unsafe {
            bindings::_ib_alloc_device(
                size_of::<Self>(),
                core::ptr::addr_of_mut!(bindings::init_net),
            )
        };
        let ibdev = NonNull::new(ibdev).ok_or(ENOMEM)?;
        let dev = ibdev.as_ptr().cast::<Self>();

        // SAFETY: `data` lies inside the fresh allocation, right after the `ib_device`, and is
        // pinned there (the core never moves the device).
        let init = unsafe {
            crate::compat::init::raw_try_init(core::ptr::addr_of_mut!((*dev).data), data)
        };
        if let Err(e) = init {
            // No ops are set yet, so no `dealloc_driver` runs over the uninitialised data.
            // SAFETY: The device was allocated above and never registered.
            unsafe { bindings::ib_dealloc_device(ibdev.as_ptr()) };
            return Err(e);
        }

        let ops = Adapter::<T>::ops(module);
        // SAFETY: The device is allocated and not yet registered, so we have exclusive access to
        // it. The core copies the ops table. From here on `dealloc_driver` drops `data`.
        unsafe {
            let ib = ibdev.as_ptr();
            bindings::ib_set_device_ops(ib, &ops);
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*ib).phys_port_cnt = 1;
            (*ib).num_comp_vectors = 1;
            (*ib).node_guid = u64::from_ne_bytes(node_guid);
            (*ib).link_ops = T::link_ops().as_raw();
            for cmd in T::UVERBS_WRITE_CMDS {
                (*ib).uverbs_cmd_mask |= cmd.mask();
            }
            let desc = node_desc.to_bytes();
            let n = desc.len().min((*ib).node_desc.len() - 1);
            for (d, s) in (*ib).node_desc.iter_mut().zip(desc[..n].iter()) {
                *d = *s as ffi::c_char;
            }
        }

        // SAFETY: The data is initialised and the device alive (ours until registration, then
        // the core's until `dealloc_driver`, which cannot run during this call).
        T::registering(unsafe { &*dev });

        // SAFETY: The device is allocated and exclusively ours; `netdev` is alive (the caller runs
        // in a link op). The core takes its own reference on the netdev.
        let err = unsafe { bindings::ib_device_set_netdev(ibdev.as_ptr(), netdev.as_raw(), 1) };
        if err != 0 {
            // SAFETY: Not registered; `dealloc_driver` drops `data`.
            unsafe { bindings::ib_dealloc_device(ibdev.as_ptr()) };
            return Err(Error::from_errno(err));
        }
        // Topology: the netdev's parent (the PCI function or virtio device under it) becomes the
        // RDMA device's parent in sysfs, as hardware RDMA drivers do, so `device/` and the
        // `numa_node` above it place the device next to its NIC. A virtual netdev (veth,
        // bridge, loopback) has none, and the device stays at the top level. This is only the
        // sysfs parent: DMA is set by the third argument of `ib_register_device` below.
        // SAFETY: The device is not yet registered, so its `dev` is ours to set up (the union
        // member the core itself uses; `coredev` begins with the same `struct device`); `netdev`
        // is alive for this call. `device_add` takes a reference on the parent, which keeps it
        // alive for as long as the RDMA device is registered.
        unsafe { (*ibdev.as_ptr()).__bindgen_anon_1.dev.parent = (*netdev.as_raw()).dev.parent };
        // SAFETY: The device is fully initialised; `name` is a valid string for the call. A NULL
        // DMA device makes the core use virtual DMA, which a software HCA needs.
        let err = unsafe {
            bindings::ib_register_device(
                ibdev.as_ptr(),
                name.as_char_ptr().cast(),
                core::ptr::null_mut(),
            )
        };
        if err != 0 {
            // SAFETY: Registration failed, so the device is still ours to free.
            unsafe { bindings::ib_dealloc_device(ibdev.as_ptr()) };
            return Err(Error::from_errno(err));
        }
        Ok(())
    }
}
