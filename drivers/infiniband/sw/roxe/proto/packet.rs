// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 packet headers (BTH, RETH, AETH, AtomicETH, AtomicAckETH, DETH, ImmDt, IETH, FETH): zero-copy views over received bytes and in-place builders.
