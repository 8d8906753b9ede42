//! The runtime's clock.

use std::sync::Arc;
use std::time::Instant as StdInstant;

use dinah_core::{Clock, Instant};

/// The runtime's default [`Clock`]: monotonic nanoseconds since the clock
/// was created.
///
/// It reads the CPU's time-stamp counter through [`quanta`] where the
/// counter is invariant (runs at a constant rate in every power state),
/// scaled to nanoseconds by a calibration against the system's monotonic
/// clock made once per process; elsewhere it reads the system's monotonic
/// clock. Every call reads the clock at least once (the caller to stamp
/// its deadline, an inline handler's end for the next one's start), so
/// the read is on every action's path, and the counter is much cheaper
/// to read than the system clock (see `docs/runtime.md`, "Time").
#[derive(Debug, Clone)]
pub struct StdClock {
    source: quanta::Clock,
    /// The counter's reading at creation.
    start: u64,
    /// The system clock at creation, for [`StdClock::to_std`].
    epoch: StdInstant,
}

impl StdClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        let source = quanta::Clock::new();
        let start = source.raw();
        Self {
            source,
            start,
            epoch: StdInstant::now(),
        }
    }

    /// The `std` instant corresponding to `instant` on this clock (to
    /// within the calibration of the time-stamp counter, where it is
    /// read).
    pub fn to_std(&self, instant: Instant) -> StdInstant {
        self.epoch + std::time::Duration::from_nanos(instant.as_nanos())
    }
}

impl Default for StdClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for StdClock {
    fn now(&self) -> Instant {
        // A reading at or before `start` (another core's counter a little
        // behind this one's) is 0 ns: quanta's delta never goes negative.
        Instant::from_nanos(self.source.delta_as_nanos(self.start, self.source.raw()))
    }
}

/// The clock a runtime reads: shared with its clients and worker threads.
pub type SharedClock = Arc<dyn Clock + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_goes_backwards() {
        let clock = StdClock::new();
        let first = clock.now();
        let second = clock.now();
        assert!(second >= first);
        assert!(clock.to_std(second) >= clock.to_std(first));
    }

    #[test]
    fn keeps_pace_with_the_system_clock() {
        let clock = StdClock::new();
        // Each reading of ours is bracketed by two system readings, so a
        // preemption between reads widens the bounds instead of failing.
        let (outer_start, first, inner_start) = (StdInstant::now(), clock.now(), StdInstant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (inner_end, last, outer_end) = (StdInstant::now(), clock.now(), StdInstant::now());
        let ours = last.saturating_duration_since(first);
        let (shortest, longest) = (inner_end - inner_start, outer_end - outer_start);
        // A calibration off by more than 1% would put every deadline that
        // far off.
        assert!(
            ours >= shortest - shortest / 100 && ours <= longest + longest / 100,
            "{ours:?} on the runtime's clock, {shortest:?} to {longest:?} on the system's"
        );
    }
}
