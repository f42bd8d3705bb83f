// SPDX-License-Identifier: GPL-2.0

//! What a software HCA needs from the kernel beside the RDMA core, which a hardware driver gets
//! from its NIC: its devices' deferred work ([`deferred`], on [`sched`]'s timers and works),
//! socket buffers to carry its packets ([`skb`]), the UDP tunnel sockets they arrive by
//! ([`udp_tunnel`]), payload copies ([`copy`]), keyed hashing ([`random`]), and a guard that
//! keeps another soft RDMA module from loading beside it ([`module_guard`]).
//!
//! It is not part of the RDMA core's mirror (`rust/rdma/`), which knows nothing of it; it may
//! use that mirror's types (a netdev, the raw bindings).
//!
//! # Contexts
//!
//! - UDP encapsulation receive ([`udp_tunnel::EncapRecv`]) runs in softirq context.

pub mod copy;
pub mod deferred;
pub mod module_guard;
pub mod random;
pub mod sched;
pub mod skb;
pub mod udp_tunnel;
