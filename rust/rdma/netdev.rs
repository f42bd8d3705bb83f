// SPDX-License-Identifier: GPL-2.0

//! Network devices, as far as an RDMA driver needs them: reading a netdev's state and following
//! its events.
//!
//! C header: [`include/linux/netdevice.h`](srctree/include/linux/netdevice.h)

use super::bindings;
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{
    ffi,
    prelude::*,
    sync::aref::AlwaysRefCounted,
    types::Opaque, //
};

/// A network device (`struct net_device`).
///
/// # Invariants
///
/// A `&NetDevice` points to a live `struct net_device`: the holder of the reference owns a
/// reference count on it ([`ARef<NetDevice>`](kernel::sync::aref::ARef)), or runs in a callback
/// (netdev notifier, RDMA link op) during which the core keeps the device alive.
#[repr(transparent)]
pub struct NetDevice(Opaque<bindings::net_device>);

// SAFETY: `struct net_device` is used from any thread; all accessors below read fields the kernel
// allows to be read concurrently (with READ_ONCE semantics) or call thread-safe functions.
unsafe impl Send for NetDevice {}
// SAFETY: See above.
unsafe impl Sync for NetDevice {}

// SAFETY: `dev_hold`/`dev_put` manage the netdev's reference count; a held reference keeps the
// `struct net_device` allocated.
unsafe impl AlwaysRefCounted for NetDevice {
    fn inc_ref(&self) {
        // SAFETY: By the type invariant the device is live.
        unsafe { bindings::roxe_helper_dev_hold(self.as_raw()) };
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference taken by `inc_ref` (or `dev_hold` in C).
        unsafe { bindings::roxe_helper_dev_put(obj.as_ptr().cast()) };
    }
}

/// Length of an Ethernet MAC address.
pub const ETH_ALEN: usize = 6;

impl NetDevice {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` points to a live `struct net_device` that stays alive for `'a` (the caller holds a
    /// reference count or runs in a callback that guarantees it).
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::net_device) -> &'a Self {
        // CAST: `NetDevice` is a transparent wrapper of `struct net_device`.
        // SAFETY: By the function's safety requirements.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The raw pointer.
    pub(crate) fn as_raw(&self) -> *mut bindings::net_device {
        self.0.get()
    }

    /// The interface name, e.g. `eth0`.
    pub fn name(&self) -> &CStr {
        // SAFETY: By the type invariant the device is live; `name` is a NUL-terminated array the
        // kernel only rewrites under RTNL with a complete new name (a racing reader sees a
        // stale or new name, always terminated within the array).
        let name = unsafe { &(*self.as_raw()).name };
        // SAFETY: `c_char` and `u8` have the same size and alignment, so the array is a valid
        // `[u8]` of the same length for the same lifetime.
        let bytes = unsafe { core::slice::from_raw_parts(name.as_ptr().cast::<u8>(), name.len()) };
        CStr::from_bytes_until_nul(bytes).unwrap_or(c"?")
    }

    /// The Ethernet MTU (payload bytes of a frame).
    pub fn mtu(&self) -> u32 {
        // SAFETY: By the type invariant the device is live; the kernel reads `mtu` locklessly
        // with READ_ONCE, which a volatile read matches.
        unsafe { core::ptr::addr_of!((*self.as_raw()).mtu).read_volatile() }
    }

    /// The interface index.
    pub fn ifindex(&self) -> i32 {
        // SAFETY: By the type invariant the device is live; `ifindex` is set at registration.
        unsafe { (*self.as_raw()).ifindex }
    }

    /// Whether the interface is administratively up (`netif_running`).
    pub fn is_running(&self) -> bool {
        // SAFETY: By the type invariant the device is live.
        unsafe { bindings::roxe_helper_netif_running(self.as_raw()) }
    }

    /// Whether the link has a carrier (`netif_carrier_ok`).
    pub fn has_carrier(&self) -> bool {
        // SAFETY: By the type invariant the device is live.
        unsafe { bindings::roxe_helper_netif_carrier_ok(self.as_raw()) }
    }

    /// Whether this is a VLAN device stacked on another netdev.
    pub fn is_vlan(&self) -> bool {
        // SAFETY: By the type invariant the device is live.
        unsafe { bindings::roxe_helper_is_vlan_dev(self.as_raw()) }
    }

    /// Whether `addr` is an IPv6 address of an interface in this device's network namespace
    /// (`ipv6_chk_addr`, any interface, tentative ones included). Any context: the lookup runs
    /// under RCU.
    pub fn ipv6_addr_is_local(&self, addr: &[u8; 16]) -> bool {
        // SAFETY: By the type invariant the device is live; `addr` holds the 16 bytes the
        // call reads.
        unsafe { bindings::roxe_helper_ipv6_addr_is_local(self.as_raw(), addr.as_ptr()) }
    }

    /// Adds `mac` to the device's multicast address filter (`dev_mc_add`, reference counted by
    /// the kernel: each add needs its own [`NetDevice::mc_del`]). Process context.
    pub fn mc_add(&self, mac: &[u8; ETH_ALEN]) -> Result {
        // SAFETY: By the type invariant the device is live; `mac` holds `ETH_ALEN` bytes, which
        // the call copies.
        kernel::error::to_result(unsafe { bindings::dev_mc_add(self.as_raw(), mac.as_ptr()) })
    }

    /// Drops one reference to `mac` in the multicast filter (`dev_mc_del`). Process context.
    pub fn mc_del(&self, mac: &[u8; ETH_ALEN]) -> Result {
        // SAFETY: As in `mc_add`.
        kernel::error::to_result(unsafe { bindings::dev_mc_del(self.as_raw(), mac.as_ptr()) })
    }

    /// The hardware address, if the device has a 6-byte (Ethernet) one.
    pub fn mac(&self) -> Option<[u8; ETH_ALEN]> {
        let dev = self.as_raw();
        // SAFETY: By the type invariant the device is live; `addr_len` is fixed at setup.
        let len = unsafe { (*dev).addr_len };
        // SAFETY: As above; `dev_addr` points to at least `addr_len` bytes while the device lives.
        let addr = unsafe { (*dev).dev_addr };
        if usize::from(len) != ETH_ALEN || addr.is_null() {
            return None;
        }
        let mut mac = [0u8; ETH_ALEN];
        // SAFETY: `addr` holds `ETH_ALEN` readable bytes (checked above); `mac` is a local array.
        unsafe { core::ptr::copy_nonoverlapping(addr, mac.as_mut_ptr(), ETH_ALEN) };
        Some(mac)
    }
}

/// A netdev event a driver follows (`enum netdev_cmd`, the subset RDMA drivers care about).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetdevEvent {
    /// The interface was brought up.
    Up,
    /// The interface was brought down.
    Down,
    /// Flags or carrier changed.
    Change,
    /// The MTU changed.
    ChangeMtu,
    /// The device is being unregistered: drop every reference to it.
    Unregister,
    /// Any other event.
    Other,
}

impl NetdevEvent {
    fn from_raw(event: ffi::c_ulong) -> Self {
        match event as u32 {
            bindings::netdev_cmd_NETDEV_UP => Self::Up,
            bindings::netdev_cmd_NETDEV_DOWN => Self::Down,
            bindings::netdev_cmd_NETDEV_CHANGE => Self::Change,
            bindings::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            bindings::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            _ => Self::Other,
        }
    }
}

/// A receiver of netdev events for every netdev of every namespace.
///
/// Called in process context with RTNL held.
pub trait NetdevNotifier: 'static {
    /// Handles `event` for `dev`.
    fn event(event: NetdevEvent, dev: &NetDevice);
}

/// A registered netdev notifier. Unregisters on drop.
///
/// # Invariants
///
/// `nb` is registered with `register_netdevice_notifier` for as long as this object lives.
#[pin_data(PinnedDrop)]
pub struct NetdevNotifierRegistration<T: NetdevNotifier> {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    _t: PhantomData<T>,
}

// SAFETY: The registration only holds a notifier block the kernel synchronises itself.
unsafe impl<T: NetdevNotifier> Send for NetdevNotifierRegistration<T> {}
// SAFETY: No method reads or writes the block after registration.
unsafe impl<T: NetdevNotifier> Sync for NetdevNotifierRegistration<T> {}

impl<T: NetdevNotifier> NetdevNotifierRegistration<T> {
    /// Registers the notifier. The kernel replays `Up` events for devices already up.
    pub fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nb <- Opaque::try_ffi_init(|nb: *mut bindings::notifier_block| {
                // SAFETY: `nb` is valid for writes and pinned; it is registered only once it is
                // fully initialised.
                unsafe {
                    nb.write(bindings::notifier_block {
                        notifier_call: Some(Self::notifier_call),
                        ..Default::default()
                    })
                };
                // SAFETY: `nb` is initialised and stays pinned until `drop` unregisters it.
                kernel::error::to_result(unsafe { bindings::register_netdevice_notifier(nb) })
            }),
            _t: PhantomData,
        })
    }

    /// The netdevice notifier.
    ///
    /// # Safety
    ///
    /// Only the netdevice notifier chain calls this, for a registered
    /// `NetdevNotifierRegistration<T>`, with `ptr` the event's `netdev_notifier_info`, valid for
    /// the call.
    unsafe extern "C" fn notifier_call(
        _nb: *mut bindings::notifier_block,
        event: ffi::c_ulong,
        ptr: *mut ffi::c_void,
    ) -> ffi::c_int {
        // SAFETY: For netdev notifier chains `ptr` is a `struct netdev_notifier_info`.
        let ndev = unsafe { bindings::roxe_helper_netdev_notifier_info_to_dev(ptr.cast()) };
        if ndev.is_null() {
            return bindings::NOTIFY_DONE as ffi::c_int;
        }
        // SAFETY: The notifier chain keeps `ndev` alive for the duration of the call (RTNL).
        let dev = unsafe { NetDevice::from_raw(ndev) };
        T::event(NetdevEvent::from_raw(event), dev);
        bindings::NOTIFY_OK as ffi::c_int
    }
}

#[pinned_drop]
impl<T: NetdevNotifier> PinnedDrop for NetdevNotifierRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `nb` is registered; unregistering waits for running
        // callbacks to finish.
        unsafe { bindings::unregister_netdevice_notifier(self.nb.get()) };
    }
}
