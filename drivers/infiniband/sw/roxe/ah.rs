// SPDX-License-Identifier: GPL-2.0

//! Address handles. Counterpart of rxe's `rxe_av.c` and the AH verbs.
//!
//! An AH is numbered from the device's AH pool; current rdma-core providers put that number
//! (`ah_num`) in UD send WQEs instead of a copy of the address vector.

#![deny(unsafe_code)]

use crate::rdma::{
    ah::{AddressVector, AhContext},
    device::Device,
    object::UData,
    pool::Alloc,
};
use crate::{hca::Roxe, param};
use kernel::prelude::*;

/// Size of `struct rxe_create_ah_resp`: `ah_num` u32, `reserved` u32.
const CREATE_AH_RESP_SIZE: usize = 8;

/// An address handle.
pub(crate) struct RoxeAh {
    pub(crate) av: AddressVector,
    pub(crate) ah_num: u32,
    /// The PD it was created in: a UD WQE may only name an AH of its QP's PD (rxe's
    /// `rxe_get_av`), since AH numbers are device-wide and another process's would resolve.
    pub(crate) pd_id: u64,
}

/// The driver's handle of an AH: its number in the pool.
pub(crate) struct AhHandle {
    ah_num: u32,
    av: AddressVector,
}

pub(crate) fn create(
    dev: &Device<Roxe>,
    pd_id: u64,
    av: &AddressVector,
    ctx: AhContext,
    udata: Option<&UData<'_>>,
) -> Result<AhHandle> {
    if av.port != crate::hca::PORT {
        return Err(EINVAL);
    }
    let alloc = if ctx == AhContext::KernelAtomic {
        Alloc::Atomic
    } else {
        Alloc::Kernel
    };
    let slot = dev
        .data()
        .ahs
        .reserve(param::AH_INDEX_MIN, param::AH_INDEX_MAX, alloc)?;
    let ah_num = slot.index();
    // Providers older than rdma-core 39 give no room for the response and embed the address
    // vector in each WQE instead; they get no number.
    if let Some(u) = udata {
        if u.out_len() >= CREATE_AH_RESP_SIZE {
            let mut resp = [0u8; CREATE_AH_RESP_SIZE];
            resp[..4].copy_from_slice(&ah_num.to_ne_bytes());
            u.respond_bytes(&resp)?;
        }
    }
    slot.fill(try_init!(RoxeAh { av: *av, ah_num, pd_id }? Error))?;
    Ok(AhHandle { ah_num, av: *av })
}

impl AhHandle {
    /// The AH's number, as UD WQEs carry it.
    pub(crate) fn ah_num(&self) -> u32 {
        self.ah_num
    }
}

pub(crate) fn query(ah: &AhHandle) -> AddressVector {
    ah.av
}

pub(crate) fn destroy(dev: &Device<Roxe>, ah: AhHandle) {
    // Destroy may run in atomic context for kernel AHs: take the entry out without waiting for
    // readers; an RCU callback frees it after the grace period.
    dev.data().ahs.remove_deferred(ah.ah_num);
}
