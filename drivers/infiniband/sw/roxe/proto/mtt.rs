// SPDX-License-Identifier: GPL-2.0

//! Memory translation: the MTT arithmetic that maps an MR's virtual range onto its pinned pages, and memory-key layout (index and key byte).
