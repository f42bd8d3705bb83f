// SPDX-License-Identifier: GPL-2.0

//! UDP encapsulation sockets: the kernel's UDP tunnel API, through which RoCEv2 packets arrive.
//!
//! C header: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h)

use super::{bindings, skb::SkBuff};
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{ffi, prelude::*};

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

/// A kernel UDP socket in the initial network namespace whose datagrams go to `T::recv`.
/// Released on drop.
///
/// # Invariants
///
/// `sock` is a socket created by `udp_sock_create` and set up as an encapsulation socket, owned by
/// this object.
pub struct UdpTunnelSocket<T: EncapRecv> {
    sock: NonNull<bindings::socket>,
    _t: PhantomData<T>,
}

// SAFETY: The socket is only released (from any thread) on drop; the network stack synchronises
// its use.
unsafe impl<T: EncapRecv> Send for UdpTunnelSocket<T> {}
// SAFETY: No method gives access to the socket through a shared reference.
unsafe impl<T: EncapRecv> Sync for UdpTunnelSocket<T> {}

impl<T: EncapRecv> UdpTunnelSocket<T> {
    /// Binds a UDP socket on `port` (host order) of the wildcard address of `init_net`.
    ///
    /// # Errors
    ///
    /// `EADDRINUSE` when another socket owns the port; any error of `udp_sock_create`.
    pub fn bind(family: Family, port: u16) -> Result<Self> {
        let mut sock: *mut bindings::socket = core::ptr::null_mut();
        // SAFETY: `init_net` lives as long as the kernel; `sock` is valid for writes; the callback
        // has the signature the UDP tunnel code expects.
        let err = unsafe {
            bindings::roxe_helper_udp_tunnel_sock_create(
                core::ptr::addr_of_mut!(bindings::init_net),
                family == Family::Ipv6,
                port.to_be(),
                Some(Self::encap_recv),
                &mut sock,
            )
        };
        kernel::error::to_result(err)?;
        let sock = NonNull::new(sock).ok_or(EINVAL)?;
        // INVARIANT: The helper created and set up the socket, and we own it.
        Ok(Self {
            sock,
            _t: PhantomData,
        })
    }

    /// The socket's `encap_rcv`.
    ///
    /// # Safety
    ///
    /// Only the UDP layer calls this, as the `encap_rcv` of the socket `new` created, with `skb`
    /// null or a socket buffer that becomes ours when we return 0.
    unsafe extern "C" fn encap_recv(
        _sk: *mut bindings::sock,
        skb: *mut bindings::sk_buff,
    ) -> ffi::c_int {
        if let Some(skb) = NonNull::new(skb) {
            // SAFETY: Returning 0 tells the UDP layer that we consumed the skb, so we own it.
            T::recv(unsafe { SkBuff::from_raw(skb) });
        }
        0
    }
}

impl<T: EncapRecv> Drop for UdpTunnelSocket<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the socket; `udp_tunnel_sock_release` detaches the
        // encapsulation hook (waiting for RCU readers) and frees the socket.
        unsafe { bindings::udp_tunnel_sock_release((*self.sock.as_ptr()).sk) };
    }
}
