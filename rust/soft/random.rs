// SPDX-License-Identifier: GPL-2.0

//! Random numbers from the kernel's CRNG, for values a peer or another process must not be
//! able to predict (the key byte of a memory key), and keyed hashes whose collisions they
//! cannot choose (a table indexed by identifiers a user or a peer picks).
//!
//! C headers: [`include/linux/random.h`](srctree/include/linux/random.h),
//! [`include/linux/siphash.h`](srctree/include/linux/siphash.h)

use crate::rdma::bindings;

/// A random `u32` from the kernel's CRNG. Any context (it never sleeps or fails).
pub fn u32() -> u32 {
    // SAFETY: `get_random_u32` may be called from any context and has no preconditions.
    unsafe { bindings::get_random_u32() }
}

/// A random SipHash key: hashes under it spread identifiers that a process or a peer chose
/// over a table's buckets, since without the key nobody can pick many that share a bucket.
pub struct HashKey(bindings::siphash_key_t);

impl HashKey {
    /// A fresh key from the kernel's CRNG. Any context.
    pub fn new() -> Self {
        HashKey(bindings::siphash_key_t {
            key: [u64_random(), u64_random()],
        })
    }

    /// SipHash-2-4 of 16 bytes (two native-endian words) under this key.
    pub fn hash16(&self, data: &[u8; 16]) -> u64 {
        let (a, b) = data.split_at(8);
        let word = |w: &[u8]| u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]));
        // SAFETY: `siphash_2u64` only reads the key, which lives for the call.
        unsafe { bindings::siphash_2u64(word(a), word(b), &self.0) }
    }
}

impl Default for HashKey {
    fn default() -> Self {
        Self::new()
    }
}

fn u64_random() -> u64 {
    // SAFETY: `get_random_u64` may be called from any context and has no preconditions.
    unsafe { bindings::get_random_u64() }
}
