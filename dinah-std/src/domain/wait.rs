//! Waiting for a result: spin briefly, then park.
//!
//! A result that arrives shortly after the wait begins is far cheaper to
//! catch by spinning than by parking, since waking a parked thread takes
//! much longer than a short spin. Spinning burns a core, though: on a
//! machine with spare cores it is nearly free, but on a busy one the
//! spinning waiter can hold the very core the worker it waits for was
//! queued on (Linux tends to place a woken thread on its waker's core),
//! delaying the result by far more than a wake-up. So the spin adapts
//! ([`AdaptiveSpin`]): it starts at the domain's `spin_before_park` budget,
//! collapses when spins keep failing, and is probed again now and then with
//! the full budget to find out whether spinning pays again.
//!
//! Every wait first spins on the core for [`PURE_SPIN`], one microsecond
//! measured by the clock: the cost of a spin hint differs widely between
//! CPUs, so a phase counted in hints would last far longer on some than
//! intended. This phase catches a result that is nearly there (a worker
//! already running finishes a short job) without giving up the core; it is
//! kept short because a woken worker queued on the waiter's own core cannot
//! run until the spin ends. Then the wait either keeps spinning
//! ([`Pace::Pure`]) or yields the core between checks ([`Pace::Yielding`]).
//! Waits for a single job yield: after an idle period the woken worker is
//! often queued on the waiter's own core, and yielding lets it run there at
//! once instead of after the spin, while a result that is nearly there is
//! still caught by the pure phase without a yield before each check. Waits
//! for a batch stay pure: the caller spins only after running its own
//! share, while its helpers finish their last, single-task claims (see
//! `batch_drive.rs`).
//!
//! # Memory ordering
//!
//! [`AdaptiveSpin`]'s budget and probe counter are `Relaxed`: they are a
//! heuristic, shared by all waiters of a domain, and a stale value only
//! makes one wait spin more or less than ideal.

use std::hint;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long every wait spins on the core before its pace applies.
const PURE_SPIN: Duration = Duration::from_micros(1);
/// `spin_loop` hints between two checks. A hint's cost differs widely
/// between CPUs, so spins are bounded by the clock, never by a count of
/// hints.
const HINTS_PER_CHECK: u32 = 4;
/// Checks between two reads of the clock.
const CHECKS_PER_CLOCK_READ: u32 = 4;

/// How a wait spends its budget after its first [`PURE_SPIN`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Keeps spinning on the core.
    Pure,
    /// Yields the core between two checks.
    Yielding,
}

/// Spins until `ready()` returns `true` or about `budget` has passed;
/// returns the last answer of `ready()`.
///
/// `ready` is called often: it should be a single atomic load.
pub(crate) fn spin_until(budget: Duration, pace: Pace, mut ready: impl FnMut() -> bool) -> bool {
    if ready() {
        return true;
    }
    if budget.is_zero() {
        return false;
    }
    let start = Instant::now();
    // Every wait spins on the core for its first `PURE_SPIN`, for results
    // that are nearly there; then it goes on at its pace.
    let pure = PURE_SPIN.min(budget);
    let mut spun = Duration::ZERO;
    while spun < budget {
        if pace == Pace::Yielding && spun >= pure {
            thread::yield_now();
            if ready() {
                return true;
            }
        } else {
            for _ in 0..CHECKS_PER_CLOCK_READ {
                for _ in 0..HINTS_PER_CHECK {
                    hint::spin_loop();
                }
                if ready() {
                    return true;
                }
            }
        }
        spun = start.elapsed();
    }
    ready()
}

/// A collapsed budget is retried at full length once every this many waits.
const PROBE_EVERY: u32 = 16;
/// A budget shrunk below this many nanoseconds collapses to zero.
const MIN_SPIN_NANOS: u64 = 1_000;

/// A spin budget shared by the waiters of one domain, learning whether
/// spinning pays off.
///
/// A wait whose result arrives during the spin restores the full budget; a
/// wait that had to give up divides it by four, so after a few failures
/// waiters park at once. While collapsed, one wait in [`PROBE_EVERY`]
/// spins with the full budget again, so the spin comes back when the
/// machine quiets down (or the work gets shorter).
#[derive(Debug)]
pub(crate) struct AdaptiveSpin {
    max_nanos: u64,
    pace: Pace,
    current_nanos: AtomicU64,
    collapsed_waits: AtomicU32,
}

impl AdaptiveSpin {
    /// A budget starting (and capped) at `max`, spent at `pace`.
    pub(crate) fn new(max: Duration, pace: Pace) -> Self {
        let max_nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        Self {
            max_nanos,
            pace,
            current_nanos: AtomicU64::new(max_nanos),
            collapsed_waits: AtomicU32::new(0),
        }
    }

    /// The budget the next wait should spin for (not more than `cap`).
    fn budget(&self, cap: Duration) -> Duration {
        let mut nanos = self.current_nanos.load(Ordering::Relaxed);
        if nanos == 0 && self.max_nanos > 0 {
            let waits = self.collapsed_waits.fetch_add(1, Ordering::Relaxed);
            if waits % PROBE_EVERY == PROBE_EVERY - 1 {
                nanos = self.max_nanos;
            }
        }
        Duration::from_nanos(nanos).min(cap)
    }

    /// Spins until `ready()` or the current budget (at most `cap`) runs
    /// out, and learns from the result; returns the last answer of
    /// `ready()`.
    pub(crate) fn spin(&self, cap: Duration, ready: impl FnMut() -> bool) -> bool {
        let budget = self.budget(cap);
        let caught = spin_until(budget, self.pace, ready);
        if budget.is_zero() {
            return caught;
        }
        let spun = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
        let next = if caught {
            self.max_nanos
        } else {
            Some(spun / 4).filter(|&n| n >= MIN_SPIN_NANOS).unwrap_or(0)
        };
        if self.current_nanos.load(Ordering::Relaxed) != next {
            self.current_nanos.store(next, Ordering::Relaxed);
        }
        caught
    }

    /// The budget the next (non-probing) wait would spin for.
    #[cfg(test)]
    fn current(&self) -> Duration {
        Duration::from_nanos(self.current_nanos.load(Ordering::Relaxed))
    }
}

/// The time left until `deadline`, or `None` if it has passed.
pub(crate) fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|left| !left.is_zero())
}

/// `now + timeout`, or `None` (no deadline) if that is not representable.
pub(crate) fn deadline_after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::thread;

    #[test]
    fn returns_at_once_when_ready() {
        let calls = AtomicU32::new(0);
        assert!(spin_until(Duration::from_secs(3600), Pace::Pure, || {
            calls.fetch_add(1, Ordering::Relaxed);
            true
        }));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn zero_budget_checks_once() {
        let calls = AtomicU32::new(0);
        assert!(!spin_until(Duration::ZERO, Pace::Pure, || {
            calls.fetch_add(1, Ordering::Relaxed);
            false
        }));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn gives_up_when_never_ready() {
        for pace in [Pace::Pure, Pace::Yielding] {
            assert!(!spin_until(Duration::from_micros(10), pace, || false));
        }
    }

    #[test]
    fn sees_a_flag_set_by_another_thread() {
        for pace in [Pace::Pure, Pace::Yielding] {
            let flag = Arc::new(AtomicBool::new(false));
            let setter = {
                let flag = Arc::clone(&flag);
                thread::spawn(move || flag.store(true, Ordering::Release))
            };
            // The budget outlasts any scheduling delay; the flag arrives
            // while this thread is waiting.
            let seen = spin_until(Duration::from_secs(3600), pace, || {
                flag.load(Ordering::Acquire)
            });
            assert!(seen, "{pace:?}");
            setter.join().unwrap();
        }
    }

    #[test]
    fn failed_spins_collapse_the_budget_and_probes_restore_it() {
        let spin = AdaptiveSpin::new(Duration::from_micros(64), Pace::Pure);
        assert_eq!(spin.current(), Duration::from_micros(64));
        assert!(!spin.spin(Duration::MAX, || false));
        assert_eq!(spin.current(), Duration::from_micros(16));
        assert!(!spin.spin(Duration::MAX, || false));
        assert!(!spin.spin(Duration::MAX, || false));
        assert_eq!(spin.current(), Duration::from_micros(1));
        assert!(!spin.spin(Duration::MAX, || false));
        assert_eq!(spin.current(), Duration::ZERO, "collapsed");
        // Collapsed: waits check once, until a probe spins in full.
        let mut checks = 0;
        for _ in 0..PROBE_EVERY - 1 {
            assert!(!spin.spin(Duration::MAX, || {
                checks += 1;
                false
            }));
        }
        assert_eq!(checks, PROBE_EVERY - 1, "one check per collapsed wait");
        let mut probe_checks = 0;
        assert!(spin.spin(Duration::MAX, || {
            probe_checks += 1;
            probe_checks > 3
        }));
        assert_eq!(
            spin.current(),
            Duration::from_micros(64),
            "a caught result restores it"
        );
    }

    #[test]
    fn a_zero_maximum_never_spins() {
        let spin = AdaptiveSpin::new(Duration::ZERO, Pace::Pure);
        let mut checks = 0;
        for _ in 0..2 * PROBE_EVERY {
            spin.spin(Duration::MAX, || {
                checks += 1;
                false
            });
        }
        assert_eq!(checks, 2 * PROBE_EVERY);
    }

    #[test]
    fn deadlines() {
        assert_eq!(remaining(Instant::now()), None);
        assert!(remaining(Instant::now() + Duration::from_secs(3600)).is_some());
        assert!(deadline_after(Duration::MAX).is_none());
        assert!(deadline_after(Duration::from_secs(1)).is_some());
    }
}
