// SPDX-License-Identifier: GPL-2.0

//! Raw bindings of roxe's own bindgen run (see `Kbuild` and `rust/bindings/`).
//!
//! This module may not be used outside `rust/`: wrap what a driver needs in a safe API first.

#![allow(
    clippy::all,
    clippy::cast_lossless,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr,
    dead_code,
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]
// Newer compilers find transmutes in bindgen's bitfield accessors unnecessary (as for the kernel's
// own bindings crate); older ones do not know the lint.
#![cfg_attr(not(CONFIG_RUSTC_HAS_UNNECESSARY_TRANSMUTES), allow(unknown_lints))]
#![allow(unnecessary_transmutes)]

use kernel::ffi;
use pin_init::{MaybeZeroable, Zeroable};

// What the kernel's `bindings` crate defines by hand for its blocklisted types.
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

// SAFETY: `__BindgenBitfieldUnit<Storage>` is a newtype around `Storage`, so it is zeroable
// whenever `Storage` is.
unsafe impl<Storage> Zeroable for __BindgenBitfieldUnit<Storage> where Storage: Zeroable {}

include!("../bindings/generated.rs");
