// SPDX-License-Identifier: GPL-2.0

//! Harness self-test module.
//!
//! Proves two things about the test harness: an out-of-tree Rust module built against a prepared
//! kernel tree loads into that kernel, and a module that warns makes the run fail (the guest's
//! kernel log check can fail). With `warn=1` it raises a `WARN` on load on purpose.
//!
//! It also checks, on every kernel, roxe's own interrupt-safe spinlock (`rust/compat/irq_nest.rs`,
//! the `SpinLockIrq` of kernels whose crate has none), which it compiles in: with two guards
//! held, dropping the outer one first must leave interrupts disabled until the inner one drops.
//! A failure fails the load.

use kernel::prelude::*;

#[path = "../../rust/compat/irq_nest.rs"]
pub mod irq_nest;

module! {
    type: RoxeSelftest,
    name: "roxe_selftest",
    authors: ["roxe developers"],
    description: "roxe harness self-test (out-of-tree Rust module)",
    license: "GPL",
    params: {
        // An integer: some kernels' `module!` takes no bool parameter.
        warn: u32 {
            default: 0,
            description: "Raise a WARN on load (1), to prove the harness catches it",
        },
    },
}

struct RoxeSelftest;

/// Two guards of [`irq_nest::SpinLockIrqNest`] dropped outer first: interrupts must stay off
/// while the inner one is held, and be on again after it. On PREEMPT_RT the lock is a sleeping
/// `spinlock_t` and interrupt handlers are threads: interrupts must stay on throughout.
fn check_irq_nest() -> Result {
    let a = KBox::pin_init(
        irq_nest::SpinLockIrqNest::new(
            (),
            kernel::optional_name!("roxe_selftest_a"),
            kernel::static_lock_class!(),
        ),
        GFP_KERNEL,
    )?;
    let b = KBox::pin_init(
        irq_nest::SpinLockIrqNest::new(
            (),
            kernel::optional_name!("roxe_selftest_b"),
            kernel::static_lock_class!(),
        ),
        GFP_KERNEL,
    )?;
    let before = irq_nest::irqs_disabled();
    let outer = a.lock();
    let inner = b.lock();
    drop(outer);
    let inner_held = irq_nest::irqs_disabled();
    drop(inner);
    let after = irq_nest::irqs_disabled();
    let rt = irq_nest::preempt_rt();
    let ok = !before && inner_held != rt && !after;
    pr_info!(
        "{} irq-nest: interrupts disabled before {}, with the inner guard alone {}, after {}{}\n",
        if ok { "PASS" } else { "FAIL" },
        before,
        inner_held,
        after,
        if rt {
            " (PREEMPT_RT: they stay on)"
        } else {
            ""
        }
    );
    if ok {
        Ok(())
    } else {
        Err(EIO)
    }
}

impl kernel::Module for RoxeSelftest {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        check_irq_nest()?;
        pr_info!("roxe_selftest: loaded\n");
        // `value()` gives the value on some kernels and a reference to it on others; a
        // reference to either coerces to `&u32`.
        let warn: &u32 = &module_parameters::warn.value();
        if *warn != 0 {
            kernel::warn_on!(true);
        }
        Ok(RoxeSelftest)
    }
}

impl Drop for RoxeSelftest {
    fn drop(&mut self) {
        pr_info!("roxe_selftest: unloaded\n");
    }
}
