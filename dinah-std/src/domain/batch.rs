//! Batches: many short tasks run inside a domain with Rayon's splitting.
//!
//! A batch runs as one job in the domain's pool: a Rayon indexed parallel
//! iterator over the caller's tasks, collected in place into the result
//! vector, so the per-task cost is Rayon's own. The calling thread, which
//! is not a worker, spins briefly while it waits (up to the domain's
//! `spin_before_park`, adapting as described in `wait.rs`) and then
//! blocks; for short batches this saves the wake-up that dominates Rayon's
//! `install` from outside the pool. A batch predicted to run long (see
//! `batch_estimate.rs`) is waited for parked at once, so the caller does
//! not take a core from the workers.
//!
//! The results come back as [`BatchResults`]: a failure there has no drop
//! glue of its own, so a batch where every task succeeded is freed without
//! a pass over its results (`batch_results.rs` says why that matters).
//!
//! A batch holds one admission for the whole call (see the
//! domain documentation). Tasks that have not started when a
//! [`ShutdownPolicy::CancelQueued`](crate::ShutdownPolicy::CancelQueued)
//! shutdown begins are reported `Cancelled` without running.
//!
//! # Memory ordering
//!
//! The `done` flag (stored `Release` after the results are written, loaded
//! `Acquire` while spinning) only ends the spin early. Visibility of the
//! results to the caller comes from Rayon's scope, which does not return
//! before the spawned job has finished.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use dinah_core::{TaskFailure, TaskId, TaskQueue};

use super::admission::{AdmissionGuard, any_cancelling};
use super::batch_results::{BatchFailure, BatchResults};
use super::instrument::Instrumentation;
use super::job::panicked;
use super::{Domain, DomainShared, TrySubmitError};

impl Domain {
    /// Runs `tasks` on the domain's workers and returns their results in
    /// the order of `tasks`.
    ///
    /// Tasks may borrow from the caller: the call returns only after every
    /// task has finished. A task's error stays its own, a panicking task
    /// becomes a [`TaskFailure`] with the panic's message (the others still
    /// run), and the domain keeps working. Called from one of the domain's
    /// own workers, the batch runs inline on that worker's pool.
    ///
    /// # Errors
    ///
    /// [`TrySubmitError::Full`] if the domain holds its capacity of jobs,
    /// [`TrySubmitError::ShuttingDown`] after shutdown began; both hand the
    /// tasks back, none having run.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use dinah_core::{DomainId, TaskFailureKind};
    /// use dinah_std::{Domain, DomainConfig};
    ///
    /// let domain = Domain::start(DomainConfig::new(DomainId::new(1)?, NonZeroUsize::MIN, NonZeroUsize::MIN), None)?;
    /// let inputs = [3_u32, 0, 5];
    /// let tasks: Vec<_> = inputs
    ///     .iter()
    ///     .map(|&x| move || 60_u32.checked_div(x).ok_or("division by zero"))
    ///     .collect();
    /// let results = domain.run_batch(tasks)?;
    /// assert_eq!(results[0].as_ref().ok(), Some(&20));
    /// assert_eq!(results[1].as_ref().unwrap_err().kind(), TaskFailureKind::ReturnedError);
    /// assert_eq!(results[2].as_ref().ok(), Some(&12));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run_batch<F, T, E>(
        &self,
        tasks: Vec<F>,
    ) -> Result<BatchResults<T, E>, TrySubmitError<Vec<F>>>
    where
        F: FnOnce() -> Result<T, E> + Send,
        T: Send,
        E: Send,
    {
        if let Err(refusal) = self.shared.admission.try_admit() {
            return Err(refusal.refuse(tasks));
        }
        let _admission = AdmissionGuard(&self.shared.admission);
        Ok(self.run_admitted(tasks))
    }

    /// Drains `queue` and runs its tasks like [`run_batch`](Self::run_batch):
    /// the domain-backed counterpart of
    /// [`Scheduler::run_parallel`](crate::Scheduler::run_parallel), for
    /// callers that run many batches and should not start threads on every
    /// call.
    ///
    /// Results are in FIFO order and the queue is empty afterwards. Unlike
    /// the scheduler, a panicking task does not unwind the call: it becomes
    /// that task's [`TaskFailure`].
    ///
    /// # Errors
    ///
    /// [`TrySubmitError::Full`] or [`TrySubmitError::ShuttingDown`] as for
    /// [`run_batch`](Self::run_batch); the queue is left untouched.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use dinah_core::{DomainId, TaskQueue};
    /// use dinah_std::{Domain, DomainConfig};
    ///
    /// let domain = Domain::start(DomainConfig::new(DomainId::new(1)?, NonZeroUsize::MIN, NonZeroUsize::MIN), None)?;
    /// let mut queue: TaskQueue<_, 8> = TaskQueue::new();
    /// for n in 0..8_u32 {
    ///     assert!(queue.try_push(move || Ok::<_, ()>(n + 1)).is_ok());
    /// }
    /// let results = domain.run_queue(&mut queue)?;
    /// assert!(queue.is_empty());
    /// assert_eq!(results.into_iter().map(Result::unwrap).sum::<u32>(), 36);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run_queue<F, T, E, const N: usize>(
        &self,
        queue: &mut TaskQueue<F, N>,
    ) -> Result<BatchResults<T, E>, TrySubmitError<()>>
    where
        F: FnOnce() -> Result<T, E> + Send,
        T: Send,
        E: Send,
    {
        if let Err(refusal) = self.shared.admission.try_admit() {
            return Err(refusal.refuse(()));
        }
        let _admission = AdmissionGuard(&self.shared.admission);
        let tasks: Vec<F> = std::iter::from_fn(|| queue.pop()).collect();
        Ok(self.run_admitted(tasks))
    }

    /// Runs an admitted batch and returns its results in order.
    fn run_admitted<F, T, E>(&self, tasks: Vec<F>) -> BatchResults<T, E>
    where
        F: FnOnce() -> Result<T, E> + Send,
        T: Send,
        E: Send,
    {
        let shared = &*self.shared;
        // Left empty here: `collect_into_vec` allocates it on the worker,
        // in that worker's allocator arena, as Rayon's own `collect` does.
        let mut results = Vec::new();
        let count = tasks.len();
        if count == 0 {
            return BatchResults::new(results, 0);
        }
        // Counted where a failure is made (a cold path); read after the
        // batch, which Rayon's scope orders after every task.
        let failed = AtomicUsize::new(0);
        let context = TaskContext {
            shared,
            failed: &failed,
        };
        let work = |results: &mut Vec<_>| match &shared.instrumentation {
            None => tasks
                .into_par_iter()
                .map(move |task| context.run(task, TaskId::MAX, || {}))
                .collect_into_vec(results),
            Some(instrumentation) => {
                run_instrumented(context, instrumentation, tasks, results);
            }
        };
        let pool = self.pool();
        if rayon::current_thread_index().is_some() {
            // On a worker (of this pool: runs inline; of another pool: that
            // worker keeps stealing while it waits). Never spin a worker.
            pool.install(|| work(&mut results));
        } else {
            let done = AtomicBool::new(false);
            let out = &mut results;
            let spin = shared
                .batch_estimate
                .should_spin(count, shared.spin_batches.max());
            pool.in_place_scope(|scope| {
                scope.spawn(|_| {
                    // Timed on the worker: the estimate is of the work
                    // alone, without the wake-ups around it (which would
                    // make a parked batch look long and keep it parked).
                    let started = Instant::now();
                    work(out);
                    shared.batch_estimate.record(count, started.elapsed());
                    done.store(true, Ordering::Release);
                });
                if spin {
                    shared
                        .spin_batches
                        .spin(Duration::MAX, || done.load(Ordering::Acquire));
                }
            });
        }
        BatchResults::new(results, failed.into_inner())
    }
}

/// What every task of one batch needs besides itself: the domain and the
/// batch's failure count.
///
/// Captured by value in the per-task closure, so the closure's environment
/// is this struct and the cold paths receive a pointer Rayon already holds:
/// the per-task loop loads nothing for them. (Captured by reference, the
/// compiler loaded both pointers every task, ahead of the branch that needs
/// them.)
#[derive(Clone, Copy)]
struct TaskContext<'a> {
    shared: &'a DomainShared,
    failed: &'a AtomicUsize,
}

impl TaskContext<'_> {
    /// Runs one task of a batch: skipped (reported cancelled under
    /// `task_id`) if a cancelling shutdown began, otherwise `on_start` is
    /// called and the task runs with its panic caught. Every failure is
    /// counted.
    ///
    /// Always inlined, with the failure paths out of line: it is the body
    /// of Rayon's per-task loop, and a call per task (which the compiler
    /// chose while the boxing of failures was inline) cost as much as a
    /// no-op task.
    #[inline(always)]
    fn run<F, T, E>(
        &self,
        task: F,
        task_id: TaskId,
        on_start: impl FnOnce(),
    ) -> Result<T, BatchFailure<E>>
    where
        F: FnOnce() -> Result<T, E>,
    {
        if any_cancelling() {
            if let Some(cancelled) = self.cancelled(task_id) {
                return Err(cancelled);
            }
        }
        on_start();
        match panic::catch_unwind(AssertUnwindSafe(task)) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.failure(TaskFailure::returned(error))),
            Err(payload) => Err(self.failure(panicked(payload))),
        }
    }

    /// The failure of a task skipped because this domain's cancelling
    /// shutdown began, or `None` if it did not (another domain's did).
    /// Out of line, so the per-task loop loads nothing for it.
    #[cold]
    #[inline(never)]
    fn cancelled<E>(&self, task_id: TaskId) -> Option<BatchFailure<E>> {
        if !self.shared.admission.cancels_queued() {
            return None;
        }
        self.shared.cancelled_by_shutdown(task_id, None);
        Some(self.failure(TaskFailure::cancelled()))
    }

    /// A task's failure, counted; out of line, so the per-task loop stays
    /// small.
    #[cold]
    #[inline(never)]
    fn failure<E>(&self, failure: TaskFailure<E>) -> BatchFailure<E> {
        self.failed.fetch_add(1, Ordering::Relaxed);
        BatchFailure::new(Box::new(failure))
    }
}

/// The instrumented twin of the plain path: task IDs are reserved as one
/// consecutive block, and every task's lifecycle is recorded.
fn run_instrumented<F, T, E>(
    context: TaskContext<'_>,
    instrumentation: &Instrumentation,
    tasks: Vec<F>,
    results: &mut Vec<Result<T, BatchFailure<E>>>,
) where
    F: FnOnce() -> Result<T, E> + Send,
    T: Send,
    E: Send,
{
    let shared = context.shared;
    let count = u64::try_from(tasks.len()).unwrap_or(u64::MAX);
    let first = shared.reserve_task_ids(count);
    let id = |index: usize| {
        DomainShared::task_id(first.saturating_add(u64::try_from(index).unwrap_or(u64::MAX)))
    };
    for index in 0..tasks.len() {
        instrumentation.submitted(shared.id, id(index));
    }
    tasks
        .into_par_iter()
        .enumerate()
        .map(|(index, task)| {
            let task_id: TaskId = id(index);
            let mut started = false;
            let result = context.run(task, task_id, || {
                started = true;
                instrumentation.started(shared.id, task_id);
            });
            if started {
                let failure = result.as_ref().err().map(|failure| failure.kind());
                instrumentation.finished(shared.id, task_id, failure);
            }
            result
        })
        .collect_into_vec(results);
}
