//! Locking the calls table: the lock that publishes the earliest deadline
//! when it is released, so that the owner's per-round checks read one
//! atomic instead of taking the lock.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{MutexGuard, PoisonError};

use dinah_core::Instant;

use super::{Calls, Inner};

/// What [`Calls::earliest`] holds while no call is waiting (or only calls
/// whose deadline is [`Instant::MAX`], which never passes).
pub(super) const NO_DEADLINE: u64 = u64::MAX;

/// The lock on a [`Calls`] table; releasing it publishes the earliest
/// deadline (before the mutex itself is released: fields drop after
/// `drop` runs).
pub(super) struct Locked<'a> {
    inner: MutexGuard<'a, Inner>,
    earliest: &'a AtomicU64,
}

impl Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let earliest = self
            .inner
            .next_deadline()
            .map_or(NO_DEADLINE, Instant::as_nanos);
        if self.earliest.load(Ordering::Relaxed) != earliest {
            self.earliest.store(earliest, Ordering::Release);
        }
    }
}

impl Calls {
    /// The lock, for reads and for changes that leave the earliest
    /// deadline as it is (or publish it themselves, as
    /// [`begin`](Self::begin) does): nothing published on release.
    pub(super) fn lock_slots(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock, publishing the earliest deadline when released.
    pub(super) fn lock(&self) -> Locked<'_> {
        // Nothing panics while holding the lock; recover the data if a
        // panic elsewhere ever poisoned it.
        Locked {
            inner: self.inner.lock().unwrap_or_else(PoisonError::into_inner),
            earliest: &self.earliest,
        }
    }

    /// Publishes `deadline` at once if it is due before everything else
    /// (a new entry can only bring the earliest deadline forward).
    pub(super) fn publish_new(&self, deadline: Instant) {
        let due = deadline.as_nanos();
        if due < self.earliest.load(Ordering::Relaxed) {
            self.earliest.store(due, Ordering::Release);
        }
    }
}
