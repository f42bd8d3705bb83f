// SPDX-License-Identifier: GPL-2.0

//! The verbs a driver implements for its devices (`struct ib_device_ops`, as the [`Driver`]
//! trait), the driver id user space matches providers by, and hardware counter names.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    ah::{AddressVector, Ah, AhContext},
    attr::{DeviceAttr, PortAttr, PortImmutable},
    bindings,
    cq::{Cq, CqInit, CqNotifier, NotifyFlags},
    device::{Device, DriverTypes},
    kverbs::{FastRegGrant, KernelMem, KernelRecvWr, KernelSendWr, Wc},
    mr::{FastRegPages, Mr, MrCreated, UserMrRequest},
    object::UData,
    pd::Pd,
    qp::{Qp, QpAttr, QpAttrMask, QpCreated, QpInit, QpNotifier},
    srq::{Srq, SrqAttr, SrqInit, SrqNotifier},
};
use kernel::{build_error, error::VTABLE_DEFAULT_ERROR, prelude::*, sync::Arc};

/// Driver ids the RDMA core knows (`enum rdma_driver_id`); user space picks its provider by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverId {
    /// The rxe (Soft-RoCE) ABI: rdma-core's rxe provider binds to the device.
    Rxe,
}

impl DriverId {
    pub(crate) const fn as_raw(self) -> bindings::rdma_driver_id {
        match self {
            DriverId::Rxe => bindings::rdma_driver_id_RDMA_DRIVER_RXE,
        }
    }
}

/// A legacy uverbs write command (`enum ib_uverbs_write_cmds`) a driver may enable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UverbsWriteCmd {
    /// `IB_USER_VERBS_CMD_POST_SEND`.
    PostSend,
    /// `IB_USER_VERBS_CMD_REQ_NOTIFY_CQ`.
    ReqNotifyCq,
}

impl UverbsWriteCmd {
    /// The command's bit in `uverbs_cmd_mask`.
    pub(crate) const fn mask(self) -> u64 {
        let cmd = match self {
            UverbsWriteCmd::PostSend => bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND,
            UverbsWriteCmd::ReqNotifyCq => {
                bindings::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ
            }
        };
        1u64 << cmd
    }
}

/// The verbs a driver implements for its devices.
///
/// All methods are called in process context by the RDMA core, with no driver lock held; several
/// may run concurrently on one device.
#[vtable]
pub trait Driver: DriverTypes {
    /// The driver id user space matches providers by.
    const DRIVER_ID: DriverId;

    /// The driver's uverbs ABI version (`uverbs_abi_ver`).
    const UVERBS_ABI_VERSION: u32;

    /// The legacy uverbs write commands the driver's user-space provider issues, which the core
    /// accepts only when the driver asks (`ib_device.uverbs_cmd_mask`).
    const UVERBS_WRITE_CMDS: &'static [UverbsWriteCmd] = &[];

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

    /// The device's data is initialised and its ops are set; it is registered with the core
    /// next, whose clients (the MAD layer, kernel ULPs) use it at once: for what the data needs
    /// running before that. Process context.
    fn registering(_dev: &Device<Self>) {}

    /// `post_send` of a user QP: uverbs' legacy `POST_SEND` command (which the driver enables
    /// with [`Driver::UVERBS_WRITE_CMDS`]). This binding passes the driver no work requests: a
    /// provider that posts through rings it maps (the queues of `mmap`) sends the command with
    /// none, to have the driver look at its ring.
    fn post_send_user(qp: &Qp<Self>) -> Result;

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
    fn alloc_mr(
        _pd: &Pd<Self>,
        _max_pages: u32,
        _grant: FastRegGrant,
    ) -> Result<MrCreated<Self::Mr>> {
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
    /// context, often with interrupts disabled: transmission must be left to deferred work.
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

    /// The device's own management agent (`process_mad`): looks at MAD `input`, received on or
    /// sent to port `port`, and may write a response to `output`. The core asks it first for
    /// every MAD of the port (QP0/QP1 traffic and local requests, such as the PerfMgt queries
    /// behind sysfs `ports/N/counters/`, which exists only when a driver implements this). May
    /// be called in atomic context.
    fn process_mad(
        _dev: &Device<Self>,
        _port: u32,
        _input: &[u8; MAD_SIZE],
        _output: &mut [u8; MAD_SIZE],
    ) -> MadResult {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// Size of a MAD (`struct ib_mad`), in and out of [`Driver::process_mad`].
pub const MAD_SIZE: usize = 256;
const _: () = assert!(MAD_SIZE == core::mem::size_of::<bindings::ib_mad>());

/// What the core does with a MAD after [`Driver::process_mad`] (`enum ib_mad_result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MadResult {
    /// The MAD is bad for the port: the core drops it (`IB_MAD_RESULT_FAILURE`).
    Failure,
    /// Not the driver's: the core passes it to the agents registered for its class
    /// (`IB_MAD_RESULT_SUCCESS`).
    Pass,
    /// The output holds the response, to be sent back or handed to the local requester
    /// (`IB_MAD_RESULT_SUCCESS | IB_MAD_RESULT_REPLY`).
    Reply,
}

impl MadResult {
    pub(crate) const fn as_raw(self) -> bindings::ib_mad_result {
        match self {
            MadResult::Failure => bindings::ib_mad_result_IB_MAD_RESULT_FAILURE,
            MadResult::Pass => bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS,
            MadResult::Reply => {
                bindings::ib_mad_result_IB_MAD_RESULT_SUCCESS
                    | bindings::ib_mad_result_IB_MAD_RESULT_REPLY
            }
        }
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

/// Unregisters every device of driver `T` and waits for queued unregistrations: call at module
/// unload, after the link type is unregistered, so that no device outlives the module.
pub fn unregister_all<T: Driver>() {
    // SAFETY: Always safe to call; it unregisters only devices with our driver id, all of which
    // have a `dealloc_driver` op.
    unsafe { bindings::ib_unregister_driver(T::DRIVER_ID.as_raw()) };
}
