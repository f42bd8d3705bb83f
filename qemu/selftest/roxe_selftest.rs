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
        warn: bool {
            default: false,
            description: "Raise a WARN on load, to prove the harness catches it",
        },
    },
}

struct RoxeSelftest;

impl kernel::Module for RoxeSelftest {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("roxe_selftest: loaded\n");
        if module_parameters::warn.value() {
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
