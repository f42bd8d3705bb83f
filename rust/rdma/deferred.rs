// SPDX-License-Identifier: GPL-2.0

//! The deferred work of a driver's devices: the [`Deferred`] trait a driver implements to run
//! a periodic tick, a short timer and softirq and process-context work for its devices, and
//! the [`Device`] methods that ask for them.
//!
//! The C RDMA core schedules nothing for a driver (rxe keeps its own tasks and timers), so this
//! is not part of the core's mirror: it sits beside it, on the [`Sched`] every [`Device`]
//! embeds, set up at allocation and stopped in `dealloc_driver` before the driver's data is
//! dropped.

use super::{
    bindings,
    device::{Device, DriverTypes},
    sched::Sched,
};

/// What a driver's devices do when their deferred work runs.
pub trait Deferred: DriverTypes {
    /// Period of [`Deferred::tick`] in milliseconds, from registration until the device is
    /// freed; 0 for no tick.
    const TICK_MS: u32;

    /// Periodic work of a registered device (e.g. retransmission and RNR timers). Softirq
    /// context.
    fn tick(dev: &Device<Self>);

    /// Runs once, in softirq context (the BH workqueue), when the timer
    /// [`Device::start_short_timer`] started expires.
    fn short_timer(dev: &Device<Self>);

    /// Work asked for with [`Device::kick`], e.g. from a context that may not transmit (kernel
    /// consumers post with interrupts disabled). Softirq context (the BH workqueue).
    fn kicked(dev: &Device<Self>);

    /// Work asked for with [`Device::queue_process_work`]: process context (the unbound system
    /// workqueue), may sleep, e.g. to fault in on-demand-paging memory for the data path.
    fn process_work(_dev: &Device<Self>) {}
}

impl<T: Deferred> Device<T> {
    /// Starts the device's short timer: [`Deferred::short_timer`] runs once in softirq context,
    /// no sooner than `us` microseconds from now and no later than one scheduler tick after
    /// that: within that slack the timer expires with the tick, so that on a busy CPU starting
    /// and stopping it costs no reprogramming of the clock event device. Starting it while it is
    /// armed moves the expiry, so the driver keeps track of whether it is. Any context.
    pub fn start_short_timer(&self, us: u32) {
        self.sched.arm_short_timer(us);
    }

    /// Stops the short timer without waiting: `true` when its callback will not run for the
    /// last start, `false` when it runs or has run since that start. Any context.
    pub fn try_cancel_short_timer(&self) -> bool {
        self.sched.try_cancel_short_timer()
    }

    /// Asks for [`Deferred::kicked`] to run soon in softirq context. Any context, including with
    /// interrupts disabled; kicks before the work runs coalesce.
    pub fn kick(&self) {
        self.sched.queue_kick();
    }

    /// Asks for [`Deferred::process_work`] to run soon in process context. Any context,
    /// including with interrupts disabled; requests before the work runs coalesce, and a request
    /// while it runs makes it run again.
    pub fn queue_process_work(&self) {
        self.sched.queue_process_work();
    }
}

/// Sets up the deferred work of the device at `dev`, before its data is initialised.
///
/// # Safety
///
/// `dev` is a freshly allocated `Device<T>` that the core never moves; [`shutdown`] runs on it
/// in `dealloc_driver`, before its data is dropped (or it is freed before registration, when
/// nothing could have armed or queued anything).
pub(super) unsafe fn init<T: Deferred>(dev: *mut Device<T>) {
    // SAFETY: The `sched` field of such a device satisfies `Sched::init`'s contract; each
    // callback below finds the device from its own field.
    unsafe {
        Sched::init(
            core::ptr::addr_of_mut!((*dev).sched),
            short_timer::<T>,
            kick::<T>,
            process_work::<T>,
        )
    };
}

/// Starts the periodic tick of a registered device, if `T` has one.
///
/// # Safety
///
/// [`init`] has run on `dev`, whose data is initialised; called once.
pub(super) unsafe fn start_tick<T: Deferred>(dev: *mut Device<T>) {
    if T::TICK_MS > 0 {
        // SAFETY: By the function's contract.
        unsafe { Sched::start_tick(core::ptr::addr_of_mut!((*dev).sched), tick::<T>, T::TICK_MS) };
    }
}

/// Stops the device's deferred work for good, waiting for running callbacks.
///
/// # Safety
///
/// [`init`] has run on `dev`; the core is freeing it and nothing else uses it.
pub(super) unsafe fn shutdown<T: Deferred>(dev: *mut Device<T>) {
    // SAFETY: By the function's contract.
    unsafe { Sched::shutdown(core::ptr::addr_of_mut!((*dev).sched)) };
}

/// The `Device<T>` whose `Sched` holds the timer or work at `field`, `offset` bytes into it.
///
/// # Safety
///
/// `field` points `offset` bytes into the `sched` field of a `Device<T>` alive for `'a`.
unsafe fn device_of<'a, T: Deferred, F>(field: *mut F, offset: usize) -> &'a Device<T> {
    let offset = core::mem::offset_of!(Device<T>, sched) + offset;
    // SAFETY: By the function's contract, stepping back `offset` bytes reaches the device.
    unsafe { &*field.cast::<u8>().sub(offset).cast::<Device<T>>() }
}

/// The tick timer's callback: runs the driver's tick, then re-arms.
///
/// # Safety
///
/// Only the periodic timer that [`start_tick::<T>`] set up calls this, with `timer` that
/// field; [`shutdown`] stops the timer before the device is freed.
unsafe extern "C" fn tick<T: Deferred>(timer: *mut bindings::timer_list) {
    // SAFETY: The timer is the periodic timer of a live device's `Sched`.
    let dev = unsafe { device_of::<T, _>(timer, Sched::TICK) };
    T::tick(dev);
    // SAFETY: This is the timer's own callback.
    unsafe { Sched::rearm_tick(timer, T::TICK_MS) };
}

/// The short timer's callback (on the BH workqueue).
///
/// # Safety
///
/// Only the short timer that [`init::<T>`] set up calls this, with `timer` that field;
/// [`shutdown`] cancels it, waiting for a running callback, before the device is freed.
unsafe extern "C" fn short_timer<T: Deferred>(timer: *mut bindings::roxe_hrtimer) {
    // SAFETY: The timer is the short timer of a live device's `Sched`.
    let dev = unsafe { device_of::<T, _>(timer, Sched::SHORT_TIMER) };
    T::short_timer(dev);
}

/// The kick work's callback (on the BH workqueue).
///
/// # Safety
///
/// Only the softirq work that [`init::<T>`] set up calls this, with `work` that field;
/// [`shutdown`] disables it, waiting for a running one, before the device is freed.
unsafe extern "C" fn kick<T: Deferred>(work: *mut bindings::work_struct) {
    // SAFETY: The work is the softirq work of a live device's `Sched`.
    let dev = unsafe { device_of::<T, _>(work, Sched::KICK) };
    T::kicked(dev);
}

/// The process work's callback (on the unbound system workqueue).
///
/// # Safety
///
/// Only the process-context work that [`init::<T>`] set up calls this, with `work` that field;
/// [`shutdown`] disables it, waiting for a running one, before the device is freed.
unsafe extern "C" fn process_work<T: Deferred>(work: *mut bindings::work_struct) {
    // SAFETY: The work is the process-context work of a live device's `Sched`.
    let dev = unsafe { device_of::<T, _>(work, Sched::PROCESS_WORK) };
    T::process_work(dev);
}
