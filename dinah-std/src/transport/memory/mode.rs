//! How the simulated network keeps time: stepped (logical ticks, fully
//! deterministic) or threaded (real time, real interleavings).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use dinah_core::{Clock, Instant, ManualClock};

/// How a [`SimNetwork`](super::SimNetwork) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimMode {
    /// Time moves only when the test calls
    /// [`SimNetwork::step`](super::SimNetwork::step); each step is one tick
    /// and moves [`SimNetwork::clock`](super::SimNetwork::clock) forward by
    /// `tick`. Drivers' [`idle_wait`](crate::transport::TransportDriver::idle_wait)
    /// returns at once. With the same seed, plan and sequence of calls,
    /// every run produces the same events in the same order.
    Stepped {
        /// The duration of one tick on the network's clock (how deadlines
        /// map onto ticks).
        tick: Duration,
    },
    /// Each rank's owner thread polls its own driver concurrently; the
    /// network sits behind one mutex. The clock is real time since the
    /// network's creation, and the network's tick counts driver polls (all
    /// ranks together), so a disconnect "at tick `t`" happens at the `t`-th
    /// poll. Delays and partitions need logical time and are refused;
    /// drop, duplicate, reorder, saturation and disconnect work. Fault
    /// decisions still come from the seeded generators, but which frames
    /// they hit depends on the threads' interleaving, so runs do not
    /// replay exactly.
    Threaded,
}

impl SimMode {
    /// The tick of [`SimMode::stepped`]: one millisecond.
    pub const DEFAULT_TICK: Duration = Duration::from_millis(1);

    /// Stepped mode with [`DEFAULT_TICK`](Self::DEFAULT_TICK).
    pub const fn stepped() -> Self {
        Self::Stepped {
            tick: Self::DEFAULT_TICK,
        }
    }

    /// Is this [`SimMode::Threaded`]?
    pub const fn is_threaded(self) -> bool {
        matches!(self, Self::Threaded)
    }
}

impl Default for SimMode {
    fn default() -> Self {
        Self::stepped()
    }
}

impl fmt::Display for SimMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stepped { tick } => write!(f, "stepped, tick {tick:?}"),
            Self::Threaded => f.write_str("threaded"),
        }
    }
}

/// The simulated network's clock, for the runtime's deadlines: logical
/// time in stepped mode (it moves only with
/// [`SimNetwork::step`](super::SimNetwork::step)), real time since the
/// network's creation in threaded mode. Cheap to clone; every clone reads
/// the same time.
///
/// # Examples
///
/// ```
/// use dinah_core::{Clock, Instant, WorldSize};
/// use dinah_std::transport::memory::{FaultPlan, SimNetwork};
///
/// let network = SimNetwork::new(WorldSize::new(2)?, 7, FaultPlan::new())?;
/// let clock = network.clock();
/// assert_eq!(clock.now(), Instant::ZERO);
/// network.step();
/// assert_eq!(clock.now(), Instant::from_nanos(1_000_000));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SimClock {
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    Logical(Arc<ManualClock>),
    Real(std::time::Instant),
}

impl SimClock {
    /// A logical clock reading zero.
    pub(super) fn logical() -> Self {
        Self {
            source: Source::Logical(Arc::new(ManualClock::new(Instant::ZERO))),
        }
    }

    /// A real clock reading zero now.
    pub(super) fn real() -> Self {
        Self {
            source: Source::Real(std::time::Instant::now()),
        }
    }

    /// Moves a logical clock forward (a real clock ignores it).
    pub(super) fn advance(&self, by: Duration) {
        if let Source::Logical(clock) = &self.source {
            clock.advance(by);
        }
    }
}

impl Clock for SimClock {
    fn now(&self) -> Instant {
        match &self.source {
            Source::Logical(clock) => clock.now(),
            Source::Real(start) => {
                let nanos = dinah_core::duration_nanos(start.elapsed()).unwrap_or(u64::MAX);
                Instant::from_nanos(nanos)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logical_clock_moves_only_when_advanced_and_clones_share_it() {
        let clock = SimClock::logical();
        let other = clock.clone();
        assert_eq!(clock.now(), Instant::ZERO);
        clock.advance(Duration::from_millis(3));
        assert_eq!(other.now(), Instant::from_nanos(3_000_000));
    }

    #[test]
    fn a_real_clock_ignores_advances_and_never_goes_back() {
        let clock = SimClock::real();
        let first = clock.now();
        clock.advance(Duration::from_secs(3600));
        let second = clock.now();
        assert!(second >= first);
        assert!(second < Instant::from_nanos(3_600_000_000_000));
    }

    #[test]
    fn modes_display_and_default() {
        assert_eq!(
            SimMode::default(),
            SimMode::Stepped {
                tick: Duration::from_millis(1)
            }
        );
        assert_eq!(SimMode::stepped().to_string(), "stepped, tick 1ms");
        assert_eq!(SimMode::Threaded.to_string(), "threaded");
        assert!(SimMode::Threaded.is_threaded());
    }
}
