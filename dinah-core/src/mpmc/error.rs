//! The MPMC queue's errors.

use core::fmt;

/// [`MpmcQueue::try_push`](crate::MpmcQueue::try_push) could not queue an
/// item; the item is handed back.
///
/// `Debug` does not print the item, so `T` needs no `Debug` of its own.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MpmcPushError<T> {
    /// Every slot held an item when the push was attempted. Never reported
    /// while a slot is merely being released by a concurrent pop.
    Full(T),
}

impl<T> MpmcPushError<T> {
    /// The item that was not queued.
    pub fn into_inner(self) -> T {
        match self {
            Self::Full(item) => item,
        }
    }

    /// Was the push rejected because the queue was full?
    pub const fn is_full(&self) -> bool {
        matches!(self, Self::Full(_))
    }
}

impl<T> fmt::Debug for MpmcPushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("Full(..)"),
        }
    }
}

impl<T> fmt::Display for MpmcPushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("mpmc queue is full"),
        }
    }
}

impl<T> core::error::Error for MpmcPushError<T> {}

/// [`MpmcQueue::with_storage`](crate::MpmcQueue::with_storage) cannot build
/// a queue on the storage it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MpmcStorageError {
    /// The storage has no slots; a queue needs at least one.
    Empty,
    /// The storage has more slots than the queue's lap counters can number
    /// (more than `usize::MAX / 4`; no real allocation is that large).
    TooLarge {
        /// The number of slots offered.
        slots: usize,
    },
}

impl fmt::Display for MpmcStorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("mpmc queue storage has no slots"),
            Self::TooLarge { slots } => {
                write!(
                    f,
                    "mpmc queue storage of {slots} slots is too large to index"
                )
            }
        }
    }
}

impl core::error::Error for MpmcStorageError {}
