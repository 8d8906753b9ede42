//! Bounded admission and the domain's open/closing state.
//!
//! A domain admits at most `capacity` jobs at once. A job holds its
//! admission from the moment [`Admission::try_admit`] accepts it until its
//! outcome has been delivered ([`Admission::release`]); a batch holds one.
//! Closing the domain (shutdown) is a one-way move to a later state; new
//! admissions fail from then on, and a shutdown waits for the in-flight
//! count to reach zero.
//!
//! The counting is [`dinah_core::AdmissionCounter`]'s: submitters (the
//! runtime's owner thread, mostly) write one cache line and the workers
//! that release write another, and the core type's documentation gives the
//! ordering argument, checked with loom in dinah-core. This module adds
//! the waiting: a shutdown sleeps on a condition variable, and the release
//! that the counter says left a closed domain idle wakes it under the same
//! lock, so the wake-up cannot fall between the shutdown's check and its
//! sleep.
//!
//! # The process-wide cancelling count
//!
//! [`Admission::cancels_queued`] first loads the process-wide count of
//! cancelling domains (`Relaxed`). `close` raises it before it returns,
//! and only this admission's drop lowers it again, so a thread that
//! `close` happened before (a worker woken by the shutdown, say) sees a
//! count of at least one and goes on to read the state, exactly as if the
//! count were not there.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use dinah_core::{AdmissionCounter, AdmissionState, AdmitError};

/// Domains of this process whose state is `Cancelling` and whose
/// admission still exists: the fast path of
/// [`Admission::cancels_queued`].
///
/// Every task of a batch asks whether to run. Asked of the domain's own
/// state, that is two pointer loads and a byte load per task (the task's
/// opaque code forces them again every time), which in a batch of no-op
/// tasks was most of what dinah's per-task loop did beyond Rayon's. This
/// counter is one compare with a static; the domain's own state is read
/// only while some domain of the process is cancelling.
static CANCELLING_DOMAINS: AtomicUsize = AtomicUsize::new(0);

/// Is any domain of this process cancelling? `false` means that
/// [`Admission::cancels_queued`] is `false` for every domain; `true` means
/// it has to be asked.
#[inline]
pub(crate) fn any_cancelling() -> bool {
    CANCELLING_DOMAINS.load(Ordering::Relaxed) != 0
}

/// The admission counter and lifecycle state of one domain.
#[derive(Debug)]
pub(crate) struct Admission {
    counter: AdmissionCounter,
    /// Guards nothing but the wake-up of a shutdown waiting in
    /// [`wait_idle`](Self::wait_idle).
    idle_lock: Mutex<()>,
    idle: Condvar,
}

impl Admission {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            counter: AdmissionCounter::new(capacity),
            idle_lock: Mutex::new(()),
            idle: Condvar::new(),
        }
    }

    /// Admits one job (or batch), or says why not.
    #[inline]
    pub(crate) fn try_admit(&self) -> Result<(), AdmitError> {
        self.counter.try_admit()
    }

    /// Ends one admission: the job's outcome has been delivered.
    #[inline]
    pub(crate) fn release(&self) {
        if self.counter.release() {
            self.wake_shutdown();
        }
    }

    /// Wakes a shutdown that may be waiting for the last job. Taking the
    /// lock orders the notification after its check (see `wait_idle`).
    #[cold]
    fn wake_shutdown(&self) {
        let _guard = self
            .idle_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.idle.notify_all();
    }

    /// Moves to `state` (`Draining` or `Cancelling`) unless already at or
    /// past it; returns the state in force afterwards.
    pub(crate) fn close(&self, state: AdmissionState) -> AdmissionState {
        let previous = self.counter.close(state);
        if previous < AdmissionState::Cancelling && state >= AdmissionState::Cancelling {
            // Exactly once per admission (the state only rises), undone
            // when the admission is dropped.
            CANCELLING_DOMAINS.fetch_add(1, Ordering::SeqCst);
        }
        previous.max(state)
    }

    /// Is the domain still admitting?
    pub(crate) fn is_open(&self) -> bool {
        self.counter.is_open()
    }

    /// Should work that has not started yet be cancelled instead of run?
    #[inline]
    pub(crate) fn cancels_queued(&self) -> bool {
        any_cancelling() && self.counter.is_cancelling_relaxed()
    }

    /// Jobs admitted and not yet delivered.
    pub(crate) fn in_flight(&self) -> usize {
        self.counter.in_flight()
    }

    /// The most jobs admitted at once.
    pub(crate) fn capacity(&self) -> usize {
        self.counter.capacity()
    }

    /// Waits until no job is in flight or `deadline` passes; `true` if the
    /// domain became idle. Only meaningful once the domain is closed (an
    /// open domain may admit more work at any time).
    pub(crate) fn wait_idle(&self, deadline: Option<Instant>) -> bool {
        let mut guard = self
            .idle_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if self.counter.is_idle() {
                return true;
            }
            match deadline {
                None => {
                    guard = self
                        .idle
                        .wait(guard)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    guard = self
                        .idle
                        .wait_timeout(guard, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if self.counter.state() == AdmissionState::Cancelling {
            CANCELLING_DOMAINS.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Releases one admission when dropped, so a job's admission ends even if
/// delivering its outcome unwinds.
#[derive(Debug)]
pub(crate) struct AdmissionGuard<'a>(pub(crate) &'a Admission);

impl Drop for AdmissionGuard<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    #[test]
    fn admits_up_to_capacity_then_refuses() {
        let admission = Admission::new(2);
        assert_eq!(admission.try_admit(), Ok(()));
        assert_eq!(admission.try_admit(), Ok(()));
        assert_eq!(admission.try_admit(), Err(AdmitError::Full { capacity: 2 }));
        assert_eq!(admission.in_flight(), 2);
        admission.release();
        assert_eq!(admission.try_admit(), Ok(()));
    }

    #[test]
    fn closing_refuses_new_work_and_only_escalates() {
        let admission = Admission::new(4);
        assert!(admission.is_open());
        assert_eq!(
            admission.close(AdmissionState::Cancelling),
            AdmissionState::Cancelling
        );
        assert_eq!(
            admission.close(AdmissionState::Draining),
            AdmissionState::Cancelling,
            "no way back"
        );
        assert!(admission.cancels_queued());
        assert_eq!(admission.try_admit(), Err(AdmitError::Closed));
        assert_eq!(
            admission.in_flight(),
            0,
            "a refused admission leaves no trace"
        );
    }

    #[test]
    fn only_the_cancelling_domain_cancels_while_another_is_cancelling() {
        let cancelling = Admission::new(1);
        let draining = Admission::new(1);
        let open = Admission::new(1);
        cancelling.close(AdmissionState::Cancelling);
        cancelling.close(AdmissionState::Cancelling);
        draining.close(AdmissionState::Draining);
        assert!(cancelling.cancels_queued());
        assert!(!draining.cancels_queued());
        assert!(!open.cancels_queued());
        drop(cancelling);
        let again = Admission::new(1);
        again.close(AdmissionState::Cancelling);
        assert!(
            again.cancels_queued(),
            "a later cancelling domain counts too"
        );
        assert!(!draining.cancels_queued());
    }

    #[test]
    fn wait_idle_returns_when_the_last_job_is_released() {
        let admission = Arc::new(Admission::new(8));
        for _ in 0..8 {
            admission.try_admit().unwrap();
        }
        admission.close(AdmissionState::Draining);
        let releaser = {
            let admission = Arc::clone(&admission);
            thread::spawn(move || {
                for _ in 0..8 {
                    admission.release();
                }
            })
        };
        assert!(admission.wait_idle(None));
        releaser.join().unwrap();
        assert_eq!(admission.in_flight(), 0);
    }

    #[test]
    fn wait_idle_gives_up_at_the_deadline() {
        let admission = Admission::new(1);
        admission.try_admit().unwrap();
        admission.close(AdmissionState::Draining);
        assert!(!admission.wait_idle(Some(Instant::now())));
        assert_eq!(admission.in_flight(), 1);
    }

    #[test]
    fn concurrent_admissions_never_exceed_capacity() {
        let admission = Arc::new(Admission::new(3));
        // The jobs actually between admission and release, counted apart
        // from the admission's own counts.
        let live = Arc::new(AtomicUsize::new(0));
        let rounds = if cfg!(miri) { 20 } else { 2_000 };
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let admission = Arc::clone(&admission);
                let live = Arc::clone(&live);
                thread::spawn(move || {
                    let mut admitted = 0;
                    for _ in 0..rounds {
                        if admission.try_admit().is_ok() {
                            let before = live.fetch_add(1, Ordering::SeqCst);
                            assert!(before < 3, "{} jobs admitted at once", before + 1);
                            admitted += 1;
                            live.fetch_sub(1, Ordering::SeqCst);
                            admission.release();
                        }
                    }
                    admitted
                })
            })
            .collect();
        let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(admitted > 0);
        assert_eq!(admission.in_flight(), 0);
    }
}
