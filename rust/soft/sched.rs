// SPDX-License-Identifier: GPL-2.0

//! One object's deferred execution: a periodic timer, two high-resolution timers whose callbacks
//! run in softirq context (a short one with a scheduler tick of slack, and a precise one), and a
//! work item each for softirq and process context.
//!
//! It knows nothing of RDMA: the owner embeds a [`Sched`], made by [`Sched::new`] with the
//! callbacks (which find the owner by the field's offset); dropping it stops everything, waiting
//! for running callbacks, so the owner declares it before what the callbacks use.
//! [`SoftDevice`](super::deferred::SoftDevice) embeds one.
//!
//! C headers: [`include/linux/timer.h`](srctree/include/linux/timer.h),
//! [`include/linux/hrtimer.h`](srctree/include/linux/hrtimer.h),
//! [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)

use crate::rdma::bindings;
use kernel::{
    prelude::*,
    sync::atomic::{Acquire, AtomicFlag, Full},
    types::Opaque,
};

/// The callback of the periodic timer.
pub(super) type TickFn = unsafe extern "C" fn(*mut bindings::timer_list);
/// The callback of the short timer or the wake timer.
pub(super) type ShortFn = unsafe extern "C" fn(*mut bindings::roxe_hrtimer);
/// The callback of a work item.
pub(super) type WorkFn = unsafe extern "C" fn(*mut bindings::work_struct);

/// An object's timers and works.
///
/// # Invariants
///
/// A `Sched` is only reachable once [`Sched::init`] has run on it in place (its only
/// constructor, [`Sched::new`], does that), and it stays at that address, with everything its
/// callbacks use alive, until [`Sched::shutdown`] has run (its `Drop`); nothing arms or queues
/// it afterwards.
#[repr(C)]
pub struct Sched {
    /// The periodic timer; set up by [`Sched::start_tick`].
    tick: Opaque<bindings::timer_list>,
    /// The periodic timer was set up.
    tick_armed: AtomicFlag,
    /// The short timer; set up by [`Sched::init`].
    short_timer: Opaque<bindings::roxe_hrtimer>,
    /// The wake timer; set up by [`Sched::init`].
    wake_timer: Opaque<bindings::roxe_hrtimer>,
    /// The softirq work; set up by [`Sched::init`].
    kick: Opaque<bindings::work_struct>,
    /// The process-context work; set up by [`Sched::init`].
    process_work: Opaque<bindings::work_struct>,
}

// SAFETY: The timers and works are the kernel's, which any CPU may arm, queue and cancel; the
// callbacks find their owner themselves.
unsafe impl Send for Sched {}
// SAFETY: As above: every method is callable from any context, concurrently.
unsafe impl Sync for Sched {}

impl Drop for Sched {
    fn drop(&mut self) {
        // SAFETY: `init` has run (type invariant); the owner is dropping it, so nothing arms or
        // queues it from now on but its own callbacks, which `shutdown` waits for.
        unsafe { Sched::shutdown(self) };
    }
}

impl Sched {
    /// A `Sched` whose short and wake timers and works call `timers.0`, `timers.1`, `kick` and
    /// `process`.
    ///
    /// # Safety
    ///
    /// Each callback may be called with the address of its own field for as long as the
    /// `Sched` lives, and finds everything it uses alive then.
    pub(super) unsafe fn new(
        timers: (ShortFn, ShortFn),
        kick: WorkFn,
        process: WorkFn,
    ) -> impl PinInit<Self> {
        // SAFETY: The slot is valid for writes and pinned: it stays there until dropped, and
        // `Drop` shuts everything down; the callbacks' contract is the caller's.
        unsafe {
            pin_init::pin_init_from_closure(move |slot: *mut Self| {
                Self::init(slot, timers, kick, process);
                Ok(())
            })
        }
    }

    /// Offset of the periodic timer in a `Sched`, for its callback to find the owner.
    pub(super) const TICK: usize = core::mem::offset_of!(Sched, tick);
    /// Offset of the short timer.
    pub(super) const SHORT_TIMER: usize = core::mem::offset_of!(Sched, short_timer);
    /// Offset of the wake timer.
    pub(super) const WAKE_TIMER: usize = core::mem::offset_of!(Sched, wake_timer);
    /// Offset of the softirq work.
    pub(super) const KICK: usize = core::mem::offset_of!(Sched, kick);
    /// Offset of the process-context work.
    pub(super) const PROCESS_WORK: usize = core::mem::offset_of!(Sched, process_work);

    /// Sets up the short and wake timers and the works of the `Sched` at `this` with their
    /// callbacks.
    ///
    /// # Safety
    ///
    /// `this` is valid for writes and stays at this address until it is freed; each callback
    /// may be called with the address of its own field from now until [`Sched::shutdown`]
    /// returns, which the owner calls before freeing `this` or dropping what the callbacks use
    /// (or the owner frees it before anything could arm or queue these).
    unsafe fn init(this: *mut Self, timers: (ShortFn, ShortFn), kick: WorkFn, process: WorkFn) {
        // SAFETY: `this` is valid for writes (the function's contract); the helpers initialise
        // the C objects in place.
        unsafe {
            core::ptr::addr_of_mut!((*this).tick_armed).write(AtomicFlag::new(false));
            bindings::roxe_helper_hrtimer_setup(
                Opaque::cast_into(core::ptr::addr_of!((*this).short_timer)),
                Some(timers.0),
            );
            bindings::roxe_helper_hrtimer_setup(
                Opaque::cast_into(core::ptr::addr_of!((*this).wake_timer)),
                Some(timers.1),
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

    /// Sets up the periodic timer with its callback and arms it `ms` milliseconds from now,
    /// unless it was started before. The callback re-arms it with [`Sched::rearm_tick`].
    ///
    /// # Safety
    ///
    /// `f` may be called with the address of the `tick` field for as long as the `Sched` lives,
    /// and finds everything it uses alive then.
    pub(super) unsafe fn start_tick(&self, f: TickFn, ms: u32) {
        if self.tick_armed.cmpxchg(false, true, Full).is_err() {
            return;
        }
        let timer = self.tick.get();
        // SAFETY: The timer lies in `self`, which lives until `shutdown` stops it (the flag set
        // above makes `shutdown` do so); it is set up once, here.
        unsafe {
            bindings::roxe_helper_timer_setup(timer, Some(f));
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
    unsafe fn shutdown(this: *mut Self) {
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
        // SAFETY: The timers were set up in `init`. Nothing else can arm them now: the works
        // and the tick are stopped and the owner is being freed; the helper waits for a running
        // callback, disables the work it queues and cancels what that callback armed. Each
        // callback may arm the other's timer, so the pair is stopped twice.
        unsafe {
            for _ in 0..2 {
                bindings::roxe_helper_hrtimer_cancel(Opaque::cast_into(core::ptr::addr_of!(
                    (*this).short_timer
                )));
                bindings::roxe_helper_hrtimer_cancel(Opaque::cast_into(core::ptr::addr_of!(
                    (*this).wake_timer
                )));
            }
        };
    }

    /// Arms the short timer: its callback runs once in softirq context, no sooner than `us`
    /// microseconds from now and no later than one scheduler tick after that. Any context.
    pub(super) fn arm_short_timer(&self, us: u32) {
        // SAFETY: The timer was set up in `init` and stays valid until `shutdown` (invariant).
        unsafe { bindings::roxe_helper_hrtimer_arm_us(self.short_timer.get(), us) };
    }

    /// Arms the wake timer: its callback runs once in softirq context, no sooner than `us`
    /// microseconds from now and no later than `slack_us` after that. Any context.
    pub(super) fn arm_wake_timer(&self, us: u32, slack_us: u32) {
        // SAFETY: The timer was set up in `init` and stays valid until `shutdown` (invariant).
        unsafe { bindings::roxe_helper_hrtimer_arm_us_slack(self.wake_timer.get(), us, slack_us) };
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

    /// Queues the softirq work on another CPU than this one (`Device::kick_other` says which);
    /// false, queueing nothing, when there is none. Any context.
    pub(super) fn queue_kick_other(&self) -> bool {
        // SAFETY: As in `queue_kick`.
        unsafe { bindings::roxe_helper_queue_work_bh_other(self.kick.get()) }
    }

    /// Queues the process-context work (the unbound system workqueue). Any context.
    pub(super) fn queue_process_work(&self) {
        // SAFETY: As in `queue_kick`.
        unsafe { bindings::roxe_helper_queue_work_unbound(self.process_work.get()) };
    }
}
