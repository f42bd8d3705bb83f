// SPDX-License-Identifier: GPL-2.0

//! Harness self-test module.
//!
//! Proves two things about the test harness: an out-of-tree Rust module built against a prepared
//! kernel tree loads into that kernel, and a module that warns makes the run fail (the guest's
//! kernel log check can fail). With `warn=1` it raises a `WARN` on load on purpose.

use kernel::prelude::*;

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

impl kernel::Module for RoxeSelftest {
    fn init(_module: &'static ThisModule) -> Result<Self> {
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
