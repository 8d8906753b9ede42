//! Errors of the pending-call table.

use core::fmt;
use core::time::Duration;

use crate::{Instant, RequestId};

/// [`PendingTable::insert`](crate::PendingTable::insert) refused a call;
/// the table is unchanged and the handle comes back in the error.
///
/// `Debug` does not print the handle, so it needs no `P: Debug`.
#[derive(Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PendingInsertError<P> {
    /// Every slot is taken: resource exhaustion, the call must not be sent.
    Full {
        /// The table's capacity.
        capacity: usize,
        /// The handle that was not inserted.
        value: P,
    },
    /// The ID is already pending (an allocator bug or a reused ID).
    Duplicate {
        /// The ID.
        id: RequestId,
        /// The handle that was not inserted.
        value: P,
    },
    /// `now + timeout` is past [`Instant::MAX`].
    DeadlineOverflow {
        /// The start instant.
        now: Instant,
        /// The timeout added to it.
        timeout: Duration,
        /// The handle that was not inserted.
        value: P,
    },
}

impl<P> PendingInsertError<P> {
    /// The handle that was not inserted.
    pub fn into_inner(self) -> P {
        match self {
            Self::Full { value, .. }
            | Self::Duplicate { value, .. }
            | Self::DeadlineOverflow { value, .. } => value,
        }
    }

    /// Is this [`PendingInsertError::Full`] (the runtime reports it as
    /// resource exhaustion)?
    pub fn is_full(&self) -> bool {
        matches!(self, Self::Full { .. })
    }
}

impl<P> fmt::Debug for PendingInsertError<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { capacity, .. } => f
                .debug_struct("Full")
                .field("capacity", capacity)
                .finish_non_exhaustive(),
            Self::Duplicate { id, .. } => f
                .debug_struct("Duplicate")
                .field("id", id)
                .finish_non_exhaustive(),
            Self::DeadlineOverflow { now, timeout, .. } => f
                .debug_struct("DeadlineOverflow")
                .field("now", now)
                .field("timeout", timeout)
                .finish_non_exhaustive(),
        }
    }
}

impl<P> fmt::Display for PendingInsertError<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { capacity, .. } => {
                write!(f, "pending-call table is full ({capacity} calls)")
            }
            Self::Duplicate { id, .. } => write!(f, "{id} is already pending"),
            Self::DeadlineOverflow { now, timeout, .. } => {
                write!(f, "call deadline {now} + {timeout:?} overflows the clock")
            }
        }
    }
}

impl<P> core::error::Error for PendingInsertError<P> {}

/// A result arrived for a call that is no longer pending (it expired, its
/// future was dropped, or it was already completed). Count it and discard
/// it; the pending table is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LateResult {
    /// The ID the result was for.
    pub id: RequestId,
}

impl fmt::Display for LateResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "late result for {}: the call is no longer pending",
            self.id
        )
    }
}

impl core::error::Error for LateResult {}
