//! Should the caller of a batch spin, or park at once?
//!
//! Spinning saves one wake-up (tens of microseconds on small VMs) when the
//! batch ends soon, but the spinning caller holds a core for as long as it
//! spins. When the domain has at least as many workers as the machine has
//! cores, that core is taken from the workers running the batch, and a
//! batch that runs for longer than a wake-up is slowed down by more than
//! the spin saves: a 10,000-task no-op batch on two workers and two cores
//! took 1.6x Rayon's time with the caller spinning and 1.08x parked.
//!
//! [`BatchEstimate`] learns how long a batch takes per task (per worker)
//! from the batches before it, and predicts the next one from its length.
//! It is fed the work alone, timed on the worker from the batch's start to
//! its end: were the caller's wake-up included, a short batch that was
//! once waited for parked would look long and stay parked.
//! The caller spins only if the prediction fits in a quarter of the spin
//! budget, or if the machine has a core to spare for it.
//!
//! Parking feeds back, though: with the caller parked, the workers fall
//! asleep between batches, and waking the second worker becomes part of
//! the next batch's work, which then looks long enough to park again. So
//! one batch in [`PROBE_EVERY`] parked in a row spins anyway; if its work
//! (with the workers awake) is short, the estimate falls and spinning
//! resumes. A 256-task no-op batch otherwise settled at 10 us parked
//! instead of 4 us spinning in about half of the runs.
//!
//! # Memory ordering
//!
//! The estimate is one `Relaxed` word: it is a heuristic shared by every
//! caller of the domain, and a stale or torn-by-race value (two callers
//! updating at once, one update lost) only makes one batch spin or park
//! when the other choice would have been a little faster.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// A batch predicted to take longer than the spin budget divided by this
/// is waited for parked (when the caller would take a worker's core).
const SPIN_SHARE: u32 = 4;

/// After this many batches waited for parked in a row, one spins.
const PROBE_EVERY: u32 = 16;

/// How far one batch moves the estimate up: by a quarter of the
/// difference, and at most by a quarter of the estimate itself. A batch
/// that was slow because a worker lost its core for a time slice (common
/// when workers outnumber cores) would otherwise make many batches after it
/// park needlessly.
const RISE_SHIFT: u32 = 2;
/// How far one batch moves the estimate down: half the difference, so a
/// batch that ran at its usual speed soon undoes an outlier.
const FALL_SHIFT: u32 = 1;

/// The learned cost of one task of a batch, in picoseconds per task times
/// workers, so no-op tasks of a few nanoseconds keep their precision.
#[derive(Debug)]
pub(crate) struct BatchEstimate {
    /// `true` if the domain's workers plus the caller fit on the machine's
    /// cores: then spinning costs the workers nothing.
    spare_core: bool,
    workers: u64,
    picos_per_task: AtomicU64,
    parked_in_a_row: AtomicU32,
}

impl BatchEstimate {
    /// An estimate for a domain of `workers` workers on a machine of
    /// `cores` cores; it starts at zero (the first batches spin).
    pub(crate) fn new(workers: usize, cores: usize) -> Self {
        Self {
            spare_core: workers < cores,
            workers: u64::try_from(workers.max(1)).unwrap_or(u64::MAX),
            picos_per_task: AtomicU64::new(0),
            parked_in_a_row: AtomicU32::new(0),
        }
    }

    /// The predicted duration of a batch of `tasks` tasks.
    pub(crate) fn predict(&self, tasks: usize) -> Duration {
        let per_task = self.picos_per_task.load(Ordering::Relaxed);
        let tasks = u64::try_from(tasks).unwrap_or(u64::MAX);
        let picos = per_task.saturating_mul(tasks) / self.workers;
        Duration::from_nanos(picos / 1_000)
    }

    /// Whether a caller about to wait for a batch of `tasks` tasks should
    /// spin with a budget of `budget`.
    pub(crate) fn should_spin(&self, tasks: usize, budget: Duration) -> bool {
        if self.spare_core || self.predict(tasks) <= budget / SPIN_SHARE {
            self.parked_in_a_row.store(0, Ordering::Relaxed);
            return true;
        }
        let parked = self.parked_in_a_row.fetch_add(1, Ordering::Relaxed);
        if parked + 1 >= PROBE_EVERY {
            self.parked_in_a_row.store(0, Ordering::Relaxed);
            return !budget.is_zero();
        }
        false
    }

    /// Learns from a batch of `tasks` tasks that took `elapsed`.
    pub(crate) fn record(&self, tasks: usize, elapsed: Duration) {
        let Some(tasks) = u64::try_from(tasks).ok().filter(|&n| n > 0) else {
            return;
        };
        let picos = u64::try_from(elapsed.as_nanos())
            .unwrap_or(u64::MAX)
            .saturating_mul(1_000)
            .saturating_mul(self.workers);
        let sample = picos / tasks;
        let old = self.picos_per_task.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else if sample >= old {
            old + ((sample - old).min(old) >> RISE_SHIFT)
        } else {
            old - ((old - sample) >> FALL_SHIFT)
        };
        self.picos_per_task.store(new, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Duration = Duration::from_micros(50);

    #[test]
    fn a_fresh_estimate_spins() {
        let estimate = BatchEstimate::new(2, 2);
        assert_eq!(estimate.predict(1_000_000), Duration::ZERO);
        assert!(estimate.should_spin(1_000_000, BUDGET));
    }

    #[test]
    fn long_batches_park_and_short_ones_spin() {
        let estimate = BatchEstimate::new(2, 2);
        // 10,000 tasks in 40 us on two workers: 8 ns per task and worker.
        estimate.record(10_000, Duration::from_micros(40));
        assert_eq!(estimate.predict(10_000), Duration::from_micros(40));
        assert!(!estimate.should_spin(10_000, BUDGET));
        // 256 of the same tasks: about 1 us, well inside a quarter of 50 us.
        assert_eq!(estimate.predict(256), Duration::from_nanos(1_024));
        assert!(estimate.should_spin(256, BUDGET));
        assert!(!estimate.should_spin(256, Duration::ZERO));
    }

    #[test]
    fn one_batch_in_sixteen_parked_in_a_row_spins_as_a_probe() {
        let estimate = BatchEstimate::new(2, 2);
        estimate.record(10_000, Duration::from_micros(40));
        let spins: Vec<bool> = (0..2 * PROBE_EVERY)
            .map(|_| estimate.should_spin(10_000, BUDGET))
            .collect();
        let probes: Vec<usize> = spins
            .iter()
            .enumerate()
            .filter_map(|(i, &spin)| spin.then_some(i))
            .collect();
        assert_eq!(probes, [15, 31]);
        // A batch predicted short resets the count.
        for _ in 0..PROBE_EVERY - 1 {
            assert!(!estimate.should_spin(10_000, BUDGET));
        }
        assert!(estimate.should_spin(1, BUDGET));
        assert!(!estimate.should_spin(10_000, BUDGET), "the count restarted");
        // With no spin budget at all, probes never spin.
        for _ in 0..2 * PROBE_EVERY {
            assert!(!estimate.should_spin(10_000, Duration::ZERO));
        }
    }

    #[test]
    fn a_spare_core_always_spins() {
        let estimate = BatchEstimate::new(2, 4);
        estimate.record(10, Duration::from_secs(1));
        assert!(estimate.should_spin(1_000_000, BUDGET));
    }

    #[test]
    fn the_estimate_rises_slowly_and_falls_fast() {
        let estimate = BatchEstimate::new(1, 1);
        // (tasks, batch took ns, estimate afterwards ns, why)
        let steps = [
            (1, 1_000, 1_000, "the first batch sets it"),
            (1, 1_400, 1_100, "a quarter of the way up"),
            (1, 5_000_000, 1_375, "an outlier adds at most a quarter"),
            (1, 375, 875, "half the way down"),
            (0, 9_000_000_000, 875, "empty batches teach nothing"),
        ];
        for (tasks, took, expected, why) in steps {
            estimate.record(tasks, Duration::from_nanos(took));
            assert_eq!(estimate.predict(1), Duration::from_nanos(expected), "{why}");
        }
    }

    #[test]
    fn a_long_batch_is_learned_within_a_few_batches() {
        let estimate = BatchEstimate::new(2, 2);
        estimate.record(10_000, Duration::from_micros(4));
        assert!(estimate.should_spin(10_000, BUDGET));
        // The tasks became ten times slower: the estimate climbs by a
        // quarter per batch and crosses a quarter of the budget on the
        // sixth.
        for _ in 0..8 {
            estimate.record(10_000, Duration::from_micros(40));
        }
        assert!(!estimate.should_spin(10_000, BUDGET));
    }

    #[test]
    fn huge_values_saturate_instead_of_overflowing() {
        let estimate = BatchEstimate::new(1, 1);
        estimate.record(1, Duration::MAX);
        assert!(estimate.predict(usize::MAX) > Duration::from_secs(1));
        assert!(!estimate.should_spin(usize::MAX, BUDGET));
    }
}
