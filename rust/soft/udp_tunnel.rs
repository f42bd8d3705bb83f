// SPDX-License-Identifier: GPL-2.0

//! UDP encapsulation sockets: the kernel's UDP tunnel API, through which RoCEv2 packets arrive,
//! one socket pair (IPv4, IPv6) per network namespace and port.
//!
//! A [`PortRef`] holds the sockets of one port in the namespace of a netdev: the first reference
//! in a namespace binds them there, the last one releases them, and so does the namespace's exit
//! (a `pernet_operations` exit hook, [`TunnelRegistration`]) if references outlive it: kernel
//! sockets do not keep their namespace alive, so they must go with it. The table of sockets is
//! one global, mutex-protected list, small (a pair per namespace in use), and touched only when
//! links come and go.
//!
//! C headers: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h),
//! [`include/net/net_namespace.h`](srctree/include/net/net_namespace.h)

use super::skb::SkBuff;
use crate::rdma::{bindings, netdev::NetDevice};
use core::ptr::NonNull;
use kernel::{
    ffi,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Full},
    types::Opaque,
};

/// The receiver of packets that arrive on an encapsulation socket.
pub trait EncapRecv: 'static {
    /// Consumes one packet. The skb's data starts at the UDP header.
    ///
    /// Called in softirq context: must not sleep.
    fn recv(skb: SkBuff);
}

/// Address family of a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// IPv4.
    Ipv4,
    /// IPv6 (v6-only).
    Ipv6,
}

/// An owned kernel UDP socket set up as an encapsulation socket. Released on drop.
///
/// # Invariants
///
/// `0` was created by `roxe_helper_udp_tunnel_sock_create` and is owned by this object.
struct Socket(NonNull<bindings::socket>);

// SAFETY: The socket is only released on drop, from any thread; the network stack synchronises
// its use.
unsafe impl Send for Socket {}

impl Socket {
    /// Binds `port` (host order) on the wildcard address of `net` for `family`, with packets
    /// going to `T::recv`.
    ///
    /// # Safety
    ///
    /// `net` is a namespace the caller holds a reference on.
    unsafe fn bind<T: EncapRecv>(
        net: *mut bindings::net,
        family: Family,
        port: u16,
    ) -> Result<Self> {
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        // SAFETY: `net` is alive (the function's contract); `sock` is valid for writes; the
        // callback has the signature the UDP tunnel code expects.
        let err = unsafe {
            bindings::roxe_helper_udp_tunnel_sock_create(
                net,
                family == Family::Ipv6,
                port.to_be(),
                Some(encap_recv::<T>),
                &mut sock,
            )
        };
        kernel::error::to_result(err)?;
        // INVARIANT: The helper created and set up the socket, and we own it.
        NonNull::new(sock).map(Self).ok_or(EINVAL)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the socket; `udp_tunnel_sock_release` detaches the
        // encapsulation hook (waiting for RCU readers) and frees the socket. Process context:
        // every path that drops a `Socket` (a `PortRef`'s drop, the namespace exit) is one.
        unsafe { bindings::udp_tunnel_sock_release((*self.0.as_ptr()).sk) };
    }
}

/// The sockets of one port in one namespace.
struct Entry {
    /// `net_cookie` of the namespace (never reused within a boot).
    net: u64,
    port: u16,
    /// Live [`PortRef`]s.
    refs: usize,
    _v4: Socket,
    /// `None` when the kernel has no IPv6.
    _v6: Option<Socket>,
}

/// The sockets in use, and whether new ones may be made.
struct Table {
    /// A [`TunnelRegistration`] is being made or exists.
    claimed: bool,
    /// A [`TunnelRegistration`] exists: namespace exits release their sockets.
    open: bool,
    entries: KVec<Entry>,
}

kernel::sync::global_lock! {
    // SAFETY: `TunnelRegistration::new` initialises it, once (`TABLE_STATE`), and every user
    // first checks that it is `READY`.
    unsafe(uninit) static TABLE: Mutex<Table> = Table {
        claimed: false,
        open: false,
        entries: KVec::new(),
    };
}

/// `TABLE` is being initialised.
const INITIALISING: u32 = 1;
/// `TABLE` is initialised; the lock stays valid for the module's life.
const READY: u32 = 2;
/// 0, then `INITIALISING`, then `READY`, never back.
static TABLE_STATE: Atomic<u32> = Atomic::new(0);

/// Whether `TABLE` may be locked.
fn table_ready() -> bool {
    TABLE_STATE.load(Acquire) == READY
}

/// The `pernet_operations` whose exit hook releases a dying namespace's sockets.
struct PernetOps(Opaque<bindings::pernet_operations>);

// SAFETY: The pernet core serialises its use of the table (under `pernet_ops_rwsem`); we write
// it only before registering it.
unsafe impl Sync for PernetOps {}

static PERNET_OPS: PernetOps = PernetOps(Opaque::zeroed());

/// The namespace exit hook: releases the sockets of `net`, whatever references remain (their
/// drops then find nothing).
///
/// # Safety
///
/// Only the pernet core calls this, in process context, for a namespace being dismantled (or
/// for every namespace when the operations are unregistered).
unsafe extern "C" fn net_exit(net: *mut bindings::net) {
    // SAFETY: The core passes a live namespace.
    let cookie = unsafe { bindings::roxe_helper_net_cookie(net) };
    // Registered, so `TABLE` is ready. Dropping an entry releases its sockets, which may sleep:
    // the lock is a mutex.
    TABLE.lock().entries.retain(|e| e.net != cookie);
}

/// The namespace exit hook, registered. Only one may exist at a time; dropping it releases
/// every socket left, in every namespace, and no [`PortRef`] can be taken afterwards.
///
/// # Invariants
///
/// `PERNET_OPS` is registered with `register_pernet_subsys` while this object lives.
pub struct TunnelRegistration(());

impl TunnelRegistration {
    /// Registers the exit hook.
    ///
    /// # Errors
    ///
    /// `EBUSY` if a registration exists (or another is being made); an error of
    /// `register_pernet_subsys`.
    pub fn new() -> Result<Self> {
        if TABLE_STATE.cmpxchg(0, INITIALISING, Full).is_ok() {
            // SAFETY: Reached once in the module's life: only the caller that moved the state
            // from 0 gets here, and nobody locks `TABLE` before the state is `READY`.
            unsafe { TABLE.init() };
            TABLE_STATE.store(READY, kernel::sync::atomic::Release);
        } else if !table_ready() {
            return Err(EBUSY);
        }
        // Claimed under the lock, registered without it: the pernet core calls `net_exit`, which
        // takes the lock, with its own lock held, so ours must not be held around its calls.
        {
            let mut table = TABLE.lock();
            if table.claimed {
                return Err(EBUSY);
            }
            table.claimed = true;
        }
        let ops = PERNET_OPS.0.get();
        // SAFETY: The table is not registered (we hold the claim, and the last registration's
        // drop unregistered it before giving the claim up), so writing it races with nothing.
        // Registering hooks `exit` for every namespace.
        let err = unsafe {
            (*ops).exit = Some(net_exit);
            bindings::register_pernet_subsys(ops)
        };
        if let Err(e) = kernel::error::to_result(err) {
            TABLE.lock().claimed = false;
            return Err(e);
        }
        TABLE.lock().open = true;
        // INVARIANT: Registered above.
        Ok(Self(()))
    }
}

impl Drop for TunnelRegistration {
    fn drop(&mut self) {
        TABLE.lock().open = false;
        // SAFETY: Registered (type invariant). Unregistering runs `net_exit` for every namespace,
        // which releases every socket left; `open` being false, none is made afterwards.
        unsafe { bindings::unregister_pernet_subsys(PERNET_OPS.0.get()) };
        let mut table = TABLE.lock();
        // Statics are never dropped: free the list's buffer (its entries are gone) before the
        // module that owns `TABLE` can go.
        let entries = core::mem::replace(&mut table.entries, KVec::new());
        table.claimed = false;
        drop(table);
        drop(entries);
    }
}

/// A reference to the encapsulation sockets of a port in a netdev's namespace: they are bound
/// while any reference to them lives and their namespace does.
pub struct PortRef {
    net: u64,
    port: u16,
}

impl PortRef {
    /// Takes a reference to the sockets of `port` (host order) in `netdev`'s namespace, binding
    /// them (IPv4, and IPv6 when the kernel has it) with `T`'s receive callback if this is the
    /// first. Process context.
    ///
    /// # Errors
    ///
    /// `ENODEV` when no [`TunnelRegistration`] exists or the namespace is being dismantled;
    /// `EADDRINUSE` when another socket owns the port there; any error of `udp_sock_create`.
    pub fn get<T: EncapRecv>(netdev: &NetDevice, port: u16) -> Result<Self> {
        if !table_ready() {
            return Err(ENODEV);
        }
        // SAFETY: `netdev` is alive (borrowed); the helper returns a counted reference or NULL.
        let net = NonNull::new(unsafe { bindings::roxe_helper_dev_net_get(netdev.as_raw()) })
            .ok_or(ENODEV)?;
        let r = Self::get_in::<T>(net.as_ptr(), port);
        // SAFETY: We own the reference taken above.
        unsafe { bindings::roxe_helper_put_net(net.as_ptr()) };
        r
    }

    /// [`PortRef::get`] in `net`, on which the caller holds a reference; the namespace cannot
    /// exit while it does, so an entry made here is seen by its exit hook.
    fn get_in<T: EncapRecv>(net: *mut bindings::net, port: u16) -> Result<Self> {
        // SAFETY: `net` is alive (the caller's reference).
        let cookie = unsafe { bindings::roxe_helper_net_cookie(net) };
        let mut table = TABLE.lock();
        if !table.open {
            return Err(ENODEV);
        }
        if let Some(e) = table
            .entries
            .iter_mut()
            .find(|e| e.net == cookie && e.port == port)
        {
            e.refs += 1;
        } else {
            // SAFETY: `net` is alive (the caller's reference).
            let v4 = unsafe { Socket::bind::<T>(net, Family::Ipv4, port) }?;
            // SAFETY: As above.
            let v6 = match unsafe { Socket::bind::<T>(net, Family::Ipv6, port) } {
                Ok(s) => Some(s),
                // No IPv6 in this kernel (or disabled): IPv4 only, as rxe does.
                Err(e) if e == crate::compat::errno::eafnosupport() => None,
                Err(e) => return Err(e),
            };
            table.entries.push(
                Entry {
                    net: cookie,
                    port,
                    refs: 1,
                    _v4: v4,
                    _v6: v6,
                },
                GFP_KERNEL,
            )?;
        }
        drop(table);
        Ok(Self { net: cookie, port })
    }
}

impl Drop for PortRef {
    fn drop(&mut self) {
        // A `PortRef` exists, so `TABLE` is ready.
        let mut table = TABLE.lock();
        // Gone already when the namespace exited first.
        if let Some(i) = table
            .entries
            .iter()
            .position(|e| e.net == self.net && e.port == self.port)
        {
            table.entries[i].refs -= 1;
            if table.entries[i].refs == 0 {
                // Releases the sockets (the lock is a mutex).
                drop(table.entries.remove(i));
            }
        }
    }
}

/// The sockets' `encap_rcv`.
///
/// # Safety
///
/// Only the UDP layer calls this, as the `encap_rcv` of a socket `Socket::bind::<T>` created,
/// with `skb` null or a socket buffer that becomes ours when we return 0.
unsafe extern "C" fn encap_recv<T: EncapRecv>(
    _sk: *mut bindings::sock,
    skb: *mut bindings::sk_buff,
) -> ffi::c_int {
    if let Some(skb) = NonNull::new(skb) {
        // SAFETY: Returning 0 tells the UDP layer that we consumed the skb, so we own it.
        T::recv(unsafe { SkBuff::from_raw(skb) });
    }
    0
}
