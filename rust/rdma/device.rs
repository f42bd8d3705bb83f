// SPDX-License-Identifier: GPL-2.0

//! RDMA devices (`struct ib_device`) and their verbs operations (`struct ib_device_ops`).
//!
//! The RDMA core allocates the device and the objects hung off it (user contexts, later PDs,
//! CQs, QPs...). A driver's per-object data lives right after the C object in the same
//! allocation, as in C's `INIT_RDMA_OBJ_SIZE`: [`Device<T>`] is `#[repr(C)]` with the
//! `ib_device` first and `T::Data` after it.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    ah::{AddressVector, Ah, AhContext},
    attr::{DeviceAttr, PortAttr, PortImmutable},
    bindings,
    cq::{Cq, CqInit, CqNotifier, NotifyFlags},
    kverbs::{KernelMem, KernelRecvWr, KernelSendWr, Wc},
    link::Link,
    mmap,
    mr::{FastRegPages, Mr, MrCreated, Mw, UserMrRequest},
    netdev::NetDevice,
    object::{Object, UData},
    pd::Pd,
    qp::{Qp, QpAttr, QpAttrMask, QpCreated, QpInit, QpNotifier},
    srq::{Srq, SrqAttr, SrqInit, SrqNotifier},
};
use core::{ffi::CStr, marker::PhantomData, mem::size_of, ops::Deref, ptr::NonNull};
use kernel::{
    build_error,
    error::{from_result, VTABLE_DEFAULT_ERROR},
    ffi,
    prelude::*,
    sync::{aref::ARef, Arc},
    types::Opaque, //
};

/// Driver ids the RDMA core knows (`enum rdma_driver_id`); user space picks its provider by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverId {
    /// The rxe (Soft-RoCE) ABI: rdma-core's rxe provider binds to the device.
    Rxe,
}

impl DriverId {
    const fn as_raw(self) -> bindings::rdma_driver_id {
        match self {
            DriverId::Rxe => bindings::rdma_driver_id_RDMA_DRIVER_RXE,
        }
    }
}

/// Asynchronous port events (`enum ib_event_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortEvent {
    /// The port became active.
    Active,
    /// The port went down.
    Error,
}

/// The verbs a driver implements for its devices.
///
/// All methods are called in process context by the RDMA core, with no driver lock held; several
/// may run concurrently on one device.
#[vtable]
pub trait Driver: Sized + Send + Sync + 'static {
    /// Per-device driver data, initialised in place at device creation, dropped when the core
    /// frees the device.
    type Data: Send + Sync;

    /// Per-user-context driver data.
    type UContext: Send + Sync;

    /// Per-protection-domain driver data.
    type Pd: Send + Sync;

    /// Per-completion-queue driver data.
    type Cq: Send + Sync;

    /// Per-queue-pair driver data.
    type Qp: Send + Sync;

    /// Per-shared-receive-queue driver data.
    type Srq: Send + Sync;

    /// Per-address-handle driver data.
    type Ah: Send + Sync;

    /// Per-memory-region driver data.
    type Mr: Send + Sync;

    /// Per-memory-window driver data.
    type Mw: Send + Sync;

    /// The driver id user space matches providers by.
    const DRIVER_ID: DriverId;

    /// The driver's uverbs ABI version (`uverbs_abi_ver`).
    const UVERBS_ABI_VERSION: u32;

    /// Period of [`Driver::tick`] in milliseconds, from registration until the device is freed.
    const TICK_MS: u32;

    /// Periodic work of a registered device (retransmission and RNR timers). Softirq context.
    fn tick(dev: &Device<Self>);

    /// Runs once, in softirq context (the BH workqueue), when the timer
    /// [`Device::start_short_timer`] started expires.
    fn short_timer(dev: &Device<Self>);

    /// Work asked for with [`Device::kick`], e.g. from a context that may not transmit (kernel
    /// consumers post with interrupts disabled). Softirq context (the BH workqueue).
    fn kicked(dev: &Device<Self>);

    /// Work asked for with [`Device::queue_process_work`]: process context (the unbound system
    /// workqueue), may sleep, e.g. to fault in on-demand-paging memory for the data path.
    fn process_work(_dev: &Device<Self>) {}

    /// Reports the device's attributes (`query_device`).
    fn query_device(dev: &Device<Self>) -> Result<DeviceAttr>;

    /// Reports a port's attributes (`query_port`). Ports are numbered from 1.
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttr>;

    /// Reports a port's immutable attributes (`get_port_immutable`), once, at registration.
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;

    /// Returns entry `index` of a port's P_Key table (`query_pkey`).
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// Creates a user context's driver data (`alloc_ucontext`): a process opened the device.
    fn alloc_ucontext(dev: &Device<Self>, udata: &UData<'_>) -> Result<Self::UContext>;

    /// Creates a protection domain's driver data (`alloc_pd`), for user space or a kernel ULP.
    fn alloc_pd(dev: &Device<Self>, udata: Option<&UData<'_>>) -> Result<Self::Pd>;

    /// Destroys a protection domain (`dealloc_pd`). The core only calls it once no object of
    /// the PD is left.
    fn dealloc_pd(dev: &Device<Self>, pd: Self::Pd) {
        let _ = dev;
        drop(pd);
    }

    /// Creates a CQ (`create_cq`) of at least `init.cqe` entries; returns its data and real
    /// capacity. `notifier` reaches the CQ's consumer until the CQ is destroyed.
    fn create_cq(
        dev: &Device<Self>,
        init: &CqInit,
        notifier: Arc<CqNotifier>,
        udata: Option<&UData<'_>>,
    ) -> Result<(Self::Cq, u32)>;

    /// Prepares a CQ's destruction (`destroy_cq`); an error keeps the CQ alive. The core only
    /// calls it once no QP uses the CQ.
    fn destroy_cq(cq: &Cq<Self>) -> Result;

    /// Resizes a CQ to at least `cqe` entries (`resize_user_cq`); returns the real capacity.
    fn resize_cq(cq: &Cq<Self>, cqe: u32, udata: Option<&UData<'_>>) -> Result<u32>;

    /// Arms a CQ's notification (`req_notify_cq`); with `REPORT_MISSED_EVENTS`, returns whether
    /// completions are already waiting.
    fn req_notify_cq(cq: &Cq<Self>, flags: NotifyFlags) -> Result<bool>;

    /// Creates a QP (`create_qp`): validates `init`, writes back the real queue sizes in
    /// `init.cap`, returns the driver's data and the QP number.
    fn create_qp(
        dev: &Device<Self>,
        init: &mut QpInit<'_, Self>,
        notifier: Arc<QpNotifier>,
        udata: Option<&UData<'_>>,
    ) -> Result<QpCreated<Self::Qp>>;

    /// Modifies a QP (`modify_qp`): the attributes in `mask`, including state transitions.
    fn modify_qp(
        qp: &Qp<Self>,
        attr: &QpAttr,
        mask: QpAttrMask,
        udata: Option<&UData<'_>>,
    ) -> Result;

    /// Reports a QP's attributes (`query_qp`) and whether every send WR is signalled.
    fn query_qp(qp: &Qp<Self>) -> Result<(QpAttr, bool)>;

    /// Prepares a QP's destruction (`destroy_qp`): afterwards no work of the QP may run.
    fn destroy_qp(qp: &Qp<Self>) -> Result;

    /// The send doorbell of a user QP (a `post_send` without WRs): new WQEs are in its ring.
    fn post_send_doorbell(qp: &Qp<Self>) -> Result;

    /// Posts a kernel consumer's receive WR to an SRQ (`ib_post_srq_recv`). Any context.
    fn post_srq_recv(_srq: &Srq<Self>, _wr: &KernelRecvWr<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Attaches UD QP `qp` to the multicast group `mgid` (`ibv_attach_mcast`; the core checked
    /// that the QP is UD and the GID multicast). Attaching twice is not an error.
    fn attach_mcast(_qp: &Qp<Self>, _mgid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Detaches `qp` from the multicast group `mgid` (`ibv_detach_mcast`).
    fn detach_mcast(_qp: &Qp<Self>, _mgid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates an SRQ (`create_srq`); writes back the real sizes in `init.attr`.
    fn create_srq(
        dev: &Device<Self>,
        init: &mut SrqInit<'_, Self>,
        notifier: Arc<SrqNotifier>,
        udata: Option<&UData<'_>>,
    ) -> Result<Self::Srq>;

    /// Modifies an SRQ (`modify_srq`): resize (`MAX_WR`) and/or arm the limit (`LIMIT`).
    fn modify_srq(srq: &Srq<Self>, attr: &SrqAttr, mask: u32, udata: Option<&UData<'_>>) -> Result;

    /// Reports an SRQ's attributes (`query_srq`).
    fn query_srq(srq: &Srq<Self>) -> Result<SrqAttr>;

    /// Prepares an SRQ's destruction (`destroy_srq`). The core only calls it once no QP uses it.
    fn destroy_srq(srq: &Srq<Self>) -> Result;

    /// Creates an address handle (`create_ah`/`create_user_ah`) in `pd`.
    fn create_ah(
        dev: &Device<Self>,
        pd: &Pd<Self>,
        av: &AddressVector,
        ctx: AhContext,
        udata: Option<&UData<'_>>,
    ) -> Result<Self::Ah>;

    /// Destroys an address handle (`destroy_ah`); may be called in atomic context.
    fn destroy_ah(dev: &Device<Self>, ah: Self::Ah);

    /// Reports an address handle's address vector (`query_ah`).
    fn query_ah(ah: &Ah<Self>) -> Result<AddressVector>;

    /// Registers user memory (`reg_user_mr`).
    fn reg_user_mr(
        pd: &Pd<Self>,
        req: &UserMrRequest,
        udata: Option<&UData<'_>>,
    ) -> Result<MrCreated<Self::Mr>>;

    /// Allocates a fast-registration MR (`ib_alloc_mr` with `IB_MR_TYPE_MEM_REG`) able to map
    /// `max_pages` pages; it maps nothing until a REG_MR work request makes it valid. `mem` is
    /// the MR's access to the kernel pages its page lists will name.
    fn alloc_mr(_pd: &Pd<Self>, _max_pages: u32, _mem: KernelMem) -> Result<MrCreated<Self::Mr>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Takes the page list `ib_map_mr_sg` built for a fast-registration MR (see
    /// [`FastRegPages`]). May be called in atomic context.
    fn map_mr_sg(_mr: &Mr<Self>, _pages: &FastRegPages<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Changes an MR in place (`rereg_user_mr`): `flags` are `mr::rereg` bits; `new_pd` is given
    /// with `rereg::PD`.
    fn rereg_user_mr(
        mr: &Mr<Self>,
        flags: u32,
        req: &UserMrRequest,
        new_pd: Option<&Pd<Self>>,
        udata: Option<&UData<'_>>,
    ) -> Result;

    /// The first half of `dereg_mr`: whether the MR may go now. An error is returned to the
    /// caller and the MR stays registered (e.g. `EBUSY` while memory windows are bound to it);
    /// after `Ok`, [`Driver::dereg_mr`] follows at once and the driver must refuse new uses
    /// that would keep it (such as binding a window).
    fn prepare_dereg_mr(dev: &Device<Self>, mr: &Self::Mr) -> Result;

    /// Deregisters an MR (`dereg_mr`), after [`Driver::prepare_dereg_mr`] allowed it (or for an
    /// MR that was never handed to a consumer).
    fn dereg_mr(dev: &Device<Self>, mr: Self::Mr);

    /// Allocates a memory window (`alloc_mw`) of type 1 or (`type2`) 2; returns its data and
    /// initial rkey.
    fn alloc_mw(pd: &Pd<Self>, type2: bool, udata: Option<&UData<'_>>) -> Result<(Self::Mw, u32)>;

    /// Deallocates a memory window (`dealloc_mw`).
    fn dealloc_mw(dev: &Device<Self>, mw: Self::Mw);

    /// Queues a kernel consumer's send work request (`post_send` of a kernel QP). Called in any
    /// context, often with interrupts disabled: transmission must be left to [`Device::kick`].
    fn post_send_kernel(qp: &Qp<Self>, wr: &KernelSendWr<'_, Self>) -> Result;

    /// Queues a kernel consumer's receive work request (`post_recv`). Any context.
    fn post_recv(qp: &Qp<Self>, wr: &KernelRecvWr<'_>) -> Result;

    /// Takes the oldest completion of a kernel consumer's CQ (`poll_cq`). Any context.
    fn poll_cq(cq: &Cq<Self>) -> Option<Wc>;

    /// Creates a DMA MR over kernel memory (`get_dma_mr`), e.g. a kernel PD's local DMA lkey;
    /// `mem` is its access to that memory.
    fn get_dma_mr(pd: &Pd<Self>, access: u32, mem: KernelMem) -> Result<MrCreated<Self::Mr>>;

    /// The names of the port's hardware counters (`rdma statistic`, sysfs `hw_counters/`), in
    /// the order [`Driver::get_hw_stats`] reports them. Empty: the device has none.
    const HW_STATS: &'static [StatDesc] = &[];

    /// Reads the port's counters into `values` (one per [`Driver::HW_STATS`] entry). Process
    /// context.
    fn get_hw_stats(dev: &Device<Self>, port: u32, values: &mut [u64]) {
        let _ = (dev, port, values);
    }
}

/// The name of one hardware counter (`struct rdma_stat_desc`), for [`Driver::HW_STATS`].
///
/// # Invariants
///
/// `name` points to a `'static` NUL-terminated string and `priv_` is NULL.
#[repr(transparent)]
pub struct StatDesc(bindings::rdma_stat_desc);

// SAFETY: The descriptor only holds a pointer to a `'static` string, never written (invariant).
unsafe impl Sync for StatDesc {}

impl StatDesc {
    /// A counter called `name`.
    pub const fn new(name: &'static CStr) -> Self {
        // INVARIANT: A static string; no private pointer.
        StatDesc(bindings::rdma_stat_desc {
            name: kernel::str::as_char_ptr_in_const_context(name).cast(),
            flags: 0,
            priv_: core::ptr::null(),
        })
    }
}

/// An RDMA device created by driver `T`.
///
/// # Invariants
///
/// - `ibdev` was allocated by `_ib_alloc_device` with the size of `Self`, and `data` is
///   initialised for as long as the device's ops are `Adapter::<T>`'s (from `register` until
///   `dealloc_driver`).
/// - A `&Device<T>` is only handed out while the holder owns a reference on the device or runs in
///   one of its ops, during which the core keeps it alive.
#[repr(C)]
pub struct Device<T: Driver> {
    ibdev: Opaque<bindings::ib_device>,
    /// Drives [`Driver::tick`]; set up at registration, shut down before `data` drops.
    tick: Opaque<bindings::timer_list>,
    /// The tick timer was set up (registration got that far).
    tick_armed: kernel::sync::atomic::AtomicFlag,
    /// Runs [`Driver::short_timer`]; set up at allocation, cancelled before `data` drops.
    short_timer: Opaque<bindings::roxe_hrtimer>,
    /// Runs [`Driver::kicked`]; set up before registration, disabled before `data` drops.
    kick: Opaque<bindings::work_struct>,
    /// Runs [`Driver::process_work`]; set up before registration, disabled before `data` drops.
    process_work: Opaque<bindings::work_struct>,
    data: T::Data,
}

// SAFETY: The core synchronises the `ib_device` itself; `T::Data` is `Send + Sync`.
unsafe impl<T: Driver> Send for Device<T> {}
// SAFETY: See above.
unsafe impl<T: Driver> Sync for Device<T> {}

impl<T: Driver> Device<T> {
    /// # Safety
    ///
    /// `ibdev` was created by [`Device::<T>::register`] and is alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ibdev: *mut bindings::ib_device) -> &'a Self {
        // CAST: `ibdev` is the first field of the `#[repr(C)]` `Device<T>`.
        // SAFETY: By the function's safety requirements.
        unsafe { &*ibdev.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ibdev.get()
    }

    /// The driver's data of this device.
    pub fn data(&self) -> &T::Data {
        &self.data
    }

    /// The device's name, e.g. `roxe0`.
    pub fn name(&self) -> &CStr {
        // SAFETY: The device is alive (type invariant); its name is a NUL-terminated array that
        // only changes under the core's rename lock, always to a complete new name.
        let name = unsafe { &(*self.as_raw()).name };
        // SAFETY: `c_char` and `u8` have the same layout; the slice covers the same array.
        let bytes = unsafe { core::slice::from_raw_parts(name.as_ptr().cast::<u8>(), name.len()) };
        CStr::from_bytes_until_nul(bytes).unwrap_or(c"?")
    }

    /// The netdev bound to `port`, with a reference held, or `None` once it is gone.
    pub fn netdev(&self, port: u32) -> Option<ARef<NetDevice>> {
        // SAFETY: The device is alive; `ib_device_get_netdev` returns a held netdev or NULL.
        let ndev = unsafe { bindings::ib_device_get_netdev(self.as_raw(), port) };
        let ndev = NonNull::new(ndev)?;
        // SAFETY: We own the reference `ib_device_get_netdev` took.
        Some(unsafe { ARef::from_raw(ndev.cast::<NetDevice>()) })
    }

    /// The port's speed and width from the netdev's link settings (`ib_get_eth_speed`).
    ///
    /// Takes RTNL: must not be called from a netdev notifier.
    pub fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: The device is alive; the out-pointers are valid locals.
        kernel::error::to_result(unsafe {
            bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width)
        })?;
        Ok((speed, width))
    }

    /// Reports an asynchronous event on `port` to the core and user space.
    pub fn dispatch_port_event(&self, port: u32, event: PortEvent) {
        let mut ev = bindings::ib_event {
            device: self.as_raw(),
            event: match event {
                PortEvent::Active => bindings::ib_event_type_IB_EVENT_PORT_ACTIVE,
                PortEvent::Error => bindings::ib_event_type_IB_EVENT_PORT_ERR,
            },
            ..Default::default()
        };
        ev.element.port_num = port;
        // SAFETY: The device is alive and `ev` is a complete event; the core copies what it keeps.
        unsafe { bindings::ib_dispatch_event(&ev) };
    }

    /// Starts the device's short timer: [`Driver::short_timer`] runs once in softirq context, no
    /// sooner than `us` microseconds from now and no later than one scheduler tick after that:
    /// within that slack the timer expires with the tick, so that on a busy CPU starting and
    /// stopping it costs no reprogramming of the clock event device. Starting it while it is
    /// armed moves the expiry, so the driver keeps track of whether it is. Any context.
    pub fn start_short_timer(&self, us: u32) {
        // SAFETY: The timer was set up at allocation and stays valid until `dealloc_driver`
        // cancels it, when no reference to the device is left.
        unsafe { bindings::roxe_helper_hrtimer_arm_us(self.short_timer.get(), us) };
    }

    /// Stops the short timer without waiting: `true` when its callback will not run for the
    /// last start, `false` when it runs or has run since that start. Any context.
    pub fn try_cancel_short_timer(&self) -> bool {
        // SAFETY: As in `start_short_timer`.
        unsafe { bindings::roxe_helper_hrtimer_try_to_cancel(self.short_timer.get()) }
    }

    /// Asks for [`Driver::kicked`] to run soon in softirq context. Any context, including with
    /// interrupts disabled; kicks before the work runs coalesce.
    pub fn kick(&self) {
        // SAFETY: The work was initialised at allocation and stays valid until `dealloc_driver`
        // disables it; queueing a pending work is a no-op.
        unsafe { bindings::roxe_helper_queue_work_bh(self.kick.get()) };
    }

    /// Asks for [`Driver::process_work`] to run soon in process context. Any context, including
    /// with interrupts disabled; requests before the work runs coalesce, and a request while it
    /// runs makes it run again.
    pub fn queue_process_work(&self) {
        // SAFETY: The work was initialised at allocation and stays valid until `dealloc_driver`
        // disables it; queueing a pending work is a no-op.
        unsafe { bindings::roxe_helper_queue_work_unbound(self.process_work.get()) };
    }

    /// Schedules the unregistration of the device (`ib_unregister_device_queued`), for contexts
    /// that hold locks the unregistration needs, such as RTNL in a netdev notifier.
    pub fn unregister_queued(&self) {
        // SAFETY: The device is alive and registered with a `dealloc_driver` op.
        unsafe { bindings::ib_unregister_device_queued(self.as_raw()) };
    }
}

impl<T: Link> Device<T> {
    /// The device of this driver bound to `netdev`, if any, with a reference held.
    pub fn get_by_netdev(netdev: &NetDevice) -> Option<DeviceRef<T>> {
        // SAFETY: `netdev` is alive; the call returns a held device or NULL.
        let ibdev =
            unsafe { bindings::ib_device_get_by_netdev(netdev.as_raw(), T::DRIVER_ID.as_raw()) };
        let ibdev = NonNull::new(ibdev)?;
        // Another driver may use the same driver id (the in-tree one for the rxe ABI): only a
        // device pointing to our link ops was created by `register` as a `Device<T>`.
        // SAFETY: The device is alive (we hold a reference); `link_ops` is set before
        // registration and never changes.
        let link_ops = unsafe { (*ibdev.as_ptr()).link_ops };
        let ours = core::ptr::eq(link_ops, T::link_ops().as_raw());
        if !ours {
            // SAFETY: We own the reference taken above.
            unsafe { bindings::ib_device_put(ibdev.as_ptr()) };
            return None;
        }
        // INVARIANT: A held reference on a device created by `register`.
        Some(DeviceRef {
            dev: ibdev.cast(),
            _t: PhantomData,
        })
    }

    /// Allocates, initialises and registers a device called `name` on `netdev`. The RDMA core
    /// owns it from then on; it is freed after unregistration (`rdma link delete`,
    /// [`Device::unregister_queued`], or [`unregister_all`] at module unload).
    ///
    /// `node_guid` is in wire (big-endian) byte order.
    pub fn register(
        module: &'static ThisModule,
        name: &CStr,
        netdev: &NetDevice,
        node_guid: [u8; 8],
        node_desc: &CStr,
        data: impl PinInit<T::Data, Error>,
    ) -> Result {
        // SAFETY: `init_net` lives as long as the kernel. The size covers `Device<T>`, whose first
        // field is the `ib_device` (`_ib_alloc_device` requires this, like INIT_RDMA_OBJ_SIZE).
        let ibdev = unsafe {
            bindings::_ib_alloc_device(
                size_of::<Self>(),
                core::ptr::addr_of_mut!(bindings::init_net),
            )
        };
        let ibdev = NonNull::new(ibdev).ok_or(ENOMEM)?;
        let dev = ibdev.as_ptr().cast::<Self>();

        // SAFETY: `data` lies inside the fresh allocation, right after the `ib_device`, and is
        // pinned there (the core never moves the device). The flag, the short timer and the
        // works are set up in place before anything can use them; the timer is cancelled in
        // `dealloc_driver`, and a device freed before registration never armed it.
        let init = unsafe {
            core::ptr::addr_of_mut!((*dev).tick_armed)
                .write(kernel::sync::atomic::AtomicFlag::new(false));
            bindings::roxe_helper_hrtimer_setup(
                Opaque::cast_into(core::ptr::addr_of!((*dev).short_timer)),
                Some(Adapter::<T>::short_timer),
            );
            bindings::roxe_helper_init_work_bh(
                Opaque::cast_into(core::ptr::addr_of!((*dev).kick)),
                Some(Adapter::<T>::kick),
            );
            bindings::roxe_helper_init_work(
                Opaque::cast_into(core::ptr::addr_of!((*dev).process_work)),
                Some(Adapter::<T>::process_work),
            );
            pin_init::raw_try_init(core::ptr::addr_of_mut!((*dev).data), data)
        };
        if let Err(e) = init {
            // No ops are set yet, so no `dealloc_driver` runs over the uninitialised data.
            // SAFETY: The device was allocated above and never registered.
            unsafe { bindings::ib_dealloc_device(ibdev.as_ptr()) };
            return Err(e);
        }

        let ops = Adapter::<T>::ops(module);
        // SAFETY: The device is allocated and not yet registered, so we have exclusive access to
        // it. The core copies the ops table. From here on `dealloc_driver` drops `data`.
        unsafe {
            let ib = ibdev.as_ptr();
            bindings::ib_set_device_ops(ib, &ops);
            (*ib).node_type = bindings::RDMA_NODE_IB_CA as u8;
            (*ib).phys_port_cnt = 1;
            (*ib).num_comp_vectors = 1;
            (*ib).node_guid = u64::from_ne_bytes(node_guid);
            (*ib).link_ops = T::link_ops().as_raw();
            // The rxe provider rings the send doorbell and arms CQs with these legacy commands.
            (*ib).uverbs_cmd_mask |= (1u64
                << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
                | (1u64 << bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
            let desc = node_desc.to_bytes();
            let n = desc.len().min((*ib).node_desc.len() - 1);
            for (d, s) in (*ib).node_desc.iter_mut().zip(desc[..n].iter()) {
                *d = *s as ffi::c_char;
            }
        }

        // SAFETY: The device is allocated and exclusively ours; `netdev` is alive (the caller runs
        // in a link op). The core takes its own reference on the netdev.
        let err = unsafe { bindings::ib_device_set_netdev(ibdev.as_ptr(), netdev.as_raw(), 1) };
        if err != 0 {
            // SAFETY: Not registered; `dealloc_driver` drops `data`.
            unsafe { bindings::ib_dealloc_device(ibdev.as_ptr()) };
            return Err(Error::from_errno(err));
        }
        // SAFETY: The device is fully initialised; `name` is a valid string for the call. A NULL
        // DMA device makes the core use virtual DMA, which a software HCA needs.
        let err = unsafe {
            bindings::ib_register_device(
                ibdev.as_ptr(),
                name.as_char_ptr().cast(),
                core::ptr::null_mut(),
            )
        };
        if err != 0 {
            // SAFETY: Registration failed, so the device is still ours to free.
            unsafe { bindings::ib_dealloc_device(ibdev.as_ptr()) };
            return Err(Error::from_errno(err));
        }
        if T::TICK_MS > 0 {
            // SAFETY: The timer lies in the device, which lives until `dealloc_driver`, where the
            // timer is shut down before anything is freed.
            unsafe {
                let timer = Opaque::cast_into(core::ptr::addr_of!((*dev).tick));
                bindings::roxe_helper_timer_setup(timer, Some(Adapter::<T>::tick));
                (*dev).tick_armed.store(true, kernel::sync::atomic::Release);
                bindings::roxe_helper_timer_arm_ms(timer, T::TICK_MS);
            }
        }
        Ok(())
    }
}

/// Unregisters every device of driver `T` and waits for queued unregistrations: call at module
/// unload, after the link type is unregistered, so that no device outlives the module.
pub fn unregister_all<T: Driver>() {
    // SAFETY: Always safe to call; it unregisters only devices with our driver id, all of which
    // have a `dealloc_driver` op.
    unsafe { bindings::ib_unregister_driver(T::DRIVER_ID.as_raw()) };
}

/// A reference-counted handle to a [`Device<T>`]. Drops its reference (`ib_device_put`).
///
/// # Invariants
///
/// `dev` is a device created by `register`, on which this handle owns a reference.
pub struct DeviceRef<T: Driver> {
    dev: NonNull<Device<T>>,
    _t: PhantomData<T>,
}

impl<T: Driver> Deref for DeviceRef<T> {
    type Target = Device<T>;

    fn deref(&self) -> &Device<T> {
        // SAFETY: By the type invariant the device is alive while the handle exists.
        unsafe { self.dev.as_ref() }
    }
}

impl<T: Driver> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: We own a reference (type invariant).
        unsafe { bindings::ib_device_put(self.dev.as_ptr().cast()) };
    }
}

/// A user context: the driver's view of a process that opened the device.
pub type UContext<T> = Object<bindings::ib_ucontext, <T as Driver>::UContext, T>;

/// The `extern "C"` trampolines of driver `T`'s ops; each object's file adds its own.
pub(crate) struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    fn ops(module: &'static ThisModule) -> bindings::ib_device_ops {
        bindings::ib_device_ops {
            owner: module.as_ptr().cast(),
            driver_id: T::DRIVER_ID.as_raw(),
            uverbs_abi_ver: T::UVERBS_ABI_VERSION,
            query_device: Some(Self::query_device),
            query_port: Some(Self::query_port),
            get_port_immutable: Some(Self::get_port_immutable),
            get_link_layer: Some(Self::get_link_layer),
            query_pkey: Some(Self::query_pkey),
            alloc_ucontext: Some(Self::alloc_ucontext),
            dealloc_ucontext: Some(Self::dealloc_ucontext),
            dealloc_driver: Some(Self::dealloc_driver),
            alloc_pd: Some(Self::alloc_pd),
            dealloc_pd: Some(Self::dealloc_pd),
            mmap: Some(mmap::mmap),
            mmap_free: Some(mmap::mmap_free),
            create_cq: Some(Self::create_cq),
            destroy_cq: Some(Self::destroy_cq),
            resize_user_cq: Some(Self::resize_cq),
            req_notify_cq: Some(Self::req_notify_cq),
            create_qp: Some(Self::create_qp),
            modify_qp: Some(Self::modify_qp),
            query_qp: Some(Self::query_qp),
            destroy_qp: Some(Self::destroy_qp),
            post_send: Some(Self::post_send),
            create_srq: Some(Self::create_srq),
            modify_srq: Some(Self::modify_srq),
            query_srq: Some(Self::query_srq),
            destroy_srq: Some(Self::destroy_srq),
            create_ah: Some(Self::create_ah),
            create_user_ah: Some(Self::create_ah),
            destroy_ah: Some(Self::destroy_ah),
            query_ah: Some(Self::query_ah),
            post_recv: Some(Self::post_recv),
            poll_cq: Some(Self::poll_cq),
            get_dma_mr: Some(Self::get_dma_mr),
            reg_user_mr: Some(Self::reg_user_mr),
            rereg_user_mr: Some(Self::rereg_user_mr),
            dereg_mr: Some(Self::dereg_mr),
            alloc_mr: if T::HAS_ALLOC_MR {
                Some(Self::alloc_mr)
            } else {
                None
            },
            post_srq_recv: if T::HAS_POST_SRQ_RECV {
                Some(Self::post_srq_recv)
            } else {
                None
            },
            attach_mcast: if T::HAS_ATTACH_MCAST {
                Some(Self::attach_mcast)
            } else {
                None
            },
            detach_mcast: if T::HAS_DETACH_MCAST {
                Some(Self::detach_mcast)
            } else {
                None
            },
            map_mr_sg: if T::HAS_MAP_MR_SG {
                Some(Self::map_mr_sg)
            } else {
                None
            },
            alloc_mw: Some(Self::alloc_mw),
            dealloc_mw: Some(Self::dealloc_mw),
            disassociate_ucontext: Some(Self::disassociate_ucontext),
            alloc_hw_port_stats: if T::HW_STATS.is_empty() {
                None
            } else {
                Some(Self::alloc_hw_port_stats)
            },
            get_hw_stats: if T::HW_STATS.is_empty() {
                None
            } else {
                Some(Self::get_hw_stats)
            },
            size_ib_ucontext: UContext::<T>::SIZE,
            size_ib_pd: Pd::<T>::SIZE,
            size_ib_cq: Cq::<T>::SIZE,
            size_ib_qp: Qp::<T>::SIZE,
            size_ib_srq: Srq::<T>::SIZE,
            size_ib_ah: Ah::<T>::SIZE,
            size_ib_mw: Mw::<T>::SIZE,
            ..Default::default()
        }
    }

    /// `ib_device_ops.query_device`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn query_device(
        ibdev: *mut bindings::ib_device,
        attr: *mut bindings::ib_device_attr,
        _udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The core calls ops only on live devices; this op is only set on ours.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let a = T::query_device(dev)?;
            // SAFETY: The core passes a valid attribute structure for the call.
            a.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// `ib_device_ops.query_port`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn query_port(
        ibdev: *mut bindings::ib_device,
        port: u32,
        attr: *mut bindings::ib_port_attr,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: As in `query_device`.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let a = T::query_port(dev, port)?;
            // SAFETY: The core passes a valid, zeroed attribute structure for the call.
            a.write_to(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// `ib_device_ops.get_port_immutable`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn get_port_immutable(
        ibdev: *mut bindings::ib_device,
        port: u32,
        imm: *mut bindings::ib_port_immutable,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: As in `query_device`.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let a = T::port_immutable(dev, port)?;
            // SAFETY: The core passes a valid structure for the call.
            a.write_to(unsafe { &mut *imm });
            Ok(0)
        })
    }

    /// `ib_device_ops.get_link_layer`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn get_link_layer(
        _ibdev: *mut bindings::ib_device,
        _port: u32,
    ) -> bindings::rdma_link_layer {
        // RoCE: IB transport over Ethernet.
        bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET
    }

    /// `ib_device_ops.query_pkey`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn query_pkey(
        ibdev: *mut bindings::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: As in `query_device`.
            let dev = unsafe { Device::<T>::from_raw(ibdev) };
            let value = T::query_pkey(dev, port, index)?;
            // SAFETY: The core passes a valid out-pointer for the call.
            unsafe { pkey.write(value) };
            Ok(0)
        })
    }

    /// `ib_device_ops.alloc_ucontext`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn alloc_ucontext(
        uctx: *mut bindings::ib_ucontext,
        udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The core passes a live context whose `device` is ours, and the udata of
            // the command.
            let (dev, udata) = unsafe {
                (
                    Device::<T>::from_raw((*uctx).device),
                    UData::from_raw(udata),
                )
            };
            let data = T::alloc_ucontext(dev, udata.as_ref().ok_or(EINVAL)?)?;
            // SAFETY: The core allocated `size_ib_ucontext` bytes; the data is not initialised.
            unsafe { UContext::<T>::init_data(uctx, data) };
            Ok(0)
        })
    }

    /// `ib_device_ops.dealloc_ucontext`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn dealloc_ucontext(uctx: *mut bindings::ib_ucontext) {
        // SAFETY: `alloc_ucontext` succeeded for this context (the core calls dealloc only then);
        // the core frees the memory after we return.
        drop(unsafe { UContext::<T>::take_data(uctx) });
    }

    /// The device is going away while a process still has it open (`ib_unregister_device` with
    /// user contexts): the core has already revoked the context's mappings and destroys its
    /// objects through their destroy ops next, so nothing is left for the driver to do. Having
    /// the op is what lets the core unregister without waiting for every process to close the
    /// device (and lets the module unload without a reference per open context).
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn disassociate_ucontext(_uctx: *mut bindings::ib_ucontext) {}

    /// `ib_device_ops.alloc_hw_port_stats`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn alloc_hw_port_stats(
        _ibdev: *mut bindings::ib_device,
        _port: u32,
    ) -> *mut bindings::rdma_hw_stats {
        let n = ffi::c_int::try_from(T::HW_STATS.len()).unwrap_or(0);
        // SAFETY: `StatDesc` is a transparent `rdma_stat_desc`; the array is `'static`, as the
        // core keeps the pointer for the lifetime of the stats. A lifespan of 0 jiffies makes
        // every read ask the driver for fresh values. Returns NULL on allocation failure, which
        // the core handles.
        unsafe { bindings::rdma_alloc_hw_stats_struct(T::HW_STATS.as_ptr().cast(), n, 0) }
    }

    /// `ib_device_ops.get_hw_stats`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn get_hw_stats(
        ibdev: *mut bindings::ib_device,
        stats: *mut bindings::rdma_hw_stats,
        port: u32,
        _index: ffi::c_int,
    ) -> ffi::c_int {
        if stats.is_null() || port == 0 {
            return EINVAL.to_errno();
        }
        // SAFETY: As in `query_device`.
        let dev = unsafe { Device::<T>::from_raw(ibdev) };
        // SAFETY: `stats` came from `alloc_hw_port_stats` and so has `num_counters` values after
        // it; the core holds the stats' lock for the call.
        let values = unsafe {
            let n = usize::try_from((*stats).num_counters)
                .unwrap_or(0)
                .min(T::HW_STATS.len());
            core::slice::from_raw_parts_mut((*stats).value.as_mut_ptr(), n)
        };
        T::get_hw_stats(dev, port, values);
        ffi::c_int::try_from(values.len()).unwrap_or(0)
    }

    /// `ib_device_ops.alloc_pd`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn alloc_pd(
        ibpd: *mut bindings::ib_pd,
        udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        from_result(|| {
            // SAFETY: The core passes a fresh PD whose `device` is set and is ours, and the udata
            // of the command (NULL for kernel consumers).
            let (dev, udata) = unsafe {
                (
                    Device::<T>::from_raw((*ibpd).device),
                    UData::from_raw(udata),
                )
            };
            let data = T::alloc_pd(dev, udata.as_ref())?;
            // SAFETY: The core allocated `size_ib_pd` bytes; the data is not initialised.
            unsafe { Pd::<T>::init_data(ibpd, data) };
            Ok(0)
        })
    }

    /// `ib_device_ops.dealloc_pd`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    unsafe extern "C" fn dealloc_pd(
        ibpd: *mut bindings::ib_pd,
        _udata: *mut bindings::ib_udata,
    ) -> ffi::c_int {
        // SAFETY: `alloc_pd` succeeded for this PD (the core deallocates only those, once no
        // object uses it); the core frees the memory afterwards.
        let data = unsafe { Pd::<T>::take_data(ibpd) };
        // SAFETY: The PD's device is ours and alive.
        let dev = unsafe { Device::<T>::from_raw((*ibpd).device) };
        T::dealloc_pd(dev, data);
        0
    }

    /// The device's tick timer.
    ///
    /// # Safety
    ///
    /// Only the `tick` timer of a `Device<T>` that `register` set up calls this, with `timer` that
    /// field; `dealloc_driver` shuts the timer down before the device is freed.
    unsafe extern "C" fn tick(timer: *mut bindings::timer_list) {
        let offset = core::mem::offset_of!(Device<T>, tick);
        // SAFETY: The timer is the `tick` field of a registered `Device<T>` (see `register`),
        // which is alive: `dealloc_driver` shuts the timer down before freeing it.
        let dev = unsafe { &*timer.cast::<u8>().sub(offset).cast::<Device<T>>() };
        T::tick(dev);
        // SAFETY: As above; once shut down the timer ignores re-arming.
        unsafe { bindings::roxe_helper_timer_arm_ms(timer, T::TICK_MS) };
    }

    /// The device's short timer.
    ///
    /// # Safety
    ///
    /// Only the `short_timer` of a live `Device<T>` calls this, with `timer` that field;
    /// `dealloc_driver` cancels it before the device is freed.
    unsafe extern "C" fn short_timer(timer: *mut bindings::roxe_hrtimer) {
        let offset = core::mem::offset_of!(Device<T>, short_timer);
        // SAFETY: The timer is the `short_timer` field of a `Device<T>`, alive: `dealloc_driver`
        // cancels the timer, waiting for a running callback, before freeing the device.
        let dev = unsafe { &*timer.cast::<u8>().sub(offset).cast::<Device<T>>() };
        T::short_timer(dev);
    }

    /// The device's kick work.
    ///
    /// # Safety
    ///
    /// Only the `kick` work of a live `Device<T>` calls this, with `work` that field;
    /// `dealloc_driver` disables it before the device is freed.
    unsafe extern "C" fn kick(work: *mut bindings::work_struct) {
        let offset = core::mem::offset_of!(Device<T>, kick);
        // SAFETY: The work is the `kick` field of a `Device<T>`, alive: `dealloc_driver` disables
        // the work (waiting for a running one) before freeing the device.
        let dev = unsafe { &*work.cast::<u8>().sub(offset).cast::<Device<T>>() };
        T::kicked(dev);
    }

    /// The device's process work.
    ///
    /// # Safety
    ///
    /// Only the `process_work` work of a live `Device<T>` calls this, with `work` that field;
    /// `dealloc_driver` disables it before the device is freed.
    unsafe extern "C" fn process_work(work: *mut bindings::work_struct) {
        let offset = core::mem::offset_of!(Device<T>, process_work);
        // SAFETY: The work is the `process_work` field of a `Device<T>`, alive: `dealloc_driver`
        // disables the work (waiting for a running one) before freeing the device.
        let dev = unsafe { &*work.cast::<u8>().sub(offset).cast::<Device<T>>() };
        T::process_work(dev);
    }

    /// None
    ///
    /// # Safety
    ///
    /// Only the RDMA core calls this, once, as `ib_device_ops.dealloc_driver` of a device of `T`,
    /// after unregistering it and before freeing it; nothing uses the device afterwards.
    unsafe extern "C" fn dealloc_driver(ibdev: *mut bindings::ib_device) {
        let dev = ibdev.cast::<Device<T>>();
        // SAFETY: The work was initialised at allocation; afterwards it can neither run nor be
        // queued again. First, since it may kick.
        unsafe {
            bindings::disable_work_sync(Opaque::cast_into(core::ptr::addr_of!((*dev).process_work)))
        };
        // SAFETY: The work was initialised at allocation; afterwards it can neither run nor be
        // queued again.
        unsafe { bindings::disable_work_sync(Opaque::cast_into(core::ptr::addr_of!((*dev).kick))) };
        // SAFETY: The device is being freed; the timer, if set up, stops for good and any
        // running callback finishes before we go on.
        unsafe {
            if (*dev).tick_armed.load(kernel::sync::atomic::Acquire) {
                bindings::timer_shutdown_sync(Opaque::cast_into(core::ptr::addr_of!((*dev).tick)));
            }
        }
        // SAFETY: The timer was set up at allocation. Nothing else can arm it now: no reference
        // to the device is left and the work and tick are stopped; the helper waits for a
        // running callback, disables the work it queues and cancels what that callback armed.
        unsafe {
            bindings::roxe_helper_hrtimer_cancel(Opaque::cast_into(core::ptr::addr_of!(
                (*dev).short_timer
            )))
        };
        // SAFETY: `dealloc_driver` is set only once `data` is initialised (see `register`), and
        // the core calls it exactly once, as the last op, before freeing the device.
        unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*dev).data)) };
    }
}

/// Nanoseconds of the monotonic clock, for short intervals. Any context.
pub fn now_ns() -> u64 {
    // SAFETY: Reads the clock; no precondition.
    unsafe { bindings::roxe_helper_ktime_ns() }
}

/// Milliseconds since boot, from the jiffies clock (the granularity of [`Driver::tick`]).
pub fn now_ms() -> u64 {
    // SAFETY: Reads the jiffies counter.
    unsafe { bindings::roxe_helper_jiffies_ms() }
}
