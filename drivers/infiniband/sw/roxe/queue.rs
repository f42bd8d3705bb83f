// SPDX-License-Identifier: GPL-2.0

//! The rings of the rxe ABI: send, receive and shared receive queues (user space produces, the
//! driver consumes) and completion queues (the driver produces, user space consumes).
//!
//! Counterpart of rxe's `rxe_queue.c`. The buffer is shared with user space, which may write
//! any byte of it at any time. So the driver keeps its own copy of the index it owns and only
//! ever *writes* that index to the shared header; the peer's index is loaded with acquire
//! ordering and masked before use, and elements are copied out before they are parsed.

#![deny(unsafe_code)]

use crate::compat::task::Preemptible;
use crate::proto::queue::{
    Geometry, CONSUMER_INDEX_OFFSET, INDEX_MASK_OFFSET, LOG2_ELEM_SIZE_OFFSET,
    PRODUCER_INDEX_OFFSET,
};
use crate::rdma::{
    mmap::{MmapEntry, MmapInfo, UserBuf},
    object::UData,
};
use kernel::{prelude::*, sync::Arc};

/// Elements a resize copies between two scheduling points: 256 slots of the largest receive WQE
/// (4 KiB) are 1 MiB, well under a millisecond of copying on any host.
pub(crate) const RESIZE_BATCH: u32 = 256;

/// The old ring of a resize, read outside the lock that protects it: a second reference to its
/// buffer, and its geometry. The buffer stays allocated while the handle lives; its bytes may
/// change under a hostile user, which only garbles that user's own elements.
pub(crate) struct RingSource {
    buf: Arc<UserBuf>,
    geometry: Geometry,
}

impl RingSource {
    /// Number of elements from slot `from` up to slot `to` of the ring.
    pub(crate) fn distance(&self, from: u32, to: u32) -> u32 {
        self.geometry.count(to, from)
    }
}

/// Who produces the ring's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// User space (or a kernel consumer) posts, the driver consumes: SQ, RQ, SRQ.
    FromClient,
    /// The driver posts, the client consumes: CQ.
    ToClient,
}

/// One ring and the driver's private copy of the index it owns.
pub(crate) struct Queue {
    buf: Arc<UserBuf>,
    geometry: Geometry,
    direction: Direction,
    /// The index the driver owns: the consumer index of a `FromClient` ring, the producer index
    /// of a `ToClient` ring. Always masked.
    own_index: u32,
    /// The offer of the buffer to user space, withdrawn when the queue is dropped.
    mmap: Option<MmapEntry>,
}

impl Queue {
    /// Creates a ring of at least `num_elem` elements of `elem_size` bytes, at most `max_elem`.
    pub(crate) fn new(
        num_elem: u32,
        elem_size: usize,
        max_elem: u32,
        direction: Direction,
    ) -> Result<Queue> {
        let geometry = Geometry::new(num_elem, elem_size, max_elem).map_err(|_| EINVAL)?;
        let buf = Arc::new(UserBuf::new(geometry.buffer_size())?, GFP_KERNEL)?;
        // The header tells user space the shape; it cannot hurt us by changing it, since we keep
        // our own geometry.
        buf.store_relaxed(LOG2_ELEM_SIZE_OFFSET, geometry.log2_elem_size());
        buf.store_relaxed(INDEX_MASK_OFFSET, geometry.index_mask());
        Ok(Queue {
            buf,
            geometry,
            direction,
            own_index: 0,
            mmap: None,
        })
    }

    /// Offers the ring to the process of `udata` for mapping; returns where it maps it.
    pub(crate) fn offer_mmap(&mut self, udata: &UData<'_>) -> Result<MmapInfo> {
        let entry = self.make_mmap_entry(udata)?;
        let info = entry.info();
        self.mmap = Some(entry);
        Ok(info)
    }

    /// Creates the mmap offer of this ring without attaching it (it allocates: call it outside
    /// spinlocks, then attach it with [`Queue::attach_mmap`]).
    pub(crate) fn make_mmap_entry(&self, udata: &UData<'_>) -> Result<MmapEntry> {
        MmapEntry::insert(udata, self.buf.clone())
    }

    /// Attaches an offer made by [`Queue::make_mmap_entry`]; withdrawn when the ring drops.
    pub(crate) fn attach_mmap(&mut self, entry: MmapEntry) {
        self.mmap = Some(entry);
    }

    /// Usable elements.
    pub(crate) fn capacity(&self) -> u32 {
        self.geometry.capacity()
    }

    /// Size of one element slot.
    pub(crate) fn elem_size(&self) -> usize {
        self.geometry.elem_size()
    }

    /// The peer's index, masked: it is user-writable and may hold anything.
    fn peer_index(&self) -> u32 {
        let offset = match self.direction {
            Direction::FromClient => PRODUCER_INDEX_OFFSET,
            Direction::ToClient => CONSUMER_INDEX_OFFSET,
        };
        self.buf.load_acquire(offset) & self.geometry.index_mask()
    }

    fn publish_own_index(&self) {
        let offset = match self.direction {
            Direction::FromClient => CONSUMER_INDEX_OFFSET,
            Direction::ToClient => PRODUCER_INDEX_OFFSET,
        };
        self.buf.store_release(offset, self.own_index);
    }

    /// (producer, consumer) as the driver sees them now.
    fn indices(&self) -> (u32, u32) {
        match self.direction {
            Direction::FromClient => (self.peer_index(), self.own_index),
            Direction::ToClient => (self.own_index, self.peer_index()),
        }
    }

    /// Number of queued elements.
    pub(crate) fn count(&self) -> u32 {
        let (p, c) = self.indices();
        self.geometry.count(p, c)
    }

    /// Whether no element is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Whether no more elements fit.
    pub(crate) fn is_full(&self) -> bool {
        self.count() == self.geometry.capacity()
    }

    /// `FromClient`: copies the oldest posted element into `out` (at most one slot) without
    /// consuming it. Returns `false` if the ring is empty.
    pub(crate) fn peek(&self, out: &mut [u8]) -> bool {
        if self.direction != Direction::FromClient || self.is_empty() {
            return false;
        }
        let n = out.len().min(self.geometry.elem_size());
        let offset = self.geometry.elem_offset(self.own_index);
        out.get_mut(..n)
            .is_some_and(|dst| self.buf.read(offset, dst).is_ok())
    }

    /// `FromClient`: consumes the oldest element, handing its slot back to the producer.
    pub(crate) fn advance_consumer(&mut self) {
        if self.direction == Direction::FromClient && !self.is_empty() {
            self.own_index = self.geometry.next(self.own_index);
            self.publish_own_index();
        }
    }

    /// `ToClient`: appends `elem` (at most one slot) and publishes it. `EBUSY` if full.
    pub(crate) fn push(&mut self, elem: &[u8]) -> Result {
        if self.direction != Direction::ToClient {
            return Err(EINVAL);
        }
        if self.is_full() {
            return Err(EBUSY);
        }
        if elem.len() > self.geometry.elem_size() {
            return Err(EINVAL);
        }
        self.buf
            .write(self.geometry.elem_offset(self.own_index), elem)?;
        self.own_index = self.geometry.next(self.own_index);
        // Release: the element's bytes are visible before the index that covers them.
        self.publish_own_index();
        Ok(())
    }

    /// Kernel consumers' rings (`FromClient`, no user space): appends `elem` as the producer.
    /// The producer index lives only in the kernel then, so it is read back from the header.
    pub(crate) fn produce(&mut self, elem: &[u8]) -> Result {
        if self.direction != Direction::FromClient || self.mmap.is_some() {
            return Err(EINVAL);
        }
        let producer = self.buf.load_acquire(PRODUCER_INDEX_OFFSET) & self.geometry.index_mask();
        if self.geometry.is_full(producer, self.own_index) {
            return Err(ENOMEM);
        }
        if elem.len() > self.geometry.elem_size() {
            return Err(EINVAL);
        }
        self.buf.write(self.geometry.elem_offset(producer), elem)?;
        self.buf
            .store_release(PRODUCER_INDEX_OFFSET, self.geometry.next(producer));
        Ok(())
    }

    /// Kernel consumers' CQs (`ToClient`, no user space): takes the oldest element as the
    /// consumer. Returns the slot it was in, `None` if empty.
    pub(crate) fn pop_client(&mut self, out: &mut [u8]) -> Option<u32> {
        if self.direction != Direction::ToClient || self.mmap.is_some() || self.is_empty() {
            return None;
        }
        let consumer = self.peer_index();
        let n = out.len().min(self.geometry.elem_size());
        let ok = out.get_mut(..n).is_some_and(|dst| {
            self.buf
                .read(self.geometry.elem_offset(consumer), dst)
                .is_ok()
        });
        if ok {
            self.buf
                .store_release(CONSUMER_INDEX_OFFSET, self.geometry.next(consumer));
        }
        ok.then_some(consumer)
    }

    /// `ToClient`: the slot the next [`Queue::push`] writes.
    pub(crate) fn producer_slot(&self) -> u32 {
        self.own_index
    }

    /// The slots of the queued elements, oldest first (the order [`Queue::take_over`] copies
    /// them in, to slots 0, 1, ...).
    pub(crate) fn queued_slots(&self) -> impl Iterator<Item = u32> + '_ {
        let (producer, consumer) = self.indices();
        let count = self.geometry.count(producer, consumer);
        let mask = self.geometry.index_mask();
        (0..count).map(move |i| consumer.wrapping_add(i) & mask)
    }

    /// Number of slots (one more than the capacity).
    pub(crate) fn slots(&self) -> u32 {
        self.geometry.slots()
    }

    /// Empties the ring (QP reset): both indices back to zero.
    pub(crate) fn reset(&mut self) {
        self.own_index = 0;
        self.buf.store_release(PRODUCER_INDEX_OFFSET, 0);
        self.buf.store_release(CONSUMER_INDEX_OFFSET, 0);
    }

    /// Whether user space maps this ring (its indices and elements are then user-writable).
    pub(crate) fn is_user(&self) -> bool {
        self.mmap.is_some()
    }

    /// The driver's view of the ring now: (consumer, producer), both masked.
    pub(crate) fn span(&self) -> (u32, u32) {
        let (producer, consumer) = self.indices();
        (consumer, producer)
    }

    /// Number of elements from slot `from` up to slot `to` of this ring.
    pub(crate) fn distance(&self, from: u32, to: u32) -> u32 {
        self.geometry.count(to, from)
    }

    /// A handle to read this ring's elements outside the lock that protects it (resize).
    pub(crate) fn source(&self) -> RingSource {
        RingSource {
            buf: self.buf.clone(),
            geometry: self.geometry,
        }
    }

    /// Copies `n` elements of `src`, from its slot `from` on, into this ring's slots `to`,
    /// `to + 1`, ... (resize). `EINVAL` if they do not fit or the rings differ in element size
    /// or direction. The caller bounds `n`: under a spinlock, by a constant; in process context,
    /// see [`Queue::copy_from_preemptible`].
    pub(crate) fn copy_from(&mut self, src: &RingSource, from: u32, to: u32, n: u32) -> Result {
        if src.geometry.elem_size() != self.geometry.elem_size()
            || to.checked_add(n).is_none_or(|end| end > self.capacity())
        {
            return Err(EINVAL);
        }
        let mut chunk = [0u8; 64];
        let elem = self.geometry.elem_size();
        for i in 0..n {
            let (from_off, to_off) = (
                src.geometry.elem_offset(from.wrapping_add(i)),
                self.geometry.elem_offset(to + i),
            );
            let mut done = 0;
            while done < elem {
                let k = chunk.len().min(elem - done);
                let part = chunk.get_mut(..k).ok_or(EINVAL)?;
                src.buf.read(from_off + done, part)?;
                self.buf.write(to_off + done, part)?;
                done += k;
            }
        }
        Ok(())
    }

    /// [`Queue::copy_from`] for a count user space chose (up to a whole ring of the device's
    /// largest size): copies in batches of [`RESIZE_BATCH`] with a scheduling point between
    /// them. Process context, no spinlock held: the [`Preemptible`] token says so.
    pub(crate) fn copy_from_preemptible(
        &mut self,
        src: &RingSource,
        from: u32,
        to: u32,
        n: u32,
        ctx: &Preemptible,
    ) -> Result {
        let mut done = 0;
        while done < n {
            let k = RESIZE_BATCH.min(n - done);
            self.copy_from(src, from.wrapping_add(done), to + done, k)?;
            done += k;
            ctx.cond_resched();
        }
        Ok(())
    }

    /// Sets the indices of a fresh ring that a resize filled: the element at slot `consumer` is
    /// the oldest, `producer` is past the newest. Both at most the capacity.
    pub(crate) fn start_at(&mut self, consumer: u32, producer: u32) -> Result {
        if consumer > producer || producer > self.capacity() {
            return Err(EINVAL);
        }
        match self.direction {
            Direction::ToClient => {
                self.own_index = producer;
                self.buf.store_release(CONSUMER_INDEX_OFFSET, consumer);
                self.buf.store_release(PRODUCER_INDEX_OFFSET, producer);
            }
            Direction::FromClient => {
                self.own_index = consumer;
                self.buf.store_release(CONSUMER_INDEX_OFFSET, consumer);
                self.buf.store_release(PRODUCER_INDEX_OFFSET, producer);
            }
        }
        Ok(())
    }

    /// Copies the queued elements of `old` into this fresh, empty ring, in order (resize of a
    /// kernel consumer's CQ or SRQ, whose indices only the kernel writes). Allocates nothing, so
    /// it may run under the lock that protects `old`; the count is what the kernel consumer
    /// queued, never a user's. `EINVAL` if they do not fit or the rings differ in element size
    /// or direction.
    pub(crate) fn take_over(&mut self, old: &Queue) -> Result {
        if old.direction != self.direction {
            return Err(EINVAL);
        }
        let (consumer, producer) = old.span();
        let count = old.distance(consumer, producer);
        // Checks the element size and that they fit.
        self.copy_from(&old.source(), consumer, 0, count)?;
        self.start_at(0, count)
    }
}
