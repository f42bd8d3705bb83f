// SPDX-License-Identifier: GPL-2.0

//! The invariant CRC (IBA 9.8.2.2 and RoCEv2 annex A17.3.3): CRC32 over the packet with the variant fields masked.
