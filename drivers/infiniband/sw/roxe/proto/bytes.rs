// SPDX-License-Identifier: GPL-2.0

//! Fixed-size fields of byte buffers (packet headers, CQEs, MADs), read and written at offsets
//! the caller's layout fixes. Out-of-range accesses read zeros and write nothing rather than
//! panic: every layout here checks, or is sized so, that its offsets fit.

/// `N` bytes of `buf` at `off`; zeros if they are not all in `buf`.
pub(super) fn read<const N: usize>(buf: &[u8], off: usize) -> [u8; N] {
    match buf.get(off..).and_then(<[u8]>::first_chunk::<N>) {
        Some(bytes) => *bytes,
        None => [0; N],
    }
}

/// Writes `bytes` at `off` of `buf`; nothing if they do not all fit.
pub(super) fn write<const N: usize>(buf: &mut [u8], off: usize, bytes: [u8; N]) {
    if let Some(dst) = buf.get_mut(off..).and_then(<[u8]>::first_chunk_mut::<N>) {
        *dst = bytes;
    }
}
