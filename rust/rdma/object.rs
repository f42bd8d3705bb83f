// SPDX-License-Identifier: GPL-2.0

//! Verbs objects the RDMA core allocates for a driver, and the user data (`struct ib_udata`) that
//! comes with their creation.
//!
//! For user contexts, PDs, CQs, QPs, SRQs, AHs and MWs the core allocates the C object with the
//! size the driver declared (`size_ib_<object>`, C's `INIT_RDMA_OBJ_SIZE`), calls the driver's
//! create op, and frees the memory after the destroy op. [`Object<C, D>`] is that allocation: the
//! C object first, the driver's data `D` right after it. The data is written when the create op
//! succeeds and dropped (or moved out) by the destroy op, so a `&Object` exists only in between.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    bindings,
    device::{Device, DriverTypes},
};
use core::{marker::PhantomData, mem::size_of, ptr::NonNull};
use kernel::{prelude::*, transmute::AsBytes, types::Opaque};

/// A C verbs object type whose first fields name its device.
///
/// # Safety
///
/// `device` must return the `device` field of a live object of this type.
pub unsafe trait IbObject {
    /// The device the object at `this` belongs to.
    ///
    /// # Safety
    ///
    /// `this` points to a live object whose `device` field is set.
    unsafe fn device(this: *mut Self) -> *mut bindings::ib_device;
}

macro_rules! ib_object {
    ($($t:ident),*) => {$(
        // SAFETY: Every one of these C structures has a `device` field that the core sets before
        // calling the driver.
        unsafe impl IbObject for bindings::$t {
            unsafe fn device(this: *mut Self) -> *mut bindings::ib_device {
                // SAFETY: By the function's safety requirements.
                unsafe { (*this).device }
            }
        }
    )*};
}
ib_object!(
    ib_ucontext,
    ib_pd,
    ib_cq,
    ib_qp,
    ib_srq,
    ib_ah,
    ib_mw,
    ib_mr
);

/// A verbs object allocated by the RDMA core for a device of driver `T`: C object `C`, then the
/// driver's data `D`.
///
/// # Invariants
///
/// - `ib` was allocated by the core with `size_of::<Self>()` bytes for a device of driver `T`,
///   whose ops declared that size, so `data` lies inside the allocation and the object's device
///   is a [`Device<T>`].
/// - `data` is initialised from the create op's success until the destroy op; references to an
///   `Object` are only created in that window.
#[repr(C)]
pub struct Object<C, D, T: DriverTypes> {
    ib: Opaque<C>,
    data: D,
    _t: PhantomData<T>,
}

impl<C: IbObject, D, T: DriverTypes> Object<C, D, T> {
    /// The size the core must allocate (`size_ib_<object>`).
    pub(crate) const SIZE: usize = size_of::<Self>();

    /// # Safety
    ///
    /// `raw` is a live object allocated with [`Self::SIZE`] bytes whose data is initialised, and
    /// it stays so for `'a`.
    pub(crate) unsafe fn from_raw<'a>(raw: *mut C) -> &'a Self {
        // CAST: `ib` is the first field of the `#[repr(C)]` struct.
        // SAFETY: By the function's safety requirements.
        unsafe { &*raw.cast::<Self>() }
    }

    /// Writes the driver's data of a freshly created object.
    ///
    /// # Safety
    ///
    /// `raw` was allocated with [`Self::SIZE`] bytes and its data is not initialised.
    pub(crate) unsafe fn init_data(raw: *mut C, data: D) {
        let this = raw.cast::<Self>();
        // SAFETY: In bounds by the size the core allocated; uninitialised, so nothing is dropped.
        unsafe { core::ptr::addr_of_mut!((*this).data).write(data) };
    }

    /// Moves the driver's data out of an object being destroyed.
    ///
    /// # Safety
    ///
    /// The data of `raw` is initialised; afterwards it is not, and no reference to the object
    /// may be used again.
    pub(crate) unsafe fn take_data(raw: *mut C) -> D {
        let this = raw.cast::<Self>();
        // SAFETY: Initialised by the safety requirements; read exactly once.
        unsafe { core::ptr::addr_of_mut!((*this).data).read() }
    }

    /// The C object.
    pub(crate) fn as_raw(&self) -> *mut C {
        self.ib.get()
    }

    /// The driver's data.
    pub fn data(&self) -> &D {
        &self.data
    }
}

impl<C: IbObject, D, T: DriverTypes> Object<C, D, T> {
    /// The device the object belongs to.
    pub fn device(&self) -> &Device<T> {
        // SAFETY: The object is live (type invariant), so its `device` field is set, and it
        // belongs to a device of driver `T` (type invariant).
        unsafe { Device::<T>::from_raw(C::device(self.as_raw())) }
    }
}

/// The driver-specific part of a verbs command from user space (`struct ib_udata`): the request
/// bytes user space sent after the generic command, and room for the driver's response.
///
/// Kernel consumers create objects without one: ops receive `Option<&UData>`.
///
/// # Invariants
///
/// `raw` is a live `ib_udata` of the command being executed, valid for `'a`.
pub struct UData<'a> {
    raw: NonNull<bindings::ib_udata>,
    _p: PhantomData<&'a bindings::ib_udata>,
}

impl<'a> UData<'a> {
    /// # Safety
    ///
    /// `raw` is NULL or a live `ib_udata` for `'a`.
    pub(crate) unsafe fn from_raw(raw: *mut bindings::ib_udata) -> Option<UData<'a>> {
        // INVARIANT: Non-NULL, live by the safety requirements.
        NonNull::new(raw).map(|raw| UData {
            raw,
            _p: PhantomData,
        })
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_udata {
        self.raw.as_ptr()
    }

    /// Bytes of driver request user space sent.
    pub fn in_len(&self) -> usize {
        // SAFETY: Live by the type invariant.
        unsafe { (*self.raw.as_ptr()).inlen }
    }

    /// Room user space gave for the driver's response.
    pub fn out_len(&self) -> usize {
        // SAFETY: Live by the type invariant.
        unsafe { (*self.raw.as_ptr()).outlen }
    }

    /// Fails with `EOPNOTSUPP`-style errors unless the request is empty or all zeros: for
    /// commands with no driver request, so that future request fields are not silently ignored.
    pub fn check_in_empty(&self) -> Result {
        if self.in_len() == 0 {
            return Ok(());
        }
        // SAFETY: Live udata; a NULL request of size 0 asks only for the zero check.
        kernel::error::to_result(unsafe {
            bindings::_ib_copy_validate_udata_in(self.as_raw(), core::ptr::null_mut(), 0, 0)
        })
    }

    /// Copies the driver's request into `req`: at least `min_len` bytes must be present, and any
    /// bytes past `size_of::<R>()` must be zero.
    pub fn copy_in<R: AsBytes + kernel::transmute::FromBytes>(
        &self,
        req: &mut R,
        min_len: usize,
    ) -> Result {
        // SAFETY: Live udata; `req` is a valid, writable `R` of `size_of::<R>()` bytes, and any
        // byte pattern is a valid `R` (`FromBytes`).
        kernel::error::to_result(unsafe {
            bindings::_ib_copy_validate_udata_in(
                self.as_raw(),
                core::ptr::from_mut(req).cast(),
                size_of::<R>(),
                min_len,
            )
        })
    }

    /// Copies the driver's request into `req`, as [`UData::copy_in`] does for a byte layout the
    /// caller decodes itself.
    pub fn copy_in_bytes(&self, req: &mut [u8], min_len: usize) -> Result {
        // SAFETY: Live udata; `req` is a valid, writable buffer of `req.len()` bytes.
        kernel::error::to_result(unsafe {
            bindings::_ib_copy_validate_udata_in(
                self.as_raw(),
                req.as_mut_ptr().cast(),
                req.len(),
                min_len,
            )
        })
    }

    /// Writes the driver's response, already laid out as bytes (truncated to the room user space
    /// gave, zero padded beyond).
    pub fn respond_bytes(&self, resp: &[u8]) -> Result {
        // SAFETY: Live udata; `resp` is `resp.len()` initialised bytes.
        kernel::error::to_result(unsafe {
            bindings::_ib_respond_udata(self.as_raw(), resp.as_ptr().cast(), resp.len())
        })
    }

    /// Writes the driver's response (truncated to the room user space gave, zero padded beyond).
    pub fn respond<R: AsBytes>(&self, resp: &R) -> Result {
        // SAFETY: Live udata; `resp` is `size_of::<R>()` initialised bytes (`AsBytes`).
        kernel::error::to_result(unsafe {
            bindings::_ib_respond_udata(
                self.as_raw(),
                core::ptr::from_ref(resp).cast(),
                size_of::<R>(),
            )
        })
    }

    /// The driver data of the user context of the process that issued the command, when that
    /// context is one of `dev`'s (it always is for a command on `dev`; the check makes the type
    /// of the data certain).
    pub fn ucontext<T: DriverTypes>(&self, dev: &Device<T>) -> Option<&T::UContext> {
        let uctx = self.ucontext_raw();
        if uctx.is_null() {
            return None;
        }
        // SAFETY: The user context of a live command is alive while the command runs (the core
        // holds it), at least as long as `self`.
        let owner = unsafe { (*uctx).device };
        if owner != dev.as_raw() {
            return None;
        }
        // SAFETY: Alive as above; a user context of a device of driver `T` was initialised with
        // `T::UContext` data by `T`'s `alloc_ucontext` op (`ops::alloc_ucontext`), so it is a
        // `UContext<T>`; the reference does not outlive the command.
        Some(unsafe { UContext::<T>::from_raw(uctx) }.data())
    }

    /// The user context of the process that issued the command.
    pub(crate) fn ucontext_raw(&self) -> *mut bindings::ib_ucontext {
        // SAFETY: Live udata of a uverbs command, which is always embedded in an attribute bundle.
        unsafe { bindings::roxe_helper_udata_to_ucontext(self.as_raw()) }
    }
}

/// A user context: the driver's view of a process that opened the device.
pub type UContext<T> = Object<bindings::ib_ucontext, <T as DriverTypes>::UContext, T>;
