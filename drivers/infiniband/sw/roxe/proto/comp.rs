// SPDX-License-Identifier: GPL-2.0

//! Completer logic (IBA 9.7.5 and rxe's rxe_comp.c, as pure decisions): what an ACK, NAK, RNR NAK, read response or atomic acknowledge means for the oldest outstanding send WQEs, retransmission and the retry counters, and the completion status of each WQE.
