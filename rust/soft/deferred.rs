// SPDX-License-Identifier: GPL-2.0

//! The deferred work of a soft HCA's devices: the [`Deferred`] trait a driver implements to run
//! a periodic tick, a short and a wake timer and softirq and process-context work for its devices, the
//! [`SoftDevice`] that carries them as the device's data, and the [`Device`] methods that ask
//! for them.
//!
//! The C RDMA core schedules nothing for a driver (rxe keeps its own tasks and timers), so this
//! is not part of the core's mirror: a driver that wants it makes its device data a
//! [`SoftDevice`] of its own state. The work is armed only through the [`Device`] that holds it,
//! so its callbacks find that device from their own field; the tick starts when the driver asks
//! ([`Device::start_tick`], from `Driver::registering`), and everything stops, waiting for
//! running callbacks, when the device's data drops, before the driver's state does.

use super::sched::Sched;
use crate::rdma::{
    bindings,
    device::{Device, DriverTypes},
};
use core::ops::Deref;
use kernel::prelude::*;

/// What a driver's devices do when their deferred work runs. Its devices' data is a
/// [`SoftDevice`] of its [`Deferred::State`].
pub trait Deferred: DriverTypes<Data = SoftDevice<Self::State>> {
    /// The driver's own per-device state.
    type State: Send + Sync;

    /// Period of [`Deferred::tick`] in milliseconds, once [`Device::start_tick`] started it,
    /// until the device is freed; 0 for no tick.
    const TICK_MS: u32;

    /// Periodic work of a device (e.g. retransmission and RNR timers). Softirq context.
    fn tick(dev: &Device<Self>);

    /// Runs once, in softirq context (the BH workqueue), when the timer
    /// [`Device::start_short_timer`] started expires.
    fn short_timer(dev: &Device<Self>);

    /// Runs once, in softirq context (the BH workqueue), when the timer
    /// [`Device::start_wake_timer`] started expires.
    fn wake_timer(dev: &Device<Self>);

    /// Work asked for with [`Device::kick`], e.g. from a context that may not transmit (kernel
    /// consumers post with interrupts disabled). Softirq context (the BH workqueue).
    fn kicked(dev: &Device<Self>);

    /// Work asked for with [`Device::queue_process_work`]: process context (the unbound system
    /// workqueue), may sleep, e.g. to fault in on-demand-paging memory for the data path.
    fn process_work(_dev: &Device<Self>) {}
}

/// A soft HCA device's data: its timers and works, then the driver's state, which it derefs to.
///
/// # Invariants
///
/// `sched`'s callbacks are those of a `Deferred` driver whose state is `S`, and it is armed or
/// queued only through the [`Device`] whose data this is; it is declared first, so it stops
/// (its `Drop` waits for running callbacks) before `state` drops.
#[pin_data]
pub struct SoftDevice<S> {
    #[pin]
    sched: Sched,
    #[pin]
    state: S,
}

impl<S> SoftDevice<S> {
    /// The data of a device of driver `T` whose state `state` initialises.
    pub fn new<T: Deferred<State = S>>(state: impl PinInit<S, Error>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            // SAFETY: The callbacks are `T`'s; by the type invariant nothing arms or queues them
            // but the device whose data this is, which they find from their field, and they stop
            // before `state` drops.
            sched <- unsafe {
                Sched::new((short_timer::<T>, wake_timer::<T>), kick::<T>, process_work::<T>)
            },
            state <- state,
        }? Error)
    }
}

impl<S> Deref for SoftDevice<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.state
    }
}

impl<T: Deferred> Device<T> {
    /// Starts the device's periodic tick ([`Deferred::tick`] every [`Deferred::TICK_MS`]), if
    /// `T` has one and it is not running yet. Any context.
    pub fn start_tick(&self) {
        if T::TICK_MS > 0 {
            // SAFETY: The callback is `T`'s tick, on the `Sched` of this device's data (the
            // callback finds the device from it); it stops before the state drops.
            unsafe { self.data().sched.start_tick(tick::<T>, T::TICK_MS) };
        }
    }

    /// Starts the device's short timer: [`Deferred::short_timer`] runs once in softirq context,
    /// no sooner than `us` microseconds from now and no later than one scheduler tick after
    /// that: within that slack the timer expires with the tick, so that on a busy CPU starting
    /// and stopping it costs no reprogramming of the clock event device. Starting it while it is
    /// armed moves the expiry, so the driver keeps track of whether it is. Any context.
    pub fn start_short_timer(&self, us: u32) {
        self.data().sched.arm_short_timer(us);
    }

    /// Starts the device's wake timer: [`Deferred::wake_timer`] runs once in softirq context, no
    /// sooner than `us` microseconds from now and no later than `slack_us` after that, for waits
    /// whose length matters (the clock event device is reprogrammed for it when its tick would
    /// come too late). Starting it while it is armed moves the expiry. Any context.
    pub fn start_wake_timer(&self, us: u32, slack_us: u32) {
        self.data().sched.arm_wake_timer(us, slack_us);
    }

    /// Stops the short timer without waiting: `true` when its callback will not run for the
    /// last start, `false` when it runs or has run since that start. Any context.
    pub fn try_cancel_short_timer(&self) -> bool {
        self.data().sched.try_cancel_short_timer()
    }

    /// Asks for [`Deferred::kicked`] to run soon in softirq context. Any context, including with
    /// interrupts disabled; kicks before the work runs coalesce.
    pub fn kick(&self) {
        self.data().sched.queue_kick();
    }

    /// As [`Self::kick`], but on another CPU than the caller's, so that the work runs beside
    /// the caller: the next one after it that the calling task may run on, that is active and
    /// that CPU isolation leaves to workqueues. False, asking for nothing, when there is none.
    /// A kick pending or running elsewhere already stays where it is (a work runs on one CPU
    /// at a time).
    pub fn kick_other(&self) -> bool {
        self.data().sched.queue_kick_other()
    }

    /// Whether more than one CPU is online, so that [`Self::kick_other`] may find another one
    /// (a hint: CPUs come and go, and the caller's affinity may still exclude them).
    pub fn other_cpus_online(&self) -> bool {
        // SAFETY: Reads the count of online CPUs; no precondition.
        unsafe { bindings::roxe_helper_num_online_cpus() > 1 }
    }

    /// Asks for [`Deferred::process_work`] to run soon in process context. Any context,
    /// including with interrupts disabled; requests before the work runs coalesce, and a request
    /// while it runs makes it run again.
    pub fn queue_process_work(&self) {
        self.data().sched.queue_process_work();
    }
}

/// The `Device<T>` whose data's `Sched` holds the timer or work at `field`, `offset` bytes into
/// that `Sched`.
///
/// # Safety
///
/// `field` points `offset` bytes into the `sched` field of the `SoftDevice` that is the data of a
/// `Device<T>` alive for `'a`.
unsafe fn device_of<'a, T: Deferred, F>(field: *mut F, offset: usize) -> &'a Device<T> {
    let offset = core::mem::offset_of!(SoftDevice<T::State>, sched) + offset;
    // SAFETY: By the function's contract, stepping back `offset` bytes reaches the data of a
    // live `Device<T>`.
    unsafe { Device::<T>::from_data(field.cast::<u8>().sub(offset).cast::<T::Data>()) }
}

/// The tick timer's callback: runs the driver's tick, then re-arms.
///
/// # Safety
///
/// Only the periodic timer that [`Device::start_tick`] set up calls this, with `timer` that
/// field; the `Sched` stops the timer before the device's data drops.
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
/// Only the short timer of a device's `Sched` (armed through the device) calls this, with
/// `timer` that field; the `Sched` cancels it, waiting for a running callback, before the
/// device's data drops.
unsafe extern "C" fn short_timer<T: Deferred>(timer: *mut bindings::roxe_hrtimer) {
    // SAFETY: The timer is the short timer of a live device's `Sched`.
    let dev = unsafe { device_of::<T, _>(timer, Sched::SHORT_TIMER) };
    T::short_timer(dev);
}

/// The wake timer's callback (on the BH workqueue).
///
/// # Safety
///
/// Only the wake timer of a device's `Sched` (armed through the device) calls this, with
/// `timer` that field; the `Sched` cancels it, waiting for a running callback, before the
/// device's data drops.
unsafe extern "C" fn wake_timer<T: Deferred>(timer: *mut bindings::roxe_hrtimer) {
    // SAFETY: The timer is the wake timer of a live device's `Sched`.
    let dev = unsafe { device_of::<T, _>(timer, Sched::WAKE_TIMER) };
    T::wake_timer(dev);
}

/// The kick work's callback (on the BH workqueue).
///
/// # Safety
///
/// Only the softirq work of a device's `Sched` (queued through the device) calls this, with
/// `work` that field; the `Sched` disables it, waiting for a running one, before the device's
/// data drops.
unsafe extern "C" fn kick<T: Deferred>(work: *mut bindings::work_struct) {
    // SAFETY: The work is the softirq work of a live device's `Sched`.
    let dev = unsafe { device_of::<T, _>(work, Sched::KICK) };
    T::kicked(dev);
}

/// The process work's callback (on the unbound system workqueue).
///
/// # Safety
///
/// Only the process-context work of a device's `Sched` (queued through the device) calls this,
/// with `work` that field; the `Sched` disables it, waiting for a running one, before the
/// device's data drops.
unsafe extern "C" fn process_work<T: Deferred>(work: *mut bindings::work_struct) {
    // SAFETY: The work is the process-context work of a live device's `Sched`.
    let dev = unsafe { device_of::<T, _>(work, Sched::PROCESS_WORK) };
    T::process_work(dev);
}
