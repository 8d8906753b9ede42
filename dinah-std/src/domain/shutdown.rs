//! Explicit shutdown: the policy for queued work, joining the workers with
//! a deadline, and the report.
//!
//! Rayon's `ThreadPool` does not join its threads when dropped; it only
//! tells them to exit once the work spawned into it has run. A domain
//! therefore counts its workers itself: the pool's exit handler counts each
//! worker out under a lock and notifies a condition variable, and
//! [`Domain::shutdown`] waits on it with the remaining time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use dinah_core::AdmissionState;

use super::admission::AdmissionGuard;
use super::error::DomainShutdownTimeout;
use super::wait::deadline_after;
use super::{Domain, DomainShared};

/// What a shutdown does with jobs that were admitted but have not started.
///
/// Under every policy new jobs are refused from the moment shutdown
/// begins, and no admitted job is ever dropped silently: each either runs
/// and delivers its outcome, or is reported `Cancelled` through its handle
/// or completion queue (and counted in the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ShutdownPolicy {
    /// Run every queued job, then stop.
    Drain,
    /// Cancel queued jobs (and tasks of running batches that have not
    /// started) without running them; let running jobs finish.
    CancelQueued,
    /// Like [`CancelQueued`](Self::CancelQueued), and also request
    /// cancellation of running jobs (they see it through their
    /// [`JobContext`](crate::JobContext); nothing is interrupted).
    CancelAll,
}

impl ShutdownPolicy {
    /// The admission state this policy moves to.
    pub(crate) fn state(self) -> AdmissionState {
        match self {
            Self::Drain => AdmissionState::Draining,
            Self::CancelQueued | Self::CancelAll => AdmissionState::Cancelling,
        }
    }
}

/// What a successful [`Domain::shutdown`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct DomainShutdownReport {
    /// The policy in force (a later, stronger request may have escalated
    /// the one `shutdown` was given).
    pub policy: ShutdownPolicy,
    /// Queued jobs (and batch tasks) cancelled without running, whether
    /// the shutdown took them from the queue or a worker found them
    /// cancelled when it reached them.
    pub cancelled: usize,
    /// Worker threads that exited (all of them).
    pub workers_joined: usize,
}

/// Counts the workers of one domain in and out.
#[derive(Debug)]
pub(crate) struct Roster {
    started: AtomicUsize,
    exited: Mutex<usize>,
    changed: Condvar,
}

impl Roster {
    pub(crate) fn new() -> Self {
        Self {
            started: AtomicUsize::new(0),
            exited: Mutex::new(0),
            changed: Condvar::new(),
        }
    }

    /// Called by each worker as it starts (`Relaxed`: a statistic).
    pub(crate) fn worker_started(&self) {
        self.started.fetch_add(1, Ordering::Relaxed);
    }

    /// Called by each worker as it exits.
    pub(crate) fn worker_exited(&self) {
        *self.exited.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.changed.notify_all();
    }

    pub(crate) fn started(&self) -> usize {
        self.started.load(Ordering::Relaxed)
    }

    pub(crate) fn exited(&self) -> usize {
        *self.exited.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until `workers` have exited or `deadline` passes; returns how
    /// many have exited.
    pub(crate) fn wait_exited(&self, workers: usize, deadline: Option<Instant>) -> usize {
        let mut exited = self.exited.lock().unwrap_or_else(PoisonError::into_inner);
        while *exited < workers {
            match deadline {
                None => {
                    exited = self
                        .changed
                        .wait(exited)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    exited = self
                        .changed
                        .wait_timeout(exited, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
        *exited
    }
}

impl DomainShared {
    /// Cancels every job still in the queue, reporting each through its own
    /// completion path; returns how many.
    pub(crate) fn cancel_queued(&self) -> usize {
        let mut cancelled = 0;
        self.with_context(&mut |context| {
            while let Some(job) = self.queue.pop() {
                let _admission = AdmissionGuard(&self.admission);
                job.cancel(self, context);
                cancelled += 1;
            }
        });
        // (`job.cancel` counted each one in `shutdown_cancelled`.)
        cancelled
    }
}

impl Domain {
    /// Starts shutting down without waiting: new jobs are refused from now
    /// on and queued jobs are handled by `policy`. Returns how many queued
    /// jobs this call cancelled.
    ///
    /// Calling it again can only escalate (`Drain` to `CancelQueued` to
    /// `CancelAll`), never relax. Use [`in_flight`](Self::in_flight) to
    /// watch the domain drain (for example while the calling thread keeps
    /// draining a completion queue), then [`shutdown`](Self::shutdown) to
    /// join the workers.
    pub fn begin_shutdown(&self, policy: ShutdownPolicy) -> usize {
        let state = self.shared.admission.close(policy.state());
        if policy == ShutdownPolicy::CancelAll {
            self.shared.cancel_running.request();
        }
        if state == AdmissionState::Cancelling {
            self.shared.cancel_queued()
        } else {
            0
        }
    }

    /// Shuts the domain down: refuses new work, handles queued jobs by
    /// `policy`, waits for admitted work to finish and for every worker to
    /// exit, all within `timeout`.
    ///
    /// # Errors
    ///
    /// [`DomainShutdownTimeout`] with exact counts if work was still running
    /// or workers had not exited when `timeout` passed. Jobs still queued
    /// at that point are cancelled (and reported through their handles or
    /// completion queues); running ones are detached and still deliver
    /// their outcomes when they return.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use std::time::Duration;
    /// use dinah_core::DomainId;
    /// use dinah_std::{Domain, DomainConfig, ShutdownPolicy};
    ///
    /// let domain = Domain::start(DomainConfig::new(DomainId::new(1)?, NonZeroUsize::MIN, NonZeroUsize::MIN), None)?;
    /// let handle = domain.try_submit(|_| Ok::<_, ()>(1))?;
    /// let report = domain.shutdown(ShutdownPolicy::Drain, Duration::from_secs(10))?;
    /// assert_eq!((report.cancelled, report.workers_joined), (0, 1));
    /// assert_eq!(handle.join(), Ok(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shutdown(
        mut self,
        policy: ShutdownPolicy,
        timeout: Duration,
    ) -> Result<DomainShutdownReport, DomainShutdownTimeout> {
        let deadline = deadline_after(timeout);
        self.begin_shutdown(policy);
        let idle = self.shared.admission.wait_idle(deadline);
        if !idle {
            // Out of time: nothing queued may wait for a worker that is
            // about to be detached.
            self.shared.admission.close(AdmissionState::Cancelling);
            self.shared.cancel_queued();
        }
        // Dropping the pool tells the workers to exit once the work spawned
        // into it (including no-op trampolines of cancelled jobs) has run.
        drop(self.pool.take());
        let workers = self.shared.workers;
        let exited = self.roster.wait_exited(workers, deadline);
        let running = self.shared.admission.in_flight();
        let cancelled = self.shared.shutdown_cancelled();
        if idle && exited == workers {
            Ok(DomainShutdownReport {
                policy: self.policy_in_force(),
                cancelled,
                workers_joined: exited,
            })
        } else {
            Err(DomainShutdownTimeout {
                domain: self.shared.id,
                policy,
                timeout,
                running,
                cancelled,
                live_workers: workers - exited,
                workers,
            })
        }
    }

    fn policy_in_force(&self) -> ShutdownPolicy {
        if self.shared.cancel_running.is_requested() {
            ShutdownPolicy::CancelAll
        } else if self.shared.admission.cancels_queued() {
            ShutdownPolicy::CancelQueued
        } else {
            ShutdownPolicy::Drain
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn policies_order_from_gentle_to_strict() {
        assert!(ShutdownPolicy::Drain < ShutdownPolicy::CancelQueued);
        assert!(ShutdownPolicy::CancelQueued < ShutdownPolicy::CancelAll);
        assert_eq!(ShutdownPolicy::Drain.state(), AdmissionState::Draining);
        assert_eq!(
            ShutdownPolicy::CancelAll.state(),
            AdmissionState::Cancelling
        );
    }

    #[test]
    fn roster_waits_for_every_worker_or_the_deadline() {
        let roster = Arc::new(Roster::new());
        roster.worker_started();
        roster.worker_started();
        assert_eq!(roster.started(), 2);
        assert_eq!(roster.wait_exited(2, Some(Instant::now())), 0);
        let exits: Vec<_> = (0..2)
            .map(|_| {
                let roster = Arc::clone(&roster);
                thread::spawn(move || roster.worker_exited())
            })
            .collect();
        assert_eq!(roster.wait_exited(2, None), 2);
        for exit in exits {
            exit.join().unwrap();
        }
        assert_eq!(roster.exited(), 2);
    }
}
