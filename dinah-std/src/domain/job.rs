//! Running one job: the cancellation check, the context user code sees,
//! panic capture and outcome classification.

use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};

use dinah_core::{
    CancelFlag, CancellationRequested, DomainId, TaskFailure, TaskFailureKind, TaskId, TaskOutcome,
    WorkerId,
};

use super::DomainShared;
use super::completion::{Completion, CompletionQueue};
use super::drain_context::Context;
use super::handle::{CancelTarget, JobCore, JobSlot};
use super::panic_text;

/// What a running job can ask about itself: its identity and whether it
/// should stop.
///
/// Handed by reference to every job submitted with
/// [`Domain::try_submit`](crate::Domain::try_submit) or
/// [`Domain::try_submit_to`](crate::Domain::try_submit_to).
///
/// # Cancellation
///
/// Cancellation is cooperative. A job that has not started when its
/// cancellation is requested never runs. A running job learns of a request
/// by polling [`is_cancellation_requested`](Self::is_cancellation_requested)
/// and *acknowledges* it through [`check`](Self::check) (which returns
/// `Err` when a request is pending) or
/// [`acknowledge_cancellation`](Self::acknowledge_cancellation). A job
/// that acknowledged ends [`Cancelled`](dinah_core::TaskFailureKind::Cancelled)
/// whatever it returns afterwards; a job that never acknowledges ends with
/// what it returns, even if a request arrived meanwhile.
///
/// A request comes from the job's own handle or canceller, or from a
/// domain shutdown with [`ShutdownPolicy::CancelAll`](crate::ShutdownPolicy::CancelAll).
///
/// # Examples
///
/// ```
/// use dinah_core::{CancellationRequested, DomainId};
/// use dinah_std::{Domain, DomainConfig};
/// # use std::num::NonZeroUsize;
///
/// let domain = Domain::start(DomainConfig::new(DomainId::new(1)?, NonZeroUsize::MIN, NonZeroUsize::MIN), None)?;
/// let handle = domain
///     .try_submit(|ctx| -> Result<u64, CancellationRequested> {
///         let mut sum = 0;
///         for i in 0..1_000 {
///             ctx.check()?; // stop here if asked to
///             sum += i;
///         }
///         Ok(sum)
///     })?;
/// assert_eq!(handle.join()?, 499_500);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct JobContext<'a> {
    task: TaskId,
    domain: DomainId,
    job_cancel: &'a CancelFlag,
    domain_cancel: &'a CancelFlag,
    acknowledged: Cell<bool>,
}

impl JobContext<'_> {
    /// The job's task ID, unique among the jobs of its domain.
    #[must_use]
    pub fn task_id(&self) -> TaskId {
        self.task
    }

    /// The domain the job runs in.
    #[must_use]
    pub fn domain_id(&self) -> DomainId {
        self.domain
    }

    /// The index (from 0) of the worker thread running the job, within its
    /// domain's pool.
    #[must_use]
    pub fn worker_index(&self) -> Option<usize> {
        rayon::current_thread_index()
    }

    /// The [`WorkerId`] of the worker thread running the job (see
    /// [`DomainConfig::first_worker`](crate::DomainConfig::first_worker)),
    /// or `None` when the job runs elsewhere: an inline handler on a
    /// runtime's owner thread.
    #[must_use]
    pub fn worker_id(&self) -> Option<WorkerId> {
        super::worker::current()
    }

    /// Has cancellation of this job been requested? Does not acknowledge.
    #[must_use]
    pub fn is_cancellation_requested(&self) -> bool {
        self.job_cancel.is_requested() || self.domain_cancel.is_requested()
    }

    /// A safe point for `?`: `Ok(())` to carry on, or
    /// `Err(CancellationRequested)` (acknowledging the request) to stop.
    ///
    /// # Errors
    ///
    /// [`CancellationRequested`] if cancellation was requested; the job
    /// then ends `Cancelled` whatever it returns.
    pub fn check(&self) -> Result<(), CancellationRequested> {
        if self.acknowledge_cancellation() {
            Err(CancellationRequested)
        } else {
            Ok(())
        }
    }

    /// Acknowledges a pending cancellation request: returns `true` (and
    /// makes the job end `Cancelled` whatever it returns) if one was
    /// requested, `false` (changing nothing) otherwise.
    pub fn acknowledge_cancellation(&self) -> bool {
        let requested = self.is_cancellation_requested();
        if requested {
            self.acknowledged.set(true);
        }
        requested
    }
}

impl fmt::Debug for JobContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("task", &self.task)
            .field("domain", &self.domain)
            .field("cancellation_requested", &self.is_cancellation_requested())
            .field("acknowledged", &self.acknowledged.get())
            .finish()
    }
}

/// A type-erased admitted job waiting in the domain's queue.
///
/// Exactly one of the two methods is called, exactly once: whoever pops
/// the job from the queue owns it. The job is shared (`Arc`) because a
/// completion job is also its own cancellation target: one allocation
/// holds the work, the task ID and the cancellation flag.
pub(crate) trait QueuedJob: Send + Sync {
    /// Runs the job (unless it is found cancelled) and delivers its
    /// outcome.
    fn run(self: Arc<Self>, domain: &DomainShared, context: Context<'_>);
    /// Delivers `Cancelled` without running user code (shutdown).
    fn cancel(self: Arc<Self>, domain: &DomainShared, context: Context<'_>);
}

/// The part of a queued job that is used up when it runs, taken exactly
/// once by whoever popped the job (the lock is never contended: it only
/// makes the one-time move out of a shared job safe).
pub(crate) struct Work<W>(Mutex<Option<W>>);

impl<W> Work<W> {
    pub(crate) const fn new(work: W) -> Self {
        Self(Mutex::new(Some(work)))
    }

    /// The work; panics on a second call (a queue accounting bug).
    pub(crate) fn take(&self) -> W {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("a queued job is popped, so taken, once")
    }
}

/// A failure from a caught panic: its text is what the panic hook recorded
/// on this thread (see [`panic_text`](super::panic_text)); the payload
/// itself is only dropped.
pub(crate) fn panicked<E>(payload: Box<dyn Any + Send>) -> TaskFailure<E> {
    let text = panic_text::take();
    let failure = TaskFailure::panicked(
        text.as_ref()
            .map_or(panic_text::NOT_KEPT, panic_text::PanicText::as_str),
    );
    // A payload whose destructor panics must not take the worker down.
    let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(payload)));
    // That second panic's text, if any, is not this failure's.
    let _ = panic_text::take();
    failure
}

/// Runs `job` on the calling thread as a task of no domain: for the
/// runtime's own actions, which need neither a worker nor a domain's
/// shutdown flag. A panic becomes a failure, as for any job.
pub(crate) fn run_detached<F, T, E>(domain: DomainId, job: F) -> TaskOutcome<T, E>
where
    F: FnOnce(&JobContext<'_>) -> Result<T, E>,
{
    let never = CancelFlag::new();
    let context = JobContext {
        task: TaskId::MIN,
        domain,
        job_cancel: &never,
        domain_cancel: &never,
        acknowledged: Cell::new(false),
    };
    match panic::catch_unwind(AssertUnwindSafe(|| job(&context))) {
        Ok(result) => TaskOutcome::from(result),
        Err(payload) => TaskOutcome::Failed(panicked(payload)),
    }
}

/// Runs `job` as task `task` of `domain`, unless it is already cancelled:
/// the one place single jobs meet user code.
///
/// Records the lifecycle events when the domain is instrumented.
pub(crate) fn execute<F, T, E>(
    domain: &DomainShared,
    task: TaskId,
    cancel: &CancelFlag,
    job: F,
) -> TaskOutcome<T, E>
where
    F: FnOnce(&JobContext<'_>) -> Result<T, E>,
{
    let instrumentation = domain.instrumentation.as_deref();
    if domain.admission.cancels_queued() {
        domain.cancelled_by_shutdown(task, Some(cancel));
        return TaskOutcome::Failed(TaskFailure::cancelled());
    }
    if cancel.is_requested() {
        // The canceller recorded the request; this is the acknowledgement.
        if let Some(instrumentation) = instrumentation {
            instrumentation.finished(domain.id, task, Some(TaskFailureKind::Cancelled));
        }
        return TaskOutcome::Failed(TaskFailure::cancelled());
    }
    if let Some(instrumentation) = instrumentation {
        instrumentation.started(domain.id, task);
    }
    let context = JobContext {
        task,
        domain: domain.id,
        job_cancel: cancel,
        domain_cancel: &domain.cancel_running,
        acknowledged: Cell::new(false),
    };
    let outcome = match panic::catch_unwind(AssertUnwindSafe(|| job(&context))) {
        Ok(_) if context.acknowledged.get() => TaskOutcome::Failed(TaskFailure::cancelled()),
        Ok(result) => TaskOutcome::from(result),
        Err(payload) => TaskOutcome::Failed(panicked(payload)),
    };
    if let Some(instrumentation) = instrumentation {
        instrumentation.finished(domain.id, task, outcome.failure().map(TaskFailure::kind));
    }
    outcome
}

/// A job whose outcome goes to a [`JobHandle`].
pub(crate) struct HandleJob<F, T, E> {
    pub(crate) job: Work<F>,
    pub(crate) slot: Arc<JobSlot<T, E>>,
}

impl<F, T, E> QueuedJob for HandleJob<F, T, E>
where
    F: FnOnce(&JobContext<'_>) -> Result<T, E> + Send,
    T: Send,
    E: Send,
{
    fn run(self: Arc<Self>, domain: &DomainShared, _: Context<'_>) {
        let job = self.job.take();
        let outcome = execute(domain, self.slot.task, &self.slot.cancel, job);
        self.slot.complete(outcome);
    }

    fn cancel(self: Arc<Self>, domain: &DomainShared, _: Context<'_>) {
        drop(self.job.take());
        domain.cancelled_by_shutdown(self.slot.task, Some(&self.slot.cancel));
        self.slot
            .complete(TaskOutcome::Failed(TaskFailure::cancelled()));
    }
}

/// Where a completion job's outcome goes: the [`CompletionQueue`] whose
/// slot its admission reserved.
pub(crate) trait CompletionSink<K, T, E>: Send {
    /// Pushes `completion` into the slot reserved for it and wakes the
    /// queue's owner.
    fn deliver(&self, completion: Completion<K, T, E>);
}

impl<K: Send, T: Send, E: Send> CompletionSink<K, T, E> for Arc<CompletionQueue<K, T, E>> {
    fn deliver(&self, completion: Completion<K, T, E>) {
        CompletionQueue::deliver(self, completion);
    }
}

/// A job whose outcome goes to a [`CompletionSink`]: one allocation
/// shared by the queue (then the worker) and the job's
/// [`JobCanceller`](crate::JobCanceller), which cancels through `core`.
pub(crate) struct CompletionJob<K, F, S, T, E> {
    pub(crate) core: JobCore,
    /// The key, the job and the sink of its outcome. The worker takes all
    /// three, so it can let go of the shared job before the outcome is
    /// delivered: the owner, who allocated it, is then usually the one who
    /// frees it, on its own thread.
    pub(crate) work: Work<(K, F, S)>,
    pub(crate) outcome: PhantomData<fn() -> (T, E)>,
}

impl<K, F, S, T, E> CancelTarget for CompletionJob<K, F, S, T, E>
where
    K: Send + 'static,
    F: Send + 'static,
    S: Send + 'static,
    T: 'static,
    E: 'static,
{
    fn cancel_flag(&self) -> &CancelFlag {
        &self.core.cancel
    }
    fn task_id(&self) -> TaskId {
        self.core.task
    }
}

impl<K, F, S, T, E> QueuedJob for CompletionJob<K, F, S, T, E>
where
    K: Send,
    F: FnOnce(&JobContext<'_>) -> Result<T, E> + Send,
    S: CompletionSink<K, T, E>,
{
    fn run(self: Arc<Self>, domain: &DomainShared, _: Context<'_>) {
        let (key, job, sink) = self.work.take();
        let task = self.core.task;
        let outcome = execute(domain, task, &self.core.cancel, job);
        drop(self);
        sink.deliver(Completion { key, task, outcome });
    }

    fn cancel(self: Arc<Self>, domain: &DomainShared, _: Context<'_>) {
        let (key, job, sink) = self.work.take();
        drop(job);
        let task = self.core.task;
        domain.cancelled_by_shutdown(task, Some(&self.core.cancel));
        drop(self);
        sink.deliver(Completion {
            key,
            task,
            outcome: TaskOutcome::Failed(TaskFailure::cancelled()),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure_of(job: impl FnOnce() -> Result<(), ()>) -> TaskFailure<()> {
        super::super::panic_text::install();
        match run_detached(DomainId::MIN, |_| job()) {
            TaskOutcome::Failed(failure) => failure,
            TaskOutcome::Completed(()) => panic!("the job panics"),
        }
    }

    #[test]
    fn a_panic_fails_the_job_with_its_text() {
        let failure = failure_of(|| panic!("static text"));
        assert_eq!(failure.kind(), TaskFailureKind::Panicked);
        assert_eq!(failure.panic_message(), Some("static text"));
        let n = 7;
        let failure = failure_of(|| panic!("formatted {n}"));
        assert_eq!(failure.panic_message(), Some("formatted 7"));
        let failure = failure_of(|| panic::panic_any(42_u32));
        assert_eq!(failure.panic_message(), Some(panic_text::NOT_A_STRING));
    }

    #[test]
    fn a_payload_that_panics_on_drop_is_contained() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("payload destructor");
            }
        }
        let failure = failure_of(|| panic::panic_any(Bomb));
        assert_eq!(failure.panic_message(), Some(panic_text::NOT_A_STRING));
        // The destructor's panic is neither this failure's text nor left
        // behind for the next one.
        assert_eq!(panic_text::take(), None);
    }

    #[test]
    fn without_a_recorded_text_the_failure_says_so() {
        let _ = panic_text::take();
        let failure: TaskFailure<()> = panicked(Box::new("never raised"));
        assert_eq!(failure.panic_message(), Some(panic_text::NOT_KEPT));
    }

    #[test]
    fn context_acknowledges_only_pending_requests() {
        let (job, domain) = (CancelFlag::new(), CancelFlag::new());
        let context = JobContext {
            task: TaskId::MIN,
            domain: DomainId::MIN,
            job_cancel: &job,
            domain_cancel: &domain,
            acknowledged: Cell::new(false),
        };
        assert_eq!(context.check(), Ok(()));
        assert!(!context.acknowledged.get());
        domain.request();
        assert!(context.is_cancellation_requested());
        assert!(!context.acknowledged.get(), "asking is not acknowledging");
        assert_eq!(context.check(), Err(CancellationRequested));
        assert!(context.acknowledged.get());
        assert_eq!(context.worker_index(), None);
        assert!(format!("{context:?}").contains("acknowledged: true"));
    }
}
