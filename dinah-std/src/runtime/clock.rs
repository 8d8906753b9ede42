//! The runtime's clock.

use std::sync::Arc;
use std::time::Instant as StdInstant;

use dinah_core::{Clock, Instant};

/// A [`Clock`] over `std::time::Instant`: nanoseconds since the clock was
/// created. Monotonic, as the standard library guarantees.
#[derive(Debug, Clone, Copy)]
pub struct StdClock {
    epoch: StdInstant,
}

impl StdClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Self {
            epoch: StdInstant::now(),
        }
    }

    /// The `std` instant corresponding to `instant` on this clock.
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
        // Saturates after ~584 years of uptime.
        let nanos = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Instant::from_nanos(nanos)
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
}
