//! A deadline queue over fixed storage: an indexed binary min-heap.
//!
//! The contract, algorithm and storage forms are documented on
//! [`DeadlineQueue`], where users of the crate see them.

pub(crate) mod heap;

use core::fmt;
use core::time::Duration;

use self::heap::Heap;
use crate::Instant;

/// The largest capacity of any table in this crate ([`DeadlineQueue`],
/// [`PendingTable`](crate::PendingTable), [`DedupTable`](crate::DedupTable)):
/// `2^31 - 1` entries, so slot indices and the hash tables' `2 * capacity`
/// buckets fit in a `u32`.
pub const MAX_TABLE_CAPACITY: usize = (u32::MAX >> 1) as usize;

/// One storage element of a [`DeadlineQueue`] (and of every
/// [`PendingSlot`](crate::PendingSlot)): 24 bytes.
///
/// Opaque: build storage from [`DeadlineSlot::EMPTY`] (it is `Copy`, so
/// `vec![DeadlineSlot::EMPTY; n]` works); the queue initialises it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DeadlineSlot {
    /// Deadline of the heap node at this position.
    deadline: Instant,
    /// Insertion sequence of the heap node at this position (tie-break).
    seq: u64,
    /// Slot of the heap node at this position.
    slot: u32,
    /// Heap position of the slot with this index.
    pos: u32,
}

impl DeadlineSlot {
    /// An uninitialised element, for building storage.
    pub const EMPTY: Self = Self {
        deadline: Instant::ZERO,
        seq: 0,
        slot: 0,
        pos: 0,
    };

    /// Same as [`DeadlineSlot::EMPTY`].
    pub const fn new() -> Self {
        Self::EMPTY
    }

    /// Element `index` of a queue with no entries: the vacant node for slot
    /// `index` sits at position `index`.
    pub(crate) const fn identity(index: u32) -> Self {
        Self {
            deadline: Instant::ZERO,
            seq: 0,
            slot: index,
            pos: index,
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

/// A deadline queue over fixed storage: an indexed binary min-heap.
///
/// [`DeadlineQueue`] keeps one deadline per *slot*, a small integer in
/// `0..capacity` that the caller uses to index its own storage (the
/// [`PendingTable`](crate::PendingTable) uses it for its entries). It hands
/// back what has expired in deadline order, and removes or reschedules any
/// slot in O(log n) because it tracks where each slot sits in the heap.
///
/// # Algorithm
///
/// A binary min-heap ordered by `(deadline, insertion sequence)`, so entries
/// with equal deadlines leave in the order they were inserted. Each storage
/// element ([`DeadlineSlot`], 24 bytes) holds the heap node at its index and
/// the heap position of the slot with its index; the nodes form a
/// permutation of all slots, so the vacant slots sit after the live heap
/// and one is always at hand without a free list.
///
/// | operation | cost |
/// | --- | --- |
/// | [`insert`](DeadlineQueue::insert), [`insert_vacant`](DeadlineQueue::insert_vacant), [`remove`](DeadlineQueue::remove), [`reschedule`](DeadlineQueue::reschedule), [`pop_expired`](DeadlineQueue::pop_expired) | O(log n) |
/// | [`peek`](DeadlineQueue::peek), [`deadline`](DeadlineQueue::deadline), [`contains`](DeadlineQueue::contains), [`clear`](DeadlineQueue::clear) | O(1) |
///
/// Nothing ever scans the table: expiry looks only at the root.
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
    heap: Heap,
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
            storage[index] = DeadlineSlot::identity(index as u32);
            index += 1;
        }
        Self {
            storage,
            heap: Heap::new(),
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
        let mut heap = Heap::new();
        heap.reset(storage.as_mut());
        Ok(Self { storage, heap })
    }

    /// How many slots the queue has.
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().len()
    }

    /// How many slots have a deadline.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Does no slot have a deadline?
    pub fn is_empty(&self) -> bool {
        self.heap.len() == 0
    }

    /// Does every slot have a deadline?
    pub fn is_full(&self) -> bool {
        self.heap.len() == self.capacity()
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
        if self.heap.contains(cells, slot) {
            return Err(DeadlineError::Occupied { slot });
        }
        self.heap.insert(cells, slot, deadline);
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

    /// Gives some vacant slot the deadline `deadline` and returns the slot,
    /// in O(log n): the queue doubles as a slot allocator.
    ///
    /// # Errors
    ///
    /// [`DeadlineError::Full`] if no slot is vacant.
    pub fn insert_vacant(&mut self, deadline: Instant) -> Result<usize, DeadlineError> {
        let cells = self.storage.as_mut();
        let Some(slot) = self.heap.vacant(cells) else {
            return Err(DeadlineError::Full {
                capacity: cells.len(),
            });
        };
        self.heap.insert(cells, slot, deadline);
        Ok(slot)
    }

    /// Removes `slot`'s deadline and returns it (`None` if it had none or
    /// is out of range).
    pub fn remove(&mut self, slot: usize) -> Option<Instant> {
        self.check_slot(slot).ok()?;
        let cells = self.storage.as_mut();
        self.heap
            .contains(cells, slot)
            .then(|| self.heap.remove(cells, slot))
    }

    /// Changes `slot`'s deadline, queueing it behind entries that already
    /// have the new deadline; returns the old deadline (`None`, and no
    /// change, if it had none or is out of range).
    pub fn reschedule(&mut self, slot: usize, deadline: Instant) -> Option<Instant> {
        self.check_slot(slot).ok()?;
        let cells = self.storage.as_mut();
        self.heap
            .contains(cells, slot)
            .then(|| self.heap.reschedule(cells, slot, deadline))
    }

    /// `slot`'s deadline, if it has one.
    pub fn deadline(&self, slot: usize) -> Option<Instant> {
        self.check_slot(slot).ok()?;
        self.heap.deadline(self.storage.as_ref(), slot)
    }

    /// Does `slot` have a deadline?
    pub fn contains(&self, slot: usize) -> bool {
        self.deadline(slot).is_some()
    }

    /// The earliest entry (ties: the first inserted).
    pub fn peek(&self) -> Option<(usize, Instant)> {
        self.heap.peek(self.storage.as_ref())
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.peek().map(|(_, deadline)| deadline)
    }

    /// Removes and returns the earliest entry, expired or not.
    pub fn pop(&mut self) -> Option<(usize, Instant)> {
        let cells = self.storage.as_mut();
        let (slot, _) = self.heap.peek(cells)?;
        Some((slot, self.heap.remove(cells, slot)))
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

    /// Every entry as `(slot, deadline)`, in heap order (not sorted).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (usize, Instant)> + '_ {
        let cells = self.storage.as_ref();
        (0..self.heap.len()).map(move |at| Heap::at(cells, at))
    }

    /// Removes every deadline in O(1).
    pub fn clear(&mut self) {
        self.heap.clear();
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
