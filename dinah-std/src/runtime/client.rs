//! [`RuntimeClient`]: the handle to a runtime that any thread may hold.
//!
//! Issuing calls is in `caller/issue.rs`; this file holds the handle
//! itself and the link through which worker jobs reach it.

use std::fmt;
use std::sync::{Arc, Weak};

use dinah_core::{Rank, WorldSize};

use super::hub::{Counters, Hub};
use crate::domain::Context;

/// Issues calls on a runtime; cloneable, `Send + Sync`, usable from any
/// thread including inside handlers.
///
/// Calls made here are progressed by the runtime's owner thread
/// ([`Runtime::progress`](crate::Runtime::progress) /
/// [`block_on`](crate::Runtime::block_on)); a client never blocks.
#[derive(Clone)]
pub struct RuntimeClient {
    pub(crate) hub: Arc<Hub>,
}

impl RuntimeClient {
    /// This rank.
    pub fn rank(&self) -> Rank {
        self.hub.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> WorldSize {
        self.hub.world
    }

    /// The runtime's event counters (readable from any thread).
    ///
    /// Events on other threads (calls issued, their bytes) are counted as
    /// they happen. The owner thread counts its own events (frames
    /// received, results, duplicates, responses sent) during a round of
    /// [`Runtime::progress`](crate::Runtime::progress) and publishes them
    /// when the round ends, so a reading from another thread may miss the
    /// events of a round still running. [`Runtime::stats`](crate::Runtime::stats)
    /// on the owner thread, and the shutdown report, include them.
    pub fn metrics(&self) -> dinah_core::MetricsSnapshot {
        self.hub.metrics.snapshot()
    }

    /// Cancellations this rank has received from peers since the start
    /// (for calls queued, running or not yet seen here).
    pub fn cancels_received(&self) -> u64 {
        Counters::read(&self.hub.counters.cancels_received)
    }
}

impl fmt::Debug for RuntimeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeClient")
            .field("rank", &self.hub.rank)
            .field("world", &self.hub.world)
            .field("state", &self.hub.state.load())
            .finish()
    }
}

/// How a domain's jobs reach the runtime that owns the domain: a weak
/// reference, entered once per drain of the domain's queue (see
/// [`Context`]), so that a job carries no counted reference of its own
/// and the domains do not keep the runtime alive.
pub(crate) struct OwnerLink(pub(crate) Weak<Hub>);

impl OwnerLink {
    /// Calls `drain` with a client of the owning runtime, or with `None`
    /// if the runtime is gone (its jobs then have nobody to answer).
    pub(crate) fn enter(&self, drain: &mut dyn FnMut(Context<'_>)) {
        match self.0.upgrade() {
            Some(hub) => drain(Some(&RuntimeClient { hub })),
            None => drain(None),
        }
    }
}
