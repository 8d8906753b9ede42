//! Opt-in structured tracing: [`TraceEvent`] (what happened, to what,
//! when and where) and [`TraceBuffer`], the bounded buffer that records
//! events in order.

use core::fmt;

use heapless::Vec;

use crate::sync::Mutex;
use crate::{DomainId, Instant, Rank, RequestId, TaskId, WorkerId};

/// What a [`TraceEvent`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum TraceEventKind {
    /// A task was accepted for execution.
    Submitted,
    /// A task began running.
    Started,
    /// A task returned successfully.
    Completed,
    /// A task returned an error.
    Failed,
    /// Cancellation of a task or request was asked for.
    CancellationRequested,
    /// The cancelled work observed the request and stopped.
    CancellationAcknowledged,
    /// A request was handed to the transport for a remote rank.
    RequestSent,
    /// The result of a request arrived and completed its waiter.
    ResultReceived,
    /// A request arrived again and was not executed a second time.
    DuplicateSuppressed,
    /// A result arrived after its waiter was gone and was dropped.
    LateResultDiscarded,
    /// A request's deadline passed before it completed.
    DeadlineExpired,
    /// An incoming message failed protocol validation and was refused.
    ProtocolRejected,
    /// A peer rank was found to be down or disconnected.
    PeerDown,
}

impl TraceEventKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 13] = [
        Self::Submitted,
        Self::Started,
        Self::Completed,
        Self::Failed,
        Self::CancellationRequested,
        Self::CancellationAcknowledged,
        Self::RequestSent,
        Self::ResultReceived,
        Self::DuplicateSuppressed,
        Self::LateResultDiscarded,
        Self::DeadlineExpired,
        Self::ProtocolRejected,
        Self::PeerDown,
    ];

    /// A short lowercase name, stable for logs and exporters.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Submitted => "submitted",
            Self::Started => "started",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::CancellationRequested => "cancellation-requested",
            Self::CancellationAcknowledged => "cancellation-acknowledged",
            Self::RequestSent => "request-sent",
            Self::ResultReceived => "result-received",
            Self::DuplicateSuppressed => "duplicate-suppressed",
            Self::LateResultDiscarded => "late-result-discarded",
            Self::DeadlineExpired => "deadline-expired",
            Self::ProtocolRejected => "protocol-rejected",
            Self::PeerDown => "peer-down",
        }
    }
}

impl fmt::Display for TraceEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a [`TraceEvent`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TraceSubject {
    /// Nothing in particular (for example a [`TraceEventKind::PeerDown`]
    /// that names no request, or a rejected message with no valid ID).
    #[default]
    None,
    /// A local task.
    Task(TaskId),
    /// A remote request, identified by the rank that issued it and its ID
    /// there (request IDs are unique only per origin).
    Request {
        /// The rank that issued the request.
        origin: Rank,
        /// The request's ID on its origin rank.
        id: RequestId,
    },
}

impl fmt::Display for TraceSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("-"),
            Self::Task(id) => write!(f, "{id}"),
            Self::Request { origin, id } => write!(f, "{id} from {origin}"),
        }
    }
}

/// One recorded occurrence: a kind, a subject, and optional time and place.
///
/// Built with [`TraceEvent::new`], [`TraceEvent::task`] or
/// [`TraceEvent::request`], then refined with the `with_*` methods; the
/// fields are public to read. `#[non_exhaustive]` keeps room for more
/// optional context, so build events through the constructors.
///
/// # Examples
///
/// ```
/// use dinah_core::{IdError, Instant, RequestId, TraceEvent, TraceEventKind, WorkerId, WorldSize};
///
/// let origin = WorldSize::new(4)?.rank(2)?;
/// let event = TraceEvent::request(TraceEventKind::RequestSent, origin, RequestId::new(9)?)
///     .with_time(Instant::from_nanos(1_500))
///     .with_worker(WorkerId::new(3)?);
/// assert_eq!(event.at, Some(Instant::from_nanos(1_500)));
/// assert_eq!(event.domain, None);
/// assert_eq!(
///     event.to_string(),
///     "request-sent request#9 from rank 2 at t+1500ns on worker#3"
/// );
/// # Ok::<(), IdError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TraceEvent {
    /// What happened.
    pub kind: TraceEventKind,
    /// What it happened to.
    pub subject: TraceSubject,
    /// When, on the clock the recorder uses, if it recorded a time.
    pub at: Option<Instant>,
    /// The worker it happened on, if any. Whoever records the event
    /// decides what the ID names; `dinah-std`'s worker domains number
    /// their worker threads so that no two workers of one runtime share an
    /// ID (the first declared domain's workers from 1, the next domain's
    /// after those), and leave this empty for events off a worker, such as
    /// a submission or an inline handler on the owner thread.
    pub worker: Option<WorkerId>,
    /// The worker domain it happened in, if any.
    pub domain: Option<DomainId>,
}

impl TraceEvent {
    /// An event of `kind` about `subject`, with no time or place.
    pub const fn new(kind: TraceEventKind, subject: TraceSubject) -> Self {
        Self {
            kind,
            subject,
            at: None,
            worker: None,
            domain: None,
        }
    }

    /// An event of `kind` about the local task `id`.
    pub const fn task(kind: TraceEventKind, id: TaskId) -> Self {
        Self::new(kind, TraceSubject::Task(id))
    }

    /// An event of `kind` about the request `id` issued by `origin`.
    pub const fn request(kind: TraceEventKind, origin: Rank, id: RequestId) -> Self {
        Self::new(kind, TraceSubject::Request { origin, id })
    }

    /// This event, recorded at `at`.
    #[must_use]
    pub const fn with_time(mut self, at: Instant) -> Self {
        self.at = Some(at);
        self
    }

    /// This event, on `worker`.
    #[must_use]
    pub const fn with_worker(mut self, worker: WorkerId) -> Self {
        self.worker = Some(worker);
        self
    }

    /// This event, in `domain`.
    #[must_use]
    pub const fn with_domain(mut self, domain: DomainId) -> Self {
        self.domain = Some(domain);
        self
    }
}

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.subject)?;
        if let Some(at) = self.at {
            write!(f, " at {at}")?;
        }
        if let Some(worker) = self.worker {
            write!(f, " on {worker}")?;
        }
        if let Some(domain) = self.domain {
            write!(f, " in {domain}")?;
        }
        Ok(())
    }
}

/// [`TraceBuffer::record`] found the buffer full; the rejected event is
/// handed back and the recorded history is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceFullError {
    event: TraceEvent,
}

impl TraceFullError {
    /// The event that was not recorded.
    pub const fn into_inner(self) -> TraceEvent {
        self.event
    }
}

impl fmt::Display for TraceFullError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("trace buffer is full")
    }
}

impl core::error::Error for TraceFullError {}

/// A bounded, thread-safe, in-order record of up to `N` trace events.
///
/// Each [`TraceEvent`] says what happened ([`TraceEventKind`]), to what
/// ([`TraceSubject`]: a local task or a remote request), and optionally when
/// and where (instant, worker, domain). It is a small `Copy` value without
/// strings or payloads, so recording never allocates and never copies user
/// data.
///
/// The buffer keeps up to `N` events in recording order (`N == 0` fails to
/// compile), in a `const`-constructible value that can be a `static`. It
/// never overwrites history: when full, [`TraceBuffer::record`] rejects the new
/// event and hands it back inside [`TraceFullError`]; the caller decides
/// whether to drain, count the loss, or stop tracing. Any number of threads
/// may record at once (the buffer is `Sync`); events from one thread keep
/// that thread's order, while the interleaving between threads is simply
/// the order in which they took the buffer's short internal lock.
///
/// Nothing records automatically: the runtime (or the application) calls
/// [`TraceBuffer::record`] at the points it wants to observe. The lock is
/// held only to copy events in or out; no user code runs under it. It is a
/// spin lock, so do not record from an interrupt handler into a buffer that
/// the interrupted code may be recording into.
///
/// # Examples
///
/// ```
/// use dinah_core::{TaskId, TraceBuffer, TraceEvent, TraceEventKind};
///
/// static TRACE: TraceBuffer<64> = TraceBuffer::new();
///
/// let task = TaskId::new(7)?;
/// TRACE.record(TraceEvent::task(TraceEventKind::Submitted, task))?;
/// TRACE.record(TraceEvent::task(TraceEventKind::Completed, task))?;
///
/// let kinds: Vec<_> = TRACE.drain().iter().map(|event| event.kind).collect();
/// assert_eq!(kinds, [TraceEventKind::Submitted, TraceEventKind::Completed]);
/// assert!(TRACE.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A full buffer keeps its history and returns the newcomer:
///
/// ```
/// use dinah_core::{TraceBuffer, TraceEvent, TraceEventKind, TraceSubject};
///
/// let trace: TraceBuffer<1> = TraceBuffer::new();
/// let first = TraceEvent::new(TraceEventKind::PeerDown, TraceSubject::None);
/// let second = TraceEvent::new(TraceEventKind::ProtocolRejected, TraceSubject::None);
/// assert!(trace.record(first).is_ok());
/// let rejected = trace.record(second).unwrap_err();
/// assert_eq!(rejected.into_inner(), second);
/// assert_eq!(trace.snapshot().as_slice(), [first]);
/// ```
pub struct TraceBuffer<const N: usize> {
    events: Mutex<Vec<TraceEvent, N>>,
}

impl<const N: usize> TraceBuffer<N> {
    /// An empty buffer; a `const fn`, so the buffer can be a `static`.
    #[cfg(not(dinah_loom))]
    pub const fn new() -> Self {
        const { assert!(N > 0, "a TraceBuffer needs a capacity of at least one") };
        Self {
            events: Mutex::new(Vec::new()),
        }
    }

    /// An empty buffer (not `const` under `--cfg dinah_loom`).
    #[cfg(dinah_loom)]
    pub fn new() -> Self {
        const { assert!(N > 0, "a TraceBuffer needs a capacity of at least one") };
        Self {
            events: Mutex::new(Vec::new()),
        }
    }

    /// Appends `event` after every event recorded so far.
    ///
    /// # Errors
    ///
    /// [`TraceFullError`] holding `event` when the buffer already holds `N`
    /// events; nothing recorded is overwritten.
    pub fn record(&self, event: TraceEvent) -> Result<(), TraceFullError> {
        self.events
            .lock()
            .push(event)
            .map_err(|event| TraceFullError { event })
    }

    /// A copy of the recorded events, oldest first; the buffer keeps them.
    pub fn snapshot(&self) -> Vec<TraceEvent, N> {
        self.events.lock().clone()
    }

    /// Removes and returns every recorded event, oldest first, leaving the
    /// buffer empty and ready for reuse.
    pub fn drain(&self) -> Vec<TraceEvent, N> {
        core::mem::take(&mut *self.events.lock())
    }

    /// Removes every recorded event and passes each to `f`, oldest first.
    ///
    /// The events are taken out under the lock and `f` runs after it is
    /// released, so `f` may itself record into this buffer (those events
    /// are kept for the next drain).
    pub fn drain_with(&self, f: impl FnMut(TraceEvent)) {
        self.drain().into_iter().for_each(f);
    }

    /// Forgets every recorded event.
    pub fn clear(&self) {
        self.events.lock().clear();
    }

    /// The number of recorded events (outdated as soon as another thread
    /// records or drains).
    pub fn len(&self) -> usize {
        self.events.lock().len()
    }

    /// Is the buffer empty? (Outdated as soon as another thread records.)
    pub fn is_empty(&self) -> bool {
        self.events.lock().is_empty()
    }

    /// Is the buffer full, so that the next [`record`](Self::record) fails
    /// unless someone drains first?
    pub fn is_full(&self) -> bool {
        self.events.lock().is_full()
    }

    /// The number of events the buffer can hold: `N`.
    pub const fn capacity(&self) -> usize {
        N
    }
}

impl<const N: usize> Default for TraceBuffer<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Debug for TraceBuffer<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceBuffer")
            .field("capacity", &N)
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests;
