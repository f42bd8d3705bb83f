// SPDX-License-Identifier: GPL-2.0

//! What the `module!` macro makes differently on different kernels: the module's own
//! `THIS_MODULE`, and parameters other than integers.
//!
//! `module!` defines `THIS_MODULE` as an associated constant of [`kernel::ModuleMetadata`] where
//! the probe `module_this_module` compiles, else as a static at the crate root. Some kernels'
//! `module!` takes integer parameters only, so roxe's bool parameter is declared in C
//! (`rust/helpers/params.c`) and read here.

extern "C" {
    // rust/helpers/params.c
    fn roxe_helper_param_rxe_compat() -> bool;
}

/// The `rxe_compat` module parameter (`modinfo roxe`).
pub fn param_rxe_compat() -> bool {
    // SAFETY: The helper reads a bool the module loader set before the module's init ran; the
    // parameter is read-only in sysfs (0444), so nothing writes it afterwards.
    unsafe { roxe_helper_param_rxe_compat() }
}

/// `&'static ThisModule` of the module whose type is `$module` (the `type:` of `module!`).
#[macro_export]
macro_rules! this_module {
    ($module:ty) => {{
        #[cfg(roxe_module_this_module)]
        let m: &'static ::kernel::ThisModule = &<$module as ::kernel::ModuleMetadata>::THIS_MODULE;
        #[cfg(not(roxe_module_this_module))]
        let m: &'static ::kernel::ThisModule = &$crate::THIS_MODULE;
        m
    }};
}
