//! Bounded admission and the domain's open/closing state.
//!
//! A domain admits at most `capacity` jobs at once. A job holds its
//! admission from the moment [`Admission::try_admit`] accepts it until its
//! outcome has been delivered ([`Admission::release`]); a batch holds one.
//! Closing the domain (shutdown) is a one-way move to a later state; new
//! admissions fail from then on, and a shutdown waits for the in-flight
//! count to reach zero.
//!
//! # Memory ordering
//!
//! - `try_admit` raises `in_flight` with a `SeqCst` compare-exchange and then
//!   loads `state` with `SeqCst`; `close` stores `state` with `SeqCst` and
//!   the shutdown then loads `in_flight` with `SeqCst` (in
//!   [`Admission::wait_idle`]). These four operations are in one total
//!   order: if an admission saw the domain open, its increment precedes the
//!   close in that order, so the shutdown's later load counts it. Either the
//!   admission fails or the shutdown waits for the job; a job can never
//!   slip in unseen.
//! - `release` lowers `in_flight` with `SeqCst` after the job's outcome was
//!   delivered, so a shutdown that reads zero (`SeqCst`, which includes
//!   `Acquire`) sees every effect of the jobs it waited for. The releaser
//!   then loads `state` (`SeqCst`) to decide whether a shutdown may be
//!   waiting; by the same total-order argument a waiter that closed the
//!   domain before that load is woken, and one that closed it after sees
//!   the decrement itself.
//! - The fast-path `state` load before the compare-exchange and
//!   [`Admission::cancels_queued`] are `Relaxed`: the first only avoids a
//!   pointless increment (the `SeqCst` re-check decides), the second is a
//!   best-effort early exit for work that has not started, whose
//!   correctness does not depend on seeing the store promptly.
//! - `cancels_queued` first loads the process-wide count of cancelling
//!   domains (`Relaxed`). `close` raises it before it returns, and only
//!   this admission's drop lowers it again, so a thread that `close`
//!   happened before (a worker woken by the shutdown, say) sees a count of
//!   at least one and goes on to read the state, exactly as if the count
//!   were not there.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use crossbeam_utils::CachePadded;

/// The domain admits new jobs.
pub(crate) const OPEN: u8 = 0;
/// Shutting down: no new jobs; queued ones still run.
pub(crate) const DRAINING: u8 = 1;
/// Shutting down: no new jobs; queued ones are cancelled without running.
pub(crate) const CANCELLING: u8 = 2;

/// Domains of this process whose state is `CANCELLING` and whose
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

/// Why an admission was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `capacity` jobs are already admitted.
    Full,
    /// The domain is shutting down.
    Closed,
}

/// The admission counter and lifecycle state of one domain.
#[derive(Debug)]
pub(crate) struct Admission {
    state: AtomicU8,
    /// On a cache line of its own: submitters raise it and workers lower
    /// it, and the read-mostly fields beside it (`state`, `capacity`)
    /// would otherwise be fetched again after every such update.
    in_flight: CachePadded<AtomicUsize>,
    capacity: usize,
    /// Guards nothing but the wake-up of a shutdown waiting in
    /// [`wait_idle`](Self::wait_idle).
    idle_lock: Mutex<()>,
    idle: Condvar,
}

impl Admission {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            state: AtomicU8::new(OPEN),
            in_flight: CachePadded::new(AtomicUsize::new(0)),
            capacity,
            idle_lock: Mutex::new(()),
            idle: Condvar::new(),
        }
    }

    /// Admits one job (or batch), or says why not.
    pub(crate) fn try_admit(&self) -> Result<(), Refusal> {
        if self.state.load(Ordering::Relaxed) != OPEN {
            return Err(Refusal::Closed);
        }
        let mut current = self.in_flight.load(Ordering::Relaxed);
        loop {
            if current >= self.capacity {
                return Err(Refusal::Full);
            }
            match self.in_flight.compare_exchange_weak(
                current,
                current + 1,
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        if self.state.load(Ordering::SeqCst) != OPEN {
            self.release();
            return Err(Refusal::Closed);
        }
        Ok(())
    }

    /// Ends one admission: the job's outcome has been delivered.
    pub(crate) fn release(&self) {
        let previous = self.in_flight.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(previous > 0, "admission released more often than taken");
        if previous == 1 && self.state.load(Ordering::SeqCst) != OPEN {
            // A shutdown may be waiting for this last job. Taking the lock
            // orders the notification after its check (see `wait_idle`).
            let _guard = self
                .idle_lock
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.idle.notify_all();
        }
    }

    /// Moves to `state` (`DRAINING` or `CANCELLING`) unless already at or
    /// past it; returns the state in force afterwards.
    pub(crate) fn close(&self, state: u8) -> u8 {
        let previous = self.state.fetch_max(state, Ordering::SeqCst);
        if previous < CANCELLING && state >= CANCELLING {
            // Exactly once per admission (the state only rises), undone
            // when the admission is dropped.
            CANCELLING_DOMAINS.fetch_add(1, Ordering::SeqCst);
        }
        previous.max(state)
    }

    /// Is the domain still admitting?
    pub(crate) fn is_open(&self) -> bool {
        self.state.load(Ordering::SeqCst) == OPEN
    }

    /// Should work that has not started yet be cancelled instead of run?
    #[inline]
    pub(crate) fn cancels_queued(&self) -> bool {
        any_cancelling() && self.state.load(Ordering::Relaxed) == CANCELLING
    }

    /// Jobs admitted and not yet delivered.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The most jobs admitted at once.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
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
            if self.in_flight.load(Ordering::SeqCst) == 0 {
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
        if *self.state.get_mut() == CANCELLING {
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
        assert_eq!(admission.try_admit(), Err(Refusal::Full));
        assert_eq!(admission.in_flight(), 2);
        admission.release();
        assert_eq!(admission.try_admit(), Ok(()));
    }

    #[test]
    fn closing_refuses_new_work_and_only_escalates() {
        let admission = Admission::new(4);
        assert!(admission.is_open());
        assert_eq!(admission.close(CANCELLING), CANCELLING);
        assert_eq!(admission.close(DRAINING), CANCELLING, "no way back");
        assert!(admission.cancels_queued());
        assert_eq!(admission.try_admit(), Err(Refusal::Closed));
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
        cancelling.close(CANCELLING);
        cancelling.close(CANCELLING);
        draining.close(DRAINING);
        assert!(cancelling.cancels_queued());
        assert!(!draining.cancels_queued());
        assert!(!open.cancels_queued());
        drop(cancelling);
        let again = Admission::new(1);
        again.close(CANCELLING);
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
        admission.close(DRAINING);
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
        admission.close(DRAINING);
        assert!(!admission.wait_idle(Some(Instant::now())));
        assert_eq!(admission.in_flight(), 1);
    }

    #[test]
    fn concurrent_admissions_never_exceed_capacity() {
        let admission = Arc::new(Admission::new(3));
        let rounds = if cfg!(miri) { 20 } else { 2_000 };
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let admission = Arc::clone(&admission);
                thread::spawn(move || {
                    let mut admitted = 0;
                    for _ in 0..rounds {
                        if admission.try_admit().is_ok() {
                            assert!(admission.in_flight() <= 3);
                            admitted += 1;
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
