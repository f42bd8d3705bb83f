// SPDX-License-Identifier: GPL-2.0

//! The data path's payload copy and packet zeroing.
//!
//! Payload bytes move between registered pages and packets with the C helper
//! `roxe_helper_copy` (`rust/helpers/mm.c`), which moves 8-byte words: the kernel's `memcpy`
//! is `rep movsb` on CPUs with FSRM, one emulated iteration per byte under QEMU TCG (the
//! measurement: `Documentation/performance.md`, "Constants"), and memory speed on hardware
//! either way.

use crate::rdma::bindings;

/// Copies `src` into the start of `dst`, as many bytes as the shorter of the two holds.
pub fn copy(dst: &mut [u8], src: &[u8]) {
    let len = core::cmp::min(dst.len(), src.len());
    // SAFETY: Both ranges are `len` bytes of live slices; `dst` is borrowed mutably, so the two
    // do not overlap.
    unsafe { bindings::roxe_helper_copy(dst.as_mut_ptr().cast(), src.as_ptr().cast(), len) };
}

/// Zeroes `dst` (the same word-wise stores as [`copy`]).
pub fn zero(dst: &mut [u8]) {
    // SAFETY: `dst` is a live, exclusively borrowed slice of `dst.len()` bytes.
    unsafe { bindings::roxe_helper_zero(dst.as_mut_ptr().cast(), dst.len()) };
}
