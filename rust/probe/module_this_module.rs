// SPDX-License-Identifier: GPL-2.0

//! Probe (Kbuild): a module's `THIS_MODULE` is an associated constant of `ModuleMetadata`.

/// `THIS_MODULE` of module `M`.
pub fn this_module<M: kernel::ModuleMetadata>() -> kernel::ThisModule {
    M::THIS_MODULE
}
