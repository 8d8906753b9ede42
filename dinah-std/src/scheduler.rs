//! [`Scheduler`]: explicit, caller-driven dispatch of queued work, and its
//! parallel drain (in `scheduler/parallel.rs`).

mod parallel;

use core::fmt;
use core::num::NonZeroUsize;

use dinah_core::TaskQueue;

use crate::Executor;

/// Dispatches closures immediately or from a caller-owned [`TaskQueue`].
///
/// A scheduler decides *when* queued closures run; it holds no state and
/// never runs anything in the background. Work waits in a caller-owned,
/// bounded [`TaskQueue`] until the caller drains it:
///
/// | method | runs | on |
/// | --- | --- | --- |
/// | [`schedule`](Scheduler::schedule) | one closure, immediately | the caller's thread |
/// | [`dispatch_next`](Scheduler::dispatch_next) | the oldest queued closure | the caller's thread |
/// | [`run_until_empty`](Scheduler::run_until_empty) | every queued closure, oldest first | the caller's thread |
/// | [`run_parallel`](Scheduler::run_parallel), [`run_parallel_bounded`](Scheduler::run_parallel_bounded) | every queued closure | the caller's thread plus scoped threads of this call |
///
/// Every method returns each task's `Result` unchanged, in dispatch (FIFO)
/// order: a task's `Err` is a value in the returned collection, never a
/// scheduler failure, and it does not stop later tasks. The only scheduler
/// error is a zero worker limit ([`SchedulerError::ZeroWorkers`]).
///
/// No method runs a task while it holds a borrow of the queue's contents or
/// an internal lock: a task is moved out of the queue first, then called.
/// Metrics ([`RuntimeMetrics`](dinah_core::RuntimeMetrics)) and tracing
/// ([`TraceBuffer`](dinah_core::TraceBuffer)) are opt-in: the scheduler
/// records nothing by itself, so instrument the closures where you need it.
///
/// # Panics
///
/// Task panics are not converted into errors. Sequential methods let the
/// panic unwind straight through (the panicking task has been removed from
/// the queue; the tasks behind it stay queued, in order).
/// [`run_parallel`](Scheduler::run_parallel) stops starting tasks, waits for
/// the running ones and for its threads, puts every task that never started
/// back into the queue in FIFO order, and then resumes the panic on the
/// caller with the original payload. Results of tasks that completed during
/// a call that panics are dropped.
///
/// # Examples
///
/// ```
/// use dinah_core::TaskQueue;
/// use dinah_std::{Scheduler, SchedulerError};
///
/// let scheduler = Scheduler::new();
/// let mut queue: TaskQueue<Box<dyn FnOnce() -> Result<u64, String> + Send>, 8> = TaskQueue::new();
/// for n in 0..4_u64 {
///     let task: Box<dyn FnOnce() -> Result<u64, String> + Send> = if n == 2 {
///         Box::new(|| Err("task 2 failed".to_owned()))
///     } else {
///         Box::new(move || Ok(n * n))
///     };
///     assert!(queue.try_push(task).is_ok());
/// }
/// let results = scheduler.run_parallel(&mut queue, 2)?;
/// assert_eq!(results, [Ok(0), Ok(1), Err("task 2 failed".to_owned()), Ok(9)]);
/// assert!(queue.is_empty());
/// # Ok::<(), SchedulerError>(())
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scheduler {
    executor: Executor,
}

impl Scheduler {
    /// A scheduler. It holds no state, so every scheduler behaves the same.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            executor: Executor::new(),
        }
    }

    /// Runs `task` now, on the caller's thread, and returns its result
    /// unchanged (the same as [`Executor::execute`]).
    ///
    /// # Errors
    ///
    /// Whatever `task` returns.
    ///
    /// # Panics
    ///
    /// Propagates a panic of `task`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_std::Scheduler;
    ///
    /// let doubled: Result<u32, ()> = Scheduler::new().schedule(|| Ok(21 * 2));
    /// assert_eq!(doubled, Ok(42));
    /// ```
    #[inline]
    pub fn schedule<T, E, F>(&self, task: F) -> Result<T, E>
    where
        F: FnOnce() -> Result<T, E>,
    {
        self.executor.execute(task)
    }

    /// Removes the oldest task from `queue` and runs it on the caller's
    /// thread; `None` if the queue is empty.
    ///
    /// The task is moved out of the queue before it is called, so it runs
    /// after the queue borrow has ended. At most one task runs per call.
    ///
    /// # Panics
    ///
    /// Propagates a panic of the task; the task is gone from the queue and
    /// every other task stays queued.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{QueuePushError, TaskQueue};
    /// use dinah_std::Scheduler;
    ///
    /// let mut queue: TaskQueue<fn() -> Result<u8, ()>, 2> = TaskQueue::new();
    /// queue.try_push(|| Ok(1))?;
    /// queue.try_push(|| Ok(2))?;
    /// let scheduler = Scheduler::new();
    /// assert_eq!(scheduler.dispatch_next(&mut queue), Some(Ok(1)));
    /// assert_eq!(queue.len(), 1);
    /// # Ok::<(), QueuePushError<fn() -> Result<u8, ()>>>(())
    /// ```
    pub fn dispatch_next<F, T, E, const N: usize>(
        &self,
        queue: &mut TaskQueue<F, N>,
    ) -> Option<Result<T, E>>
    where
        F: FnOnce() -> Result<T, E>,
    {
        let task = queue.pop()?;
        Some(self.executor.execute(task))
    }

    /// Runs every queued task on the caller's thread, oldest first, and
    /// returns their results in that order.
    ///
    /// A task returning `Err` does not stop the drain; its error is kept at
    /// its position. An empty queue gives an empty vector. The queue is
    /// empty afterwards.
    ///
    /// # Panics
    ///
    /// Propagates a panic of a task. The results gathered so far are
    /// dropped; the panicking task is gone from the queue and the tasks
    /// behind it stay queued, in order.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{QueuePushError, TaskQueue};
    /// use dinah_std::Scheduler;
    ///
    /// let mut queue: TaskQueue<fn() -> Result<u8, &'static str>, 4> = TaskQueue::new();
    /// queue.try_push(|| Ok(1))?;
    /// queue.try_push(|| Err("second failed"))?;
    /// queue.try_push(|| Ok(3))?;
    /// let results = Scheduler::new().run_until_empty(&mut queue);
    /// assert_eq!(results, [Ok(1), Err("second failed"), Ok(3)]);
    /// assert!(queue.is_empty());
    /// # Ok::<(), QueuePushError<fn() -> Result<u8, &'static str>>>(())
    /// ```
    pub fn run_until_empty<F, T, E, const N: usize>(
        &self,
        queue: &mut TaskQueue<F, N>,
    ) -> Vec<Result<T, E>>
    where
        F: FnOnce() -> Result<T, E>,
    {
        let mut results = Vec::with_capacity(queue.len());
        while let Some(result) = self.dispatch_next(queue) {
            results.push(result);
        }
        results
    }

    /// Runs every queued task on up to `max_workers` threads (the caller's
    /// included) and returns their results in FIFO order.
    ///
    /// The same as [`run_parallel_bounded`](Self::run_parallel_bounded),
    /// with the worker limit checked here.
    ///
    /// # Errors
    ///
    /// [`SchedulerError::ZeroWorkers`] if `max_workers` is zero; the queue is
    /// left untouched and no task runs.
    ///
    /// # Panics
    ///
    /// Resumes a task's panic after the call has wound down; see
    /// [`run_parallel_bounded`](Self::run_parallel_bounded).
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::TaskQueue;
    /// use dinah_std::{Scheduler, SchedulerError};
    ///
    /// let mut queue: TaskQueue<fn() -> Result<u8, ()>, 2> = TaskQueue::new();
    /// assert!(queue.try_push(|| Ok(1)).is_ok());
    /// let scheduler = Scheduler::new();
    /// assert_eq!(scheduler.run_parallel(&mut queue, 0), Err(SchedulerError::ZeroWorkers));
    /// assert_eq!(queue.len(), 1, "a rejected call runs nothing");
    /// assert_eq!(scheduler.run_parallel(&mut queue, 4)?, [Ok(1)]);
    /// # Ok::<(), SchedulerError>(())
    /// ```
    pub fn run_parallel<F, T, E, const N: usize>(
        &self,
        queue: &mut TaskQueue<F, N>,
        max_workers: usize,
    ) -> Result<Vec<Result<T, E>>, SchedulerError>
    where
        F: FnOnce() -> Result<T, E> + Send,
        T: Send,
        E: Send,
    {
        let max_workers = NonZeroUsize::new(max_workers).ok_or(SchedulerError::ZeroWorkers)?;
        Ok(self.run_parallel_bounded(queue, max_workers))
    }

    /// Runs every queued task on up to `max_workers` threads (the caller's
    /// included) and returns their results in FIFO order.
    ///
    /// All tasks queued at the call are drained; after a normal return the
    /// queue is empty and the result vector has one entry per task, at the
    /// task's queue position. A task returning `Err` does not stop the
    /// others; its error is kept at its position.
    ///
    /// # Workers
    ///
    /// The caller's thread is one worker. The call starts at most
    /// `min(max_workers, queued tasks) - 1` further threads with
    /// [`std::thread::scope`] and joins all of them before it returns, so
    /// tasks may borrow from the caller's stack and no thread outlives the
    /// call. Each worker runs one task at a time, so at most `max_workers`
    /// tasks ever run at once. `max_workers` is a ceiling, not a demand:
    ///
    /// - No thread is started for an empty queue, a single task or a limit
    ///   of one: those run on the caller's thread alone.
    /// - A queue of at most 32 tasks per worker starts its threads at once.
    /// - A longer queue is first worked on by the caller's thread alone,
    ///   which times the tasks it runs; the other threads start as soon as
    ///   the work left is estimated to take longer than about 100 µs on one
    ///   thread. So a long batch of tiny tasks never pays for starting a
    ///   thread (tens of microseconds, often more than the batch itself),
    ///   while a batch of heavy tasks loses about one task's time of
    ///   parallelism (the first task's, which the estimate needs; cheap
    ///   tasks followed by heavy ones can delay the threads by up to 256
    ///   tasks).
    /// - A thread is only started while unclaimed tasks remain, and if the
    ///   operating system refuses one, the call carries on with the workers
    ///   it has.
    ///
    /// # Dispatch
    ///
    /// Workers claim tasks from the queue in FIFO order and run them
    /// without any barrier between groups of tasks: a worker that finishes
    /// claims more work at once. A claim takes a run of consecutive tasks
    /// sized by the worker's own measurements: one task at first, then as
    /// many as ran in about 20 µs, so cheap tasks cost a few nanoseconds of
    /// coordination each while heavy tasks are claimed one at a time (a
    /// preempted worker then holds back nothing the others could run). A
    /// claim never takes more than `remaining / (4 * workers)` tasks (at
    /// least one) or 1024, so the last tasks are spread one by one.
    /// Completion order is unspecified.
    ///
    /// A task must not wait for another task of the same call to make
    /// progress (for example on a channel or a barrier), except when the
    /// queue holds at most `max_workers` tasks: then every task is claimed
    /// by a worker of its own, all threads are started at once, and the
    /// tasks can all run at the same time.
    ///
    /// # Panics
    ///
    /// Resumes the panic of a task, with its original payload, once the
    /// call has wound down:
    ///
    /// 1. when a task panics, no worker starts another task (a worker
    ///    notices within the task it is running, if any); the tasks already
    ///    running finish;
    /// 2. all threads of the call are joined;
    /// 3. every task that never started, whether it was still in the queue
    ///    or already claimed by a worker, is back in `queue` in its original
    ///    order (nothing else is queued then, so they always fit);
    /// 4. the results of the tasks that completed are dropped, and the panic
    ///    resumes on the caller through [`std::panic::resume_unwind`].
    ///
    /// Exactly the tasks that started are gone from the queue: the ones
    /// that completed and the ones that panicked. If several tasks panic,
    /// the payload of the earliest of them in queue order is resumed and
    /// the others are dropped.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    ///
    /// use dinah_core::TaskQueue;
    /// use dinah_std::Scheduler;
    ///
    /// let total = AtomicU64::new(0);
    /// let total = &total; // tasks may borrow from the caller's stack
    /// let mut queue = TaskQueue::<_, 64>::new();
    /// for n in 1..=64_u64 {
    ///     let task = move || {
    ///         total.fetch_add(n, Ordering::Relaxed);
    ///         Ok::<u64, ()>(n)
    ///     };
    ///     assert!(queue.try_push(task).is_ok());
    /// }
    /// let workers = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    /// let results = Scheduler::new().run_parallel_bounded(&mut queue, workers);
    /// assert!(results.iter().zip(1..).all(|(result, n)| *result == Ok(n)));
    /// assert_eq!(total.load(Ordering::Relaxed), 64 * 65 / 2);
    /// # Ok::<(), std::convert::Infallible>(())
    /// ```
    pub fn run_parallel_bounded<F, T, E, const N: usize>(
        &self,
        queue: &mut TaskQueue<F, N>,
        max_workers: NonZeroUsize,
    ) -> Vec<Result<T, E>>
    where
        F: FnOnce() -> Result<T, E> + Send,
        T: Send,
        E: Send,
    {
        if max_workers.get() == 1 || queue.len() <= 1 {
            // One worker: the sequential drain has exactly the parallel
            // contract (FIFO, and on a panic the not-started tasks are still
            // queued, in order), without a thread or a claim lock.
            return self.run_until_empty(queue);
        }
        parallel::run(queue, max_workers)
    }
}

/// A [`Scheduler`] call was rejected before any task ran.
///
/// Task errors are never reported here: they are values in the returned
/// results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SchedulerError {
    /// [`Scheduler::run_parallel`] was asked to run on zero workers.
    ZeroWorkers,
}

impl fmt::Display for SchedulerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroWorkers => f.write_str("parallel run needs at least one worker, got zero"),
        }
    }
}

impl core::error::Error for SchedulerError {}

#[cfg(test)]
mod tests {
    use core::num::NonZeroUsize;

    use dinah_core::TaskQueue;

    use super::{Scheduler, SchedulerError};

    fn queue_of(values: &[u32]) -> TaskQueue<impl FnOnce() -> Result<u32, u32> + Send, 16> {
        let mut queue = TaskQueue::new();
        for &value in values {
            let task = move || {
                if value % 3 == 0 {
                    Err(value)
                } else {
                    Ok(value)
                }
            };
            assert!(queue.try_push(task).is_ok());
        }
        queue
    }

    #[test]
    fn zero_workers_is_rejected_without_touching_the_queue() {
        let mut queue = queue_of(&[1, 2]);
        assert_eq!(
            Scheduler::new().run_parallel(&mut queue, 0),
            Err(SchedulerError::ZeroWorkers)
        );
        assert_eq!(queue.len(), 2);
    }

    #[test]
    fn error_display_says_what_failed() {
        assert_eq!(
            SchedulerError::ZeroWorkers.to_string(),
            "parallel run needs at least one worker, got zero"
        );
    }

    #[test]
    fn sequential_and_parallel_drains_agree() {
        let values: Vec<u32> = (1..=16).collect();
        let expected: Vec<Result<u32, u32>> = values
            .iter()
            .map(|&v| if v % 3 == 0 { Err(v) } else { Ok(v) })
            .collect();
        let scheduler = Scheduler::new();
        assert_eq!(scheduler.run_until_empty(&mut queue_of(&values)), expected);
        for workers in [1, 2, 3, 16, 40] {
            let mut queue = queue_of(&values);
            assert_eq!(
                scheduler.run_parallel(&mut queue, workers),
                Ok(expected.clone())
            );
            assert!(queue.is_empty());
        }
        let mut queue = queue_of(&values);
        assert_eq!(
            scheduler.run_parallel_bounded(&mut queue, NonZeroUsize::MIN),
            expected
        );
    }

    #[test]
    fn empty_queues_give_empty_results() {
        let scheduler = Scheduler::new();
        let mut queue = queue_of(&[]);
        assert_eq!(scheduler.dispatch_next(&mut queue), None);
        assert!(scheduler.run_until_empty(&mut queue).is_empty());
        assert_eq!(scheduler.run_parallel(&mut queue, 8), Ok(Vec::new()));
    }
}
