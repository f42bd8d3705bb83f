// SPDX-License-Identifier: GPL-2.0

//! The verbs of kernel consumers (the MAD layer and its GSI QP, the connection manager, ULPs):
//! work requests posted by function call instead of through mapped rings, completions polled
//! into `struct ib_wc`, and DMA MRs over kernel memory.
//!
//! A software HCA uses virtual DMA (`ib_register_device` with no DMA device), so the addresses
//! kernel consumers put in their SGEs are kernel virtual addresses of memory they own.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use super::{
    ah::Ah,
    bindings,
    cq::Cq,
    device::{Adapter, Driver},
    mr::Mr,
    pd::Pd,
    qp::{Qp, QpNotifier},
    srq::Srq,
};
use kernel::{ffi, prelude::*, sync::Arc};

/// Most SGEs a kernel work request may carry here (the device's `max_send_sge`).
pub const MAX_SGE: usize = 32;

/// A scatter/gather entry of a kernel work request: a kernel virtual address.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelSge {
    /// Kernel virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key (usually the PD's `local_dma_lkey`).
    pub lkey: u32,
}

/// The UD part of a kernel send work request.
pub struct KernelUd<'a, T: Driver> {
    /// The destination's address handle.
    pub ah: &'a Ah<T>,
    /// Destination QP.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
}

/// A kernel consumer's send work request, decoded from `struct ib_send_wr` and its container.
pub struct KernelSendWr<'a, T: Driver> {
    /// The consumer's id.
    pub wr_id: u64,
    /// `enum ib_wr_opcode` (equal to the user ABI's for the operations both have).
    pub opcode: u32,
    /// `IB_SEND_*` flags.
    pub send_flags: u32,
    /// Immediate data (wire bytes as a native u32) or the rkey to invalidate.
    pub ex: u32,
    /// RDMA and atomics: remote address and key.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Atomics: compare (CmpSwap) or addend (FetchAdd).
    pub compare_add: u64,
    /// Atomics: swap value.
    pub swap: u64,
    /// UD and GSI: the destination.
    pub ud: Option<KernelUd<'a, T>>,
    /// REG_MR: the fast registration.
    pub reg: Option<KernelRegWr<'a, T>>,
    /// The SGEs.
    pub sges: &'a [KernelSge],
}

/// The fast registration of a REG_MR work request (`struct ib_reg_wr`).
pub struct KernelRegWr<'a, T: Driver> {
    /// The MR, allocated by `alloc_mr` and mapped by `map_mr_sg`.
    pub mr: &'a Mr<T>,
    /// The key the MR gets (`ib_update_fast_reg_key` chose its key byte).
    pub key: u32,
    /// `IB_ACCESS_*` rights the MR gets.
    pub access: u32,
}

/// `IB_WR_REG_MR`: kernel-only opcode of a fast registration.
pub const WR_REG_MR: u32 = bindings::ib_wr_opcode_IB_WR_REG_MR;

/// A kernel consumer's receive work request.
pub struct KernelRecvWr<'a> {
    /// The consumer's id.
    pub wr_id: u64,
    /// The SGEs.
    pub sges: &'a [KernelSge],
}

/// A completion for a kernel consumer (`struct ib_wc`).
#[derive(Default)]
pub struct Wc {
    /// The work request's id.
    pub wr_id: u64,
    /// `enum ib_wc_status`.
    pub status: u32,
    /// `enum ib_wc_opcode`.
    pub opcode: u32,
    /// Bytes received.
    pub byte_len: u32,
    /// Immediate data or invalidated rkey, raw.
    pub ex: u32,
    /// The QP the work request belonged to.
    pub qp: Option<Arc<QpNotifier>>,
    /// UD: source QP.
    pub src_qp: u32,
    /// `IB_WC_*` flags.
    pub wc_flags: u32,
    /// P_Key index.
    pub pkey_index: u16,
    /// UD receives over RoCEv2: IPv4 or IPv6 (`enum rdma_network_type`), 0 if unknown.
    pub network_hdr_type: u8,
}

/// `enum rdma_network_type` of RoCEv2 over IPv4.
pub const NETWORK_IPV4: u8 = bindings::rdma_network_type_RDMA_NETWORK_IPV4 as u8;
/// `enum rdma_network_type` of RoCEv2 over IPv6.
pub const NETWORK_IPV6: u8 = bindings::rdma_network_type_RDMA_NETWORK_IPV6 as u8;
/// `IB_WC_WITH_NETWORK_HDR_TYPE`.
pub const WC_WITH_NETWORK_HDR_TYPE: u32 = bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE;

/// Access to kernel virtual memory through the MR of a kernel consumer: a DMA MR
/// (`get_dma_mr`) or a fast-registration MR (`alloc_mr`), the two kinds only kernel code can
/// create. A kernel consumer's work requests and page lists address, by kernel virtual address
/// (virtual DMA), buffers it owns and does not touch until the request completes; kernel
/// consumers are trusted as any kernel code is. A driver receives one `KernelMem` with each such
/// MR it creates and may use it only for that MR's accesses, within the MR's range and rights.
///
/// # Invariants
///
/// Only created by this module's `get_dma_mr` op and `mr.rs`'s `alloc_mr` op, for an MR of a
/// kernel consumer; a driver cannot make one.
pub struct KernelMem(());

impl KernelMem {
    /// The access that comes with an MR being created for a kernel consumer.
    pub(in crate::rdma) fn new() -> Self {
        // INVARIANT: Called only by the ops that create kernel consumers' MRs.
        KernelMem(())
    }

    /// Copies `dst.len()` bytes of kernel memory at `va` into `dst`.
    pub fn read(&self, va: u64, dst: &mut [u8]) {
        // SAFETY: By the type invariant the address comes from a kernel consumer's work request
        // or page list: `va..va + len` is kernel memory the consumer handed to the HCA and does
        // not touch until completion; `dst` is a distinct buffer.
        unsafe {
            bindings::roxe_helper_copy(
                dst.as_mut_ptr().cast(),
                va as usize as *const ffi::c_void,
                dst.len(),
            )
        };
    }

    /// Copies `src` into kernel memory at `va`.
    pub fn write(&self, va: u64, src: &[u8]) {
        // SAFETY: As in `read`: consumer-owned kernel memory given to the HCA for writing.
        unsafe {
            bindings::roxe_helper_copy(
                va as usize as *mut ffi::c_void,
                src.as_ptr().cast(),
                src.len(),
            )
        };
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
                            // consumer registers an MR of this device, from `alloc_mr`.
                            reg = Some(KernelRegWr {
                                mr: &*r.mr.cast::<Mr<T>>(),
                                key: r.key,
                                access: r.access as u32,
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
        mut wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> ffi::c_int {
        // SAFETY: A live QP of ours.
        let qp = unsafe { Qp::<T>::from_raw(ibqp) };
        let mut sge_buf = [KernelSge::default(); MAX_SGE];
        while !wr.is_null() {
            // SAFETY: The core passes a valid list of work requests.
            let w = unsafe { &*wr };
            // SAFETY: `sg_list` holds `num_sge` entries.
            let res = match unsafe { sges(w.sg_list, w.num_sge, &mut sge_buf) } {
                None => Err(EINVAL),
                Some(s) => {
                    // SAFETY: `wr_id` is the member kernel consumers of this op set.
                    let wr_id = unsafe { w.__bindgen_anon_1.wr_id };
                    T::post_recv(qp, &KernelRecvWr { wr_id, sges: s })
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

    /// `ib_device_ops.post_srq_recv`.
    ///
    /// # Safety
    ///
    /// The RDMA core calls this through the ops of a device of `T` (`Adapter::ops`), with
    /// arguments that are live and valid for the call, as for this entry in `ib_device_ops`.
    pub(crate) unsafe extern "C" fn post_srq_recv(
        ibsrq: *mut bindings::ib_srq,
        mut wr: *const bindings::ib_recv_wr,
        bad_wr: *mut *const bindings::ib_recv_wr,
    ) -> ffi::c_int {
        // SAFETY: A live SRQ of ours.
        let srq = unsafe { Srq::<T>::from_raw(ibsrq) };
        let mut sge_buf = [KernelSge::default(); MAX_SGE];
        while !wr.is_null() {
            // SAFETY: The core passes a valid list of work requests.
            let w = unsafe { &*wr };
            // SAFETY: `sg_list` holds `num_sge` entries.
            let res = match unsafe { sges(w.sg_list, w.num_sge, &mut sge_buf) } {
                None => Err(EINVAL),
                Some(s) => {
                    // SAFETY: `wr_id` is the member kernel consumers of this op set.
                    let wr_id = unsafe { w.__bindgen_anon_1.wr_id };
                    T::post_srq_recv(srq, &KernelRecvWr { wr_id, sges: s })
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
