// SPDX-License-Identifier: GPL-2.0

//! RDMA core abstractions: safe Rust over the kernel's InfiniBand/RDMA midlayer.
//!
//! Written as if it were `rust/kernel/rdma/` upstream. Every `unsafe` block of roxe lives under
//! `rust/`; the driver in `drivers/` uses only the safe APIs exported here.
//!
//! C headers: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h),
//! [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h).
//!
//! # Contexts
//!
//! - Device ops ([`driver::Driver`]) are called by the RDMA core in process context, with no
//!   driver lock held. Several may run concurrently on one device.
//! - Link ops ([`link::Link`]) run in process context under the core's netlink locks (`newlink`
//!   may sleep; RTNL is not held).
//! - Netdev notifier events ([`netdev::NetdevNotifier`]) run in process context with RTNL held:
//!   they must not call anything that takes RTNL (such as `ib_get_eth_speed`).

pub(crate) mod bindings;

pub mod ah;
pub mod attr;
pub mod bh;
pub mod cq;
pub mod device;
pub mod driver;
pub mod kverbs;
pub mod link;
pub mod mmap;
pub mod mr;
pub mod netdev;
pub mod object;
pub mod odp;
pub(crate) mod ops;
pub mod pd;
pub mod pool;
pub mod qp;
pub mod revocable;
pub mod srq;
