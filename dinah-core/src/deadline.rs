//! A deadline queue over fixed storage: sorted runs with a heap for the
//! rest (`timers.rs`).
//!
//! The contract, algorithm and storage forms are documented on
//! [`DeadlineQueue`], where users of the crate see them.

mod spill;
pub(crate) mod timers;

use core::fmt;
use core::time::Duration;

use self::timers::{Cursor, NIL, Timers, VACANT};
use crate::Instant;

/// The largest capacity of any table in this crate ([`DeadlineQueue`],
/// [`PendingTable`](crate::PendingTable), [`DedupTable`](crate::DedupTable)):
/// `2^31 - 1` entries, so slot indices and the hash tables' `2 * capacity`
/// buckets fit in a `u32`.
pub const MAX_TABLE_CAPACITY: usize = (u32::MAX >> 1) as usize;

/// One storage element of a [`DeadlineQueue`] (and of every
/// [`PendingSlot`](crate::PendingSlot)): 32 bytes.
///
/// Opaque: build storage from [`DeadlineSlot::EMPTY`] (it is `Copy`, so
/// `vec![DeadlineSlot::EMPTY; n]` works); the queue initialises it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DeadlineSlot {
    /// This slot's deadline, while it has one.
    deadline: Instant,
    /// This slot's insertion sequence (the tie-break for equal deadlines).
    seq: u64,
    /// The previous and next slot in this slot's run, or in the free list.
    prev: u32,
    next: u32,
    /// Where this slot is: vacant, in a run, or at a heap position.
    place: u32,
    /// The slot at heap position `index` (for indices inside the heap).
    heap: u32,
}

impl DeadlineSlot {
    /// An uninitialised element, for building storage.
    pub const EMPTY: Self = Self {
        deadline: Instant::ZERO,
        seq: 0,
        prev: NIL,
        next: NIL,
        place: VACANT,
        heap: 0,
    };

    /// Same as [`DeadlineSlot::EMPTY`].
    pub const fn new() -> Self {
        Self::EMPTY
    }

    /// Element `index` of `count` in a queue with no entries: vacant, and
    /// linked into the free list in index order.
    pub(crate) const fn vacant(index: u32, count: u32) -> Self {
        Self {
            prev: if index == 0 { NIL } else { index - 1 },
            next: if index + 1 >= count { NIL } else { index + 1 },
            ..Self::EMPTY
        }
    }
}

impl Default for DeadlineSlot {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl fmt::Debug for DeadlineSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlineSlot").finish_non_exhaustive()
    }
}

/// A [`DeadlineQueue`] operation was refused; the queue is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeadlineError {
    /// Every slot already has a deadline (resource exhaustion).
    Full {
        /// The queue's capacity.
        capacity: usize,
    },
    /// The slot is not below the capacity.
    SlotOutOfRange {
        /// The offending slot.
        slot: usize,
        /// The queue's capacity.
        capacity: usize,
    },
    /// The slot already has a deadline (use
    /// [`reschedule`](DeadlineQueue::reschedule) to change it).
    Occupied {
        /// The slot.
        slot: usize,
    },
    /// `now + timeout` is past [`Instant::MAX`].
    Overflow {
        /// The start instant.
        now: Instant,
        /// The timeout added to it.
        timeout: Duration,
    },
}

impl fmt::Display for DeadlineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { capacity } => {
                write!(f, "deadline queue is full ({capacity} slots)")
            }
            Self::SlotOutOfRange { slot, capacity } => write!(
                f,
                "deadline slot {slot} is out of range for a capacity of {capacity}"
            ),
            Self::Occupied { slot } => write!(f, "deadline slot {slot} is already scheduled"),
            Self::Overflow { now, timeout } => {
                write!(f, "deadline {now} + {timeout:?} overflows the clock")
            }
        }
    }
}

impl core::error::Error for DeadlineError {}

/// `now + timeout`, or [`DeadlineError::Overflow`].
pub(crate) fn deadline_after(now: Instant, timeout: Duration) -> Result<Instant, DeadlineError> {
    now.checked_add(timeout)
        .ok_or(DeadlineError::Overflow { now, timeout })
}

/// Storage offered to a table's `with_storage` cannot back a table:
/// [`DeadlineQueue`], [`PendingTable`](crate::PendingTable) or
/// [`DedupTable`](crate::DedupTable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TableStorageError {
    /// The storage has no slots; a table needs at least one.
    Empty,
    /// The storage has more than [`MAX_TABLE_CAPACITY`] slots.
    TooLarge {
        /// The number of slots offered.
        slots: usize,
    },
}

impl fmt::Display for TableStorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("table storage has no slots"),
            Self::TooLarge { slots } => write!(
                f,
                "table storage of {slots} slots exceeds the limit of {MAX_TABLE_CAPACITY}"
            ),
        }
    }
}

impl core::error::Error for TableStorageError {}

/// Checks that `slots` is a valid table capacity.
pub(crate) const fn check_capacity(slots: usize) -> Result<(), TableStorageError> {
    if slots == 0 {
        Err(TableStorageError::Empty)
    } else if slots > MAX_TABLE_CAPACITY {
        Err(TableStorageError::TooLarge { slots })
    } else {
        Ok(())
    }
}

/// A deadline queue over fixed storage.
///
/// [`DeadlineQueue`] keeps one deadline per *slot*, a small integer in
/// `0..capacity` that the caller uses to index its own storage (the
/// [`PendingTable`](crate::PendingTable) uses it for its entries). It hands
/// back what has expired in deadline order, and removes or reschedules any
/// slot without searching, because each slot records where it is queued.
///
/// # Algorithm
///
/// Entries are ordered by `(deadline, insertion sequence)`, so entries
/// with equal deadlines leave in the order they were inserted. Most
/// deadlines arrive in order (one timeout for most entries, a clock that
/// only moves forward), so an entry whose deadline is at or after the tail
/// of one of four **sorted runs** is appended to it: a run is a doubly
/// linked list through the storage, sorted because it only grows at its
/// tail, and any entry leaves it in O(1). An entry earlier than every run's
/// tail goes to an indexed binary min-heap in the same storage instead.
/// Each storage element ([`DeadlineSlot`], 32 bytes) holds its slot's
/// deadline, sequence, run or free-list links and place, plus the heap's
/// entry at its index; vacant slots form a free list, so one is always at
/// hand. With `h` entries in the heap:
///
/// | operation | cost |
/// | --- | --- |
/// | [`insert`](DeadlineQueue::insert), [`insert_vacant`](DeadlineQueue::insert_vacant), [`remove`](DeadlineQueue::remove), [`reschedule`](DeadlineQueue::reschedule), [`pop_expired`](DeadlineQueue::pop_expired) | O(1) in a run, O(log h) in the heap |
/// | [`peek`](DeadlineQueue::peek), [`deadline`](DeadlineQueue::deadline), [`contains`](DeadlineQueue::contains) | O(1) |
/// | [`clear`](DeadlineQueue::clear) | O(len) |
///
/// Nothing ever scans the table: expiry looks only at the four run heads
/// and the heap's root.
///
/// # Storage
///
/// Every table in this crate comes in two forms that share one type: the
/// storage parameter `S` is either an array (`[DeadlineSlot; N]`, built by
/// the `const fn` [`DeadlineQueue::new`], so a queue can sit in a `static`;
/// [`ArrayDeadlineQueue`] names it) or anything the caller sized once, such
/// as a `Box<[DeadlineSlot]>`, a `Vec` or a `&'static mut [DeadlineSlot]`
/// ([`DeadlineQueue::with_storage`]). The capacity is the storage length and
/// never changes; `S::as_mut` must keep returning the same slice.
///
/// An entry's deadline has passed when it is **at or before** `now`. Time
/// is the caller's [`Instant`]; [`insert_after`](DeadlineQueue::insert_after)
/// computes `now + timeout` with checked arithmetic and reports overflow.
///
/// # Examples
///
/// ```
/// use dinah_core::{ArrayDeadlineQueue, DeadlineError, Instant};
///
/// let mut timers = ArrayDeadlineQueue::<8>::new();
/// timers.insert(3, Instant::from_nanos(50))?;
/// timers.insert(5, Instant::from_nanos(20))?;
/// let any = timers.insert_vacant(Instant::from_nanos(20))?;
///
/// let now = Instant::from_nanos(30);
/// assert_eq!(timers.pop_expired(now), Some((5, Instant::from_nanos(20))));
/// assert_eq!(timers.pop_expired(now), Some((any, Instant::from_nanos(20))));
/// assert_eq!(timers.pop_expired(now), None);
/// assert_eq!(timers.next_deadline(), Some(Instant::from_nanos(50)));
/// # Ok::<(), DeadlineError>(())
/// ```
pub struct DeadlineQueue<S> {
    storage: S,
    timers: Timers,
}

/// A [`DeadlineQueue`] that stores `N` slots inline.
pub type ArrayDeadlineQueue<const N: usize> = DeadlineQueue<[DeadlineSlot; N]>;

impl<const N: usize> DeadlineQueue<[DeadlineSlot; N]> {
    /// An empty queue of `N` slots, usable in a `static`.
    ///
    /// `N` must be between 1 and [`MAX_TABLE_CAPACITY`]; anything else is a
    /// compile-time error.
    pub const fn new() -> Self {
        const {
            assert!(N > 0, "a deadline queue needs at least one slot");
            assert!(N <= MAX_TABLE_CAPACITY, "capacity above MAX_TABLE_CAPACITY");
        }
        let mut storage = [DeadlineSlot::EMPTY; N];
        let mut index = 0;
        while index < N {
            storage[index] = DeadlineSlot::vacant(index as u32, N as u32);
            index += 1;
        }
        Self {
            storage,
            timers: Timers::new(),
        }
    }
}

impl<const N: usize> Default for DeadlineQueue<[DeadlineSlot; N]> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> DeadlineQueue<S>
where
    S: AsRef<[DeadlineSlot]> + AsMut<[DeadlineSlot]>,
{
    /// An empty queue over `storage`, whose length is the capacity
    /// (whatever it held is overwritten).
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{DeadlineQueue, DeadlineSlot, Instant, TableStorageError};
    ///
    /// let mut storage = [DeadlineSlot::EMPTY; 16];
    /// let mut timers = DeadlineQueue::with_storage(&mut storage[..])?;
    /// assert_eq!(timers.capacity(), 16);
    /// assert_eq!(timers.insert_vacant(Instant::from_nanos(7)), Ok(0));
    ///
    /// let empty: &mut [DeadlineSlot] = &mut [];
    /// assert_eq!(DeadlineQueue::with_storage(empty).err(), Some(TableStorageError::Empty));
    /// # Ok::<(), TableStorageError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`TableStorageError`] if `storage` is empty or longer than
    /// [`MAX_TABLE_CAPACITY`].
    pub fn with_storage(mut storage: S) -> Result<Self, TableStorageError> {
        check_capacity(storage.as_ref().len())?;
        let mut timers = Timers::new();
        timers.reset(storage.as_mut());
        Ok(Self { storage, timers })
    }

    /// How many slots the queue has.
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().len()
    }

    /// How many slots have a deadline.
    pub fn len(&self) -> usize {
        self.timers.len()
    }

    /// Does no slot have a deadline?
    pub fn is_empty(&self) -> bool {
        self.timers.len() == 0
    }

    /// Does every slot have a deadline?
    pub fn is_full(&self) -> bool {
        self.timers.len() == self.capacity()
    }

    fn check_slot(&self, slot: usize) -> Result<(), DeadlineError> {
        let capacity = self.capacity();
        if slot < capacity {
            Ok(())
        } else {
            Err(DeadlineError::SlotOutOfRange { slot, capacity })
        }
    }

    /// Gives `slot` the deadline `deadline`.
    ///
    /// # Errors
    ///
    /// [`DeadlineError::SlotOutOfRange`] or [`DeadlineError::Occupied`];
    /// the queue is unchanged.
    pub fn insert(&mut self, slot: usize, deadline: Instant) -> Result<(), DeadlineError> {
        self.check_slot(slot)?;
        let cells = self.storage.as_mut();
        if self.timers.contains(cells, slot) {
            return Err(DeadlineError::Occupied { slot });
        }
        self.timers.insert(cells, slot, deadline);
        Ok(())
    }

    /// Gives `slot` the deadline `now + timeout` and returns it.
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert), plus [`DeadlineError::Overflow`].
    pub fn insert_after(
        &mut self,
        slot: usize,
        now: Instant,
        timeout: Duration,
    ) -> Result<Instant, DeadlineError> {
        let deadline = deadline_after(now, timeout)?;
        self.insert(slot, deadline).map(|()| deadline)
    }

    /// Gives some vacant slot the deadline `deadline` and returns the slot
    /// (the one most recently vacated, else the lowest never used): the
    /// queue doubles as a slot allocator.
    ///
    /// # Errors
    ///
    /// [`DeadlineError::Full`] if no slot is vacant.
    pub fn insert_vacant(&mut self, deadline: Instant) -> Result<usize, DeadlineError> {
        let cells = self.storage.as_mut();
        let Some(slot) = self.timers.vacant() else {
            return Err(DeadlineError::Full {
                capacity: cells.len(),
            });
        };
        self.timers.insert(cells, slot, deadline);
        Ok(slot)
    }

    /// Removes `slot`'s deadline and returns it (`None` if it had none or
    /// is out of range).
    pub fn remove(&mut self, slot: usize) -> Option<Instant> {
        self.check_slot(slot).ok()?;
        let cells = self.storage.as_mut();
        self.timers
            .contains(cells, slot)
            .then(|| self.timers.remove(cells, slot))
    }

    /// Changes `slot`'s deadline, queueing it behind entries that already
    /// have the new deadline; returns the old deadline (`None`, and no
    /// change, if it had none or is out of range).
    pub fn reschedule(&mut self, slot: usize, deadline: Instant) -> Option<Instant> {
        self.check_slot(slot).ok()?;
        let cells = self.storage.as_mut();
        self.timers
            .contains(cells, slot)
            .then(|| self.timers.reschedule(cells, slot, deadline))
    }

    /// `slot`'s deadline, if it has one.
    pub fn deadline(&self, slot: usize) -> Option<Instant> {
        self.check_slot(slot).ok()?;
        self.timers.deadline(self.storage.as_ref(), slot)
    }

    /// Does `slot` have a deadline?
    pub fn contains(&self, slot: usize) -> bool {
        self.deadline(slot).is_some()
    }

    /// The earliest entry (ties: the first inserted).
    pub fn peek(&self) -> Option<(usize, Instant)> {
        self.timers.peek(self.storage.as_ref())
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.peek().map(|(_, deadline)| deadline)
    }

    /// Removes and returns the earliest entry, expired or not.
    pub fn pop(&mut self) -> Option<(usize, Instant)> {
        let cells = self.storage.as_mut();
        let (slot, _) = self.timers.peek(cells)?;
        Some((slot, self.timers.remove(cells, slot)))
    }

    /// Removes and returns the earliest entry if its deadline is at or
    /// before `now`; `None` otherwise. Repeated calls yield every expired
    /// entry in deadline order.
    pub fn pop_expired(&mut self, now: Instant) -> Option<(usize, Instant)> {
        match self.peek() {
            Some((_, deadline)) if deadline <= now => self.pop(),
            _ => None,
        }
    }

    /// An iterator that pops expired entries as it is advanced (see
    /// [`pop_expired`](Self::pop_expired)); stop early, for example with
    /// `take(batch)`, to bound the work, and the rest stays queued.
    pub fn drain_expired(&mut self, now: Instant) -> DrainExpiredSlots<'_, S> {
        DrainExpiredSlots { queue: self, now }
    }

    /// Every entry as `(slot, deadline)`, in no particular order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (usize, Instant)> + '_ {
        let cells = self.storage.as_ref();
        let timers = &self.timers;
        let mut cursor = Cursor::START;
        let entries = core::iter::from_fn(move || timers.next_entry(cells, &mut cursor));
        ExactLen::new(entries, timers.len())
    }

    /// Removes every deadline, in O(len).
    pub fn clear(&mut self) {
        self.timers.clear(self.storage.as_mut());
    }
}

impl<S> fmt::Debug for DeadlineQueue<S>
where
    S: AsRef<[DeadlineSlot]> + AsMut<[DeadlineSlot]>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlineQueue")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

/// Pops expired entries of a [`DeadlineQueue`]; see
/// [`DeadlineQueue::drain_expired`].
pub struct DrainExpiredSlots<'a, S> {
    queue: &'a mut DeadlineQueue<S>,
    now: Instant,
}

impl<S> Iterator for DrainExpiredSlots<'_, S>
where
    S: AsRef<[DeadlineSlot]> + AsMut<[DeadlineSlot]>,
{
    type Item = (usize, Instant);

    fn next(&mut self) -> Option<Self::Item> {
        self.queue.pop_expired(self.now)
    }
}

impl<S> fmt::Debug for DrainExpiredSlots<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrainExpiredSlots")
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;

/// An iterator of a known length.
pub(crate) struct ExactLen<I> {
    inner: I,
    left: usize,
}

impl<I> ExactLen<I> {
    pub(crate) fn new(inner: I, len: usize) -> Self {
        Self { inner, left: len }
    }
}

impl<I: Iterator> Iterator for ExactLen<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let item = self.inner.next()?;
        self.left = self.left.saturating_sub(1);
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<I: Iterator> ExactSizeIterator for ExactLen<I> {}
