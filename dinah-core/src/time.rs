//! Monotonic time without a clock.
//!
//! The core never reads a clock: deadlines and TTLs are computed from an
//! [`Instant`] the caller supplies. `dinah-std` maps `std::time::Instant`
//! onto it (nanoseconds since the runtime's start); an embedded build maps
//! its timer's ticks. Nanoseconds in a `u64` cover more than 580 years, so
//! the epoch can be "when the program started" without overflow concerns,
//! and every addition is still checked.
//!
//! # Examples
//!
//! ```
//! use core::time::Duration;
//! use dinah_core::{Clock, Instant, ManualClock};
//!
//! let clock = ManualClock::new(Instant::from_nanos(1_000));
//! let deadline = clock.now().checked_add(Duration::from_micros(5)).expect("no overflow");
//! clock.advance(Duration::from_micros(2));
//! assert!(clock.now() < deadline);
//! assert_eq!(deadline.saturating_duration_since(clock.now()), Duration::from_micros(3));
//! assert_eq!(Instant::MAX.checked_add(Duration::from_nanos(1)), None);
//! ```

use core::fmt;
use core::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// A point on a monotonic clock, in nanoseconds since the clock's epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Instant {
    nanos: u64,
}

impl Instant {
    /// The clock's epoch.
    pub const ZERO: Self = Self { nanos: 0 };
    /// The latest representable instant.
    pub const MAX: Self = Self { nanos: u64::MAX };

    /// The instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Self { nanos }
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.nanos
    }

    /// `self + duration`, or `None` if that is past [`Instant::MAX`].
    pub const fn checked_add(self, duration: Duration) -> Option<Self> {
        match duration_nanos(duration) {
            Some(delta) => match self.nanos.checked_add(delta) {
                Some(nanos) => Some(Self { nanos }),
                None => None,
            },
            None => None,
        }
    }

    /// `self - duration`, or `None` if that is before the epoch.
    pub const fn checked_sub(self, duration: Duration) -> Option<Self> {
        match duration_nanos(duration) {
            Some(delta) => match self.nanos.checked_sub(delta) {
                Some(nanos) => Some(Self { nanos }),
                None => None,
            },
            None => None,
        }
    }

    /// `self - earlier`, or `None` if `earlier` is later than `self`.
    pub const fn checked_duration_since(self, earlier: Self) -> Option<Duration> {
        match self.nanos.checked_sub(earlier.nanos) {
            Some(nanos) => Some(Duration::from_nanos(nanos)),
            None => None,
        }
    }

    /// `self - earlier`, or zero if `earlier` is later than `self`.
    pub const fn saturating_duration_since(self, earlier: Self) -> Duration {
        match self.checked_duration_since(earlier) {
            Some(duration) => duration,
            None => Duration::ZERO,
        }
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{}ns", self.nanos)
    }
}

/// A duration in whole nanoseconds as `u64`, or `None` when it does not
/// fit (more than about 584 years).
pub const fn duration_nanos(duration: Duration) -> Option<u64> {
    let nanos = duration.as_nanos();
    if nanos > u64::MAX as u128 {
        None
    } else {
        Some(nanos as u64)
    }
}

/// A source of monotonic [`Instant`]s.
///
/// Implementations must never go backwards. `dinah-std` implements it over
/// `std::time::Instant`; embedded code implements it over a hardware timer.
pub trait Clock {
    /// The current instant.
    fn now(&self) -> Instant;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

/// A clock that moves only when told to: for tests, simulations and
/// logical-time transports.
///
/// # Memory ordering
///
/// The time is a single counter read and written with `Relaxed`: a clock
/// reading orders nothing else, and each thread sees its own advances in
/// program order.
#[derive(Debug)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock reading `start`.
    #[cfg(not(dinah_loom))]
    pub const fn new(start: Instant) -> Self {
        Self {
            nanos: AtomicU64::new(start.nanos),
        }
    }

    /// A clock reading `start`.
    #[cfg(dinah_loom)]
    pub fn new(start: Instant) -> Self {
        Self {
            nanos: AtomicU64::new(start.nanos),
        }
    }

    /// Moves the clock forward by `by`, saturating at [`Instant::MAX`].
    pub fn advance(&self, by: Duration) {
        let delta = duration_nanos(by).unwrap_or(u64::MAX);
        let mut current = self.nanos.load(Ordering::Relaxed);
        loop {
            let next = current.saturating_add(delta);
            match self.nanos.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Sets the clock to `to` if that is not earlier than the current
    /// reading (a clock never goes backwards); returns whether it moved.
    pub fn set(&self, to: Instant) -> bool {
        let previous = self.nanos.fetch_max(to.nanos, Ordering::Relaxed);
        previous < to.nanos
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        Instant {
            nanos: self.nanos.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_arithmetic_reports_overflow() {
        let t = Instant::from_nanos(10);
        assert_eq!(
            t.checked_add(Duration::from_nanos(5)),
            Some(Instant::from_nanos(15))
        );
        assert_eq!(t.checked_sub(Duration::from_nanos(11)), None);
        assert_eq!(Instant::MAX.checked_add(Duration::from_nanos(1)), None);
        assert_eq!(Instant::ZERO.checked_add(Duration::MAX), None);
        assert_eq!(t.checked_duration_since(Instant::from_nanos(11)), None);
        assert_eq!(
            t.saturating_duration_since(Instant::from_nanos(11)),
            Duration::ZERO
        );
        assert_eq!(
            t.saturating_duration_since(Instant::ZERO),
            Duration::from_nanos(10)
        );
    }

    #[test]
    fn duration_nanos_bounds() {
        assert_eq!(duration_nanos(Duration::from_secs(1)), Some(1_000_000_000));
        assert_eq!(
            duration_nanos(Duration::from_nanos(u64::MAX)),
            Some(u64::MAX)
        );
        assert_eq!(duration_nanos(Duration::MAX), None);
    }

    #[test]
    fn manual_clock_never_goes_backwards() {
        let clock = ManualClock::new(Instant::from_nanos(100));
        assert!(!clock.set(Instant::from_nanos(50)));
        assert_eq!(clock.now(), Instant::from_nanos(100));
        assert!(clock.set(Instant::from_nanos(150)));
        clock.advance(Duration::MAX);
        assert_eq!(clock.now(), Instant::MAX);
    }
}
