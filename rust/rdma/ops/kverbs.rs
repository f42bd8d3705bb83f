// SPDX-License-Identifier: GPL-2.0

//! The trampolines of `kverbs.rs`'s ops (see [`Adapter`]).

use super::Adapter;
use crate::rdma::driver::Driver;
use crate::rdma::kverbs::*;
use crate::rdma::{ah::Ah, bindings, cq::Cq, mr::Mr, pd::Pd, qp::Qp, srq::Srq};
use kernel::{ffi, prelude::*};

impl<T: Driver> Adapter<T> {
    /// `post_send` for a kernel consumer's QP.
    ///
    /// # Safety
    ///
    /// `ibqp` is a live kernel (not user) QP of a device of `T`, `wr` a valid chain of send WRs and
    /// `bad_wr` a valid pointer, as `ib_device_ops.post_send` passes them (the caller is
    /// `Adapter::post_send`).
    pub(crate) unsafe fn post_send_kernel(
        ibqp: *mut bindings::ib_qp,
        mut wr: *const bindings::ib_send_wr,
        bad_wr: *mut *const bindings::ib_send_wr,
    ) -> ffi::c_int {
        // SAFETY: A live QP of ours.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        let mut sge_buf = [KernelSge::default(); MAX_SGE];
        while !wr.is_null() {
            // SAFETY: The core passes a valid list of work requests.
            let w = unsafe { &*wr };
            let opcode = w.opcode;
            // SAFETY: `wr` is valid; the containers below are read only for the opcodes whose
            // work requests the ULP embeds in them (`rdma_wr`, `atomic_wr`, `ud_wr`).
            let res = unsafe {
                let sges = sges(w.sg_list, w.num_sge, &mut sge_buf);
                let (mut remote_addr, mut rkey, mut compare_add, mut swap) = (0, 0, 0, 0);
                let mut ud = None;
                let mut reg = None;
                match opcode {
                    bindings::ib_wr_opcode_IB_WR_RDMA_WRITE
                    | bindings::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
                    | bindings::ib_wr_opcode_IB_WR_RDMA_READ => {
                        let r = &*wr.cast::<bindings::ib_rdma_wr>();
                        remote_addr = r.remote_addr;
                        rkey = r.rkey;
                    }
                    bindings::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP
                    | bindings::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                        let a = &*wr.cast::<bindings::ib_atomic_wr>();
                        remote_addr = a.remote_addr;
                        rkey = a.rkey;
                        compare_add = a.compare_add;
                        swap = a.swap;
                    }
                    bindings::ib_wr_opcode_IB_WR_REG_MR => {
                        let r = &*wr.cast::<bindings::ib_reg_wr>();
                        if !r.mr.is_null() {
                            // CAST: `ib` is the first field of the `#[repr(C)]` `Mr<T>`; the
                            // consumer registers an MR of this device, from `alloc_mr`. Its
                            // `iova` and `length` are read now: they are the registration's.
                            reg = Some(KernelRegWr {
                                mr: &*r.mr.cast::<Mr<T>>(),
                                key: r.key,
                                access: r.access as u32,
                                iova: (*r.mr).iova,
                                length: (*r.mr).length,
                            });
                        }
                    }
                    _ => {}
                }
                let qpt = (*ibqp).qp_type;
                if qpt == bindings::ib_qp_type_IB_QPT_UD || qpt == bindings::ib_qp_type_IB_QPT_GSI {
                    let u = &*wr.cast::<bindings::ib_ud_wr>();
                    if !u.ah.is_null() {
                        ud = Some(KernelUd {
                            ah: Ah::<T>::from_raw(u.ah),
                            remote_qpn: u.remote_qpn,
                            remote_qkey: u.remote_qkey,
                        });
                    }
                }
                match sges {
                    None => Err(EINVAL),
                    Some(sges) => T::post_send_kernel(
                        qp,
                        &KernelSendWr {
                            wr_id: w.__bindgen_anon_1.wr_id,
                            opcode,
                            send_flags: w.send_flags as u32,
                            ex: w.ex.invalidate_rkey,
                            remote_addr,
                            rkey,
                            compare_add,
                            swap,
                            ud,
                            reg,
                            sges,
                        },
                    ),
                }
            };
            if let Err(e) = res {
                if !bad_wr.is_null() {
                    // SAFETY: The core passes a valid out-pointer.
                    unsafe { *bad_wr = wr };
                }
                return e.to_errno();
            }
            wr = w.next;
        }
        0
    }

    /// `ib_device_ops.post_recv`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn post_recv(
        ibqp: *mut bindings::ib_qp,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> ffi::c_int {
        // SAFETY: A live QP of ours.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        // SAFETY: The core passes a valid list of work requests and a valid (or NULL)
        // out-pointer.
        unsafe { post_recv_list(wr, bad_wr, |r| T::post_recv(qp, r)) }
    }

    /// `ib_device_ops.post_srq_recv`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn post_srq_recv(
        ibsrq: *mut bindings::ib_srq,
        wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> ffi::c_int {
        // SAFETY: A live SRQ of ours.
        let srq = unsafe { Srq::<T>::from_raw(ibsrq) };
        // SAFETY: As in `post_recv`.
        unsafe { post_recv_list(wr, bad_wr, |r| T::post_srq_recv(srq, r)) }
    }

    /// `ib_device_ops.poll_cq`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn poll_cq(
        ibcq: *mut bindings::ib_cq,
        num: ffi::c_int,
        wc: *mut bindings::ib_wc,
    ) -> ffi::c_int {
        // SAFETY: A live CQ of ours.
        let cq = unsafe { Cq::<T>::from_raw(ibcq) };
        let n = usize::try_from(num).unwrap_or(0);
        let mut done = 0usize;
        while done < n {
            let Some(c) = T::poll_cq(cq) else { break };
            // SAFETY: The core passes room for `num` entries; `done < num`.
            let out = unsafe { &mut *wc.add(done) };
            *out = bindings::ib_wc::default();
            out.__bindgen_anon_1.wr_id = c.wr_id;
            out.status = c.status;
            out.opcode = c.opcode;
            out.byte_len = c.byte_len;
            out.ex.invalidate_rkey = c.ex;
            out.qp =
                c.qp.as_ref()
                    .and_then(|q| q.raw_ptr())
                    .unwrap_or(core::ptr::null_mut());
            out.src_qp = c.src_qp;
            out.wc_flags = c.wc_flags as i32;
            out.pkey_index = c.pkey_index;
            out.port_num = 1;
            out.network_hdr_type = c.network_hdr_type;
            done += 1;
        }
        done as ffi::c_int
    }

    /// `ib_device_ops.get_dma_mr`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn get_dma_mr(
        ibpd: *mut bindings::ib_pd,
        access: ffi::c_int,
    ) -> *mut bindings::ib_mr {
        // SAFETY: A live PD of ours.
        let pd = unsafe { Pd::<T>::from_raw(ibpd) };
        match T::get_dma_mr(pd, access as u32, KernelMem::new()) {
            Ok(created) => Self::finish_mr(ibpd, created, 0, u64::MAX),
            Err(e) => core::ptr::without_provenance_mut(e.to_errno() as isize as usize),
        }
    }
}

/// Decodes the SGE array of a work request into `out`; `None` if there are too many.
///
/// # Safety
///
/// `sg` points to `n` valid `ib_sge`s (or `n` is 0).
unsafe fn sges<'a>(
    sg: *const bindings::ib_sge,
    n: ffi::c_int,
    out: &'a mut [KernelSge; MAX_SGE],
) -> Option<&'a [KernelSge]> {
    let n = usize::try_from(n).ok()?;
    if n > MAX_SGE {
        return None;
    }
    for (i, slot) in out.iter_mut().take(n).enumerate() {
        // SAFETY: `i < n` and the array holds `n` entries.
        let s = unsafe { &*sg.add(i) };
        *slot = KernelSge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        };
    }
    out.get(..n)
}

/// Posts the receive work requests of the list at `wr` one by one through `post`, stopping at
/// the first that fails: its address goes to `*bad_wr` and its error is returned (as
/// `post_recv` and `post_srq_recv` report to kernel consumers).
///
/// # Safety
///
/// `wr` is NULL or the first of a valid list of `ib_recv_wr`s, each with `num_sge` valid
/// entries at `sg_list`, and `bad_wr` is NULL or valid for writing, for the call.
unsafe fn post_recv_list(
    mut wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
    mut post: impl FnMut(&KernelRecvWr<'_>) -> Result,
) -> ffi::c_int {
    let mut sge_buf = [KernelSge::default(); MAX_SGE];
    while !wr.is_null() {
        // SAFETY: By the function's safety requirements `wr` is a valid work request.
        let w = unsafe { &*wr };
        // SAFETY: `sg_list` holds `num_sge` entries (safety requirements).
        let res = match unsafe { sges(w.sg_list, w.num_sge, &mut sge_buf) } {
            None => Err(EINVAL),
            Some(s) => {
                // SAFETY: `wr_id` is the member kernel consumers of this op set.
                let wr_id = unsafe { w.__bindgen_anon_1.wr_id };
                post(&KernelRecvWr { wr_id, sges: s })
            }
        };
        if let Err(e) = res {
            if !bad_wr.is_null() {
                // SAFETY: A valid out-pointer (safety requirements).
                unsafe { *bad_wr = wr };
            }
            return e.to_errno();
        }
        wr = w.next;
    }
    0
}
