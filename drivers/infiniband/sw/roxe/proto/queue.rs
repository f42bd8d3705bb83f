// SPDX-License-Identifier: GPL-2.0

//! Geometry of the rings shared with user space (the rxe ABI's `struct rxe_queue_buf`).
//!
//! A ring is one buffer: a header with the element size, the index mask and the two indices,
//! each index on its own 128-byte line, then `slots` elements of a power-of-two size. Indices are
//! stored masked; one slot always stays empty, so `capacity = slots - 1`. The layout must match
//! rdma-core's `providers/rxe/rxe_queue.h` byte for byte.
//!
//! Everything user space can write (indices, element contents) is untrusted: indices are masked
//! before use, and elements are copied out and then validated (see [`super::wqe`]).

/// Offset of `log2_elem_size` in the ring header.
pub const LOG2_ELEM_SIZE_OFFSET: usize = 0;
/// Offset of `index_mask`.
pub const INDEX_MASK_OFFSET: usize = 4;
/// Offset of `producer_index` (its own 128-byte line).
pub const PRODUCER_INDEX_OFFSET: usize = 128;
/// Offset of `consumer_index` (its own 128-byte line).
pub const CONSUMER_INDEX_OFFSET: usize = 256;
/// Offset of the first element.
pub const DATA_OFFSET: usize = 384;

/// Elements are at least one cache line, as in rxe, so that producer and consumer of adjacent
/// elements do not share a line.
pub const MIN_ELEM_SIZE: usize = 64;

/// Why a ring cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// Zero elements or a zero element size.
    Empty,
    /// More elements or bytes than the limit.
    TooLarge,
}

/// The shape of one ring.
///
/// # Invariants
///
/// `slots` and `elem_size` are powers of two, `slots >= 2`, `elem_size >= MIN_ELEM_SIZE`, and
/// `DATA_OFFSET + slots * elem_size` does not overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    slots: u32,
    log2_elem_size: u32,
}

impl Geometry {
    /// The geometry for a ring of at least `num_elem` usable elements of `elem_size` bytes,
    /// refusing rings of more than `max_elem` elements.
    pub fn new(num_elem: u32, elem_size: usize, max_elem: u32) -> Result<Geometry, GeometryError> {
        if num_elem == 0 || elem_size == 0 {
            return Err(GeometryError::Empty);
        }
        if num_elem > max_elem {
            return Err(GeometryError::TooLarge);
        }
        // One slot stays empty to tell a full ring from an empty one.
        let slots = num_elem
            .checked_add(1)
            .and_then(u32::checked_next_power_of_two)
            .ok_or(GeometryError::TooLarge)?;
        let elem = elem_size
            .max(MIN_ELEM_SIZE)
            .checked_next_power_of_two()
            .ok_or(GeometryError::TooLarge)?;
        (slots as usize)
            .checked_mul(elem)
            .and_then(|b| b.checked_add(DATA_OFFSET))
            .ok_or(GeometryError::TooLarge)?;
        // INVARIANT: both are powers of two (checked_next_power_of_two), slots >= 2 because
        // num_elem >= 1, elem >= MIN_ELEM_SIZE, and the byte size was checked above.
        Ok(Geometry {
            slots,
            log2_elem_size: elem.trailing_zeros(),
        })
    }

    /// Number of slots (a power of two).
    pub const fn slots(self) -> u32 {
        self.slots
    }

    /// Usable elements: one slot always stays empty.
    pub const fn capacity(self) -> u32 {
        self.slots - 1
    }

    /// Mask applied to every index.
    pub const fn index_mask(self) -> u32 {
        self.slots - 1
    }

    /// log2 of the element size, as the header stores it.
    pub const fn log2_elem_size(self) -> u32 {
        self.log2_elem_size
    }

    /// Size of one element in bytes.
    pub const fn elem_size(self) -> usize {
        1 << self.log2_elem_size
    }

    /// Total bytes of the ring buffer (header and elements).
    pub const fn buffer_size(self) -> usize {
        // NO-OVERFLOW: checked in `new` (type invariant).
        DATA_OFFSET + self.slots as usize * self.elem_size()
    }

    /// Byte offset of the element at `index`; any `index` (even one user space wrote) is
    /// masked first, so the result is always inside the buffer.
    pub const fn elem_offset(self, index: u32) -> usize {
        DATA_OFFSET + (index & self.index_mask()) as usize * self.elem_size()
    }

    /// Number of elements between `consumer` and `producer` (both masked first).
    pub const fn count(self, producer: u32, consumer: u32) -> u32 {
        producer.wrapping_sub(consumer) & self.index_mask()
    }

    /// Whether no element is queued.
    pub const fn is_empty(self, producer: u32, consumer: u32) -> bool {
        self.count(producer, consumer) == 0
    }

    /// Whether no more element fits.
    pub const fn is_full(self, producer: u32, consumer: u32) -> bool {
        self.count(producer, consumer) == self.capacity()
    }

    /// The index after `index`, masked.
    pub const fn next(self, index: u32) -> u32 {
        index.wrapping_add(1) & self.index_mask()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_offsets_match_rdma_core() {
        // struct rxe_queue_buf { u32 log2_elem_size; u32 index_mask; u32 pad_1[30];
        //   u32 producer_index; u32 pad_2[31]; u32 consumer_index; u32 pad_3[31]; u8 data[]; }
        assert_eq!(PRODUCER_INDEX_OFFSET, 4 + 4 + 30 * 4);
        assert_eq!(CONSUMER_INDEX_OFFSET, PRODUCER_INDEX_OFFSET + 4 + 31 * 4);
        assert_eq!(DATA_OFFSET, CONSUMER_INDEX_OFFSET + 4 + 31 * 4);
    }

    #[test]
    fn sizes_round_like_rxe() {
        // A CQ of 100 entries of 48-byte ib_uverbs_wc: 128 slots of 64 bytes.
        let g = Geometry::new(100, 48, 1 << 20).unwrap();
        assert_eq!((g.slots(), g.elem_size(), g.capacity()), (128, 64, 127));
        assert_eq!(g.buffer_size(), 384 + 128 * 64);
        // Exactly a power of two asks for one more slot.
        let g = Geometry::new(128, 208, 1 << 20).unwrap();
        assert_eq!(
            (g.slots(), g.elem_size(), g.log2_elem_size()),
            (256, 256, 8)
        );
    }

    #[test]
    fn rejects_empty_and_oversized() {
        assert_eq!(Geometry::new(0, 64, 10), Err(GeometryError::Empty));
        assert_eq!(Geometry::new(10, 0, 10), Err(GeometryError::Empty));
        assert_eq!(Geometry::new(11, 64, 10), Err(GeometryError::TooLarge));
        assert_eq!(
            Geometry::new(u32::MAX, 64, u32::MAX),
            Err(GeometryError::TooLarge)
        );
        assert_eq!(
            Geometry::new(1 << 20, usize::MAX / 2, u32::MAX),
            Err(GeometryError::TooLarge)
        );
    }

    #[test]
    fn hostile_indices_stay_inside() {
        let g = Geometry::new(7, 64, 100).unwrap();
        for idx in [0, 7, 8, 9, u32::MAX, 0x8000_0001] {
            assert!(g.elem_offset(idx) + g.elem_size() <= g.buffer_size());
        }
        assert!(g.is_empty(5, 5));
        assert!(g.is_full(7, 0));
        assert_eq!(g.count(2, 6), 4);
        assert_eq!(g.next(7), 0);
    }
}
