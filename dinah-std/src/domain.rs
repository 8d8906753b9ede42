//! Worker domains: persistent, fixed-size pools that run jobs under a
//! bounded admission contract. The contract is documented on [`Domain`];
//! the parts live in `domain/` (admission, job execution, handles,
//! completion queue, batches, shutdown, instrumentation, waiting).

mod admission;
mod batch;
mod batch_drive;
mod batch_results;
mod completion;
mod config;
mod drain_context;
mod error;
mod handle;
mod helpers;
mod instrument;
mod job;
mod panic_text;
mod shutdown;
mod spare_jobs;
mod wait;
mod worker;

use std::fmt;
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use dinah_core::{AdmitError, CancelFlag, DomainId, Drainers, TaskId, TaskOutcome};

use admission::{Admission, AdmissionGuard};
pub(crate) use drain_context::{Context, OwnerLink};
use handle::JobSlot;
pub(crate) use handle::{CancelTarget, JobCore};
pub(crate) use job::CompletionSink;
use job::{CompletionJob, HandleJob};
pub(crate) use job::{QueuedJob, Work, execute, run_detached};
pub(crate) use panic_text::install as install_panic_hook;
use shutdown::Roster;
pub(crate) use spare_jobs::SpareJobs;
use wait::{AdaptiveSpin, Pace};

pub use batch_results::{BatchFailure, BatchResult, BatchResults, BatchResultsIntoIter};
pub use completion::{Completion, CompletionQueue};
pub use config::{DEFAULT_SPIN_BEFORE_PARK, DomainConfig};
pub use error::{DomainShutdownTimeout, DomainStartError, TrySubmitError};
pub use handle::{JobCanceller, JobHandle, JoinTimeoutError};
pub use instrument::{Instrumentation, TraceSink};
pub use job::JobContext;
pub use shutdown::{DomainShutdownReport, ShutdownPolicy};

/// The part of a domain its workers share.
pub(crate) struct DomainShared {
    pub(crate) id: DomainId,
    /// Worker threads the pool really runs.
    pub(crate) workers: usize,
    /// The spin of callers waiting on job handles.
    pub(crate) spin_jobs: Arc<AdaptiveSpin>,
    /// The spin of callers waiting for a batch.
    pub(crate) spin_batches: AdaptiveSpin,
    pub(crate) admission: Admission,
    /// Admitted jobs not yet picked up, in admission order. Sized to the
    /// admission capacity, so a push after admission always fits.
    pub(crate) queue: ArrayQueue<Arc<dyn QueuedJob>>,
    /// Set by a [`ShutdownPolicy::CancelAll`] shutdown; every running job's
    /// context reports it.
    pub(crate) cancel_running: CancelFlag,
    pub(crate) instrumentation: Option<Arc<Instrumentation>>,
    /// The next task ID (`Relaxed`: only uniqueness matters). On a cache
    /// line of its own, like the other counters a submission updates:
    /// the submitting thread (usually the runtime's owner) then keeps it,
    /// instead of fetching it back from the workers that write the
    /// fields around it (see `docs/architecture.md`).
    next_task: CachePadded<AtomicU64>,
    /// Jobs and batch tasks a cancelling shutdown stopped before they ran
    /// (`Relaxed`: a count read after the work is done, when the
    /// admission counter has already synchronised with it).
    shutdown_cancelled: AtomicUsize,
    /// The trampolines draining the queue: a job starts a new one while
    /// fewer than `workers` are active. Its own cache line: submitters
    /// and workers both update it.
    trampolines: CachePadded<Drainers>,
    /// The link to the runtime that owns the domain, if any.
    owner: OnceLock<OwnerLink>,
}

impl DomainShared {
    /// `count` consecutive fresh task IDs; returns the first.
    pub(crate) fn reserve_task_ids(&self, count: u64) -> u64 {
        self.next_task.fetch_add(count, Ordering::Relaxed)
    }

    /// Task ID number `n` (saturating at the largest ID after 2^64 tasks).
    pub(crate) fn task_id(n: u64) -> TaskId {
        NonZeroU64::new(n).map_or(TaskId::MAX, TaskId::from_non_zero)
    }

    /// A fresh task ID for an admitted job, recorded as submitted.
    fn next_task(&self) -> TaskId {
        let task = Self::task_id(self.reserve_task_ids(1));
        if let Some(instrumentation) = &self.instrumentation {
            instrumentation.submitted(self.id, task);
        }
        task
    }

    /// The body of a trampoline (a closure spawned into the pool): runs
    /// queued jobs, oldest first, until the queue is empty, then leaves
    /// (see [`Drainers`] for why no job is left behind). One trampoline
    /// per job cost a Rayon spawn per job (a heap job, an injector slot,
    /// often a worker's wake-up).
    fn drain(&self) {
        self.with_context(&mut |context| {
            loop {
                while let Some(job) = self.queue.pop() {
                    let _admission = AdmissionGuard(&self.admission);
                    job.run(self, context);
                }
                if !self.trampolines.leave(|| self.queue.is_empty()) {
                    return;
                }
            }
        });
    }

    /// Runs `f` with the owner's context (see [`OwnerLink`]).
    pub(crate) fn with_context(&self, f: &mut dyn FnMut(Context<'_>)) {
        match self.owner.get() {
            Some(owner) => owner.enter(f),
            None => f(None),
        }
    }

    /// Counts and records a job (or batch task) that a cancelling shutdown
    /// stopped before it ran: the shutdown is the one asking, so the
    /// request is recorded (once per job) along with the acknowledgement.
    pub(crate) fn cancelled_by_shutdown(&self, task: TaskId, cancel: Option<&CancelFlag>) {
        self.shutdown_cancelled.fetch_add(1, Ordering::Relaxed);
        if let Some(instrumentation) = &self.instrumentation {
            if cancel.is_none_or(CancelFlag::request) {
                instrumentation.cancellation_requested(self.id, task);
            }
            instrumentation.finished(self.id, task, Some(dinah_core::TaskFailureKind::Cancelled));
        }
    }

    /// Jobs and batch tasks cancelled by shutdown so far.
    pub(crate) fn shutdown_cancelled(&self) -> usize {
        self.shutdown_cancelled.load(Ordering::Relaxed)
    }
}

/// Runs jobs of a domain on the calling thread, as the runtime does for
/// actions registered inline, whose handlers are too short to be worth a
/// thread hand-off.
///
/// It holds only the domain's shared state, so the owner thread keeps one
/// per domain and reaches it without the lock on the runtime's domain
/// list. After the domain's shutdown began it runs nothing.
pub(crate) struct InlineRunner {
    shared: Arc<DomainShared>,
}

impl InlineRunner {
    /// Runs `job` on the calling thread as a task of the domain (a fresh
    /// task ID, the domain's instrumentation and shutdown cancellation),
    /// without taking a queue slot or waking a worker. `None` if the
    /// domain no longer accepts work.
    pub(crate) fn run<F, T, E>(&self, job: F) -> Option<TaskOutcome<T, E>>
    where
        F: FnOnce(&JobContext<'_>) -> Result<T, E>,
    {
        if !self.shared.admission.is_open() {
            return None;
        }
        let task = self.shared.next_task();
        Some(job::execute(&self.shared, task, &CancelFlag::new(), job))
    }
}

/// A persistent, fixed-size pool of worker threads with bounded admission.
///
/// A domain owns a dedicated Rayon thread pool of `workers` threads
/// (see [`DomainConfig`]). The long-lived runtime runs its action handlers
/// on domains; local callers use them directly for jobs and batches that
/// should not pay thread start-up on every call.
///
/// # Admission
///
/// A domain admits at most `queue_capacity + workers` jobs at once. A job
/// holds its admission from the moment it is accepted until its outcome has
/// been delivered; a full domain hands the job straight back inside
/// [`TrySubmitError::Full`], and nothing is queued beyond the bound. A
/// batch ([`Domain::run_batch`]) is admitted as one unit: it holds one
/// admission for the whole call, whatever its length, because its tasks
/// live in the caller's vector and the caller is blocked until they finish.
///
/// # Three ways to get results
///
/// - [`Domain::try_submit`] returns a [`JobHandle`]; `join` spins briefly,
///   then parks until the worker wakes it.
/// - [`Domain::try_submit_to`] delivers a [`Completion`] to a bounded
///   [`CompletionQueue`] that an owner thread drains (the runtime's path).
///   Admission reserves the completion's slot, so a worker's push can never
///   fail and no unbounded fallback exists.
/// - [`Domain::run_batch`] runs a vector of tasks inside the pool with
///   Rayon's own work splitting and returns their results in order, as
///   [`BatchResults`].
///
/// # Waiting
///
/// A caller that waits (on a handle, or for a batch) spins briefly before
/// it parks, because a result that arrives within microseconds is much
/// cheaper to catch than a wake-up. The spin is bounded by
/// [`DomainConfig::spin_before_park`] and adapts: it collapses while spins
/// keep failing (a busy machine, long batches) and is probed at full
/// length again now and then.
///
/// # Failures, panics and cancellation
///
/// A job's outcome is a [`TaskOutcome`](dinah_core::TaskOutcome): its
/// value, or a [`TaskFailure`](dinah_core::TaskFailure) that keeps the
/// error it returned, the message of a panic (a panic never escapes into
/// the pool and the domain keeps working), or `Cancelled`. Cancellation is
/// cooperative: a job whose cancellation was requested before it started
/// never calls user code; a running job polls its [`JobContext`].
///
/// # Shutdown
///
/// [`Domain::shutdown`] refuses new work, handles queued jobs by an
/// explicit [`ShutdownPolicy`], waits for admitted work and joins the
/// workers within a deadline, reporting exact counts in
/// [`DomainShutdownTimeout`] if it runs out of time. Dropping a domain
/// without shutting it down cancels its queued jobs (each reported
/// `Cancelled`) and detaches the workers without waiting.
///
/// # Examples
///
/// ```
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// use dinah_core::DomainId;
/// use dinah_std::{Domain, DomainConfig, ShutdownPolicy};
///
/// let workers = NonZeroUsize::new(2).unwrap();
/// let queue = NonZeroUsize::new(64).unwrap();
/// let domain = Domain::start(DomainConfig::new(DomainId::new(1)?, workers, queue), None)?;
///
/// let job = domain.try_submit(|_ctx| Ok::<u64, String>(6 * 7))?;
/// assert_eq!(job.join(), Ok(42));
///
/// let squares = domain.run_batch((0..100_u64).map(|i| move || Ok::<_, String>(i * i)).collect())?;
/// assert_eq!(squares[9].as_ref().ok(), Some(&81));
///
/// domain.shutdown(ShutdownPolicy::Drain, Duration::from_secs(10))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Sharing
///
/// A domain is `Send` and `Sync`: share it by reference (or `Arc`) between
/// submitting threads.
pub struct Domain {
    shared: Arc<DomainShared>,
    /// `Some` until `shutdown` (or drop) lets it go.
    pool: Option<rayon::ThreadPool>,
    roster: Arc<Roster>,
}

impl Domain {
    /// Starts a domain: its worker threads exist when this returns.
    ///
    /// With `instrumentation`, every job's lifecycle is recorded into it
    /// (see [`Instrumentation`]); without, the only cost is one `Option`
    /// check per job.
    ///
    /// # Errors
    ///
    /// [`DomainStartError::CapacityOverflow`] if `queue_capacity + workers`
    /// overflows; [`DomainStartError::Threads`] if the threads could not be
    /// spawned.
    pub fn start(
        config: DomainConfig,
        instrumentation: Option<Arc<Instrumentation>>,
    ) -> Result<Self, DomainStartError> {
        // Before any job can panic, so each panic's text is recorded.
        panic_text::install();
        let capacity = config
            .capacity()
            .ok_or(DomainStartError::CapacityOverflow)?;
        if config.last_worker().is_none() {
            return Err(DomainStartError::WorkerIdOverflow);
        }
        let queue = ArrayQueue::new(capacity);
        let roster = Arc::new(Roster::new());
        let pool = {
            let names = config.clone();
            let started = Arc::clone(&roster);
            let exited = Arc::clone(&roster);
            let first = config.first_worker;
            rayon::ThreadPoolBuilder::new()
                .num_threads(config.workers.get())
                .thread_name(move |index| names.thread_name(index))
                .start_handler(move |index| {
                    worker::enter(worker::nth(first, index));
                    started.worker_started();
                })
                .exit_handler(move |_| exited.worker_exited())
                .build()
                .map_err(DomainStartError::Threads)?
        };
        let shared = Arc::new(DomainShared {
            id: config.id,
            workers: pool.current_num_threads(),
            spin_jobs: Arc::new(AdaptiveSpin::new(config.spin_before_park, Pace::Yielding)),
            spin_batches: AdaptiveSpin::new(config.spin_before_park, Pace::Pure),
            admission: Admission::new(capacity),
            queue,
            cancel_running: CancelFlag::new(),
            instrumentation,
            next_task: CachePadded::new(AtomicU64::new(1)),
            shutdown_cancelled: AtomicUsize::new(0),
            trampolines: CachePadded::new(Drainers::new(pool.current_num_threads())),
            owner: OnceLock::new(),
        });
        Ok(Self {
            shared,
            pool: Some(pool),
            roster,
        })
    }

    /// Submits one job; its outcome is delivered to the returned handle.
    ///
    /// The job receives a [`JobContext`] (identity and cancellation).
    /// Jobs start in admission order; a panic in the job becomes a
    /// [`TaskFailure`](dinah_core::TaskFailure) with the panic's message.
    ///
    /// # Errors
    ///
    /// [`TrySubmitError::Full`] if the domain holds its capacity of jobs,
    /// [`TrySubmitError::ShuttingDown`] after shutdown began; both hand the
    /// job back.
    pub fn try_submit<F, T, E>(&self, job: F) -> Result<JobHandle<T, E>, TrySubmitError<F>>
    where
        F: FnOnce(&JobContext<'_>) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        if let Err(refusal) = self.shared.admission.try_admit() {
            return Err(refuse(refusal, job));
        }
        let task = self.next_task();
        let slot = Arc::new(JobSlot::new(task));
        self.enqueue(Arc::new(HandleJob {
            job: Work::new(job),
            slot: Arc::clone(&slot),
        }));
        Ok(JobHandle::new(
            slot,
            self.shared.id,
            Arc::clone(&self.shared.spin_jobs),
            self.shared.instrumentation.clone(),
        ))
    }

    /// Submits one job whose outcome is pushed to `completions` under
    /// `key`, waking the queue's registered waker.
    ///
    /// A slot of `completions` is reserved before the job is admitted, so
    /// the worker's push cannot fail. Returns a canceller for the job.
    ///
    /// # Errors
    ///
    /// [`TrySubmitError::Full`], [`TrySubmitError::ShuttingDown`] as for
    /// [`try_submit`](Self::try_submit), and
    /// [`TrySubmitError::CompletionsFull`] if every slot of `completions`
    /// is taken; each hands back the key and the job.
    pub fn try_submit_to<K, F, T, E>(
        &self,
        completions: &Arc<CompletionQueue<K, T, E>>,
        key: K,
        job: F,
    ) -> Result<JobCanceller, TrySubmitError<(K, F)>>
    where
        K: Send + 'static,
        F: FnOnce(&JobContext<'_>) -> Result<T, E> + Send + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        self.try_submit_to_sink(completions, Arc::clone(completions), key, job)
    }

    /// As [`try_submit_to`](Self::try_submit_to), with the outcome
    /// delivered through `sink` (which must push it into `completions`,
    /// where the slot is reserved).
    pub(crate) fn try_submit_to_sink<K, F, S, T, E>(
        &self,
        completions: &CompletionQueue<K, T, E>,
        sink: S,
        key: K,
        job: F,
    ) -> Result<JobCanceller, TrySubmitError<(K, F)>>
    where
        K: Send + 'static,
        F: FnOnce(&JobContext<'_>) -> Result<T, E> + Send + 'static,
        S: CompletionSink<K, T, E> + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let queued = self.try_submit_job(completions, |core| {
            Arc::new(CompletionJob {
                core,
                work: Work::new((key, job, sink)),
                outcome: PhantomData,
            })
        });
        match queued {
            Ok(job) => Ok(JobCanceller::new(
                job,
                self.shared.id,
                self.shared.instrumentation.clone(),
            )),
            Err(Refused { job, reason }) => {
                Err(match Arc::into_inner(job).map(|job| job.work.take()) {
                    Some((key, job, _)) => match reason {
                        SubmitRefusal::Full => TrySubmitError::Full((key, job)),
                        SubmitRefusal::CompletionsFull => {
                            TrySubmitError::CompletionsFull((key, job))
                        }
                        SubmitRefusal::ShuttingDown => TrySubmitError::ShuttingDown((key, job)),
                    },
                    None => unreachable!("a refused job was never shared"),
                })
            }
        }
    }

    /// Admits one job whose outcome goes to `completions`: takes an
    /// admission and reserves the completion's slot (so the job's delivery
    /// can never fail), gives the job a fresh task ID, builds it with
    /// `build` (which receives its [`JobCore`]: a caller that keeps
    /// finished blocks writes the job into one there) and queues it.
    /// Returns the queued job, which is also its cancellation target.
    ///
    /// The one place completion jobs are admitted: the public
    /// [`try_submit_to`](Self::try_submit_to) and the runtime's actions
    /// both come through here.
    ///
    /// # Errors
    ///
    /// [`Refused`] with the built job and why, if the domain is full, its
    /// completion queue is full, or it is shutting down. The job is built
    /// either way, so the caller gets back whatever it moved into it.
    pub(crate) fn try_submit_job<J, K, T, E>(
        &self,
        completions: &CompletionQueue<K, T, E>,
        build: impl FnOnce(JobCore) -> Arc<J>,
    ) -> Result<Arc<J>, Refused<J>>
    where
        J: QueuedJob + 'static,
    {
        let reason = match self.shared.admission.try_admit() {
            Err(AdmitError::Closed) => Some(SubmitRefusal::ShuttingDown),
            Err(AdmitError::Full { .. }) => Some(SubmitRefusal::Full),
            Ok(()) if !completions.try_reserve() => {
                self.shared.admission.release();
                Some(SubmitRefusal::CompletionsFull)
            }
            Ok(()) => None,
        };
        if let Some(reason) = reason {
            // Task IDs are for admitted jobs; a refused one never runs.
            let core = JobCore {
                task: TaskId::MAX,
                cancel: CancelFlag::new(),
            };
            return Err(Refused {
                job: build(core),
                reason,
            });
        }
        let core = JobCore {
            task: self.next_task(),
            cancel: CancelFlag::new(),
        };
        let job = build(core);
        self.enqueue(Arc::clone(&job) as Arc<dyn QueuedJob>);
        Ok(job)
    }

    /// Requests cancellation of `job`, a job of this domain, recording the
    /// request when the domain is instrumented; `true` for the call that
    /// made the request.
    pub(crate) fn cancel_job(&self, job: &dyn CancelTarget) -> bool {
        JobCanceller::request(job, self.shared.id, self.shared.instrumentation.as_deref())
    }

    /// Links the domain to the runtime that owns it, once: later calls are
    /// ignored (`false`).
    pub(crate) fn set_owner(&self, owner: OwnerLink) -> bool {
        self.shared.owner.set(owner).is_ok()
    }

    /// A runner of inline jobs on this domain (see [`InlineRunner`]).
    pub(crate) fn inline_runner(&self) -> InlineRunner {
        InlineRunner {
            shared: Arc::clone(&self.shared),
        }
    }

    /// A fresh task ID for an admitted job, recorded as submitted.
    fn next_task(&self) -> TaskId {
        self.shared.next_task()
    }

    /// Queues an admitted job and spawns the trampoline that will run it.
    fn enqueue(&self, job: Arc<dyn QueuedJob>) {
        if self.shared.queue.push(job).is_err() {
            // The queue has one slot per admission; reaching this is a bug
            // in the admission accounting.
            unreachable!("an admitted job found the domain queue full");
        }
        if self.shared.trampolines.enter() {
            let shared = Arc::clone(&self.shared);
            self.pool().spawn(move || shared.drain());
        }
    }

    fn pool(&self) -> &rayon::ThreadPool {
        self.pool
            .as_ref()
            .expect("the pool lives until shutdown consumes the domain")
    }

    /// The domain's ID.
    #[must_use]
    pub fn id(&self) -> DomainId {
        self.shared.id
    }

    /// The number of worker threads.
    #[must_use]
    pub fn workers(&self) -> usize {
        self.shared.workers
    }

    /// The most jobs admitted at once (`queue_capacity + workers`).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.shared.admission.capacity()
    }

    /// Jobs (and batches) admitted whose outcome is not delivered yet.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.shared.admission.in_flight()
    }

    /// Admitted jobs no worker has picked up yet.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.shared.queue.len()
    }

    /// Does the domain still admit work (no shutdown has begun)?
    #[must_use]
    pub fn is_accepting(&self) -> bool {
        self.shared.admission.is_open()
    }

    /// Worker threads that have started and not exited.
    #[must_use]
    pub fn live_workers(&self) -> usize {
        self.roster.started().saturating_sub(self.roster.exited())
    }

    /// The instrumentation the domain records into, if any.
    #[must_use]
    pub fn instrumentation(&self) -> Option<&Arc<Instrumentation>> {
        self.shared.instrumentation.as_ref()
    }
}

/// Why [`Domain::try_submit_job`] refused a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SubmitRefusal {
    /// The domain holds its capacity of jobs.
    Full,
    /// Every slot of the completion queue is reserved.
    CompletionsFull,
    /// The domain's shutdown has begun.
    ShuttingDown,
}

/// A job [`Domain::try_submit_job`] refused, and why.
pub(crate) struct Refused<J> {
    pub(crate) job: Arc<J>,
    pub(crate) reason: SubmitRefusal,
}

/// The public error for an admission refusal, holding `job`.
fn refuse<J>(refusal: AdmitError, job: J) -> TrySubmitError<J> {
    match refusal {
        AdmitError::Full { .. } => TrySubmitError::Full(job),
        AdmitError::Closed => TrySubmitError::ShuttingDown(job),
    }
}

impl Drop for Domain {
    /// Cancels queued jobs (each reported `Cancelled`) and lets the workers
    /// go without waiting; running jobs finish on their own.
    fn drop(&mut self) {
        if self.pool.is_some() {
            self.begin_shutdown(ShutdownPolicy::CancelQueued);
        }
    }
}

impl fmt::Debug for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Domain")
            .field("id", &self.shared.id)
            .field("workers", &self.shared.workers)
            .field("capacity", &self.capacity())
            .field("in_flight", &self.in_flight())
            .field("queued", &self.queued())
            .field("accepting", &self.is_accepting())
            .finish()
    }
}

#[cfg(test)]
mod tests;
