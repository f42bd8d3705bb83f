// SPDX-License-Identifier: GPL-2.0
/*
 * roxe's module parameters. They are declared in C because the `module!` macro of some
 * Rust-enabled kernels takes integer parameters only, and rxe_compat is a bool (Y/N/1/0, as
 * modprobe.d lines and users write it). Read once at module init, through
 * roxe_helper_param_rxe_compat (rust/compat/module.rs).
 */
#include <linux/moduleparam.h>
#include "helpers.h"

static bool rxe_compat;
module_param(rxe_compat, bool, 0444);
MODULE_PARM_DESC(rxe_compat,
		 "Also answer to the link type rxe (rdma link add NAME type rxe), for tools written for rdma_rxe; see Documentation/install.md");

bool roxe_helper_param_rxe_compat(void)
{
	return READ_ONCE(rxe_compat);
}
