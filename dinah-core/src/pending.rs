//! The pending-call table: calls this rank issued and still waits for.
//!
//! The contract, algorithm and storage forms are documented on
//! [`PendingTable`], where users of the crate see them.

mod error;
mod iter;
pub(crate) mod slots;

use core::fmt;
use core::time::Duration;

pub use self::error::*;
pub use self::iter::*;
use self::slots::{Keyed, Probe};
use crate::TableStorageError;
use crate::deadline::timers::{TimerCell, Timers};
use crate::deadline::{DeadlineSlot, MAX_TABLE_CAPACITY, check_capacity, deadline_after};
use crate::{Instant, RequestId};

/// One storage element of a [`PendingTable`]: an entry slot plus its share
/// of the hash buckets and the deadline heap.
///
/// Opaque: build storage from [`PendingSlot::EMPTY`] (or `Default`); the
/// table initialises it.
pub struct PendingSlot<P> {
    timer: DeadlineSlot,
    entry: Option<(RequestId, P)>,
    buckets: [u32; 2],
}

impl<P> PendingSlot<P> {
    /// An unused element, for building storage (`[const { PendingSlot::EMPTY }; N]`).
    pub const EMPTY: Self = Self {
        timer: DeadlineSlot::EMPTY,
        entry: None,
        buckets: [0; 2],
    };

    /// Same as [`PendingSlot::EMPTY`].
    pub const fn new() -> Self {
        Self::EMPTY
    }
}

impl<P> Default for PendingSlot<P> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<P: Clone> Clone for PendingSlot<P> {
    fn clone(&self) -> Self {
        Self {
            timer: self.timer,
            entry: self.entry.clone(),
            buckets: self.buckets,
        }
    }
}

impl<P> fmt::Debug for PendingSlot<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingSlot")
            .field("id", &self.entry.as_ref().map(|(id, _)| *id))
            .finish_non_exhaustive()
    }
}

impl<P> TimerCell for PendingSlot<P> {
    fn timer(&self) -> &DeadlineSlot {
        &self.timer
    }

    fn timer_mut(&mut self) -> &mut DeadlineSlot {
        &mut self.timer
    }
}

impl<P> Keyed for PendingSlot<P> {
    type Key = RequestId;

    fn key(&self) -> Option<RequestId> {
        self.entry.as_ref().map(|(id, _)| *id)
    }

    fn home(key: RequestId, count: usize) -> usize {
        let id = key.get();
        slots::run_home(slots::mix(id / slots::ID_RUN), id % slots::ID_RUN, count)
    }

    fn buckets(&self) -> &[u32; 2] {
        &self.buckets
    }

    fn buckets_mut(&mut self) -> &mut [u32; 2] {
        &mut self.buckets
    }
}

/// The pending-call table: calls this rank issued and still waits for.
///
/// [`PendingTable`] maps a [`RequestId`] to the caller's waiter handle `P`
/// (for example the index of a future's completion cell) and that call's
/// deadline. A result removes the entry with [`complete`](PendingTable::complete);
/// a result for an ID that is no longer pending (it expired, was dropped or
/// already completed) is reported as a [`LateResult`] and never recreates
/// an entry. [`pop_expired`](PendingTable::pop_expired) hands back calls
/// whose deadline has passed, earliest first.
///
/// # Algorithm
///
/// One storage element ([`PendingSlot`]) per call holds the entry, two
/// buckets of an open-addressing hash table and one cell of the
/// [`DeadlineQueue`](crate::DeadlineQueue) timers:
///
/// - lookup by ID: `2 * capacity` buckets (load factor at most ½), a fixed
///   multiplicative (Fibonacci) hash of the ID, linear probing and
///   backward-shift deletion (no tombstones); O(1) expected;
/// - deadlines: the sorted runs and spill heap of
///   [`DeadlineQueue`](crate::DeadlineQueue), ordered by `(deadline,
///   insertion order)`; insert, remove and expire are O(1) for a deadline
///   that fits a run (the common case: most calls share one timeout) and
///   O(log h) for the `h` that spilled to the heap, and never scan;
/// - a free slot is always found in O(1) (vacant slots form a free list).
///
/// | operation | cost |
/// | --- | --- |
/// | [`insert`](PendingTable::insert), [`remove`](PendingTable::remove), [`complete`](PendingTable::complete), [`pop_expired`](PendingTable::pop_expired) | O(1) in a run, O(log h) in the heap (+ O(1) expected probing) |
/// | [`get`](PendingTable::get), [`contains`](PendingTable::contains), [`deadline`](PendingTable::deadline) | O(1) expected |
/// | [`next_deadline`](PendingTable::next_deadline), [`len`](PendingTable::len) | O(1) |
///
/// # Storage
///
/// As for every table here, the storage parameter is an array
/// (`[PendingSlot<P>; N]`, [`ArrayPendingTable`], `const fn`
/// [`PendingTable::new`]) or storage the caller sized once from
/// [`RuntimeLimits::max_pending_calls`](crate::RuntimeLimits::max_pending_calls)
/// ([`PendingTable::with_storage`], for example a `Box<[PendingSlot<P>]>`).
/// A slot is 40 bytes plus `(RequestId, P)` (the `Option` around it is
/// free: the ID has a niche), so 56 bytes for any handle of at most 8
/// bytes. Nothing grows after construction; a full
/// table refuses new calls with [`PendingInsertError::Full`].
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use dinah_core::{
///     ArrayPendingTable, Instant, LateResult, PendingInsertError, RequestId,
/// };
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut pending = ArrayPendingTable::<u32, 64>::new();
/// let now = Instant::from_nanos(0);
/// let (a, b) = (RequestId::new(1)?, RequestId::new(2)?);
/// pending.insert_after(a, now, Duration::from_millis(5), 10)?;
/// pending.insert_after(b, now, Duration::from_millis(1), 20)?;
///
/// assert_eq!(pending.complete(a), Ok(10));
/// assert_eq!(pending.complete(a), Err(LateResult { id: a }));
///
/// let later = Instant::from_nanos(2_000_000);
/// assert_eq!(pending.pop_expired(later), Some((b, 20)));
/// assert!(pending.is_empty());
///
/// let error = pending.insert(b, Instant::MAX, 30).and_then(|()| pending.insert(b, later, 40));
/// assert!(matches!(error, Err(PendingInsertError::Duplicate { .. })));
/// assert_eq!(error.unwrap_err().into_inner(), 40);
/// # Ok(())
/// # }
/// ```
pub struct PendingTable<P, S> {
    storage: S,
    timers: Timers,
    _handle: core::marker::PhantomData<fn() -> P>,
}

/// A [`PendingTable`] that stores `N` slots inline.
pub type ArrayPendingTable<P, const N: usize> = PendingTable<P, [PendingSlot<P>; N]>;

impl<P, const N: usize> PendingTable<P, [PendingSlot<P>; N]> {
    /// An empty table of `N` slots, usable in a `static`.
    ///
    /// `N` must be between 1 and [`MAX_TABLE_CAPACITY`]; anything else is a
    /// compile-time error.
    pub const fn new() -> Self {
        const {
            assert!(N > 0, "a pending table needs at least one slot");
            assert!(N <= MAX_TABLE_CAPACITY, "capacity above MAX_TABLE_CAPACITY");
        }
        let mut storage = [const { PendingSlot::EMPTY }; N];
        let mut index = 0;
        while index < N {
            storage[index].timer = DeadlineSlot::vacant(index as u32, N as u32);
            index += 1;
        }
        Self {
            storage,
            timers: Timers::new(),
            _handle: core::marker::PhantomData,
        }
    }
}

impl<P, const N: usize> Default for PendingTable<P, [PendingSlot<P>; N]> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P, S> PendingTable<P, S>
where
    S: AsRef<[PendingSlot<P>]> + AsMut<[PendingSlot<P>]>,
{
    /// An empty table over `storage`, whose length is the capacity. Values
    /// left in the storage are dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{PendingSlot, PendingTable, RuntimeLimits, TableStorageError};
    ///
    /// let limits = RuntimeLimits::default();
    /// let storage: Box<[PendingSlot<u32>]> = (0..limits.max_pending_calls)
    ///     .map(|_| PendingSlot::EMPTY)
    ///     .collect();
    /// let pending = PendingTable::with_storage(storage)?;
    /// assert_eq!(pending.capacity(), 1024);
    /// # Ok::<(), TableStorageError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`TableStorageError`] if `storage` is empty or longer than
    /// [`MAX_TABLE_CAPACITY`].
    pub fn with_storage(mut storage: S) -> Result<Self, TableStorageError> {
        let cells = storage.as_mut();
        check_capacity(cells.len())?;
        for cell in cells.iter_mut() {
            cell.entry = None;
        }
        slots::clear(cells);
        let mut timers = Timers::new();
        timers.reset(cells);
        Ok(Self {
            storage,
            timers,
            _handle: core::marker::PhantomData,
        })
    }

    /// How many calls the table can hold.
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().len()
    }

    /// How many calls are pending.
    pub fn len(&self) -> usize {
        self.timers.len()
    }

    /// Is no call pending?
    pub fn is_empty(&self) -> bool {
        self.timers.len() == 0
    }

    /// Is every slot taken?
    pub fn is_full(&self) -> bool {
        self.timers.len() == self.capacity()
    }

    /// Records the call `id`, waited on by `value`, with deadline
    /// `deadline`.
    ///
    /// # Errors
    ///
    /// [`PendingInsertError::Duplicate`] if `id` is already pending (checked
    /// first), [`PendingInsertError::Full`] if every slot is taken
    /// (resource exhaustion). Either way the table is unchanged and the
    /// error gives `value` back.
    #[inline]
    pub fn insert(
        &mut self,
        id: RequestId,
        deadline: Instant,
        value: P,
    ) -> Result<(), PendingInsertError<P>> {
        let cells = self.storage.as_mut();
        let bucket = match slots::find(cells, id) {
            Probe::Found { .. } => return Err(PendingInsertError::Duplicate { id, value }),
            Probe::Vacant { bucket } => bucket,
        };
        let Some(slot) = self.timers.vacant() else {
            return Err(PendingInsertError::Full {
                capacity: cells.len(),
                value,
            });
        };
        cells[slot].entry = Some((id, value));
        slots::link(cells, bucket, slot);
        self.timers.insert(cells, slot, deadline);
        Ok(())
    }

    /// Records the call `id` with deadline `now + timeout` and returns that
    /// deadline.
    ///
    /// # Errors
    ///
    /// As [`insert`](Self::insert), plus
    /// [`PendingInsertError::DeadlineOverflow`] if the deadline is past
    /// [`Instant::MAX`] (checked first).
    pub fn insert_after(
        &mut self,
        id: RequestId,
        now: Instant,
        timeout: Duration,
        value: P,
    ) -> Result<Instant, PendingInsertError<P>> {
        let Ok(deadline) = deadline_after(now, timeout) else {
            return Err(PendingInsertError::DeadlineOverflow {
                now,
                timeout,
                value,
            });
        };
        self.insert(id, deadline, value).map(|()| deadline)
    }

    fn slot_of(&self, id: RequestId) -> Option<usize> {
        match slots::find(self.storage.as_ref(), id) {
            Probe::Found { slot, .. } => Some(slot),
            Probe::Vacant { .. } => None,
        }
    }

    /// Is `id` pending?
    pub fn contains(&self, id: RequestId) -> bool {
        self.slot_of(id).is_some()
    }

    /// The handle waiting on `id`.
    pub fn get(&self, id: RequestId) -> Option<&P> {
        let slot = self.slot_of(id)?;
        self.storage.as_ref()[slot]
            .entry
            .as_ref()
            .map(|(_, value)| value)
    }

    /// The handle waiting on `id`, mutably.
    pub fn get_mut(&mut self, id: RequestId) -> Option<&mut P> {
        let slot = self.slot_of(id)?;
        self.storage.as_mut()[slot]
            .entry
            .as_mut()
            .map(|(_, value)| value)
    }

    /// The deadline of `id`.
    pub fn deadline(&self, id: RequestId) -> Option<Instant> {
        let slot = self.slot_of(id)?;
        self.timers.deadline(self.storage.as_ref(), slot)
    }

    /// Removes `id` from the hash and the timers and takes its entry.
    fn take(&mut self, bucket: usize, slot: usize) -> Option<(RequestId, P)> {
        let cells = self.storage.as_mut();
        slots::unlink(cells, bucket);
        self.timers.remove(cells, slot);
        cells[slot].entry.take()
    }

    /// Forgets the call `id` (its future was dropped or it was answered)
    /// and returns its handle; `None` if it was not pending.
    #[inline]
    pub fn remove(&mut self, id: RequestId) -> Option<P> {
        match slots::find(self.storage.as_ref(), id) {
            Probe::Found { bucket, slot } => self.take(bucket, slot).map(|(_, value)| value),
            Probe::Vacant { .. } => None,
        }
    }

    /// Takes the handle of `id` because its result arrived.
    ///
    /// # Errors
    ///
    /// [`LateResult`] if `id` is not pending (it expired, was dropped or
    /// was already completed): the result should be counted and discarded.
    /// The table is unchanged; a late result never recreates an entry.
    pub fn complete(&mut self, id: RequestId) -> Result<P, LateResult> {
        self.remove(id).ok_or(LateResult { id })
    }

    /// The earliest deadline of any pending call.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.peek(self.storage.as_ref()).map(|(_, at)| at)
    }

    /// Removes and returns the call with the earliest deadline if that
    /// deadline is at or before `now` (ties: the first inserted); `None`
    /// otherwise. O(1) in a run, O(log h) in the heap; repeated calls
    /// yield every expired call in deadline order.
    pub fn pop_expired(&mut self, now: Instant) -> Option<(RequestId, P)> {
        let cells = self.storage.as_ref();
        let (slot, deadline) = self.timers.peek(cells)?;
        if deadline > now {
            return None;
        }
        let (id, _) = cells[slot].entry.as_ref()?;
        let Probe::Found { bucket, slot } = slots::find(cells, *id) else {
            return None;
        };
        self.take(bucket, slot)
    }

    /// An iterator that pops expired calls as it is advanced (see
    /// [`pop_expired`](Self::pop_expired)); stop early, for example with
    /// `take(batch)`, to bound the work, and the rest stays pending.
    pub fn drain_expired(&mut self, now: Instant) -> DrainExpired<'_, P, S> {
        DrainExpired::new(self, now)
    }

    /// Removes every call, yielding `(id, handle)` in no particular order
    /// (O(1) expected per call), for shutdown. Dropping the iterator early
    /// still empties the table.
    pub fn drain(&mut self) -> Drain<'_, P, S> {
        Drain::new(self)
    }

    /// Removes one arbitrary call in O(1) expected (a run's tail or the
    /// heap's last leaf).
    fn pop_any(&mut self) -> Option<(RequestId, P)> {
        let cells = self.storage.as_mut();
        let (slot, _) = self.timers.pop_any(cells)?;
        let (id, _) = cells[slot].entry.as_ref()?;
        if let Probe::Found { bucket, .. } = slots::find(cells, *id) {
            slots::unlink(cells, bucket);
        }
        cells[slot].entry.take()
    }

    /// Every pending call as `(id, deadline, handle)`, in no particular
    /// order.
    pub fn iter(&self) -> Iter<'_, P> {
        Iter::new(self.storage.as_ref(), &self.timers)
    }
}

impl<P, S> fmt::Debug for PendingTable<P, S>
where
    S: AsRef<[PendingSlot<P>]> + AsMut<[PendingSlot<P>]>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingTable")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("next_deadline", &self.next_deadline())
            .finish()
    }
}

#[cfg(test)]
mod tests;
