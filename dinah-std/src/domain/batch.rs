//! Batches: many short tasks run by the caller and the domain's workers.
//!
//! Called from outside the domain's pool, a batch runs on the calling
//! thread, which counts as one of the domain's workers, and up to
//! `workers - 1` of the domain's workers join it once the work left is
//! worth waking them for; a heavy batch is handed to all `workers` while
//! the caller waits (`batch_drive.rs` says how and why). Called from
//! a Rayon worker, it runs on the pool with Rayon's own splitting (inline
//! on a worker of this pool; a worker of another pool keeps stealing in
//! its own while it waits). Either way the per-task loop is Rayon's
//! sequential iterator over the tasks and their result slots.
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
//! Task `i` writes its result into slot `i` of the result vector's spare
//! capacity; the results become visible to the caller when it joins the
//! batch's helpers (`helpers.rs`), or through Rayon's `install` for a
//! batch called from a worker, both of which return only after every job
//! has finished. The failure counter is `Relaxed` for the same reason.

use std::mem::MaybeUninit;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use dinah_core::{TaskFailure, TaskId, TaskQueue};

use super::admission::{AdmissionGuard, any_cancelling};
use super::batch_drive::{Crew, HAND_OFF_WORTH, drive};
use super::batch_results::{BatchFailure, BatchResults};
use super::instrument::Instrumentation;
use super::job::panicked;
use super::{Domain, DomainShared, TrySubmitError};

impl Domain {
    /// Runs `tasks` on the domain's workers and returns their results in
    /// the order of `tasks`.
    ///
    /// Tasks may borrow from the caller: the call returns only after every
    /// task has finished. The calling thread runs tasks too and counts as
    /// one of the domain's workers, so no more than
    /// [`workers`](Self::workers) of the batch's tasks run at once; a batch
    /// whose work is shorter than waking a worker runs on the caller alone,
    /// and one estimated at a millisecond or more is handed to all the
    /// workers after the caller's first tasks while the caller waits.
    /// A task's error stays its own, a panicking task becomes a
    /// [`TaskFailure`] with the panic's message (the others still run), and
    /// the domain keeps working. Called from one of the domain's
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
            return Err(super::refuse(refusal, tasks));
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
            return Err(super::refuse(refusal, ()));
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
        let count = tasks.len();
        let mut results: Vec<Result<T, BatchFailure<E>>> = Vec::with_capacity(count);
        if count == 0 {
            return BatchResults::new(results, 0);
        }
        // Counted where a failure is made (a cold path); read after the
        // batch, which `drive` and Rayon's `install` order after every task.
        let failed = AtomicUsize::new(0);
        let context = TaskContext {
            shared,
            failed: &failed,
        };
        // Task `i` writes its result into slot `i` of the spare capacity.
        let slots = &mut results.spare_capacity_mut()[..count];
        let runner = Runner {
            crew: Crew {
                pool: self.pool(),
                helpers: shared.workers - 1,
                spin: &shared.spin_batches,
                hand_off: HAND_OFF_WORTH,
            },
        };
        let written = match &shared.instrumentation {
            None => runner.run(
                tasks.into_par_iter().zip(slots.par_iter_mut()),
                move |(task, slot)| {
                    slot.write(context.run(task, TaskId::MAX, || {}));
                },
            ),
            Some(instrumentation) => {
                run_instrumented(&runner, context, instrumentation, tasks, slots)
            }
        };
        // Internal invariant (it protects the `set_len` below).
        assert_eq!(written, count, "a batch lost a result");
        // SAFETY: `results` has capacity for at least `count` elements and
        // none initialised. The zip paired each of its first `count` spare
        // slots with exactly one task, Rayon's producers split them into
        // disjoint pieces, and `written` counts the tasks of pieces whose
        // every item went through the closure above, which writes its
        // slot with `MaybeUninit::write`: all `count` were written. The
        // writes on other threads are visible here because `drive`'s scope
        // and `install` return only after every job they ran has finished.
        unsafe { results.set_len(count) };
        BatchResults::new(results, failed.into_inner())
    }
}

/// Where a batch's tasks run: inline on a worker's pool when called from a
/// Rayon worker, otherwise on the caller with the domain's workers helping
/// (`batch_drive.rs`).
struct Runner<'a> {
    crew: Crew<'a>,
}

impl Runner<'_> {
    /// Calls `op` on every item and returns how many calls returned.
    fn run<I, Op>(&self, items: I, op: Op) -> usize
    where
        I: IndexedParallelIterator,
        Op: Fn(I::Item) + Sync + Send,
    {
        if rayon::current_thread_index().is_some() {
            // On a worker (of this pool: runs inline; of another pool: that
            // worker keeps stealing while it waits). Never spin a worker.
            let len = items.len();
            self.crew.pool.install(|| items.for_each(op));
            len
        } else {
            drive(&self.crew, items, op)
        }
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
/// consecutive block, and every task's lifecycle is recorded. Returns how
/// many slots were written.
fn run_instrumented<F, T, E>(
    runner: &Runner<'_>,
    context: TaskContext<'_>,
    instrumentation: &Instrumentation,
    tasks: Vec<F>,
    slots: &mut [MaybeUninit<Result<T, BatchFailure<E>>>],
) -> usize
where
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
    runner.run(
        tasks.into_par_iter().enumerate().zip(slots.par_iter_mut()),
        |((index, task), slot)| {
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
            slot.write(result);
        },
    )
}
