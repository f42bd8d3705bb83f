// SPDX-License-Identifier: GPL-2.0

//! Completion queue entries (struct ib_uverbs_wc of the rxe ABI): the 48-byte layout and builders for send and receive completions.
