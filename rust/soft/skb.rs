// SPDX-License-Identifier: GPL-2.0

//! Socket buffers (`struct sk_buff`) as the RoCEv2 paths use them: received packets (read
//! only), packets the driver builds and sends, and queues of them.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)

use crate::rdma::{bindings, netdev::NetDevice};
use core::ptr::NonNull;
use kernel::{prelude::*, types::Opaque};

/// An owned socket buffer. Freed (`kfree_skb`) when dropped.
///
/// # Invariants
///
/// `self.0` points to an `sk_buff` this object owns exclusively.
pub struct SkBuff(NonNull<bindings::sk_buff>);

// SAFETY: An owned skb may be passed to and freed on any CPU.
unsafe impl Send for SkBuff {}

impl SkBuff {
    /// Takes ownership of `skb`.
    ///
    /// # Safety
    ///
    /// `skb` is a valid socket buffer whose ownership the caller gives up.
    pub(crate) unsafe fn from_raw(skb: NonNull<bindings::sk_buff>) -> Self {
        // INVARIANT: By the function's safety requirements.
        Self(skb)
    }

    fn into_raw(self) -> *mut bindings::sk_buff {
        let p = self.0.as_ptr();
        core::mem::forget(self);
        p
    }

    fn as_raw(&self) -> *mut bindings::sk_buff {
        self.0.as_ptr()
    }

    /// Length of the data in the buffer (from the current data pointer).
    pub fn len(&self) -> u32 {
        // SAFETY: By the type invariant the skb is valid and owned.
        unsafe { (*self.as_raw()).len }
    }

    /// Whether the buffer holds no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pulls all data into the linear area, so that [`SkBuff::data`] covers the whole packet.
    pub fn linearize(&mut self) -> Result {
        // SAFETY: Owned, valid skb.
        kernel::error::to_result(unsafe { bindings::roxe_helper_skb_linearize(self.as_raw()) })
    }

    /// The linear data from the current data pointer (all of it after [`SkBuff::linearize`]).
    /// Read only: a received skb may share its data with clones.
    pub fn data(&self) -> &[u8] {
        // SAFETY: Owned, valid skb: `headlen` bytes from `data` are readable for as long as we
        // own it and do not change its layout (which needs `&mut self`).
        unsafe {
            let p = bindings::roxe_helper_skb_data(self.as_raw());
            let n = bindings::roxe_helper_skb_headlen(self.as_raw());
            core::slice::from_raw_parts(p, n as usize)
        }
    }

    /// The bytes from the network header to the data pointer: the IP header of a received
    /// packet whose data starts at its UDP header.
    pub fn network_header(&self) -> &[u8] {
        let mut len = 0u32;
        // SAFETY: Owned, valid skb; the helper returns the network header of its linear area and
        // the bytes up to `data`, all inside the buffer.
        unsafe {
            let p = bindings::roxe_helper_skb_network_header(self.as_raw(), &mut len);
            core::slice::from_raw_parts(p, len as usize)
        }
    }

    /// The netdev the packet arrived on (or leaves by).
    pub fn netdev(&self) -> Option<&NetDevice> {
        // SAFETY: Owned, valid skb; its device is held by the stack while the packet is processed
        // (receive path under RCU) or by us (transmit path: the device's own netdev).
        let dev = unsafe { bindings::roxe_helper_skb_dev(self.as_raw()) };
        // SAFETY: Non-NULL devices of a live skb are live netdevs.
        (!dev.is_null()).then(|| unsafe { NetDevice::from_raw(dev) })
    }
}

impl Drop for SkBuff {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own the skb.
        unsafe { bindings::roxe_helper_kfree_skb(self.as_raw()) };
    }
}

/// `NET_XMIT_DROP` (`include/linux/netdevice.h`): the queue discipline dropped the packet.
const NET_XMIT_DROP: i32 = 1;

/// What `ip_local_out` (or `ip6_local_out`) returned, as `net_xmit_eval` reads it: a negative
/// errno, or a positive NET_XMIT code of which only `NET_XMIT_DROP` means the packet is lost
/// (`NET_XMIT_CN`, congestion, still sent it).
fn xmit_result(ret: i32) -> Result {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else if ret == NET_XMIT_DROP {
        Err(crate::compat::errno::enobufs())
    } else {
        Ok(())
    }
}

/// A packet the driver builds: data it owns exclusively and may write.
///
/// # Invariants
///
/// The wrapped skb was allocated by [`TxSkBuff::alloc`] and never shared.
pub struct TxSkBuff(SkBuff);

/// Most packets [`TxSkBuff::send_v4_batch`] sends at once.
pub const MAX_BATCH: usize = 32;

impl TxSkBuff {
    /// Allocates a packet of `len` zeroed bytes leaving by `netdev`, with headroom for the link,
    /// IP and UDP headers. Any context (atomic allocation).
    pub fn alloc(netdev: &NetDevice, len: usize) -> Result<TxSkBuff> {
        let len = u32::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: `netdev` is alive for the call.
        let skb = unsafe { bindings::roxe_helper_alloc_tx_skb(netdev.as_raw(), len) };
        let skb = NonNull::new(skb).ok_or(ENOMEM)?;
        // SAFETY: A fresh skb we own.
        Ok(TxSkBuff(unsafe { SkBuff::from_raw(skb) }))
    }

    /// The packet's bytes, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: We allocated the skb and never shared it (type invariant), so its linear data
        // is ours alone; `&mut self` excludes other access.
        unsafe {
            let p = bindings::roxe_helper_skb_data(self.0.as_raw());
            let n = bindings::roxe_helper_skb_headlen(self.0.as_raw());
            core::slice::from_raw_parts_mut(p, n as usize)
        }
    }

    /// The packet's bytes.
    pub fn data(&self) -> &[u8] {
        self.0.data()
    }

    /// Routes the packet over IPv4 out of `netdev` and pushes its UDP and IP headers: afterwards
    /// [`TxSkBuff::data`] starts at the IP header. Addresses in network byte order as bytes.
    pub fn prepare_v4(
        &mut self,
        netdev: &NetDevice,
        saddr: [u8; 4],
        daddr: [u8; 4],
        sport: u16,
        tos: u8,
        ttl: u8,
    ) -> Result {
        self.push_v4(Some(netdev), saddr, daddr, sport, tos, ttl)
    }

    /// Pushes the UDP and IPv4 headers of a packet to one of this host's own addresses, without
    /// routing it (it never leaves memory), and turns it into one "received", as
    /// [`TxSkBuff::into_loopback`] does.
    pub fn into_local_v4(
        mut self,
        saddr: [u8; 4],
        daddr: [u8; 4],
        sport: u16,
        tos: u8,
        ttl: u8,
    ) -> Result<SkBuff> {
        self.push_v4(None, saddr, daddr, sport, tos, ttl)?;
        Ok(self.into_loopback())
    }

    /// Pushes the UDP and IPv4 headers, routed out of `netdev` if given.
    fn push_v4(
        &mut self,
        netdev: Option<&NetDevice>,
        saddr: [u8; 4],
        daddr: [u8; 4],
        sport: u16,
        tos: u8,
        ttl: u8,
    ) -> Result {
        // SAFETY: Owned skb with the headroom `alloc` reserved; `netdev`, when given, is alive;
        // without it the helper does not route and does not use the (null) device.
        kernel::error::to_result(unsafe {
            bindings::roxe_helper_prepare4(
                self.0.as_raw(),
                netdev.map_or(core::ptr::null_mut(), |n| n.as_raw()),
                u32::from_ne_bytes(saddr),
                u32::from_ne_bytes(daddr),
                sport.to_be(),
                tos,
                ttl,
                netdev.is_some(),
            )
        })
    }

    /// The IPv6 counterpart of [`TxSkBuff::into_local_v4`].
    pub fn into_local_v6(
        mut self,
        saddr: &[u8; 16],
        daddr: &[u8; 16],
        sport: u16,
        tclass: u8,
        hop_limit: u8,
    ) -> Result<SkBuff> {
        self.push_v6(None, saddr, daddr, sport, tclass, hop_limit)?;
        Ok(self.into_loopback())
    }

    /// Sends a packet prepared by [`TxSkBuff::prepare_v4`]. Consumes it, whatever the outcome; an
    /// error says it did not leave (no route, refused by the IP layer, dropped by the qdisc).
    pub fn send_v4(self) -> Result {
        let skb = self.0.into_raw();
        // SAFETY: An skb we own and never shared (type invariant), passed to the helper, which
        // sends it if it has a route (prepare_v4) and frees it otherwise.
        let ret = unsafe { bindings::roxe_helper_send4(skb) };
        xmit_result(ret)
    }

    /// Pushes the UDP and IPv4 headers of a packet that leaves in a batch
    /// ([`TxSkBuff::send_v4_batch`]): no route, IP ID zero until [`TxSkBuff::route_v4_batch`]
    /// numbers the batch. Afterwards [`TxSkBuff::data`] starts at the IP header.
    pub fn push_headers_v4(
        &mut self,
        saddr: [u8; 4],
        daddr: [u8; 4],
        sport: u16,
        tos: u8,
        ttl: u8,
    ) -> Result {
        self.push_v4(None, saddr, daddr, sport, tos, ttl)
    }

    /// Routes this packet, the first of a batch of `n` (headers pushed by
    /// [`TxSkBuff::push_headers_v4`]), out of `netdev`, and reserves `n` consecutive IP IDs
    /// for the batch. Returns the first; packet `i` of the batch must carry the first plus `i`
    /// (segmentation numbers them so).
    pub fn route_v4_batch(
        &mut self,
        netdev: &NetDevice,
        saddr: [u8; 4],
        daddr: [u8; 4],
        n: u32,
    ) -> Result<u16> {
        let mut first = 0u16;
        // SAFETY: Owned skb with its IPv4 header pushed; `netdev` is alive for the call; `first`
        // is a valid place for the helper to write.
        kernel::error::to_result(unsafe {
            bindings::roxe_helper_route4_batch(
                self.0.as_raw(),
                netdev.as_raw(),
                u32::from_ne_bytes(saddr),
                u32::from_ne_bytes(daddr),
                n,
                &mut first,
            )
        })?;
        Ok(first)
    }

    /// Sends this packet (routed by [`TxSkBuff::route_v4_batch`]) and `rest` (at most
    /// [`MAX_BATCH`] - 1 packets, headers pushed, IDs following this one's) as one UDP
    /// fraglist GSO packet: the stack routes and queues it once and the device is kicked
    /// once for the batch. Consumes them all, whatever the outcome.
    pub fn send_v4_batch(self, rest: impl IntoIterator<Item = TxSkBuff>) -> Result {
        let mut raw = [core::ptr::null_mut::<bindings::sk_buff>(); MAX_BATCH];
        let mut n = 0usize;
        for skb in rest {
            // Beyond the batch limit (callers keep to it) a packet is dropped, as a full queue would.
            if let Some(slot) = raw.get_mut(n) {
                *slot = skb.0.into_raw();
                n += 1;
            }
        }
        let head = self.0.into_raw();
        // SAFETY: `head` and `raw[..n]` are owned skbs never shared (type invariant) whose
        // ownership passes to the helper; it sends them only if their headers and the head's
        // route are in place (the order of calls above) and frees them otherwise.
        let ret = unsafe { bindings::roxe_helper_send4_batch(head, raw.as_mut_ptr(), n as u32) };
        xmit_result(ret)
    }

    /// Routes the packet over IPv6 out of `netdev` and pushes its UDP and IPv6 headers.
    pub fn prepare_v6(
        &mut self,
        netdev: &NetDevice,
        saddr: &[u8; 16],
        daddr: &[u8; 16],
        sport: u16,
        tclass: u8,
        hop_limit: u8,
    ) -> Result {
        self.push_v6(Some(netdev), saddr, daddr, sport, tclass, hop_limit)
    }

    /// Pushes the UDP and IPv6 headers, routed out of `netdev` if given.
    fn push_v6(
        &mut self,
        netdev: Option<&NetDevice>,
        saddr: &[u8; 16],
        daddr: &[u8; 16],
        sport: u16,
        tclass: u8,
        hop_limit: u8,
    ) -> Result {
        // SAFETY: Owned skb with the headroom `alloc` reserved (room for an IPv6 header);
        // `netdev`, when given, is alive (without it the helper neither routes nor uses the
        // null device); the addresses are 16-byte arrays for the call.
        kernel::error::to_result(unsafe {
            bindings::roxe_helper_prepare6(
                self.0.as_raw(),
                netdev.map_or(core::ptr::null_mut(), |n| n.as_raw()),
                saddr.as_ptr(),
                daddr.as_ptr(),
                sport.to_be(),
                tclass,
                hop_limit,
                netdev.is_some(),
            )
        })
    }

    /// Sends a packet prepared by [`TxSkBuff::prepare_v6`]. Consumes it, whatever the outcome; an
    /// error says it did not leave, as for [`TxSkBuff::send_v4`].
    pub fn send_v6(self) -> Result {
        let skb = self.0.into_raw();
        // SAFETY: An skb we own and never shared (type invariant), passed to the helper, which
        // sends it if it has a route (prepare_v6) and frees it otherwise.
        let ret = unsafe { bindings::roxe_helper_send6(skb) };
        xmit_result(ret)
    }

    /// Turns a prepared packet into one "received" by this host: data at the UDP header, the
    /// IP header as network header, as the UDP encapsulation hook delivers packets.
    fn into_loopback(self) -> SkBuff {
        // SAFETY: A prepared skb we own, with its IP header pushed.
        unsafe { bindings::roxe_helper_loopback_prepare(self.0.as_raw()) };
        self.0
    }
}

/// A queue of socket buffers (`struct sk_buff_head`), internally locked with IRQs disabled.
///
/// # Invariants
///
/// `head` is initialised by `skb_queue_head_init` and holds only skbs owned by the queue.
#[pin_data(PinnedDrop)]
pub struct SkbQueue {
    #[pin]
    head: Opaque<bindings::sk_buff_head>,
}

// SAFETY: The queue has its own lock; skbs may move between CPUs.
unsafe impl Send for SkbQueue {}
// SAFETY: As above: all operations lock internally.
unsafe impl Sync for SkbQueue {}

impl SkbQueue {
    /// An empty queue.
    pub fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `skb_queue_head_init` initialises the whole head.
            head <- Opaque::ffi_init(|h| unsafe { bindings::roxe_helper_skb_queue_init(h) }),
        })
    }

    /// Appends `skb`. Any context.
    pub fn push(&self, skb: SkBuff) {
        // SAFETY: Initialised queue; the queue takes ownership of the skb.
        unsafe { bindings::skb_queue_tail(self.head.get(), skb.into_raw()) };
    }

    /// Whether the queue is empty (a snapshot: another CPU may add to it at once).
    pub fn is_empty(&self) -> bool {
        // SAFETY: Initialised queue; the lockless check only reads the head's pointers.
        unsafe { bindings::roxe_helper_skb_queue_empty(self.head.get()) }
    }

    /// Takes the oldest skb, if any. Any context.
    pub fn pop(&self) -> Option<SkBuff> {
        // SAFETY: Initialised queue.
        let skb = unsafe { bindings::skb_dequeue(self.head.get()) };
        // SAFETY: Dequeued: ownership passes to us.
        NonNull::new(skb).map(|p| unsafe { SkBuff::from_raw(p) })
    }
}

#[pinned_drop]
impl PinnedDrop for SkbQueue {
    fn drop(self: Pin<&mut Self>) {
        while let Some(skb) = self.pop() {
            drop(skb);
        }
    }
}

/// CRC32 (little-endian, reflected, no pre/post inversion) from the kernel's CRC32 library, for
/// the RoCEv2 invariant CRC.
pub fn crc32_le(seed: u32, data: &[u8]) -> u32 {
    // SAFETY: `data` is a valid slice for the call.
    unsafe { bindings::roxe_helper_crc32_le(seed, data.as_ptr().cast(), data.len()) }
}
