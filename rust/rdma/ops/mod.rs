// SPDX-License-Identifier: GPL-2.0

//! The `extern "C"` side of a driver's verbs: [`Adapter<T>`] builds the `ib_device_ops` table
//! of driver `T` and holds the trampolines the RDMA core calls, which turn raw pointers into
//! the safe types and call the [`Driver`] methods. This file has the device-level ones; each object's are in the file of its name.

mod ah;
mod cq;
mod kverbs;
mod mr;
mod qp;
mod srq;

use crate::rdma::{
    ah::Ah,
    bindings,
    cq::Cq,
    device::Device,
    driver::{Driver, MadResult, MAD_SIZE},
    mmap,
    mr::Mw,
    object::{UContext, UData},
    pd::Pd,
    qp::Qp,
    srq::Srq,
};
use core::marker::PhantomData;
use kernel::{error::from_result, ffi, prelude::*};

/// The `extern "C"` trampolines of driver `T`'s ops; each object's file adds its own.
pub(crate) struct Adapter<T: Driver>(PhantomData<T>);

impl<T: Driver> Adapter<T> {
    pub(in crate::rdma) fn ops(module: &'static ThisModule) -> bindings::ib_device_ops {
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
            process_mad: if T::HAS_PROCESS_MAD {
                Some(Self::process_mad)
            } else {
                None
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

    /// `ib_device_ops.process_mad`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`:
    /// `in_mad` a MAD to read, `out_mad` a distinct buffer of `*out_mad_size` bytes to write.
    unsafe extern "C" fn process_mad(
        ibdev: *mut bindings::ib_device,
        _flags: ffi::c_int,
        port: u32,
        _in_wc: *const bindings::ib_wc,
        _in_grh: *const bindings::ib_grh,
        in_mad: *const bindings::ib_mad,
        out_mad: *mut bindings::ib_mad,
        out_mad_size: *mut usize,
        _out_mad_pkey_index: *mut u16,
    ) -> ffi::c_int {
        let failure = MadResult::Failure.as_raw() as ffi::c_int;
        if in_mad.is_null() || out_mad.is_null() || out_mad_size.is_null() {
            return failure;
        }
        // SAFETY: The core passes the size of the output buffer, valid for the call.
        if unsafe { *out_mad_size } < MAD_SIZE {
            return failure;
        }
        // SAFETY: As in `query_device`.
        let dev = unsafe { Device::<T>::from_raw(ibdev) };
        // SAFETY: `in_mad` is a `struct ib_mad` (`MAD_SIZE` bytes, alignment 1 as a byte array),
        // only read during the call; `out_mad` has at least `MAD_SIZE` bytes (checked above), is
        // not `in_mad` and nothing else uses it during the call.
        let (input, output) = unsafe {
            (
                &*in_mad.cast::<[u8; MAD_SIZE]>(),
                &mut *out_mad.cast::<[u8; MAD_SIZE]>(),
            )
        };
        T::process_mad(dev, port, input, output).as_raw() as ffi::c_int
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

    /// None
    ///
    /// # Safety
    ///
    /// Only the RDMA core calls this, once, as `ib_device_ops.dealloc_driver` of a device of `T`,
    /// after unregistering it and before freeing it; nothing uses the device afterwards.
    unsafe extern "C" fn dealloc_driver(ibdev: *mut bindings::ib_device) {
        let dev = ibdev.cast::<Device<T>>();
        // SAFETY: `dealloc_driver` is set only once `data` is initialised (see `register`), and
        // the core calls it exactly once, as the last op, before freeing the device.
        unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*dev).data)) };
    }
}
