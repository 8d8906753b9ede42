//! Opt-in instrumentation of worker domains: metrics and trace events.
//!
//! A domain started with an [`Instrumentation`] records every job's
//! lifecycle at the place it happens: admission (`submitted`), the start
//! of user code on a worker (`started`), its end (`completed`, `failed`,
//! or `cancellation acknowledged` when it stopped on a request), a queued
//! job cancelled before it ran (`cancellation requested` by whoever asked,
//! `cancellation acknowledged` where it was skipped). A domain started
//! without one checks a single `Option` per job (per batch for batches)
//! and records nothing.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dinah_core::{
    DomainId, RuntimeMetrics, TaskFailureKind, TaskId, TraceBuffer, TraceEvent, TraceEventKind,
    TraceFullError,
};

/// Where a domain sends its trace events.
///
/// Implemented for [`TraceBuffer`]; implement it to forward events
/// elsewhere (a log, an exporter). `record` is called on worker threads and
/// on submitting threads, so it must be quick and must not block for long.
/// It must not panic either: a panic there escapes into the worker pool,
/// which aborts the process like any panic outside a job.
pub trait TraceSink: Send + Sync {
    /// Records `event`.
    ///
    /// # Errors
    ///
    /// [`TraceFullError`] holding `event` if the sink has no room; the
    /// domain counts such events (see [`Instrumentation::trace_rejected`])
    /// and carries on.
    fn record(&self, event: TraceEvent) -> Result<(), TraceFullError>;
}

impl<const N: usize> TraceSink for TraceBuffer<N> {
    fn record(&self, event: TraceEvent) -> Result<(), TraceFullError> {
        TraceBuffer::record(self, event)
    }
}

/// Metrics and, optionally, a trace sink that one or more domains record
/// into.
///
/// Share one `Arc<Instrumentation>` between domains to aggregate them;
/// trace events carry their [`DomainId`] (and the [`WorkerId`](dinah_core::WorkerId) of the
/// worker for events that happen on a worker: see
/// [`DomainConfig::first_worker`](crate::DomainConfig::first_worker) for
/// how workers are numbered), plus the time since [`epoch`](Self::epoch).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use dinah_core::TraceBuffer;
/// use dinah_std::Instrumentation;
///
/// let trace = Arc::new(TraceBuffer::<64>::new());
/// let instrumentation = Instrumentation::with_trace(trace.clone());
/// assert_eq!(instrumentation.metrics().snapshot().submitted, 0);
/// assert!(trace.is_empty());
/// ```
pub struct Instrumentation {
    metrics: RuntimeMetrics,
    trace: Option<Arc<dyn TraceSink>>,
    trace_rejected: AtomicU64,
    epoch: std::time::Instant,
}

impl Instrumentation {
    /// Metrics only, no trace.
    #[must_use]
    pub fn new() -> Self {
        Self {
            metrics: RuntimeMetrics::new(),
            trace: None,
            trace_rejected: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
        }
    }

    /// Metrics plus trace events sent to `sink`.
    #[must_use]
    pub fn with_trace(sink: Arc<dyn TraceSink>) -> Self {
        Self {
            trace: Some(sink),
            ..Self::new()
        }
    }

    /// The counters.
    #[must_use]
    pub fn metrics(&self) -> &RuntimeMetrics {
        &self.metrics
    }

    /// The trace sink, if any.
    #[must_use]
    pub fn trace(&self) -> Option<&Arc<dyn TraceSink>> {
        self.trace.as_ref()
    }

    /// Trace events the sink refused because it was full (`Relaxed`: a
    /// statistic).
    #[must_use]
    pub fn trace_rejected(&self) -> u64 {
        self.trace_rejected.load(Ordering::Relaxed)
    }

    /// The instant trace timestamps count from (when this value was built).
    #[must_use]
    pub fn epoch(&self) -> std::time::Instant {
        self.epoch
    }

    fn trace_event(&self, kind: TraceEventKind, domain: DomainId, task: TaskId, on_worker: bool) {
        let Some(sink) = &self.trace else {
            return;
        };
        let nanos = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut event = TraceEvent::task(kind, task)
            .with_domain(domain)
            .with_time(dinah_core::Instant::from_nanos(nanos));
        if on_worker {
            if let Some(worker) = super::worker::current() {
                event = event.with_worker(worker);
            }
        }
        if sink.record(event).is_err() {
            self.trace_rejected.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A job (or one task of a batch) was admitted.
    pub(crate) fn submitted(&self, domain: DomainId, task: TaskId) {
        self.metrics.record_submitted();
        self.trace_event(TraceEventKind::Submitted, domain, task, false);
    }

    /// User code is about to run on a worker.
    pub(crate) fn started(&self, domain: DomainId, task: TaskId) {
        self.metrics.record_started();
        self.trace_event(TraceEventKind::Started, domain, task, true);
    }

    /// A job ended after it started (or was skipped, for `Cancelled`).
    pub(crate) fn finished(
        &self,
        domain: DomainId,
        task: TaskId,
        failure: Option<TaskFailureKind>,
    ) {
        let kind = match failure {
            None => {
                self.metrics.record_completed();
                TraceEventKind::Completed
            }
            Some(TaskFailureKind::Cancelled) => {
                self.metrics.record_cancellation_acknowledged();
                TraceEventKind::CancellationAcknowledged
            }
            Some(_) => {
                self.metrics.record_failed();
                TraceEventKind::Failed
            }
        };
        self.trace_event(kind, domain, task, true);
    }

    /// Someone asked for a job to be cancelled (first request only).
    pub(crate) fn cancellation_requested(&self, domain: DomainId, task: TaskId) {
        self.metrics.record_cancellation_requested();
        self.trace_event(TraceEventKind::CancellationRequested, domain, task, false);
    }
}

impl Default for Instrumentation {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Instrumentation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instrumentation")
            .field("metrics", &self.metrics.snapshot())
            .field("traced", &self.trace.is_some())
            .field("trace_rejected", &self.trace_rejected())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_update_metrics_and_trace() {
        let trace = Arc::new(TraceBuffer::<8>::new());
        let instrumentation = Instrumentation::with_trace(trace.clone());
        let (domain, task) = (DomainId::MIN, TaskId::MIN);
        instrumentation.submitted(domain, task);
        instrumentation.started(domain, task);
        instrumentation.finished(domain, task, None);
        instrumentation.finished(domain, task, Some(TaskFailureKind::Panicked));
        instrumentation.cancellation_requested(domain, task);
        instrumentation.finished(domain, task, Some(TaskFailureKind::Cancelled));
        let snapshot = instrumentation.metrics().snapshot();
        assert_eq!(
            (
                snapshot.submitted,
                snapshot.started,
                snapshot.completed,
                snapshot.failed
            ),
            (1, 1, 1, 1)
        );
        assert_eq!(
            (
                snapshot.cancellation_requested,
                snapshot.cancellation_acknowledged
            ),
            (1, 1)
        );
        let kinds: Vec<_> = trace.snapshot().iter().map(|event| event.kind).collect();
        assert_eq!(
            kinds,
            [
                TraceEventKind::Submitted,
                TraceEventKind::Started,
                TraceEventKind::Completed,
                TraceEventKind::Failed,
                TraceEventKind::CancellationRequested,
                TraceEventKind::CancellationAcknowledged,
            ]
        );
        assert!(trace.snapshot().iter().all(|e| e.domain == Some(domain)));
        assert!(
            trace.snapshot().iter().all(|e| e.worker.is_none()),
            "not on a worker"
        );
    }

    #[test]
    fn a_full_sink_is_counted_not_fatal() {
        let trace = Arc::new(TraceBuffer::<1>::new());
        let instrumentation = Instrumentation::with_trace(trace.clone());
        for _ in 0..3 {
            instrumentation.submitted(DomainId::MIN, TaskId::MIN);
        }
        assert_eq!(trace.len(), 1);
        assert_eq!(instrumentation.trace_rejected(), 2);
        assert_eq!(instrumentation.metrics().snapshot().submitted, 3);
    }
}
