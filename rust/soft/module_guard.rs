// SPDX-License-Identifier: GPL-2.0

//! Keeping a conflicting module out of the kernel.
//!
//! roxe speaks the rxe ABI under the same driver id as the in-tree `rdma_rxe` and needs the same
//! UDP port, so the two must never run together: unloading `rdma_rxe` would unregister every
//! device of that driver id, roxe's included. [`ModuleBlocker`] refuses a load while it lives,
//! and [`module_loaded`] tells whether the other module is already there.
//!
//! C header: [`include/linux/module.h`](srctree/include/linux/module.h)

use crate::rdma::bindings;
use core::ffi::CStr;
use kernel::{ffi, prelude::*, types::Opaque};

/// Whether a module called `name` is loaded (has an entry under `/sys/module`).
///
/// `this` is the calling module: every module's kobject belongs to the kernel's module kset, the
/// set searched here.
pub fn module_loaded(this: &ThisModule, name: &CStr) -> bool {
    let module = this.as_ptr().cast::<bindings::module>();
    if module.is_null() {
        return false;
    }
    // SAFETY: `this` is the live module running this code; `mkobj.kobj.kset` is set when the
    // module's sysfs entry is created, before its init function runs, and never changes.
    let kset = unsafe { (*module).mkobj.kobj.kset };
    if kset.is_null() {
        return false;
    }
    // SAFETY: `kset` is the module kset, which lives as long as the kernel; `name` is a valid
    // NUL-terminated string for the call.
    let kobj = unsafe { bindings::kset_find_obj(kset, name.as_char_ptr().cast()) };
    if kobj.is_null() {
        return false;
    }
    // SAFETY: `kset_find_obj` returned a reference that we own and drop here.
    unsafe { bindings::kobject_put(kobj) };
    true
}

/// While alive, makes the loading of the module `name` fail with `EBUSY`, logging `reason`.
///
/// # Invariants
///
/// `nb` is registered with `register_module_notifier` for as long as this object lives, and
/// `nb` is the first field, so the notifier callback can recover `Self` from it.
#[repr(C)]
#[pin_data(PinnedDrop)]
pub struct ModuleBlocker {
    #[pin]
    nb: Opaque<bindings::notifier_block>,
    name: &'static CStr,
    reason: &'static CStr,
}

// SAFETY: The blocker's fields are immutable after registration; the notifier block is
// synchronised by the kernel's module notifier chain.
unsafe impl Send for ModuleBlocker {}
// SAFETY: See above.
unsafe impl Sync for ModuleBlocker {}

impl ModuleBlocker {
    /// Fails with `EBUSY` if `name` is already loaded; otherwise keeps it from loading.
    pub fn new(
        this: &'static ThisModule,
        name: &'static CStr,
        reason: &'static CStr,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            name,
            reason,
            nb <- Opaque::try_ffi_init(move |nb: *mut bindings::notifier_block| {
                if module_loaded(this, name) {
                    pr_err!("{} is loaded: {}\n", name.to_str().unwrap_or("?"), reason.to_str().unwrap_or("?"));
                    return Err(EBUSY);
                }
                // SAFETY: `nb` is valid for writes and pinned.
                unsafe {
                    nb.write(bindings::notifier_block {
                        notifier_call: Some(Self::notifier_call),
                        ..Default::default()
                    })
                };
                // SAFETY: `nb` is initialised and stays pinned until `drop` unregisters it. The
                // other fields are written before `nb` (they come first in this initializer), so
                // the callback never sees them uninitialised.
                kernel::error::to_result(unsafe { bindings::register_module_notifier(nb) })
            }),
        })
    }

    /// The module notifier.
    ///
    /// # Safety
    ///
    /// Only the module notifier chain calls this, with `nb` the notifier block of a registered,
    /// live `ModuleBlocker` and, for each event, `data` the `struct module` it is about.
    unsafe extern "C" fn notifier_call(
        nb: *mut bindings::notifier_block,
        state: ffi::c_ulong,
        data: *mut ffi::c_void,
    ) -> ffi::c_int {
        if state as u32 != bindings::module_state_MODULE_STATE_COMING {
            return bindings::NOTIFY_DONE as ffi::c_int;
        }
        // CAST: `nb` is the first field of the `#[repr(C)]` `ModuleBlocker` (type invariant).
        // SAFETY: The blocker outlives its registration, so it is valid during the callback.
        let this = unsafe { &*nb.cast::<Self>() };
        let module = data.cast::<bindings::module>();
        // SAFETY: For module notifiers `data` is the `struct module` being loaded, whose `name`
        // is a NUL-terminated array fixed at load time.
        let name = unsafe { &(*module).name };
        // SAFETY: `c_char` and `u8` have the same layout; the slice covers the same array.
        let bytes = unsafe { core::slice::from_raw_parts(name.as_ptr().cast::<u8>(), name.len()) };
        if CStr::from_bytes_until_nul(bytes).ok() != Some(this.name) {
            return bindings::NOTIFY_DONE as ffi::c_int;
        }
        pr_err!(
            "refusing to load {}: {}\n",
            this.name.to_str().unwrap_or("?"),
            this.reason.to_str().unwrap_or("?")
        );
        // `notifier_from_errno(-EBUSY)`: stop the chain and make the load fail with EBUSY.
        (bindings::NOTIFY_STOP_MASK as ffi::c_int)
            | ((bindings::NOTIFY_OK as ffi::c_int) + EBUSY.to_errno().abs())
    }
}

#[pinned_drop]
impl PinnedDrop for ModuleBlocker {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant `nb` is registered.
        unsafe { bindings::unregister_module_notifier(self.nb.get()) };
    }
}
