//! Storage elements of the dedup table and their bookkeeping: the free
//! list and the FIFO ring of finished entries.
//!
//! Element `i` carries slot `i` (key, state, bytes, expiry, free-list
//! link) and two things indexed by position rather than by slot: hash
//! buckets `2i` and `2i + 1`, and ring position `i`. Freeing a slot
//! therefore keeps the position-indexed parts.
//!
//! Slots at and above `high_water` have never been used; the free list
//! holds the others that are free, so construction needs no pass that links
//! every slot.

use core::fmt;
use core::time::Duration;

use super::{DedupKey, DedupState};
use crate::Instant;
use crate::pending::slots::{self, Keyed};

/// End of the free list.
const NONE: u32 = u32::MAX;

/// One storage element of a [`DedupTable`](crate::DedupTable): an entry slot
/// plus its share of the hash buckets and the expiry ring. 56 bytes.
///
/// Opaque: build storage from [`DedupSlot::EMPTY`] (it is `Copy`, so
/// `vec![DedupSlot::EMPTY; n]` works); the table initialises it.
#[derive(Clone, Copy)]
pub struct DedupSlot {
    /// The entry's key; `None` when the slot is free.
    pub(super) key: Option<DedupKey>,
    /// When a finished entry expires.
    pub(super) expiry: Instant,
    /// Response bytes accounted for.
    pub(super) bytes: u64,
    /// The slot at ring position `i`.
    ring: u32,
    /// Next free slot (while this one is free).
    next_free: u32,
    /// Hash buckets `2i` and `2i + 1`.
    buckets: [u32; 2],
    /// The entry's state (meaningless when free).
    pub(super) state: DedupState,
    /// A cancellation of a request not seen yet.
    pub(super) tombstone: bool,
}

impl DedupSlot {
    /// An unused element, for building storage.
    pub const EMPTY: Self = Self {
        key: None,
        expiry: Instant::ZERO,
        bytes: 0,
        ring: 0,
        next_free: NONE,
        buckets: [0; 2],
        state: DedupState::Cancelled,
        tombstone: false,
    };

    /// Same as [`DedupSlot::EMPTY`].
    pub const fn new() -> Self {
        Self::EMPTY
    }
}

impl Default for DedupSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl fmt::Debug for DedupSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DedupSlot")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Keyed for DedupSlot {
    type Key = DedupKey;

    fn key(&self) -> Option<DedupKey> {
        self.key
    }

    fn home(key: DedupKey, count: usize) -> usize {
        // The rank's low bits go to the top, where the bucket is taken
        // from, so equal IDs from different origins spread apart.
        let hash = slots::mix(key.id.get() ^ u64::from(key.origin.get()).rotate_right(16));
        slots::home(hash, count)
    }

    fn buckets(&self) -> &[u32; 2] {
        &self.buckets
    }

    fn buckets_mut(&mut self) -> &mut [u32; 2] {
        &mut self.buckets
    }
}

/// The free list and the expiry ring; the cells live in the table's
/// storage.
#[derive(Debug, Clone, Copy)]
pub(super) struct Book {
    free_head: u32,
    /// Slots at and above this index have never been used.
    high_water: u32,
    ring_head: u32,
    ring_len: u32,
    /// Expiry of the most recently finished entry.
    last_expiry: Instant,
}

impl Book {
    /// Bookkeeping for storage that holds only [`DedupSlot::EMPTY`].
    pub(super) const fn new() -> Self {
        Self {
            free_head: NONE,
            high_water: 0,
            ring_head: 0,
            ring_len: 0,
            last_expiry: Instant::ZERO,
        }
    }

    /// Takes a free slot, if any.
    pub(super) fn allocate(&mut self, cells: &[DedupSlot]) -> Option<usize> {
        if self.free_head != NONE {
            let slot = self.free_head as usize;
            self.free_head = cells[slot].next_free;
            Some(slot)
        } else if (self.high_water as usize) < cells.len() {
            self.high_water += 1;
            Some(self.high_water as usize - 1)
        } else {
            None
        }
    }

    /// Frees `slot` (already unlinked from the hash and the ring).
    pub(super) fn release(&mut self, cells: &mut [DedupSlot], slot: usize) {
        let cell = &mut cells[slot];
        *cell = DedupSlot {
            buckets: cell.buckets,
            ring: cell.ring,
            next_free: self.free_head,
            ..DedupSlot::EMPTY
        };
        self.free_head = slot as u32;
    }

    /// The expiry of an entry finishing at `now`: `now + ttl`, but never
    /// before the previous entry's, so the ring stays sorted. `None` on
    /// overflow.
    #[inline]
    pub(super) fn expiry_after(&self, now: Instant, ttl: Duration) -> Option<Instant> {
        now.checked_add(ttl)
            .map(|expiry| expiry.max(self.last_expiry))
    }

    /// Appends the finished `slot` with `expiry` (from
    /// [`expiry_after`](Self::expiry_after)) to the ring.
    pub(super) fn push_finished(&mut self, cells: &mut [DedupSlot], slot: usize, expiry: Instant) {
        cells[slot].expiry = expiry;
        let at = (self.ring_head as usize + self.ring_len as usize) % cells.len();
        cells[at].ring = slot as u32;
        self.ring_len += 1;
        self.last_expiry = expiry;
    }

    /// The slot that finished first, if any.
    pub(super) fn oldest(&self, cells: &[DedupSlot]) -> Option<usize> {
        (self.ring_len > 0).then(|| cells[self.ring_head as usize].ring as usize)
    }

    /// Removes and returns the slot that finished first.
    pub(super) fn pop_oldest(&mut self, cells: &[DedupSlot]) -> Option<usize> {
        let slot = self.oldest(cells)?;
        let next = self.ring_head as usize + 1;
        self.ring_head = if next == cells.len() { 0 } else { next as u32 };
        self.ring_len -= 1;
        Some(slot)
    }
}
