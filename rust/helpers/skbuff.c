// SPDX-License-Identifier: GPL-2.0
/* Helpers for include/linux/skbuff.h. */
#include <linux/skbuff.h>
#include "helpers.h"

void roxe_helper_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}
