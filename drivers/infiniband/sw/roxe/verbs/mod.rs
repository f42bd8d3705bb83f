// SPDX-License-Identifier: GPL-2.0

//! The verbs: roxe's implementation of the RDMA core's device operations (`Driver`), of its link
//! type (`rdma link add NAME type roxe netdev DEV`) and of netdev events. Each verb checks what is
//! the device's to check and hands the object's work to the object's file.
//!
//! Rust counterpart of rxe's `rxe_verbs.c` and the link and netdev parts of `rxe.c` and
//! `rxe_net.c`.

#![deny(unsafe_code)]

pub(crate) mod kpost;

use crate::rdma::{
    ah::{AddressVector, Ah, AhContext},
    attr::{
        self, AtomicCap, DeviceAttr, DeviceCaps, KernelCaps, OdpCaps, PhysState, PortAttr,
        PortImmutable, PortState,
    },
    cq::{Cq, CqInit, CqNotifier, NotifyFlags},
    device::{Device, PortEvent},
    driver::{Driver, DriverId, StatDesc, UverbsWriteCmd},
    kverbs::{FastRegGrant, KernelMem, KernelRecvWr, KernelSendWr, Wc},
    link::{Link, LinkOps},
    mr::{FastRegPages, Mr, MrCreated, UserMrRequest},
    netdev::{NetDevice, NetdevEvent, NetdevNotifier},
    object::UData,
    odp::OdpBudget,
    pd::Pd,
    pool::{Pool, PoolRef},
    qp::{Qp, QpAttr, QpAttrMask, QpCreated, QpInit, QpNotifier},
    srq::{Srq, SrqAttr, SrqInit, SrqNotifier},
};
use crate::soft::{
    deferred::{Deferred, SoftDevice},
    skb::SkbQueue,
};
use crate::{
    ah::{self, AhHandle},
    counters::{self, Counter, Counters},
    cq::{self, RoxeCq},
    mem::mr::{self, MrHandle},
    mem::mw::MwHandle,
    param,
    proto::{guid::eui64_from_mac, mtu::IbMtu},
    qp::{self, RoxeQp},
    srq::{self, RoxeSrq},
};
use crate::{
    device::{fallback_mac, port_state, RoxeDevice, RoxePd, RoxeUContext},
    hca::{Roxe, PORT},
};
use kernel::{
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{Atomic, AtomicFlag, Relaxed},
        Arc,
    },
};

/// The link type table the RDMA core calls `newlink`/`dellink` through.
pub(crate) static LINK_OPS: LinkOps<Roxe> = LinkOps::new();

/// The same link type under rdma_rxe's name, registered only with the `rxe_compat` module
/// parameter, so that `rdma link add NAME type rxe` creates a roxe device. Never beside
/// rdma_rxe: the module keeps rdma_rxe from loading while it is loaded, and does not load
/// while rdma_rxe is.
pub(crate) static RXE_LINK_OPS: LinkOps<Roxe> = LinkOps::with_type(c"rxe");

impl Deferred for Roxe {
    type State = RoxeDevice;

    /// The granularity of the retransmission and RNR timers.
    const TICK_MS: u32 = 10;

    fn tick(dev: &Device<Self>) {
        crate::task::tick(dev);
    }

    fn short_timer(dev: &Device<Self>) {
        crate::task::short_timer(dev);
    }

    fn wake_timer(dev: &Device<Self>) {
        crate::task::rnr_timer(dev);
    }

    fn kicked(dev: &Device<Self>) {
        crate::task::kicked(dev);
    }

    fn process_work(dev: &Device<Self>) {
        crate::task::process_work(dev);
    }
}

#[vtable]
impl Driver for Roxe {
    const DRIVER_ID: DriverId = DriverId::Rxe;
    /// rxe's `RXE_UVERBS_ABI_VERSION`, the only one rdma-core's rxe provider accepts.
    const UVERBS_ABI_VERSION: u32 = 2;
    /// rdma-core's rxe provider rings the send doorbell and arms CQs with these.
    const UVERBS_WRITE_CMDS: &'static [UverbsWriteCmd] =
        &[UverbsWriteCmd::PostSend, UverbsWriteCmd::ReqNotifyCq];
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr> {
        let caps = [
            DeviceCaps::BAD_PKEY_CNTR,
            DeviceCaps::BAD_QKEY_CNTR,
            DeviceCaps::AUTO_PATH_MIG,
            DeviceCaps::CHANGE_PHY_PORT,
            DeviceCaps::UD_AV_PORT_ENFORCE,
            DeviceCaps::PORT_ACTIVE_EVENT,
            DeviceCaps::SYS_IMAGE_GUID,
            DeviceCaps::RC_RNR_NAK_GEN,
            DeviceCaps::SRQ_RESIZE,
            DeviceCaps::MEM_MGT_EXTENSIONS,
            DeviceCaps::MEM_WINDOW,
            DeviceCaps::MEM_WINDOW_TYPE_2B,
            DeviceCaps::FLUSH_GLOBAL,
            DeviceCaps::FLUSH_PERSISTENT,
            DeviceCaps::ATOMIC_WRITE,
        ]
        .iter()
        .fold(DeviceCaps::default(), |acc, c| acc.with(*c));
        Ok(DeviceAttr {
            sys_image_guid: dev.data().guid,
            max_mr_size: u64::MAX,
            page_size_cap: param::PAGE_SIZE_CAP,
            vendor_id: param::VENDOR_ID,
            max_qp: param::MAX_QP,
            max_qp_wr: param::MAX_QP_WR,
            device_cap_flags: caps,
            kernel_cap_flags: KernelCaps::ALLOW_USER_UNREG.with(KernelCaps::ON_DEMAND_PAGING),
            // Explicit and implicit ODP MRs (no prefetch): as local memory of sends and
            // receives on RC and UD, as the target of RC WRITEs, READs and atomics.
            odp_caps: OdpCaps {
                general: OdpCaps::SUPPORT | OdpCaps::SUPPORT_IMPLICIT,
                rc: OdpCaps::SEND
                    | OdpCaps::RECV
                    | OdpCaps::WRITE
                    | OdpCaps::READ
                    | OdpCaps::ATOMIC
                    | OdpCaps::SRQ_RECV,
                ud: OdpCaps::SEND | OdpCaps::RECV | OdpCaps::SRQ_RECV,
                uc: 0,
                xrc: 0,
            },
            max_send_sge: param::MAX_SGE,
            max_recv_sge: param::MAX_SGE,
            max_sge_rd: param::MAX_SGE_RD,
            max_cq: param::MAX_CQ,
            max_cqe: (1 << param::MAX_LOG_CQE) - 1,
            max_mr: param::MAX_MR,
            max_pd: param::MAX_PD,
            max_qp_rd_atom: param::MAX_QP_RD_ATOM,
            max_res_rd_atom: param::MAX_RES_RD_ATOM,
            max_qp_init_rd_atom: param::MAX_QP_INIT_RD_ATOM,
            atomic_cap: AtomicCap::Hca,
            max_mcast_grp: param::MAX_MCAST_GRP,
            max_mcast_qp_attach: param::MAX_MCAST_QP_ATTACH,
            max_total_mcast_qp_attach: param::MAX_TOT_MCAST_QP_ATTACH,
            max_ah: param::MAX_AH,
            max_srq: param::MAX_SRQ,
            max_srq_wr: param::MAX_SRQ_WR,
            max_srq_sge: param::MAX_SRQ_SGE,
            max_fast_reg_page_list_len: param::MAX_FMR_PAGE_LIST_LEN,
            max_pkeys: param::MAX_PKEYS,
            local_ca_ack_delay: param::LOCAL_CA_ACK_DELAY,
            max_mw: param::MAX_MW,
            ..Default::default()
        })
    }

    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr> {
        if port != PORT {
            return Err(EINVAL);
        }
        let mut attr = PortAttr {
            max_mtu: IbMtu::Mtu4096.as_raw(),
            active_mtu: IbMtu::Mtu256.as_raw(),
            gid_tbl_len: param::PORT_GID_TBL_LEN,
            port_cap_flags: attr::PORT_CAP_CM_SUP,
            max_msg_sz: param::PORT_MAX_MSG_SZ,
            pkey_tbl_len: param::PORT_PKEY_TBL_LEN,
            max_vl_num: 1,
            ..Default::default()
        };
        // Everything is read live from the netdev, so MTU and link changes show at once. Once
        // the netdev is gone the port reports down until the core unregisters the device.
        if let Some(netdev) = dev.netdev(PORT) {
            attr.state = port_state(&netdev);
            attr.phys_state = match attr.state {
                PortState::Active => PhysState::LinkUp,
                PortState::Down => PhysState::Disabled,
            };
            attr.active_mtu = IbMtu::for_netdev_mtu(netdev.mtu()).as_raw();
        }
        // Speed and width follow the netdev's link settings; a netdev without them (virtio,
        // veth) gets the core's default.
        if let Ok((speed, width)) = dev.eth_speed(PORT) {
            attr.active_speed = speed;
            attr.active_width = width;
        }
        Ok(attr)
    }

    fn port_immutable(_dev: &Device<Self>, port: u32) -> Result<PortImmutable> {
        if port != PORT {
            return Err(EINVAL);
        }
        Ok(PortImmutable {
            pkey_tbl_len: i32::from(param::PORT_PKEY_TBL_LEN),
            gid_tbl_len: param::PORT_GID_TBL_LEN,
            core_cap_flags: attr::CORE_CAP_ROCE_UDP_ENCAP,
            max_mad_size: attr::MGMT_MAD_SIZE,
        })
    }

    fn query_pkey(_dev: &Device<Self>, port: u32, index: u16) -> Result<u16> {
        if port != PORT || index >= param::PORT_PKEY_TBL_LEN {
            return Err(EINVAL);
        }
        Ok(param::DEFAULT_PKEY)
    }

    fn alloc_ucontext(_dev: &Device<Self>, udata: &UData<'_>) -> Result<RoxeUContext> {
        udata.check_in_empty()?;
        let (num, den) = param::ODP_PROCESS_RAM_SHARE;
        Ok(RoxeUContext {
            odp: Arc::new(OdpBudget::of_ram(num, den), GFP_KERNEL)?,
        })
    }

    fn alloc_pd(dev: &Device<Self>, udata: Option<&UData<'_>>) -> Result<RoxePd> {
        if let Some(u) = udata {
            u.check_in_empty()?;
        }
        let pds = &dev.data().pds;
        // Reserve a slot first, so that concurrent allocations cannot overshoot the limit.
        if pds.fetch_add(1u32, Relaxed) >= param::MAX_PD {
            pds.fetch_sub(1u32, Relaxed);
            return Err(ENOMEM);
        }
        Ok(RoxePd {
            id: dev.data().next_pd_id.fetch_add(1u64, Relaxed),
        })
    }

    fn dealloc_pd(dev: &Device<Self>, _pd: RoxePd) {
        dev.data().pds.fetch_sub(1u32, Relaxed);
    }

    fn create_cq(
        dev: &Device<Self>,
        init: &CqInit,
        notifier: Arc<CqNotifier>,
        udata: Option<&UData<'_>>,
    ) -> Result<(Arc<RoxeCq>, u32)> {
        cq::create(dev, init, notifier, udata)
    }

    fn destroy_cq(_cq: &Cq<Self>) -> Result {
        Ok(())
    }

    fn resize_cq(cq: &Cq<Self>, cqe: u32, udata: Option<&UData<'_>>) -> Result<u32> {
        cq::resize(cq, cqe, udata)
    }

    fn req_notify_cq(cq: &Cq<Self>, flags: NotifyFlags) -> Result<bool> {
        cq::req_notify(cq, flags)
    }

    fn create_qp(
        dev: &Device<Self>,
        init: &mut QpInit<'_, Self>,
        notifier: Arc<QpNotifier>,
        udata: Option<&UData<'_>>,
    ) -> Result<QpCreated<PoolRef<RoxeQp>>> {
        qp::create(dev, init, notifier, udata)
    }

    fn modify_qp(
        qp: &Qp<Self>,
        attr: &QpAttr,
        mask: QpAttrMask,
        udata: Option<&UData<'_>>,
    ) -> Result {
        match qp::modify(qp, attr, mask, udata)? {
            qp::Transition::ToError => {
                // Outstanding and queued WQEs complete with a flush error (IBA 10.3.1).
                crate::task::run_queues(qp.device(), qp.qp_data());
                qp::last_wqe_reached(qp.qp_data());
            }
            // An ACK held for the old connection still leaves (it carries its own address),
            // with no lock held.
            qp::Transition::ToReset => {
                crate::net::ack::send_held_ack(qp.device(), qp.qp_data());
                crate::recv::loopback::drain(qp.device());
            }
            qp::Transition::Other => {}
        }
        Ok(())
    }

    fn query_qp(qp: &Qp<Self>) -> Result<(QpAttr, bool)> {
        Ok(qp::query(qp))
    }

    fn destroy_qp(qp: &Qp<Self>) -> Result {
        qp::destroy(qp);
        // No responder finds the QP any more to hold an ACK. One it holds leaves now: its
        // request completed here, and the peer's requester waits for it (after its last message
        // to a consumer that then destroys the QP, it would time out for good).
        crate::net::ack::send_held_ack(qp.device(), qp.qp_data());
        crate::recv::loopback::drain(qp.device());
        Ok(())
    }

    fn post_srq_recv(s: &Srq<Self>, wr: &KernelRecvWr<'_>) -> Result {
        crate::verbs::kpost::post_srq_recv(s, wr)
    }

    fn attach_mcast(q: &Qp<Self>, mgid: &[u8; 16]) -> Result {
        crate::mcast::attach(q, mgid)
    }

    fn detach_mcast(q: &Qp<Self>, mgid: &[u8; 16]) -> Result {
        crate::mcast::detach(q, mgid)
    }

    fn registering(dev: &Device<Self>) {
        // The retransmission, RNR and READ-reply timers run from the first QP on.
        dev.start_tick();
    }

    fn post_send_user(qp: &Qp<Self>) -> Result {
        // New WQEs are in the ring: the requester sends them (or flushes them in the error
        // state).
        qp::doorbell(qp)?;
        crate::task::doorbell(qp.device(), qp.qp_data());
        Ok(())
    }

    fn create_srq(
        dev: &Device<Self>,
        init: &mut SrqInit<'_, Self>,
        notifier: Arc<SrqNotifier>,
        udata: Option<&UData<'_>>,
    ) -> Result<PoolRef<RoxeSrq>> {
        srq::create(dev, init, notifier, udata)
    }

    fn modify_srq(s: &Srq<Self>, attr: &SrqAttr, mask: u32, udata: Option<&UData<'_>>) -> Result {
        srq::modify(s, attr, mask, udata)
    }

    fn query_srq(s: &Srq<Self>) -> Result<SrqAttr> {
        Ok(srq::query(s))
    }

    fn destroy_srq(s: &Srq<Self>) -> Result {
        srq::destroy(s);
        Ok(())
    }

    fn create_ah(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        av: &AddressVector,
        ctx: AhContext,
        udata: Option<&UData<'_>>,
    ) -> Result<AhHandle> {
        ah::create(dev, pd.data().id, av, ctx, udata)
    }

    fn destroy_ah(dev: &Device<Self>, a: AhHandle) {
        ah::destroy(dev, a)
    }

    fn query_ah(a: &Ah<Self>) -> Result<AddressVector> {
        Ok(ah::query(a.data()))
    }

    fn reg_user_mr(
        pd: &Pd<Self>,
        req: &UserMrRequest,
        udata: Option<&UData<'_>>,
    ) -> Result<MrCreated<MrHandle>> {
        mr::reg_user(pd, req, udata)
    }

    fn rereg_user_mr(
        m: &Mr<Self>,
        flags: u32,
        req: &UserMrRequest,
        new_pd: Option<&Pd<Self>>,
        udata: Option<&UData<'_>>,
    ) -> Result {
        mr::rereg(m, flags, req, new_pd, udata)
    }

    fn prepare_dereg_mr(dev: &Device<Self>, m: &MrHandle) -> Result {
        mr::prepare_dereg(dev, m)
    }

    fn dereg_mr(dev: &Device<Self>, m: MrHandle) {
        mr::dereg(dev, m)
    }

    fn alloc_mw(pd: &Pd<Self>, type2: bool, udata: Option<&UData<'_>>) -> Result<(MwHandle, u32)> {
        crate::mem::mw::alloc_mw(pd, type2, udata)
    }

    fn dealloc_mw(dev: &Device<Self>, m: MwHandle) {
        crate::mem::mw::dealloc_mw(dev, m)
    }

    fn post_send_kernel(q: &Qp<Self>, wr: &KernelSendWr<'_, Self>) -> Result {
        crate::verbs::kpost::post_send(q, wr)
    }

    fn post_recv(q: &Qp<Self>, wr: &KernelRecvWr<'_>) -> Result {
        crate::verbs::kpost::post_recv(q, wr)
    }

    fn poll_cq(c: &Cq<Self>) -> Option<Wc> {
        cq::poll(c)
    }

    fn get_dma_mr(pd: &Pd<Self>, access: u32, mem: KernelMem) -> Result<MrCreated<MrHandle>> {
        mr::get_dma(pd, access, mem)
    }

    const HW_STATS: &'static [StatDesc] = &counters::DESCS;

    fn get_hw_stats(dev: &Device<Self>, _port: u32, values: &mut [u64]) {
        dev.data().counters.read(values);
        // Refusals are counted by the device's ODP budget itself.
        if let Some(v) = values.get_mut(Counter::OdpRefused as usize) {
            *v = dev.data().odp_budget.refused();
        }
    }

    fn process_mad(
        dev: &Device<Self>,
        port: u32,
        input: &[u8; crate::rdma::driver::MAD_SIZE],
        output: &mut [u8; crate::rdma::driver::MAD_SIZE],
    ) -> crate::rdma::driver::MadResult {
        crate::counters::pma::process_mad(&dev.data().counters, port, input, output)
    }

    fn alloc_mr(pd: &Pd<Self>, max_pages: u32, grant: FastRegGrant) -> Result<MrCreated<MrHandle>> {
        mr::alloc_fast(pd, max_pages, grant)
    }

    fn map_mr_sg(m: &Mr<Self>, pages: &FastRegPages<'_>) -> Result {
        mr::map_sg(m, pages)
    }
}

impl Link for Roxe {
    const TYPE: &'static CStr = c"roxe";

    fn link_ops() -> &'static LinkOps<Self> {
        &LINK_OPS
    }

    fn dellink(dev: &Device<Self>) -> Result {
        // The port closes in the namespace with its last device, before `rdma link delete`
        // returns (rxe_sock_put in rdma_rxe's dellink).
        dev.data().release_sockets();
        Ok(())
    }

    fn newlink(name: &CStr, netdev: &NetDevice) -> Result {
        // As rxe: a VLAN device has its own GIDs on the real device; bind to that one.
        if netdev.is_vlan() {
            pr_err!(
                "{}: create roxe on the real device, not on a VLAN\n",
                netdev.name().to_str().unwrap_or("?")
            );
            return Err(EPERM);
        }
        if Device::<Roxe>::get_by_netdev(netdev).is_some() {
            pr_err!(
                "{}: already has a roxe device\n",
                netdev.name().to_str().unwrap_or("?")
            );
            return Err(EEXIST);
        }
        let sockets = crate::recv::rx::port_ref(netdev)?;
        let mac = netdev.mac().unwrap_or_else(|| fallback_mac(netdev));
        let guid = eui64_from_mac(mac);
        let active = port_state(netdev) == PortState::Active;
        let (num, den) = param::ODP_DEVICE_RAM_SHARE;
        let odp_budget = Arc::new(OdpBudget::of_ram(num, den), GFP_KERNEL)?;
        let peers = crate::peer::Peers::new()?;
        // The loopback drainer's buffers, a segment each: allocated here, in process context,
        // not in softirq on first use.
        let local_reply_buf = KVVec::from_elem(0u8, crate::qp::LOCAL_PACKET_MAX, GFP_KERNEL)?;
        let local_bounce = KVVec::from_elem(0u8, crate::qp::LOCAL_PACKET_MAX, GFP_KERNEL)?;
        Device::<Roxe>::register(
            crate::this_module(),
            name,
            netdev,
            guid,
            c"roxe",
            SoftDevice::new::<Roxe>(try_pin_init!(RoxeDevice {
                netdev: ARef::from(netdev),
                guid,
                port_active: AtomicFlag::new(active),
                pds: Atomic::new(0),
                next_pd_id: Atomic::new(1),
                qps <- Pool::new(),
                srqs <- Pool::new(),
                mrs <- Pool::new(),
                mws <- Pool::new(),
                ahs <- Pool::new(),
                loopback <- SkbQueue::new(),
                loopback_draining: AtomicFlag::new(false),
                doorbell_qpn: Atomic::new(crate::task::NO_QP),
                doorbell_pass: AtomicFlag::new(false),
                local_response <- crate::compat::sync::new_spinlock_irq!(None, "roxe_local_response"),
                local_reply_buf <- crate::compat::sync::new_spinlock_irq!(
                    local_reply_buf,
                    "roxe_local_reply_buf"
                ),
                local_source <- crate::compat::sync::new_spinlock_irq!(None, "roxe_local_source"),
                local_bounce <- crate::compat::sync::new_spinlock_irq!(
                    local_bounce,
                    "roxe_local_bounce"
                ),
                atomic_lock <- crate::rdma::bh::new_bh_lock!((), "roxe_atomic"),
                held_acks <- crate::compat::sync::new_spinlock_irq!(crate::device::HeldAcks::new(), "roxe_held_acks"),
                rnr_wake_ns <- crate::compat::sync::new_spinlock_irq!(0, "roxe_rnr_wake"),
                counters: Counters::new(),
                peers,
                odp_budget,
                mcast <- crate::mcast::McastTable::new(),
                odp_jobs <- crate::compat::sync::new_spinlock_irq!(KVec::new(), "roxe_odp_jobs"),
                sockets <- kernel::new_mutex!(Some(sockets)),
            })),
        )?;
        pr_info!(
            "{}: created on {} (mtu {})\n",
            name.to_str().unwrap_or("?"),
            netdev.name().to_str().unwrap_or("?"),
            netdev.mtu()
        );
        Ok(())
    }
}

impl NetdevNotifier for Roxe {
    fn event(event: NetdevEvent, netdev: &NetDevice) {
        let Some(dev) = Device::<Roxe>::get_by_netdev(netdev) else {
            return;
        };
        match event {
            // RTNL is held here, and unregistration needs it: queue it. The sockets go now, so
            // that the port is closed when the netdev's removal returns, as with rdma_rxe.
            NetdevEvent::Unregister => {
                dev.unregister_queued();
                dev.data().release_sockets();
            }
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                let active = port_state(netdev) == PortState::Active;
                if dev.data().port_active.xchg(active, Relaxed) != active {
                    if !active {
                        dev.data().counters.inc(Counter::LinkDowned);
                    }
                    dev.dispatch_port_event(
                        PORT,
                        if active {
                            PortEvent::Active
                        } else {
                            PortEvent::Error
                        },
                    );
                    pr_info!(
                        "{}: port {}\n",
                        dev.name().to_str().unwrap_or("?"),
                        if active { "ACTIVE" } else { "DOWN" }
                    );
                }
            }
            // query_port reads the MTU live; the data path will cache it here.
            NetdevEvent::ChangeMtu | NetdevEvent::Other => {}
        }
    }
}
