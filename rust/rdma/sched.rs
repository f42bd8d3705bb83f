// SPDX-License-Identifier: GPL-2.0

//! One object's deferred execution: a periodic timer, a short high-resolution timer whose
//! callback runs in softirq context, and a work item each for softirq and process context.
//!
//! It knows nothing of RDMA: the owner embeds a [`Sched`], gives [`Sched::init`] the callbacks
//! (which find the owner by the field's offset) and stops everything with [`Sched::shutdown`]
//! before it drops what the callbacks use. [`Device`](super::device::Device) embeds one; the
//! driver's side of it is in `deferred.rs`.
//!
//! C headers: [`include/linux/timer.h`](srctree/include/linux/timer.h),
//! [`include/linux/hrtimer.h`](srctree/include/linux/hrtimer.h),
//! [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)

use super::bindings;
use kernel::{
    sync::atomic::{Acquire, AtomicFlag, Release},
    types::Opaque,
};

/// The callback of the periodic timer.
pub(super) type TickFn = unsafe extern "C" fn(*mut bindings::timer_list);
/// The callback of the short timer.
pub(super) type ShortFn = unsafe extern "C" fn(*mut bindings::roxe_hrtimer);
/// The callback of a work item.
pub(super) type WorkFn = unsafe extern "C" fn(*mut bindings::work_struct);

/// An object's timers and works.
///
/// # Invariants
///
/// A `Sched` is only reachable once [`Sched::init`] has run on it in place (it has no other
/// constructor), and it stays at that address, with everything its callbacks use alive, until
/// [`Sched::shutdown`] has run; nothing arms or queues it afterwards.
#[repr(C)]
pub struct Sched {
    /// The periodic timer; set up by [`Sched::start_tick`].
    tick: Opaque<bindings::timer_list>,
    /// The periodic timer was set up.
    tick_armed: AtomicFlag,
    /// The short timer; set up by [`Sched::init`].
    short_timer: Opaque<bindings::roxe_hrtimer>,
    /// The softirq work; set up by [`Sched::init`].
    kick: Opaque<bindings::work_struct>,
    /// The process-context work; set up by [`Sched::init`].
    process_work: Opaque<bindings::work_struct>,
}

impl Sched {
    /// Offset of the periodic timer in a `Sched`, for its callback to find the owner.
    pub(super) const TICK: usize = core::mem::offset_of!(Sched, tick);
    /// Offset of the short timer.
    pub(super) const SHORT_TIMER: usize = core::mem::offset_of!(Sched, short_timer);
    /// Offset of the softirq work.
    pub(super) const KICK: usize = core::mem::offset_of!(Sched, kick);
    /// Offset of the process-context work.
    pub(super) const PROCESS_WORK: usize = core::mem::offset_of!(Sched, process_work);

    /// Sets up the short timer and the works of the `Sched` at `this` with their callbacks.
    ///
    /// # Safety
    ///
    /// `this` is valid for writes and stays at this address until it is freed; each callback
    /// may be called with the address of its own field from now until [`Sched::shutdown`]
    /// returns, which the owner calls before freeing `this` or dropping what the callbacks use
    /// (or the owner frees it before anything could arm or queue these).
    pub(super) unsafe fn init(this: *mut Self, short: ShortFn, kick: WorkFn, process: WorkFn) {
        // SAFETY: `this` is valid for writes (the function's contract); the helpers initialise
        // the C objects in place.
        unsafe {
            core::ptr::addr_of_mut!((*this).tick_armed).write(AtomicFlag::new(false));
            bindings::roxe_helper_hrtimer_setup(
                Opaque::cast_into(core::ptr::addr_of!((*this).short_timer)),
                Some(short),
            );
            bindings::roxe_helper_init_work_bh(
                Opaque::cast_into(core::ptr::addr_of!((*this).kick)),
                Some(kick),
            );
            bindings::roxe_helper_init_work(
                Opaque::cast_into(core::ptr::addr_of!((*this).process_work)),
                Some(process),
            );
        }
    }

    /// Sets up the periodic timer with its callback and arms it `ms` milliseconds from now.
    /// The callback re-arms it with [`Sched::rearm_tick`].
    ///
    /// # Safety
    ///
    /// As for [`Sched::init`], which has run on `this`; called at most once.
    pub(super) unsafe fn start_tick(this: *mut Self, f: TickFn, ms: u32) {
        // SAFETY: The timer lies in `this`, which lives until `shutdown` stops it.
        unsafe {
            let timer = Opaque::cast_into(core::ptr::addr_of!((*this).tick));
            bindings::roxe_helper_timer_setup(timer, Some(f));
            (*this).tick_armed.store(true, Release);
            bindings::roxe_helper_timer_arm_ms(timer, ms);
        }
    }

    /// Re-arms the periodic timer from its own callback, `ms` milliseconds from now.
    ///
    /// # Safety
    ///
    /// `timer` is the periodic timer of a `Sched` whose callback is running.
    pub(super) unsafe fn rearm_tick(timer: *mut bindings::timer_list, ms: u32) {
        // SAFETY: The timer is set up and alive (the callback runs); once shut down it ignores
        // re-arming.
        unsafe { bindings::roxe_helper_timer_arm_ms(timer, ms) };
    }

    /// Stops everything for good, waiting for running callbacks: afterwards none runs, and
    /// arming or queueing is ignored.
    ///
    /// # Safety
    ///
    /// [`Sched::init`] has run on `this`, which is still valid; the owner is being freed.
    pub(super) unsafe fn shutdown(this: *mut Self) {
        // SAFETY: The work was initialised in `init`; afterwards it can neither run nor be
        // queued again. First, since it may kick.
        unsafe {
            bindings::disable_work_sync(Opaque::cast_into(core::ptr::addr_of!(
                (*this).process_work
            )))
        };
        // SAFETY: As above.
        unsafe {
            bindings::disable_work_sync(Opaque::cast_into(core::ptr::addr_of!((*this).kick)))
        };
        // SAFETY: The timer, if set up, stops for good and a running callback finishes first.
        unsafe {
            if (*this).tick_armed.load(Acquire) {
                bindings::timer_shutdown_sync(Opaque::cast_into(core::ptr::addr_of!((*this).tick)));
            }
        }
        // SAFETY: The timer was set up in `init`. Nothing else can arm it now: the works and
        // the tick are stopped and the owner is being freed; the helper waits for a running
        // callback, disables the work it queues and cancels what that callback armed.
        unsafe {
            bindings::roxe_helper_hrtimer_cancel(Opaque::cast_into(core::ptr::addr_of!(
                (*this).short_timer
            )))
        };
    }

    /// Arms the short timer: its callback runs once in softirq context, no sooner than `us`
    /// microseconds from now and no later than one scheduler tick after that. Any context.
    pub(super) fn arm_short_timer(&self, us: u32) {
        // SAFETY: The timer was set up in `init` and stays valid until `shutdown` (invariant).
        unsafe { bindings::roxe_helper_hrtimer_arm_us(self.short_timer.get(), us) };
    }

    /// Stops the short timer without waiting: `true` when its callback will not run for the
    /// last start. Any context.
    pub(super) fn try_cancel_short_timer(&self) -> bool {
        // SAFETY: As in `arm_short_timer`.
        unsafe { bindings::roxe_helper_hrtimer_try_to_cancel(self.short_timer.get()) }
    }

    /// Queues the softirq work (the BH workqueue). Any context; a pending work is not queued
    /// twice.
    pub(super) fn queue_kick(&self) {
        // SAFETY: The work was initialised in `init` and stays valid until `shutdown`.
        unsafe { bindings::roxe_helper_queue_work_bh(self.kick.get()) };
    }

    /// Queues the process-context work (the unbound system workqueue). Any context.
    pub(super) fn queue_process_work(&self) {
        // SAFETY: As in `queue_kick`.
        unsafe { bindings::roxe_helper_queue_work_unbound(self.process_work.get()) };
    }
}
