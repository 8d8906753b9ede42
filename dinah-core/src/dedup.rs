//! The receiver's deduplication table: at-most-once execution of remote
//! requests within a retained window.
//!
//! The contract, transition table, algorithm and storage forms are
//! documented on [`DedupTable`], where users of the crate see them.

mod iter;
mod slot;
mod types;
mod window;

use core::fmt;
use core::time::Duration;

pub use self::iter::DrainExpiredEntries;
use self::slot::Book;
pub use self::slot::DedupSlot;
pub use self::types::*;
pub use self::window::*;
use crate::deadline::{MAX_TABLE_CAPACITY, check_capacity};
use crate::pending::slots::{self, Probe};
use crate::{Instant, RuntimeLimits, TableStorageError};

/// The receiver's deduplication table: at-most-once execution of remote
/// requests within a retained window.
///
/// Transports may deliver a request twice (a retry, a duplicated frame), and
/// a cancellation may overtake the request it cancels. [`DedupTable`]
/// remembers each request by [`DedupKey`] (origin rank, request ID) from the
/// moment it is admitted until a fixed TTL after it finished, and tells the
/// receiver what to do with every arrival.
///
/// # States and transitions
///
/// An entry is [`Running`](DedupState::Running) (optionally with
/// cancellation requested), [`Completed`](DedupState::Completed) (with or
/// without its response cached) or [`Cancelled`](DedupState::Cancelled).
/// Every operation returns a `#[must_use]` outcome or a [`DedupError`]:
///
/// | state \ operation | [`begin`](DedupTable::begin) | [`cancel`](DedupTable::cancel) | [`complete`](DedupTable::complete) | [`rollback`](DedupTable::rollback) | [`pop_expired`](DedupTable::pop_expired) |
/// | --- | --- | --- | --- | --- | --- |
/// | absent | `Execute`, now running | `Tombstoned`, now cancelled | `NotFound` | `NotFound` | - |
/// | running | `DuplicateRunning` | `Requested`, now running with cancel requested | `Retained` or `MarkerOnly`, now completed | removed | never |
/// | running, cancel requested | `DuplicateRunning` | `AlreadyRequested` | `Cancelled`, now cancelled | removed | never |
/// | completed | `DuplicateCompleted` | `AlreadyCompleted` | `NotRunning` | `NotRunning` | removed after the TTL |
/// | cancelled | `DuplicateCancelled` | `AlreadyCancelled` | `NotRunning` | `NotRunning` | removed after the TTL |
///
/// - The entry is inserted as running by `begin`, **before** any user code
///   is queued, and a running entry is never evicted.
/// - A job whose cancellation was requested still calls `complete` when it
///   ends (whether user code ran or not); the entry then becomes cancelled,
///   retains nothing, and keeps refusing the request until its TTL passes.
/// - `rollback` undoes an `Execute` whose job could not be queued (so user
///   code never ran), letting a retry execute.
/// - A cancellation for a request not seen yet leaves a tombstone, bounded
///   by [`DedupConfig::max_tombstones`], so a late-arriving request is
///   refused instead of executed.
///
/// # At most once, within the retained window
///
/// `begin` answers `Execute` only for an absent key, and a key leaves the
/// table only by `rollback` (user code never ran), by `pop_expired` at
/// least [`DedupConfig::ttl`] after it finished, or by `clear` at shutdown.
/// So no request executes twice while its entry is retained: from `begin`
/// until `ttl` after `complete`. A duplicate delayed beyond that window may
/// execute again; choose the TTL longer than any plausible redelivery
/// delay. Nothing is evicted implicitly: a full table refuses new requests
/// with [`DedupError::Full`] (resource exhaustion) rather than forget an
/// entry. Call [`drain_expired`](DedupTable::drain_expired) before admitting
/// (the runtime's progress loop does), because `begin` itself never expires
/// anything.
///
/// # Response bytes
///
/// The table does not store responses (it allocates nothing). Each entry has
/// a slot index, stable for its lifetime and below the capacity, which the
/// caller uses to index its own fixed response storage. `complete` reports
/// whether the response fits the remaining [`DedupConfig::byte_budget`]
/// ([`Retention::Retained`]: keep it) or not ([`Retention::MarkerOnly`]:
/// keep only the marker; duplicates are answered "result unavailable",
/// never re-executed). Expiry reports the bytes it releases.
///
/// # Algorithm and storage
///
/// One storage element ([`DedupSlot`], 56 bytes) per entry holds the entry,
/// two buckets of the open-addressing hash (`2 * capacity` buckets, load
/// factor at most ½, linear probing, backward-shift deletion) and one cell
/// of a FIFO ring of finished entries. Since the TTL is constant, expiry
/// order is finishing order, so the ring replaces a heap: expiry is O(1) per
/// entry and never scans. An entry's expiry is never earlier than that of
/// the entry finished before it (a clock that steps back only lengthens the
/// window). Free slots form an intrusive list.
///
/// | operation | cost |
/// | --- | --- |
/// | `begin`, `cancel`, `complete`, `rollback`, `get` | O(1) expected |
/// | `pop_expired` | O(1) expected |
/// | `clear`, construction | O(capacity) |
///
/// Storage is an array ([`ArrayDedupTable`], `const fn` [`DedupTable::new`])
/// or storage the caller sized once from
/// [`RuntimeLimits::max_dedup_entries`](crate::RuntimeLimits::max_dedup_entries)
/// ([`DedupTable::with_storage`], [`DedupTable::from_limits`]).
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use dinah_core::{
///     Arrival, ArrayDedupTable, Retention, DedupConfig, DedupKey, Instant, Rank, RequestId,
/// };
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let config = DedupConfig::new(Duration::from_secs(60), 1024);
/// let mut dedup = ArrayDedupTable::<64>::new(config);
/// let key = DedupKey::new(Rank::ZERO, RequestId::new(7)?);
/// let now = Instant::from_nanos(0);
///
/// let Arrival::Execute { slot } = dedup.begin(key)? else { unreachable!() };
/// assert_eq!(dedup.begin(key)?, Arrival::DuplicateRunning { slot });
///
/// assert_eq!(dedup.complete(key, now, 100)?, Retention::Retained { slot, bytes: 100 });
/// assert_eq!(dedup.begin(key)?, Arrival::DuplicateCompleted { slot, cached: true });
///
/// let later = Instant::from_nanos(61_000_000_000);
/// let expired = dedup.pop_expired(later).expect("past its TTL");
/// assert_eq!((expired.key, expired.released_bytes), (key, 100));
/// assert!(dedup.begin(key)?.is_execute());
/// # Ok(())
/// # }
/// ```
pub struct DedupTable<S> {
    storage: S,
    config: DedupConfig,
    len: usize,
    running: usize,
    tombstones: usize,
    retained_bytes: u64,
    book: Book,
}

/// A [`DedupTable`] that stores `N` slots inline.
pub type ArrayDedupTable<const N: usize> = DedupTable<[DedupSlot; N]>;

impl<const N: usize> DedupTable<[DedupSlot; N]> {
    /// An empty table of `N` slots configured by `config`, usable in a
    /// `static`.
    ///
    /// `N` must be between 1 and [`MAX_TABLE_CAPACITY`]; anything else is a
    /// compile-time error.
    pub const fn new(config: DedupConfig) -> Self {
        const {
            assert!(N > 0, "a dedup table needs at least one slot");
            assert!(N <= MAX_TABLE_CAPACITY, "capacity above MAX_TABLE_CAPACITY");
        }
        Self::from_parts([DedupSlot::EMPTY; N], config)
    }
}

impl<S> DedupTable<S> {
    const fn from_parts(storage: S, config: DedupConfig) -> Self {
        Self {
            storage,
            config,
            len: 0,
            running: 0,
            tombstones: 0,
            retained_bytes: 0,
            book: Book::new(),
        }
    }
}

impl<S> DedupTable<S>
where
    S: AsRef<[DedupSlot]> + AsMut<[DedupSlot]>,
{
    /// An empty table over `storage`, whose length is the capacity,
    /// configured by `config`.
    ///
    /// # Errors
    ///
    /// [`TableStorageError`] if `storage` is empty or longer than
    /// [`MAX_TABLE_CAPACITY`].
    pub fn with_storage(mut storage: S, config: DedupConfig) -> Result<Self, TableStorageError> {
        check_capacity(storage.as_ref().len())?;
        storage.as_mut().fill(DedupSlot::EMPTY);
        Ok(Self::from_parts(storage, config))
    }

    /// An empty table over `storage` (sized from
    /// `limits.max_dedup_entries`) configured by
    /// [`DedupConfig::from_limits`].
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{DedupSlot, DedupTable, RuntimeLimits, TableStorageError};
    ///
    /// let limits = RuntimeLimits::default();
    /// let storage = vec![DedupSlot::EMPTY; limits.max_dedup_entries as usize];
    /// let dedup = DedupTable::from_limits(storage, &limits)?;
    /// assert_eq!(dedup.capacity(), 4096);
    /// assert_eq!(dedup.byte_budget(), 4 << 20);
    /// # Ok::<(), TableStorageError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`with_storage`](Self::with_storage).
    pub fn from_limits(storage: S, limits: &RuntimeLimits) -> Result<Self, TableStorageError> {
        Self::with_storage(storage, DedupConfig::from_limits(limits))
    }

    /// How many entries the table can hold.
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().len()
    }

    /// The configuration.
    pub const fn config(&self) -> &DedupConfig {
        &self.config
    }

    /// How long finished entries are kept.
    pub const fn ttl(&self) -> Duration {
        self.config.ttl
    }

    /// The most response bytes retained at once.
    pub const fn byte_budget(&self) -> u64 {
        self.config.byte_budget
    }

    /// Response bytes currently retained (never above the budget).
    pub const fn retained_bytes(&self) -> u64 {
        self.retained_bytes
    }

    /// Entries in any state.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Is the table empty?
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Is every slot taken?
    pub fn is_full(&self) -> bool {
        self.len == self.capacity()
    }

    /// Running entries.
    pub const fn running(&self) -> usize {
        self.running
    }

    /// Cancellation tombstones (cancelled before the request was seen).
    pub const fn tombstones(&self) -> usize {
        self.tombstones
    }

    /// When the next finished entry expires.
    pub fn next_expiry(&self) -> Option<Instant> {
        let cells = self.storage.as_ref();
        self.book.oldest(cells).map(|slot| cells[slot].expiry)
    }

    /// The entry for `key`.
    pub fn get(&self, key: DedupKey) -> Option<DedupEntry> {
        let cells = self.storage.as_ref();
        let Probe::Found { slot, .. } = slots::find(cells, key) else {
            return None;
        };
        let cell = &cells[slot];
        let finished = !matches!(cell.state, DedupState::Running { .. });
        Some(DedupEntry {
            slot,
            state: cell.state,
            retained_bytes: cell.bytes,
            expiry: finished.then_some(cell.expiry),
        })
    }

    /// Is there an entry for `key`?
    pub fn contains(&self, key: DedupKey) -> bool {
        self.get(key).is_some()
    }

    /// Decides what to do with an arriving request, recording a new one as
    /// running before the caller queues it.
    ///
    /// # Errors
    ///
    /// [`DedupError::Full`] if the request is new and no slot is free: it
    /// must not be executed (resource exhaustion). Expired entries are not
    /// reclaimed here; drain them first.
    pub fn begin(&mut self, key: DedupKey) -> Result<Arrival, DedupError> {
        let capacity = self.capacity();
        let bucket = match slots::find(self.storage.as_ref(), key) {
            Probe::Found { slot, .. } => {
                return Ok(match self.storage.as_ref()[slot].state {
                    DedupState::Running { .. } => Arrival::DuplicateRunning { slot },
                    DedupState::Completed { cached } => {
                        Arrival::DuplicateCompleted { slot, cached }
                    }
                    DedupState::Cancelled => Arrival::DuplicateCancelled { slot },
                });
            }
            Probe::Vacant { bucket } => bucket,
        };
        let slot = self.allocate().ok_or(DedupError::Full { capacity })?;
        let cells = self.storage.as_mut();
        cells[slot].key = Some(key);
        cells[slot].state = DedupState::Running {
            cancel_requested: false,
        };
        slots::link(cells, bucket, slot);
        self.len += 1;
        self.running += 1;
        Ok(Arrival::Execute { slot })
    }

    /// Records that the job for `key` finished at `now` with a response of
    /// `response_bytes` bytes, and says whether to retain the response.
    ///
    /// # Errors
    ///
    /// [`DedupError::NotFound`], [`DedupError::NotRunning`] (it already
    /// finished), or [`DedupError::TimeOverflow`] if `now + ttl` overflows;
    /// the entry is unchanged.
    pub fn complete(
        &mut self,
        key: DedupKey,
        now: Instant,
        response_bytes: u64,
    ) -> Result<Retention, DedupError> {
        let slot = self.running_slot(key)?;
        let expiry = self.expiry_after(now)?;
        let cell = &mut self.storage.as_mut()[slot];
        let completion = match cell.state {
            DedupState::Running {
                cancel_requested: true,
            } => {
                cell.state = DedupState::Cancelled;
                Retention::Cancelled { slot }
            }
            _ => match self.retained_bytes.checked_add(response_bytes) {
                Some(total) if total <= self.config.byte_budget => {
                    self.retained_bytes = total;
                    cell.bytes = response_bytes;
                    cell.state = DedupState::Completed { cached: true };
                    Retention::Retained {
                        slot,
                        bytes: response_bytes,
                    }
                }
                _ => {
                    cell.state = DedupState::Completed { cached: false };
                    Retention::MarkerOnly { slot }
                }
            },
        };
        self.running -= 1;
        self.push_finished(slot, expiry);
        Ok(completion)
    }

    /// Records a cancellation of `key` arriving at `now`.
    ///
    /// # Errors
    ///
    /// Only when `key` is unknown and a tombstone must be created:
    /// [`DedupError::TombstonesFull`], [`DedupError::TimeOverflow`], or
    /// [`DedupError::Full`] (checked in that order). The cancellation is
    /// then not remembered.
    pub fn cancel(&mut self, key: DedupKey, now: Instant) -> Result<CancelOutcome, DedupError> {
        let capacity = self.capacity();
        let bucket = match slots::find(self.storage.as_ref(), key) {
            Probe::Found { slot, .. } => {
                let cell = &mut self.storage.as_mut()[slot];
                return Ok(match cell.state {
                    DedupState::Running {
                        cancel_requested: false,
                    } => {
                        cell.state = DedupState::Running {
                            cancel_requested: true,
                        };
                        CancelOutcome::Requested { slot }
                    }
                    DedupState::Running { .. } => CancelOutcome::AlreadyRequested { slot },
                    DedupState::Completed { .. } => CancelOutcome::AlreadyCompleted { slot },
                    DedupState::Cancelled => CancelOutcome::AlreadyCancelled { slot },
                });
            }
            Probe::Vacant { bucket } => bucket,
        };
        if self.tombstones >= self.config.max_tombstones {
            return Err(DedupError::TombstonesFull {
                limit: self.config.max_tombstones,
            });
        }
        let expiry = self.expiry_after(now)?;
        let slot = self.allocate().ok_or(DedupError::Full { capacity })?;
        let cells = self.storage.as_mut();
        cells[slot].key = Some(key);
        cells[slot].state = DedupState::Cancelled;
        cells[slot].tombstone = true;
        slots::link(cells, bucket, slot);
        self.len += 1;
        self.tombstones += 1;
        self.push_finished(slot, expiry);
        Ok(CancelOutcome::Tombstoned { slot })
    }

    /// Removes the running entry for `key` because its job could not be
    /// queued and user code never ran, so a retry may execute; returns the
    /// freed slot.
    ///
    /// # Errors
    ///
    /// [`DedupError::NotFound`] or [`DedupError::NotRunning`].
    pub fn rollback(&mut self, key: DedupKey) -> Result<usize, DedupError> {
        let slot = self.running_slot(key)?;
        self.unlink(key);
        self.release(slot);
        self.running -= 1;
        Ok(slot)
    }

    /// Removes and returns the oldest finished entry if its TTL has passed
    /// at `now` (its expiry is at or before `now`). Running entries are
    /// never returned.
    pub fn pop_expired(&mut self, now: Instant) -> Option<ExpiredEntry> {
        if self.next_expiry()? > now {
            return None;
        }
        let cells = self.storage.as_mut();
        let slot = self.book.pop_oldest(cells)?;
        let cell = cells[slot];
        let key = cell.key?;
        self.unlink(key);
        self.release(slot);
        self.retained_bytes -= cell.bytes;
        if cell.tombstone {
            self.tombstones -= 1;
        }
        Some(ExpiredEntry {
            key,
            slot,
            state: cell.state,
            released_bytes: cell.bytes,
        })
    }

    /// The key of the oldest finished entry: the next to expire, and the
    /// one [`pop_expired`](Self::pop_expired) with [`Instant::MAX`]
    /// removes to make room.
    pub fn oldest_finished(&self) -> Option<DedupKey> {
        let cells = self.storage.as_ref();
        self.book.oldest(cells).and_then(|slot| cells[slot].key)
    }

    /// An iterator that pops expired entries as it is advanced (see
    /// [`pop_expired`](Self::pop_expired)); use `take(batch)` to bound the
    /// work, and the rest stays until the next call.
    pub fn drain_expired(&mut self, now: Instant) -> DrainExpiredEntries<'_, S> {
        DrainExpiredEntries::new(self, now)
    }

    /// Forgets every entry, running ones included (shutdown, once no job is
    /// left), and returns the response bytes released.
    pub fn clear(&mut self) -> u64 {
        let released = self.retained_bytes;
        self.storage.as_mut().fill(DedupSlot::EMPTY);
        self.len = 0;
        self.running = 0;
        self.tombstones = 0;
        self.retained_bytes = 0;
        self.book = Book::new();
        released
    }

    fn running_slot(&self, key: DedupKey) -> Result<usize, DedupError> {
        let Probe::Found { slot, .. } = slots::find(self.storage.as_ref(), key) else {
            return Err(DedupError::NotFound { key });
        };
        match self.storage.as_ref()[slot].state {
            DedupState::Running { .. } => Ok(slot),
            state => Err(DedupError::NotRunning { key, state }),
        }
    }

    fn expiry_after(&self, now: Instant) -> Result<Instant, DedupError> {
        self.book
            .expiry_after(now, self.config.ttl)
            .ok_or(DedupError::TimeOverflow { now })
    }

    fn allocate(&mut self) -> Option<usize> {
        self.book.allocate(self.storage.as_ref())
    }

    fn release(&mut self, slot: usize) {
        self.book.release(self.storage.as_mut(), slot);
        self.len -= 1;
    }

    fn unlink(&mut self, key: DedupKey) {
        let cells = self.storage.as_mut();
        if let Probe::Found { bucket, .. } = slots::find(cells, key) {
            slots::unlink(cells, bucket);
        }
    }

    fn push_finished(&mut self, slot: usize, expiry: Instant) {
        self.book.push_finished(self.storage.as_mut(), slot, expiry);
    }
}

impl<S> fmt::Debug for DedupTable<S>
where
    S: AsRef<[DedupSlot]> + AsMut<[DedupSlot]>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DedupTable")
            .field("len", &self.len)
            .field("running", &self.running)
            .field("tombstones", &self.tombstones)
            .field("capacity", &self.capacity())
            .field("retained_bytes", &self.retained_bytes)
            .field("byte_budget", &self.config.byte_budget)
            .field("ttl", &self.config.ttl)
            .finish()
    }
}

#[cfg(test)]
mod tests;
