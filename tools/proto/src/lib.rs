// SPDX-License-Identifier: GPL-2.0

//! Host build of roxe's pure protocol logic.
//!
//! The sources live in the driver (`drivers/infiniband/sw/roxe/proto/`) and are included here by
//! path, so the code the tests exercise is byte for byte the code in `roxe.ko`. `no_std` and
//! `deny(unsafe_code)` keep the split honest: a `kernel::` import or an `unsafe` block in
//! `proto/` fails this build.

#![no_std]
#![deny(unsafe_code)]

#[cfg(test)]
extern crate std;

#[path = "../../../drivers/infiniband/sw/roxe/proto/mod.rs"]
pub mod proto;
