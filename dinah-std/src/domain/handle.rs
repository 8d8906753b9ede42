//! Waiting for one job: [`JobHandle`] and [`JobCanceller`].
//!
//! A handle job's outcome lands in a slot shared by the worker and the
//! handle. The waiter spins for the domain's adaptive spin budget (see
//! `wait.rs`), then registers its thread and parks; the worker unparks it
//! only if it registered.
//!
//! # Memory ordering
//!
//! The slot's `state` word carries two bits, `DONE` (set by the worker
//! after storing the outcome) and `WAITING` (set by a waiter after storing
//! its thread). Both are set with `AcqRel` read-modify-writes on the same
//! word, so whichever comes second in that word's modification order sees
//! the other: a worker whose `fetch_or(DONE)` returns `WAITING` finds the
//! waiter's thread (it also takes the waiter lock), and a waiter whose
//! `fetch_or(WAITING)` returns `DONE` does not park. Plain checks load
//! `state` with `Acquire`, pairing with the worker's `Release` half, so a
//! waiter that sees `DONE` finds the outcome stored (the outcome lock
//! orders it too).

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use dinah_core::{CancelFlag, DomainId, TaskFailure, TaskId, TaskOutcome};

use super::instrument::Instrumentation;
#[cfg(test)]
use super::wait::Pace;
use super::wait::{AdaptiveSpin, deadline_after, remaining};

/// The outcome is stored.
const DONE: u8 = 1;
/// A waiter registered its thread and may be parked.
const WAITING: u8 = 2;

/// Something a [`JobCanceller`] can cancel.
pub(crate) trait CancelTarget: Send + Sync {
    fn cancel_flag(&self) -> &CancelFlag;
    fn task_id(&self) -> TaskId;
}

/// The identity and cancellation flag of a job without a handle (a job
/// whose outcome goes to a completion queue); it lives in the job itself,
/// which is its canceller's target.
#[derive(Debug)]
pub(crate) struct JobCore {
    pub(crate) task: TaskId,
    pub(crate) cancel: CancelFlag,
}

/// Where a handle job's outcome lands.
pub(crate) struct JobSlot<T, E> {
    pub(crate) task: TaskId,
    pub(crate) cancel: CancelFlag,
    state: AtomicU8,
    outcome: Mutex<Option<TaskOutcome<T, E>>>,
    waiter: Mutex<Option<Thread>>,
}

impl<T, E> JobSlot<T, E> {
    pub(crate) fn new(task: TaskId) -> Self {
        Self {
            task,
            cancel: CancelFlag::new(),
            state: AtomicU8::new(0),
            outcome: Mutex::new(None),
            waiter: Mutex::new(None),
        }
    }

    /// Stores the outcome and wakes a parked waiter. Called once.
    pub(crate) fn complete(&self, outcome: TaskOutcome<T, E>) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
        let previous = self.state.fetch_or(DONE, Ordering::AcqRel);
        debug_assert_eq!(previous & DONE, 0, "a job completes once");
        if previous & WAITING != 0 {
            if let Some(waiter) = &*self.waiter.lock().unwrap_or_else(PoisonError::into_inner) {
                waiter.unpark();
            }
        }
    }

    fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) & DONE != 0
    }

    /// Waits until the outcome is stored or `deadline` passes; `true` if
    /// it is stored.
    fn wait(&self, spin: &AdaptiveSpin, deadline: Option<Instant>) -> bool {
        let cap = match deadline {
            Some(deadline) => remaining(deadline).unwrap_or_default(),
            None => Duration::MAX,
        };
        if spin.spin(cap, || self.is_done()) {
            return true;
        }
        *self.waiter.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread::current());
        if self.state.fetch_or(WAITING, Ordering::AcqRel) & DONE != 0 {
            return true;
        }
        loop {
            if self.is_done() {
                return true;
            }
            match deadline {
                None => thread::park(),
                Some(deadline) => match remaining(deadline) {
                    Some(left) => thread::park_timeout(left),
                    None => return self.is_done(),
                },
            }
        }
    }

    fn take(&self) -> TaskOutcome<T, E> {
        self.outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("a finished job's outcome is taken once, by its handle")
    }
}

impl<T: Send + 'static, E: Send + 'static> CancelTarget for JobSlot<T, E> {
    fn cancel_flag(&self) -> &CancelFlag {
        &self.cancel
    }
    fn task_id(&self) -> TaskId {
        self.task
    }
}

/// Requests cancellation of one job; cheap to clone and send.
///
/// Obtained from [`JobHandle::canceller`] or
/// [`Domain::try_submit_to`](crate::Domain::try_submit_to). See
/// [`JobContext`](crate::JobContext) for what a request does.
#[derive(Clone)]
pub struct JobCanceller {
    target: Arc<dyn CancelTarget>,
    domain: DomainId,
    instrumentation: Option<Arc<Instrumentation>>,
}

impl JobCanceller {
    pub(crate) fn new(
        target: Arc<dyn CancelTarget>,
        domain: DomainId,
        instrumentation: Option<Arc<Instrumentation>>,
    ) -> Self {
        Self {
            target,
            domain,
            instrumentation,
        }
    }

    /// Requests cancellation. Returns `true` for the one call that made the
    /// request, `false` if it had already been made.
    ///
    /// A job that has not started will not run; a running job sees the
    /// request when it polls its [`JobContext`](crate::JobContext); a
    /// finished job is unaffected.
    pub fn cancel(&self) -> bool {
        Self::request(&*self.target, self.domain, self.instrumentation.as_deref())
    }

    /// Requests cancellation of `target`, a job of `domain`, recording the
    /// first request in `instrumentation`; `true` for that first request.
    pub(crate) fn request(
        target: &dyn CancelTarget,
        domain: DomainId,
        instrumentation: Option<&Instrumentation>,
    ) -> bool {
        let first = target.cancel_flag().request();
        if first {
            if let Some(instrumentation) = instrumentation {
                instrumentation.cancellation_requested(domain, target.task_id());
            }
        }
        first
    }

    /// Has cancellation been requested (through any canceller or handle of
    /// this job)?
    #[must_use]
    pub fn is_cancellation_requested(&self) -> bool {
        self.target.cancel_flag().is_requested()
    }

    /// The job's task ID.
    #[must_use]
    pub fn task_id(&self) -> TaskId {
        self.target.task_id()
    }

    /// How many references to the job's shared block exist (tests only).
    #[cfg(test)]
    pub(crate) fn holders(&self) -> usize {
        Arc::strong_count(&self.target)
    }
}

impl fmt::Debug for JobCanceller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobCanceller")
            .field("task", &self.task_id())
            .field("domain", &self.domain)
            .field("cancellation_requested", &self.is_cancellation_requested())
            .finish()
    }
}

/// The eventual outcome of one job submitted with
/// [`Domain::try_submit`](crate::Domain::try_submit).
///
/// [`join`](Self::join) waits for it: the caller spins briefly (up to the
/// domain's `spin_before_park`, less when spinning has not been paying
/// off), then parks until the worker wakes it.
/// Dropping the handle detaches the job: it still runs (unless cancelled)
/// and its outcome is dropped.
#[must_use = "dropping a job handle detaches the job; call `join` to get its outcome"]
pub struct JobHandle<T, E> {
    slot: Arc<JobSlot<T, E>>,
    domain: DomainId,
    spin: Arc<AdaptiveSpin>,
    instrumentation: Option<Arc<Instrumentation>>,
}

impl<T: Send + 'static, E: Send + 'static> JobHandle<T, E> {
    pub(crate) fn new(
        slot: Arc<JobSlot<T, E>>,
        domain: DomainId,
        spin: Arc<AdaptiveSpin>,
        instrumentation: Option<Arc<Instrumentation>>,
    ) -> Self {
        Self {
            slot,
            domain,
            spin,
            instrumentation,
        }
    }

    /// The job's task ID.
    #[must_use]
    pub fn task_id(&self) -> TaskId {
        self.slot.task
    }

    /// Has the job's outcome been delivered? (Never blocks.)
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.slot.is_done()
    }

    /// Requests cancellation; see [`JobCanceller::cancel`].
    pub fn cancel(&self) -> bool {
        self.canceller().cancel()
    }

    /// A canceller for this job, usable from other threads while this
    /// handle waits.
    #[must_use]
    pub fn canceller(&self) -> JobCanceller {
        let target: Arc<dyn CancelTarget> = self.slot.clone();
        JobCanceller::new(target, self.domain, self.instrumentation.clone())
    }

    /// Waits for the job and returns its value.
    ///
    /// # Errors
    ///
    /// The job's [`TaskFailure`]: the error it returned, the message of
    /// its panic, or `Cancelled`.
    pub fn join(self) -> Result<T, TaskFailure<E>> {
        self.slot.wait(&self.spin, None);
        self.slot.take().into_result()
    }

    /// Waits at most `timeout` for the job.
    ///
    /// # Errors
    ///
    /// [`JoinTimeoutError`] holding this handle if the job has not finished
    /// in time (call again, or drop the handle to detach it).
    pub fn join_timeout(
        self,
        timeout: Duration,
    ) -> Result<Result<T, TaskFailure<E>>, JoinTimeoutError<T, E>> {
        if self.slot.wait(&self.spin, deadline_after(timeout)) {
            Ok(self.slot.take().into_result())
        } else {
            Err(JoinTimeoutError { handle: self })
        }
    }
}

impl<T, E> fmt::Debug for JobHandle<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobHandle")
            .field("task", &self.slot.task)
            .field("domain", &self.domain)
            .field("finished", &self.slot.is_done())
            .finish()
    }
}

/// [`JobHandle::join_timeout`] ran out of time; the handle is inside.
pub struct JoinTimeoutError<T, E> {
    handle: JobHandle<T, E>,
}

impl<T, E> JoinTimeoutError<T, E> {
    /// The handle, to wait again or to drop (detaching the job).
    pub fn into_inner(self) -> JobHandle<T, E> {
        self.handle
    }
}

impl<T, E> fmt::Debug for JoinTimeoutError<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinTimeoutError")
            .field("handle", &self.handle)
            .finish()
    }
}

impl<T, E> fmt::Display for JoinTimeoutError<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} did not finish within the timeout",
            self.handle.slot.task
        )
    }
}

impl<T, E> std::error::Error for JoinTimeoutError<T, E> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(spin: Duration) -> JobHandle<u32, ()> {
        let slot = Arc::new(JobSlot::new(TaskId::MIN));
        JobHandle::new(
            slot,
            DomainId::MIN,
            Arc::new(AdaptiveSpin::new(spin, Pace::Yielding)),
            None,
        )
    }

    #[test]
    fn a_completed_slot_is_joined_without_waiting() {
        let handle = handle(Duration::ZERO);
        handle.slot.complete(TaskOutcome::Completed(5));
        assert!(handle.is_finished());
        assert_eq!(handle.join(), Ok(5));
    }

    #[test]
    fn a_parked_waiter_is_woken_by_the_worker() {
        // No spinning: the waiter parks, so the unpark path is exercised.
        let handle = handle(Duration::ZERO);
        let slot = Arc::clone(&handle.slot);
        let worker = thread::spawn(move || {
            // Complete only once the waiter has announced itself.
            while slot.state.load(Ordering::Acquire) & WAITING == 0 {
                thread::yield_now();
            }
            slot.complete(TaskOutcome::Failed(TaskFailure::returned(())));
        });
        assert_eq!(handle.join().unwrap_err().into_error(), Some(()));
        worker.join().unwrap();
    }

    #[test]
    fn join_timeout_hands_the_handle_back_then_joins() {
        let handle = handle(Duration::from_micros(5));
        let error = handle.join_timeout(Duration::ZERO).unwrap_err();
        assert!(error.to_string().contains("did not finish"));
        let handle = error.into_inner();
        assert!(!handle.is_finished());
        handle.slot.complete(TaskOutcome::Completed(9));
        assert_eq!(
            handle.join_timeout(Duration::from_secs(3600)).unwrap(),
            Ok(9)
        );
    }

    #[test]
    fn cancellers_share_the_flag_and_report_the_first_request() {
        let handle = handle(Duration::ZERO);
        let canceller = handle.canceller();
        assert!(!canceller.is_cancellation_requested());
        assert!(canceller.clone().cancel());
        assert!(!handle.cancel(), "already requested");
        assert!(canceller.is_cancellation_requested());
        assert_eq!(canceller.task_id(), TaskId::MIN);
        assert!(format!("{canceller:?}").contains("cancellation_requested: true"));
    }
}
