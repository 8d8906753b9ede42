//! Keys, configuration, states, outcomes and errors of the dedup table.

use core::fmt;
use core::time::Duration;

use crate::{Instant, Rank, RequestId, RuntimeLimits};

/// What the dedup table is keyed by: a request as identified by the rank
/// that issued it. Request IDs are unique per origin, so the pair is
/// unique within a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DedupKey {
    /// The rank that issued the request.
    pub origin: Rank,
    /// The request's ID, scoped to `origin`.
    pub id: RequestId,
}

impl DedupKey {
    /// The key of request `id` from `origin`.
    pub const fn new(origin: Rank, id: RequestId) -> Self {
        Self { origin, id }
    }
}

impl fmt::Display for DedupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} from {}", self.id, self.origin)
    }
}

/// How a [`DedupTable`](crate::DedupTable) is bounded; fixed at
/// construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct DedupConfig {
    /// How long a completed or cancelled entry is kept after it finished.
    /// This is the retained window: a duplicate arriving later than this
    /// may execute again.
    pub ttl: Duration,
    /// The most response bytes cached at once, over all entries.
    pub byte_budget: u64,
    /// The most cancellation tombstones (cancellations of requests not yet
    /// seen) kept at once, so cancellations cannot crowd out requests.
    pub max_tombstones: usize,
}

impl DedupConfig {
    /// `ttl` and `byte_budget`, with tombstones bounded only by the table's
    /// capacity.
    pub const fn new(ttl: Duration, byte_budget: u64) -> Self {
        Self {
            ttl,
            byte_budget,
            max_tombstones: usize::MAX,
        }
    }

    /// The same configuration with at most `max` tombstones.
    #[must_use]
    pub const fn with_max_tombstones(mut self, max: usize) -> Self {
        self.max_tombstones = max;
        self
    }

    /// From [`RuntimeLimits`]: `dedup_ttl`, `max_dedup_bytes`, and
    /// `max_cancellations` tombstones. Size the table's storage with
    /// `max_dedup_entries`.
    pub const fn from_limits(limits: &RuntimeLimits) -> Self {
        Self::new(limits.dedup_ttl, limits.max_dedup_bytes)
            .with_max_tombstones(limits.max_cancellations as usize)
    }
}

/// The state of a dedup entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DedupState {
    /// Admitted for execution and not finished; never evicted.
    Running {
        /// The origin cancelled it; the worker should stop if it can.
        cancel_requested: bool,
    },
    /// Finished with a response.
    Completed {
        /// The response bytes are retained for resending (otherwise only
        /// the marker is, and a duplicate is answered
        /// "result unavailable").
        cached: bool,
    },
    /// Cancelled: before it was seen (a tombstone) or while it ran.
    Cancelled,
}

impl fmt::Display for DedupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Running {
                cancel_requested: false,
            } => "running",
            Self::Running {
                cancel_requested: true,
            } => "running with cancellation requested",
            Self::Completed { cached: true } => "completed with its response cached",
            Self::Completed { cached: false } => "completed without a cached response",
            Self::Cancelled => "cancelled",
        })
    }
}

/// A snapshot of one entry; see [`DedupTable::get`](crate::DedupTable::get).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DedupEntry {
    /// The entry's stable slot index (below the capacity).
    pub slot: usize,
    /// Its state.
    pub state: DedupState,
    /// Response bytes it accounts for against the budget.
    pub retained_bytes: u64,
    /// When it expires (finished entries only).
    pub expiry: Option<Instant>,
}

/// What to do with an incoming request; see
/// [`DedupTable::begin`](crate::DedupTable::begin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "an arrival says whether to run the request"]
pub enum Arrival {
    /// New: now recorded as running. Queue it; its slot indexes the
    /// caller's response storage.
    Execute {
        /// The new entry's slot.
        slot: usize,
    },
    /// Already running: do not execute it again.
    DuplicateRunning {
        /// The entry's slot.
        slot: usize,
    },
    /// Already completed: resend the response stored in `slot` if
    /// `cached`, else answer "result unavailable". Never re-execute.
    DuplicateCompleted {
        /// The entry's slot.
        slot: usize,
        /// Whether the response bytes were retained.
        cached: bool,
    },
    /// Cancelled (possibly before it arrived): answer "cancelled"; do not
    /// execute.
    DuplicateCancelled {
        /// The entry's slot.
        slot: usize,
    },
}

impl Arrival {
    /// Is this [`Arrival::Execute`]?
    pub const fn is_execute(&self) -> bool {
        matches!(self, Self::Execute { .. })
    }

    /// The entry's slot.
    pub const fn slot(&self) -> usize {
        match *self {
            Self::Execute { slot }
            | Self::DuplicateRunning { slot }
            | Self::DuplicateCompleted { slot, .. }
            | Self::DuplicateCancelled { slot } => slot,
        }
    }
}

/// How a finished request was recorded; see
/// [`DedupTable::complete`](crate::DedupTable::complete).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "a retention says whether to keep the response bytes"]
pub enum Retention {
    /// The response fits the byte budget: store it in `slot` of the
    /// caller's response storage until the entry expires.
    Retained {
        /// The entry's slot.
        slot: usize,
        /// The bytes now accounted for.
        bytes: u64,
    },
    /// Over budget: only the completion marker is kept; do not store the
    /// response. Duplicates are answered "result unavailable".
    MarkerOnly {
        /// The entry's slot.
        slot: usize,
    },
    /// Cancellation was requested while it ran: the entry is now
    /// [`DedupState::Cancelled`] and nothing is retained. The origin no
    /// longer waits, so sending the response is optional (it would be
    /// discarded as late).
    Cancelled {
        /// The entry's slot.
        slot: usize,
    },
}

impl Retention {
    /// The entry's slot.
    pub const fn slot(&self) -> usize {
        match *self {
            Self::Retained { slot, .. } | Self::MarkerOnly { slot } | Self::Cancelled { slot } => {
                slot
            }
        }
    }

    /// Should the caller keep the response bytes?
    pub const fn retain(&self) -> bool {
        matches!(self, Self::Retained { .. })
    }
}

/// What a cancellation did; see
/// [`DedupTable::cancel`](crate::DedupTable::cancel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[must_use = "a cancel outcome says whether a worker must be told"]
pub enum CancelOutcome {
    /// Not seen yet: a tombstone now refuses the request if it arrives
    /// within the TTL.
    Tombstoned {
        /// The tombstone's slot.
        slot: usize,
    },
    /// Running: marked; signal the worker (the entry keeps blocking
    /// re-execution and becomes cancelled when the job finishes).
    Requested {
        /// The entry's slot.
        slot: usize,
    },
    /// Running and already marked.
    AlreadyRequested {
        /// The entry's slot.
        slot: usize,
    },
    /// Too late: it already completed.
    AlreadyCompleted {
        /// The entry's slot.
        slot: usize,
    },
    /// Already cancelled.
    AlreadyCancelled {
        /// The entry's slot.
        slot: usize,
    },
}

/// An entry removed after its TTL; see
/// [`DedupTable::pop_expired`](crate::DedupTable::pop_expired).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExpiredEntry {
    /// The request.
    pub key: DedupKey,
    /// Its former slot: free the response stored there, if any.
    pub slot: usize,
    /// Its state when it expired (completed or cancelled).
    pub state: DedupState,
    /// Response bytes no longer accounted for.
    pub released_bytes: u64,
}

/// A dedup-table operation was refused; the table is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DedupError {
    /// Every slot is taken: resource exhaustion. The request must not be
    /// executed.
    Full {
        /// The table's capacity.
        capacity: usize,
    },
    /// The tombstone bound is reached: the cancellation is not remembered.
    TombstonesFull {
        /// The configured bound.
        limit: usize,
    },
    /// No entry for the key.
    NotFound {
        /// The key.
        key: DedupKey,
    },
    /// The entry is not running, so it cannot complete or be rolled back.
    NotRunning {
        /// The key.
        key: DedupKey,
        /// Its actual state.
        state: DedupState,
    },
    /// `now + ttl` is past [`Instant::MAX`].
    TimeOverflow {
        /// The instant the TTL was added to.
        now: Instant,
    },
}

impl DedupError {
    /// Is this a resource bound ([`DedupError::Full`] or
    /// [`DedupError::TombstonesFull`])?
    pub const fn is_exhaustion(&self) -> bool {
        matches!(self, Self::Full { .. } | Self::TombstonesFull { .. })
    }
}

impl fmt::Display for DedupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { capacity } => write!(f, "dedup table is full ({capacity} entries)"),
            Self::TombstonesFull { limit } => {
                write!(f, "too many remembered cancellations ({limit})")
            }
            Self::NotFound { key } => write!(f, "no dedup entry for {key}"),
            Self::NotRunning { key, state } => write!(f, "{key} is not running: it is {state}"),
            Self::TimeOverflow { now } => {
                write!(f, "dedup expiry after {now} overflows the clock")
            }
        }
    }
}

impl core::error::Error for DedupError {}
