// SPDX-License-Identifier: GPL-2.0
/* The interrupt-nesting spinlock of rust/helpers/irq_nest.c, for the self-test's own check. */
#include "../../rust/helpers/irq_nest.c"
