// SPDX-License-Identifier: GPL-2.0

//! The roxe device's state: what a device holds (its netdev, object pools, loopback queue,
//! counters, the state of held ACKs, multicast groups and ODP jobs), its PDs and user contexts,
//! and the port state read from the netdev. The verbs that create and use it are in `verbs/`.
//!
//! Rust counterpart of the device part of rxe's `rxe.c` and `rxe.h`.

#![deny(unsafe_code)]

use crate::compat::sync::SpinLockIrq;
use crate::rdma::{
    attr::PortState,
    bh::BhLock,
    device::DriverTypes,
    netdev::NetDevice,
    odp::OdpBudget,
    pool::{Pool, PoolRef},
};
use crate::soft::{deferred::SoftDevice, skb::SkbQueue, udp_tunnel::PortRef};
use crate::{
    ah::{AhHandle, RoxeAh},
    counters::Counters,
    cq::RoxeCq,
    hca::Roxe,
    mem::mr::{MrHandle, RoxeMr},
    mem::mw::MwHandle,
    mem::mw::RoxeMw,
    mem::LocalSource,
    net::source::Source,
    proto::{
        mtu::Pmtu,
        packet::Aeth,
        resp::{ReadReply, RespHeader},
    },
    qp::RoxeQp,
    srq::RoxeSrq,
};
use kernel::sync::Mutex;
use kernel::{
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, AtomicFlag},
        Arc,
    },
};

/// Per-device state.
#[pin_data]
pub(crate) struct RoxeDevice {
    /// The netdev the device sits on, held from creation until the device is freed. The data
    /// path uses this reference rather than `ib_device_get_netdev`, whose lock is not safe in
    /// softirq context.
    pub(crate) netdev: ARef<NetDevice>,
    /// Node GUID (EUI-64 of the netdev's MAC), wire order.
    pub(crate) guid: [u8; 8],
    /// Whether the port was last reported active, so that events fire only on transitions.
    /// Written only from the netdev notifier (serialised by RTNL).
    pub(crate) port_active: AtomicFlag,
    /// Live protection domains, bounded by `param::MAX_PD`.
    pub(crate) pds: Atomic<u32>,
    /// Source of PD identities (never reused, so a stale id matches no PD).
    pub(crate) next_pd_id: Atomic<u64>,
    /// QPs by number: the receive path finds a packet's QP here.
    #[pin]
    pub(crate) qps: Pool<RoxeQp>,
    /// SRQs by number.
    #[pin]
    pub(crate) srqs: Pool<RoxeSrq>,
    /// MRs by key index.
    #[pin]
    pub(crate) mrs: Pool<RoxeMr>,
    /// MWs by key index.
    #[pin]
    pub(crate) mws: Pool<RoxeMw>,
    /// AHs by number (`ah_num` in UD WQEs).
    #[pin]
    pub(crate) ahs: Pool<RoxeAh>,
    /// Packets sent to the device's own GIDs, waiting for the receive pipeline.
    #[pin]
    pub(crate) loopback: SkbQueue,
    /// Someone is draining `loopback` (see `recv::loopback`).
    pub(crate) loopback_draining: AtomicFlag,
    /// The QP whose send doorbells hand its requester to the kick work on another CPU until
    /// the kick work finishes a pass (`task::doorbell`), or `task::NO_QP`: one QP at a time,
    /// so that other QPs' doorbells keep running their requesters on their own CPUs.
    pub(crate) doorbell_qpn: Atomic<u32>,
    /// A send doorbell handed a requester to the kick work, which has not finished a pass that
    /// leaves nothing to the next since (`task::doorbell`, `task::kicked`).
    pub(crate) doorbell_pass: AtomicFlag,
    /// A response to a requester on this device, which the drainer that delivered the request
    /// builds and delivers next (`recv::loopback`). Only the holder of the
    /// drainer claim (`loopback_draining`) fills or empties it, and it is empty whenever the
    /// claim is free; the lock is a leaf, taken under a QP's `resp_state`.
    #[pin]
    pub(crate) local_response: SpinLockIrq<Option<LocalResponse>>,
    /// The buffer the drainer builds a [`LocalReply`]'s responses in, one at a time: allocated
    /// with the device, a loopback packet long (`qp::LOCAL_PACKET_MAX`, from vmalloc space when
    /// no contiguous pages are free), so that a READ's reply allocates and zeroes nothing. Only
    /// the holder of the drainer claim takes it out (and puts it back); a leaf lock.
    #[pin]
    pub(crate) local_reply_buf: SpinLockIrq<KVVec<u8>>,
    /// The payload of the loopback packet being delivered, left in the MR it is read from
    /// ([`LocalSource`]): a WRITE's or SEND's, put here by the requester's direct delivery for
    /// the responder, or a READ response's, put here by the drainer for the completer; either
    /// holds the drainer claim meanwhile and takes the slot back right after the delivery. A
    /// leaf lock, taken under a QP's `resp_state` or `sq_state`.
    #[pin]
    pub(crate) local_source: SpinLockIrq<Option<LocalSource>>,
    /// The buffer a [`LocalSource`]'s bytes are read into, whole, when they cannot be copied
    /// page to page into their target ([`RoxeDevice::with_source_bytes`]): allocated with the
    /// device, as `local_reply_buf` is. Only the holder of the drainer claim takes it out (and
    /// puts it back); a leaf lock, taken under a QP's `resp_state` or `sq_state`.
    #[pin]
    pub(crate) local_bounce: SpinLockIrq<KVVec<u8>>,
    /// Serialises the responder's atomic operations device-wide (IBA 9.4.5: atomics are atomic
    /// with respect to other atomics on the same HCA). A bottom-half lock, taken by the
    /// responder alone; an ODP or fast-registration MR's copy under it takes that MR's own
    /// bottom-half lock.
    #[pin]
    pub(crate) atomic_lock: BhLock<()>,
    /// How many QPs hold an ACK, and whether the short timer runs for them (`ack::hold_ack`).
    #[pin]
    pub(crate) held_acks: SpinLockIrq<HeldAcks>,
    /// When the wake timer is armed to expire (`now_ns`; 0: not armed), for the earliest end of
    /// an RC requester's RNR wait (`comp::rnr_wake_at`). A leaf lock, taken under `sq_state`.
    #[pin]
    pub(crate) rnr_wake_ns: SpinLockIrq<u64>,
    /// The port's hardware counters (`rdma statistic`).
    pub(crate) counters: Counters,
    /// The send windows the RC QPs to one peer share (`peer`).
    pub(crate) peers: crate::peer::Peers,
    /// Pages of range all processes together may register on the device for on-demand paging
    /// (`param::ODP_DEVICE_RAM_SHARE` of RAM); its refusals are the `odp_refused` counter.
    pub(crate) odp_budget: Arc<OdpBudget>,
    /// Multicast groups and their attached QPs (`mcast.rs`).
    #[pin]
    pub(crate) mcast: crate::mcast::McastTable,
    /// On-demand paging: faults, kicks and deferred packets for the process work (`mem/odp.rs`).
    #[pin]
    pub(crate) odp_jobs: SpinLockIrq<KVec<crate::mem::odp::Job>>,
    /// The device's hold on the RoCEv2 sockets of its netdev's namespace (`recv::rx::port_ref`),
    /// let go when the link is deleted or the netdev unregisters, so that the last device of a
    /// namespace closes the port there at once, as rdma_rxe does; process context only.
    #[pin]
    pub(crate) sockets: Mutex<Option<PortRef>>,
}

/// The device's account of held ACKs (`RoxeDevice::held_acks`): the short timer runs while
/// any QP holds one, and is stopped when the last is taken, so that a ping-pong, whose ACKs
/// all leave with the answers, pays no timer interrupt.
pub(crate) struct HeldAcks {
    /// QPs holding an ACK.
    pub(crate) count: u32,
    /// The short timer is started and has not begun to run.
    pub(crate) timer_armed: bool,
}

impl RoxeDevice {
    /// Lets go of the device's RoCEv2 sockets (`sockets`); the port closes in the namespace if
    /// no other device there holds it. Process context: releasing a socket may sleep.
    pub(crate) fn release_sockets(&self) {
        let sockets = self.sockets.lock().take();
        drop(sockets);
    }
}

impl HeldAcks {
    pub(crate) const fn new() -> Self {
        HeldAcks {
            count: 0,
            timer_armed: false,
        }
    }
}

/// A response the loopback drainer delivers right after the request that asked for it, without
/// a socket buffer (the device's `local_response` slot).
pub(crate) enum LocalResponse {
    /// An ACKNOWLEDGE, ATOMIC ACKNOWLEDGE or READ response without payload.
    Ack(LocalAck),
    /// The first burst of an RDMA READ reply.
    Read(LocalReply),
}

/// A headers-only response (ACKNOWLEDGE, ATOMIC ACKNOWLEDGE, a READ response without payload)
/// to a requester on this device, left for the loopback drainer that delivered the request
/// ([`LocalResponse`]): built on the drainer's stack and handed to the completer
/// (`response::local_ack`), where the packet path allocates a socket buffer, adds IP
/// and UDP headers, queues, parses and frees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocalAck {
    pub(crate) hdr: RespHeader,
    pub(crate) dest_qpn: u32,
    /// The response's addresses, as the completer sees them (`response::local_source`).
    pub(crate) src: Source,
}

/// An RDMA READ reply (its first [`crate::proto::resp::READ_REPLY_BURST`] responses) to a
/// requester on this device, left for the loopback drainer that delivered the READ: it builds
/// the responses one at a time into one buffer as it hands them to the completer
/// (`recv::loopback::deliver_local_reply`), where the wire path builds a socket buffer per
/// response and the drainer would queue, parse and free each. A response's data under a page is
/// read as it is built, as a NIC reads it while it sends; a page or more is left in the MR for
/// the completer to copy once (`read_reply::LocalPackets::next`).
pub(crate) struct LocalReply {
    /// Pinned user memory: its pages stay while this reference does.
    pub(crate) mr: PoolRef<RoxeMr>,
    pub(crate) reply: ReadReply,
    pub(crate) mtu: Pmtu,
    /// The AETH of the responses that carry one.
    pub(crate) ack: Aeth,
    pub(crate) dest_qpn: u32,
    /// The responses' addresses, as the completer sees them.
    pub(crate) src: Source,
}

impl RoxeDevice {
    /// The key byte of a new memory key. IBA 10.6.2 leaves it to the HCA. Random, so that
    /// neither a key of a freed MR nor a guess from the (small, predictable) key index reaches
    /// the MR or window that now holds the index: another process or a remote peer has one
    /// chance in 256 per try, and a wrong key puts its QP in the error state.
    pub(crate) fn next_key_byte(&self) -> u8 {
        (crate::soft::random::u32() & 0xff) as u8
    }

    /// Calls `f` with the bytes of `s`, the payload of the loopback packet being delivered,
    /// read whole into the device's `local_bounce` buffer: for a target that cannot take them
    /// page to page (not pinned user memory, or sharing pages with them), as a packet's payload
    /// is read before it is written (the buffer holds a whole segment from the device's creation
    /// on). `None` if the bytes cannot be read: the packet is then lost, as on a wire. Context:
    /// the holder of the drainer claim, which alone uses the buffer (the slot holds a source
    /// only meanwhile).
    pub(crate) fn with_source_bytes<R>(
        &self,
        s: &LocalSource,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let mut buf = core::mem::take(&mut *self.local_bounce.lock());
        let r = match buf.get_mut(..s.len) {
            Some(b) => s.mr.read_at(s.va, b).ok().map(|()| f(b)),
            None => None,
        };
        *self.local_bounce.lock() = buf;
        r
    }
}

/// Per-PD state.
pub(crate) struct RoxePd {
    /// The PD's identity, recorded by the MRs, MWs, QPs and SRQs created in it.
    pub(crate) id: u64,
}

/// Per-process state: the objects a process creates are tracked by the core; roxe keeps the
/// budget of its on-demand paging registrations.
pub(crate) struct RoxeUContext {
    /// Pages of range the process may register for on-demand paging, its implicit MRs'
    /// children included (`param::ODP_PROCESS_RAM_SHARE` of RAM).
    pub(crate) odp: Arc<OdpBudget>,
}

/// The logical state of the port on `netdev`: active when the interface is up with a carrier.
pub(crate) fn port_state(netdev: &NetDevice) -> PortState {
    if netdev.is_running() && netdev.has_carrier() {
        PortState::Active
    } else {
        PortState::Down
    }
}

/// A MAC for netdevs without one (tunnels, `lo` has one): locally administered, unique per
/// interface index, so that connection management still sees distinct GUIDs.
pub(crate) fn fallback_mac(netdev: &NetDevice) -> [u8; 6] {
    let i = netdev.ifindex().to_be_bytes();
    [0x02, 0x52, i[0], i[1], i[2], i[3]]
}

impl DriverTypes for Roxe {
    type Data = SoftDevice<RoxeDevice>;
    type UContext = RoxeUContext;
    type Pd = RoxePd;
    type Cq = Arc<RoxeCq>;
    type Qp = PoolRef<RoxeQp>;
    type Srq = PoolRef<RoxeSrq>;
    type Ah = AhHandle;
    type Mr = MrHandle;
    type Mw = MwHandle;
}
