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
    ah::Ah, bindings, device::DriverTypes, mr::Mr, qp::QpNotifier, revocable::RcuRevocable,
};
use kernel::{ffi, sync::Arc};

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
pub struct KernelUd<'a, T: DriverTypes> {
    /// The destination's address handle.
    pub ah: &'a Ah<T>,
    /// Destination QP.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
}

/// A kernel consumer's send work request, decoded from `struct ib_send_wr` and its container.
pub struct KernelSendWr<'a, T: DriverTypes> {
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
pub struct KernelRegWr<'a, T: DriverTypes> {
    /// The MR, allocated by `alloc_mr` and mapped by `map_mr_sg`.
    pub mr: &'a Mr<T>,
    /// The key the MR gets (`ib_update_fast_reg_key` chose its key byte).
    pub key: u32,
    /// `IB_ACCESS_*` rights the MR gets.
    pub access: u32,
    /// The MR's IOVA when the work request was posted: `ib_map_mr_sg` sets it to the first
    /// byte's address, and a consumer may change it before posting (NFS's client puts the RPC's
    /// XID in its upper 32 bits), so the registration takes it from here, not from the mapping.
    pub iova: u64,
    /// The MR's length when the work request was posted.
    pub length: u64,
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
/// The access ends with [`KernelMem::revoke`], which the driver calls when the MR is
/// deregistered: a copy that began before it has ended when it returns, and every later one is
/// refused, so that `ib_dereg_mr` returns only when nothing can still touch the pages, which the
/// consumer may then free.
///
/// # Invariants
///
/// Only created by this module's `get_dma_mr` op and `mr.rs`'s `alloc_mr` op, for an MR of a
/// kernel consumer; a driver cannot make one. Copies run only inside `live`'s read side.
pub struct KernelMem {
    live: RcuRevocable<()>,
}

/// The MR of a [`KernelMem`] was deregistered: its access is revoked.
#[derive(Clone, Copy, Debug)]
pub struct Revoked;

impl KernelMem {
    /// The access that comes with an MR being created for a kernel consumer.
    pub(in crate::rdma) fn new() -> Self {
        // INVARIANT: Called only by the ops that create kernel consumers' MRs.
        KernelMem {
            live: RcuRevocable::new(()),
        }
    }

    /// Copies `dst.len()` bytes of kernel memory at `va` into `dst`, unless the access was
    /// revoked. Any context; interrupts stay as they are (the copy runs under RCU).
    pub fn read(&self, va: u64, dst: &mut [u8]) -> Result<(), Revoked> {
        self.live
            .try_access_with(|()| {
                // SAFETY: By the type invariant the address comes from a kernel consumer's work
                // request or page list: `va..va + len` is kernel memory the consumer handed to
                // the HCA and does not touch until completion, and the MR is not deregistered
                // (the access is not revoked, and `revoke` waits for this read side); `dst` is
                // a distinct buffer.
                unsafe {
                    bindings::roxe_helper_copy(
                        dst.as_mut_ptr().cast(),
                        va as usize as *const ffi::c_void,
                        dst.len(),
                    )
                };
            })
            .ok_or(Revoked)
    }

    /// Copies `src` into kernel memory at `va`, unless the access was revoked. Any context.
    pub fn write(&self, va: u64, src: &[u8]) -> Result<(), Revoked> {
        self.live
            .try_access_with(|()| {
                // SAFETY: As in `read`: consumer-owned kernel memory given to the HCA for
                // writing, through an MR not yet deregistered.
                unsafe {
                    bindings::roxe_helper_copy(
                        va as usize as *mut ffi::c_void,
                        src.as_ptr().cast(),
                        src.len(),
                    )
                };
            })
            .ok_or(Revoked)
    }

    /// Ends the access: waits until no copy through it runs (a grace period), and refuses every
    /// later one. Process context; sleeps.
    pub fn revoke(&self) {
        self.live.revoke();
    }
}
