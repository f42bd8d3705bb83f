// SPDX-License-Identifier: GPL-2.0

//! roxe: a software RoCEv2 host channel adapter.
//!
//! `rdma link add roxe0 type roxe netdev eth0` creates an RDMA device on any netdev. It speaks the
//! rxe user ABI, so stock rdma-core (its rxe provider) and the tools built on it work unchanged,
//! and RoCEv2 on the wire (UDP port 4791). See `Documentation/architecture.md`.
//!
//! This file is the crate root: the module declaration and the module's lifetime. Each stage
//! of the HCA has a file of its own, after rxe's layout.

#![deny(unsafe_code)]

// The RDMA abstractions are a library, written as if they were `rust/kernel/rdma/`: their `pub`
// API is wider than what this one driver uses today.
#[path = "../../../../rust/rdma/mod.rs"]
#[expect(
    unsafe_code,
    reason = "rust/ is where roxe's unsafe code lives, each block justified"
)]
#[expect(
    unreachable_pub,
    dead_code,
    reason = "library API, used in part by this driver"
)]
mod rdma;

// The soft-HCA platform: what a software HCA needs beside the RDMA core (socket buffers, UDP
// tunnel sockets, copies, keyed hashing, the module guard).
#[path = "../../../../rust/soft/mod.rs"]
#[expect(
    unsafe_code,
    reason = "rust/ is where roxe's unsafe code lives, each block justified"
)]
#[allow(
    unreachable_pub,
    dead_code,
    reason = "library API, used in part by this driver"
)]
mod soft;

// Where Rust-enabled kernels differ, chosen by probed features (`Kbuild`, `rust/probe/`).
#[path = "../../../../rust/compat/mod.rs"]
#[expect(
    unsafe_code,
    reason = "rust/ is where roxe's unsafe code lives, each block justified"
)]
#[expect(unreachable_pub, reason = "library API, used in part by this driver")]
#[allow(
    dead_code,
    reason = "which fallbacks are used, and so which items are dead, depends on the kernel"
)]
mod compat;

mod ah;
mod comp;
mod counters;
mod cq;
mod device;
mod hca;
mod mcast;
mod mem;
mod net;
mod param;
mod peer;
mod qp;
mod queue;
mod recv;
mod req;
mod resp;
mod srq;
mod task;
mod verbs;
// Pure protocol logic shared with the host test crate, which uses all of it.
#[expect(
    unreachable_pub,
    dead_code,
    reason = "shared with tools/proto, which uses all of it"
)]
mod proto;

use kernel::prelude::*;
use rdma::{
    driver::unregister_all,
    link::LinkRegistration,
    netdev::NetdevNotifierRegistration, //
};
use soft::{module_guard::ModuleBlocker, udp_tunnel::TunnelRegistration};

module! {
    type: RoxeModule,
    name: "roxe",
    authors: ["roxe developers"],
    description: "Software RoCEv2 HCA (rxe ABI), in Rust",
    license: "GPL",
    alias: ["rdma-link-roxe"],
}
// The module parameter `rxe_compat` is declared in C: see `compat::module`.

/// Unregisters every roxe device when dropped.
struct Devices;

impl Drop for Devices {
    fn drop(&mut self) {
        unregister_all::<hca::Roxe>();
    }
}

/// Waits for pending RCU callbacks when dropped: objects removed with `Pool::remove_deferred`
/// are freed by callbacks that run roxe code, so they must all have run before the module goes.
struct RcuCallbacks;

impl Drop for RcuCallbacks {
    fn drop(&mut self) {
        compat::rcu::rcu_barrier();
    }
}

/// The module's state. Fields drop in declaration order, which is the teardown order: first no
/// new devices (under either link type), then no devices (and no RCU callback of their
/// objects), then no events, then no packets (the namespace hook releases any socket left),
/// and last the guard that keeps `rdma_rxe` out.
#[pin_data]
struct RoxeModule {
    rxe_link: Option<LinkRegistration<hca::Roxe>>,
    link: LinkRegistration<hca::Roxe>,
    devices: Devices,
    rcu_callbacks: RcuCallbacks,
    #[pin]
    notifier: NetdevNotifierRegistration<hca::Roxe>,
    tunnels: TunnelRegistration,
    #[pin]
    rxe_guard: ModuleBlocker,
}

impl kernel::InPlaceModule for RoxeModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        // Initialised in the reverse of the teardown order.
        try_pin_init!(Self {
            rxe_guard <- ModuleBlocker::new(
                module,
                c"rdma_rxe",
                c"roxe and rdma_rxe share the rxe driver id and UDP port 4791 and cannot run together; unload one of them",
            ),
            tunnels: TunnelRegistration::new()?,
            notifier <- NetdevNotifierRegistration::new(),
            rcu_callbacks: RcuCallbacks,
            devices: Devices,
            link: LinkRegistration::new(&verbs::LINK_OPS),
            // rdma_rxe is not loaded (the guard above would have failed), so the name is free.
            rxe_link: compat::module::param_rxe_compat()
                .then(|| LinkRegistration::new(&verbs::RXE_LINK_OPS)),
        })
    }
}

/// This module, for the RDMA core's reference counting of open devices.
pub(crate) fn this_module() -> &'static ThisModule {
    this_module!(RoxeModule)
}
