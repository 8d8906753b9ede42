//! What a domain's workers hold while they drain its queue.
//!
//! A job that must reach its owner's state (the runtime's registry, clock
//! and completion queues) could carry a counted reference to it, but then
//! every job takes that reference on the submitting thread's core and lets
//! it go on a worker's: two transfers of one cache line per job, about a
//! tenth of the pooled runtime's throughput over TCP and MPI. Instead the
//! owner gives the domain a [`DrainContext`] once; a worker enters it once
//! per drain of the queue (a trampoline, which runs every job it finds)
//! and its jobs borrow the context through their
//! [`JobContext`](crate::JobContext). (Tested in `domain/tests.rs`.)

use std::any::Any;

/// The borrowed context jobs see: whatever the domain's owner provides.
pub(crate) type Context<'a> = Option<&'a (dyn Any + Send + Sync)>;

/// Provides a domain's jobs with their owner's context.
pub(crate) trait DrainContext: Send + Sync {
    /// Calls `drain` with the context, or with `None` if it is gone (its
    /// owner was dropped; the jobs then have nobody to answer).
    fn enter(&self, drain: &mut dyn FnMut(Context<'_>));
}
