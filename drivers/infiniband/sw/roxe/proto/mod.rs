// SPDX-License-Identifier: GPL-2.0

//! Pure protocol logic of roxe: no `kernel`, no allocation, no `unsafe`.
//!
//! This module is built twice: into `roxe.ko` (through `#[path]` from the crate root) and as the
//! host crate `tools/proto` for `cargo test`, property tests and fuzzing. Anything that needs a
//! kernel service reaches it through a trait implemented by the caller.

pub mod batch;
mod bytes;
pub mod comp;
pub mod cqe;
pub mod cwnd;
pub mod guid;
pub mod icrc;
pub mod mcast;
pub mod mtt;
pub mod mtu;
pub mod opcode;
pub mod packet;
pub mod pma;
pub mod psn;
pub mod qp_state;
pub mod queue;
pub mod req;
pub mod resp;
pub mod wqe;
