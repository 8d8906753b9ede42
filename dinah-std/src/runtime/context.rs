//! [`ActionContext`]: what a handler sees besides its input.

use std::fmt;

use dinah_core::wire::TraceId;
use dinah_core::{ActionId, DomainId, Instant, Rank, RequestId, WorkerId};

use super::client::RuntimeClient;
use crate::action::ActionError;
use crate::domain::JobContext;

/// What a handler sees besides its input: who called, the call's
/// identity, its deadline, and whether it was cancelled.
///
/// Cancellation is cooperative: a long handler should call
/// [`is_cancelled`](Self::is_cancelled) at safe points and return early;
/// nothing interrupts it. The [`client`](Self::client) lets a handler call
/// other ranks (its futures are driven by the owner thread's progress).
pub struct ActionContext<'a> {
    pub(crate) origin: Rank,
    pub(crate) request: RequestId,
    pub(crate) action: ActionId,
    pub(crate) domain: DomainId,
    pub(crate) trace: Option<TraceId>,
    pub(crate) deadline: Instant,
    pub(crate) job: Option<&'a JobContext<'a>>,
    pub(crate) client: &'a RuntimeClient,
}

impl ActionContext<'_> {
    /// The rank that issued the call.
    pub fn origin(&self) -> Rank {
        self.origin
    }

    /// The call's request ID (scoped to the origin).
    pub fn request(&self) -> RequestId {
        self.request
    }

    /// The action being run.
    pub fn action(&self) -> ActionId {
        self.action
    }

    /// The domain running it.
    pub fn domain(&self) -> DomainId {
        self.domain
    }

    /// The worker running the handler, numbered uniquely across this
    /// runtime's domains; `None` for an inline handler, which runs on the
    /// owner thread.
    pub fn worker(&self) -> Option<WorkerId> {
        self.job.and_then(JobContext::worker_id)
    }

    /// The trace ID the caller gave the call
    /// ([`SpawnOptions::with_trace`](crate::SpawnOptions::with_trace)), if
    /// any. A nested call can pass it on to keep one trace across ranks.
    pub fn trace(&self) -> Option<TraceId> {
        self.trace
    }

    /// When the caller stops waiting, on this runtime's clock (the call's
    /// relative deadline counted from the moment the request arrived
    /// here, which is never earlier than the caller's own).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Has the caller (or a shutdown) asked this call to stop?
    pub fn is_cancelled(&self) -> bool {
        self.job.is_some_and(JobContext::is_cancellation_requested)
    }

    /// A safe point for `?`: stops the handler with a cancellation error if
    /// cancellation was requested (the caller then sees `Cancelled`).
    ///
    /// # Errors
    ///
    /// An [`ActionError`] saying the call was cancelled.
    pub fn check(&self) -> Result<(), ActionError> {
        match self.job {
            Some(job) if job.check().is_err() => Err(ActionError::new("cancelled")),
            _ => Ok(()),
        }
    }

    /// A client of the local runtime, for nested calls.
    pub fn client(&self) -> &RuntimeClient {
        self.client
    }
}

impl fmt::Debug for ActionContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActionContext")
            .field("origin", &self.origin)
            .field("request", &self.request)
            .field("action", &self.action)
            .field("domain", &self.domain)
            .field("trace", &self.trace)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
