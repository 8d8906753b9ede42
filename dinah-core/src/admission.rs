//! [`AdmissionCounter`]: at most `capacity` units of work admitted at once,
//! with a one-way close for shutdown.

use core::fmt;

use crate::padded::Padded;
use crate::sync::{AtomicU8, AtomicU64, Ordering};

/// Where an [`AdmissionCounter`] is in its life. The state only rises:
/// `Open`, then `Draining` or `Cancelling`, and `Draining` may still move
/// on to `Cancelling`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum AdmissionState {
    /// New work is admitted.
    Open = 0,
    /// Shutting down: nothing new is admitted; work already admitted still
    /// runs.
    Draining = 1,
    /// Shutting down: nothing new is admitted; admitted work that has not
    /// started is to be cancelled without running.
    Cancelling = 2,
}

impl AdmissionState {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => Self::Open,
            1 => Self::Draining,
            _ => Self::Cancelling,
        }
    }
}

/// Why [`AdmissionCounter::try_admit`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdmitError {
    /// `capacity` units were in flight when the counter looked.
    Full {
        /// The counter's capacity.
        capacity: usize,
    },
    /// The counter is closed (its owner is shutting down).
    Closed,
}

impl fmt::Display for AdmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { capacity } => write!(f, "all {capacity} admissions are in use"),
            Self::Closed => f.write_str("admission is closed"),
        }
    }
}

impl core::error::Error for AdmitError {}

/// The submitters' cache line: the count of admissions ever taken, and the
/// newest count of releases a submitter has read.
#[derive(Debug)]
struct Submitted {
    admitted: AtomicU64,
    seen_released: AtomicU64,
}

/// Bounds the work in flight: at most `capacity` admissions are held at
/// once, and a shutdown can close the counter and learn when the last one
/// has been released.
///
/// `dinah-std`'s worker domains take one admission per job (or batch) when
/// it is submitted and release it when its outcome has been delivered.
///
/// # Two counts, two cache lines
///
/// The counter keeps the number of admissions ever taken (`admitted`,
/// written by submitters) apart from the number ever released (`released`,
/// written by whoever finishes the work), each on a cache line of its own.
/// A single in-flight count that both sides update moves its cache line
/// between the submitting and the finishing core on every unit of work;
/// with two counts each side writes only its own line.
///
/// A submitter also needs the released count to check the bound, and
/// reading it on every admission would fetch the finishers' line just the
/// same. So the submitters' line keeps the released count as a submitter
/// last read it (`seen_released`). Releases only ever add, so this value is
/// never above the real count, and `admitted - seen_released` is never
/// below the real number in flight: the check can only err on the side of
/// refusing. Only when that estimate reaches `capacity` does a submitter
/// read the real released count (and remember it); with `capacity` well
/// above the work actually in flight, that is once every
/// `capacity - in_flight` admissions or so.
///
/// The counts are 64-bit and only rise; they do not wrap in the life of a
/// process.
///
/// # Closing without a race
///
/// [`close`](Self::close) sets a *closed* bit in both counts, first in
/// `admitted`, then in `released`, each with a read-modify-write. Every
/// operation that has to agree with the close meets it on one variable,
/// whose modifications come in a single order, so no argument about two
/// variables (and no store-load fence) is needed:
///
/// - An admission is a compare-exchange on `admitted` that fails if the bit
///   is set. It lands either before the close (and is counted) or not at
///   all. Once `admitted` is closed its count never changes again.
/// - A release adds one to `released` and gets the previous value back. If
///   the bit is not set, the close has not reached `released` yet and will
///   count this release itself. If it is set, the release reads the frozen
///   admitted count (the close wrote it first, and the release's acquire
///   sees that) and returns `true` when its own count equals it: this was
///   the last one out.
/// - [`is_idle`](Self::is_idle) compares the two counts. After a close that
///   is exact, since `admitted` no longer moves.
///
/// A shutdown that closes the counter, then sleeps under a lock until
/// `is_idle`, and is woken under the same lock by the release that
/// returned `true`, cannot miss its wake-up: that release came either
/// before the shutdown's check (which then sees the counter idle) or after
/// it (and then wakes it).
///
/// # Memory ordering
///
/// An admission that a release made room for happens after that release:
/// the release's increment is a release operation, the submitter's read of
/// `released` is an acquire, and it publishes what it read to other
/// submitters through `seen_released` with a release store and acquire
/// loads. Work admitted in the room a release made sees everything the
/// released work did, and a shutdown that found the counter idle (acquire
/// loads) sees everything the admitted work did.
///
/// `tests/loom/admission.rs` checks the bound, the close and the wake-up
/// under every interleaving loom explores.
///
/// # Examples
///
/// ```
/// use dinah_core::{AdmissionCounter, AdmissionState, AdmitError};
///
/// let counter = AdmissionCounter::new(2);
/// counter.try_admit()?;
/// counter.try_admit()?;
/// assert_eq!(counter.try_admit(), Err(AdmitError::Full { capacity: 2 }));
/// assert!(!counter.release(), "still open: nobody waits for idleness");
/// counter.try_admit()?;
///
/// // Shutting down: nothing new gets in, and the last release says so.
/// counter.close(AdmissionState::Draining);
/// assert_eq!(counter.try_admit(), Err(AdmitError::Closed));
/// assert!(!counter.release());
/// assert!(counter.release(), "the last one out wakes the shutdown");
/// assert!(counter.is_idle());
/// # Ok::<(), AdmitError>(())
/// ```
#[derive(Debug)]
pub struct AdmissionCounter {
    /// An [`AdmissionState`], for readers that want the policy (draining
    /// or cancelling). The closed bit in the counts is what admissions and
    /// releases go by.
    state: AtomicU8,
    capacity: u64,
    submitted: Padded<Submitted>,
    released: Padded<AtomicU64>,
}

/// Set in both counts by [`AdmissionCounter::close`].
const CLOSED: u64 = 1 << 63;
/// The count below the closed bit.
const COUNT: u64 = CLOSED - 1;

impl AdmissionCounter {
    /// An open counter that admits at most `capacity` units at once (none
    /// if `capacity` is zero).
    pub fn new(capacity: usize) -> Self {
        Self {
            state: AtomicU8::new(AdmissionState::Open as u8),
            capacity: capacity as u64,
            submitted: Padded(Submitted {
                admitted: AtomicU64::new(0),
                seen_released: AtomicU64::new(0),
            }),
            released: Padded(AtomicU64::new(0)),
        }
    }

    /// Takes one admission, or says why not. Every `Ok` must be matched by
    /// one [`release`](Self::release); a refusal leaves no count behind.
    ///
    /// # Errors
    ///
    /// [`AdmitError::Full`] if `capacity` admissions were held at a moment
    /// during the call; [`AdmitError::Closed`] once [`close`](Self::close)
    /// has run.
    #[inline]
    pub fn try_admit(&self) -> Result<(), AdmitError> {
        let submitted = &self.submitted.0;
        let mut admitted = submitted.admitted.load(Ordering::Relaxed);
        let mut seen = submitted.seen_released.load(Ordering::Acquire);
        loop {
            if admitted & CLOSED != 0 {
                return Err(AdmitError::Closed);
            }
            // `seen` may be newer than `admitted` (another submitter read
            // the released count after this one read `admitted`): the
            // wrapped difference is then huge and takes the slow path too.
            if admitted.wrapping_sub(seen) >= self.capacity {
                // `released` first: the `admitted` read after it is at
                // least as large, so their difference is a true count.
                let released = self.released.0.load(Ordering::Acquire) & COUNT;
                let now = submitted.admitted.load(Ordering::Relaxed);
                if released == seen && now == admitted {
                    // `admitted` held still across the read of `released`:
                    // at that moment `admitted - released` were in flight,
                    // and that is at least `capacity`.
                    return Err(AdmitError::Full {
                        capacity: self.capacity as usize,
                    });
                }
                if released != seen {
                    // May move the remembered value back if another
                    // submitter stored a newer one meanwhile; an older
                    // value is still a true lower bound.
                    submitted.seen_released.store(released, Ordering::Release);
                }
                seen = released;
                admitted = now;
                continue;
            }
            // `Relaxed`: what this admission must happen after, it learnt
            // through the acquire loads of the released count above.
            match submitted.admitted.compare_exchange_weak(
                admitted,
                admitted + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => admitted = actual,
            }
        }
    }

    /// Ends one admission. Returns `true` if the counter is closed and this
    /// release left nothing in flight: a shutdown waiting for
    /// [`is_idle`](Self::is_idle) should be woken.
    #[inline]
    #[must_use = "a `true` return means a waiting shutdown must be woken"]
    pub fn release(&self) -> bool {
        let previous = self.released.0.fetch_add(1, Ordering::AcqRel);
        if previous & CLOSED == 0 {
            // The close has not reached `released`: it counts this release
            // itself when it does.
            return false;
        }
        let released = (previous & COUNT) + 1;
        self.submitted.0.admitted.load(Ordering::Acquire) & COUNT == released
    }

    /// Moves to `state` unless the counter is already there or further on,
    /// and returns the state before the call (the state in force afterwards
    /// is the larger of the two). `close(AdmissionState::Open)` changes
    /// nothing. From the first close on, every admission is refused.
    pub fn close(&self, state: AdmissionState) -> AdmissionState {
        let previous = self.state.fetch_max(state as u8, Ordering::AcqRel);
        if state != AdmissionState::Open {
            // `admitted` first: a release that finds the bit in `released`
            // must find the admitted count already frozen.
            self.submitted.0.admitted.fetch_or(CLOSED, Ordering::AcqRel);
            self.released.0.fetch_or(CLOSED, Ordering::AcqRel);
        }
        AdmissionState::from_u8(previous)
    }

    /// The current state.
    pub fn state(&self) -> AdmissionState {
        AdmissionState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Is the counter cancelling? A `Relaxed` read, for a best-effort early
    /// exit of work that has not started: a caller that must not miss the
    /// close uses [`state`](Self::state).
    #[inline]
    pub fn is_cancelling_relaxed(&self) -> bool {
        self.state.load(Ordering::Relaxed) == AdmissionState::Cancelling as u8
    }

    /// Is the counter still open?
    pub fn is_open(&self) -> bool {
        self.state() == AdmissionState::Open
    }

    /// Is nothing in flight? Exact once the counter is closed (and `true`
    /// stays `true` then); everything the released work did happens before
    /// the call that returned `true`. On an open counter, `true` means
    /// nothing was in flight at a moment during the call.
    pub fn is_idle(&self) -> bool {
        // `released` first (see `in_flight`).
        let released = self.released.0.load(Ordering::Acquire) & COUNT;
        self.submitted.0.admitted.load(Ordering::Acquire) & COUNT == released
    }

    /// Admissions held now: exact when no admission lands during the call,
    /// otherwise a value between the true count at some moment of the call
    /// and `capacity`.
    pub fn in_flight(&self) -> usize {
        let admitted = &self.submitted.0.admitted;
        let mut before = admitted.load(Ordering::Acquire) & COUNT;
        for _ in 0..4 {
            let released = self.released.0.load(Ordering::Acquire) & COUNT;
            let after = admitted.load(Ordering::Acquire) & COUNT;
            if after == before {
                // `admitted` held still across the read of `released`.
                return (after - released) as usize;
            }
            before = after;
        }
        // Still moving. Read `released` first: the `admitted` read after
        // it is at least as large (a release always follows its
        // admission), so the difference is an upper bound of the count at
        // the first read. Never above `capacity`.
        let released = self.released.0.load(Ordering::Acquire) & COUNT;
        let after = admitted.load(Ordering::Acquire) & COUNT;
        (after - released).min(self.capacity) as usize
    }

    /// The most admissions held at once.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_capacity_then_refuses_until_a_release() {
        let counter = AdmissionCounter::new(2);
        assert_eq!(counter.try_admit(), Ok(()));
        assert_eq!(counter.try_admit(), Ok(()));
        assert_eq!(counter.try_admit(), Err(AdmitError::Full { capacity: 2 }));
        assert_eq!(counter.in_flight(), 2);
        assert!(!counter.release());
        assert_eq!(counter.in_flight(), 1);
        assert_eq!(counter.try_admit(), Ok(()));
        assert_eq!(counter.try_admit(), Err(AdmitError::Full { capacity: 2 }));
    }

    #[test]
    fn a_zero_capacity_admits_nothing() {
        let counter = AdmissionCounter::new(0);
        assert_eq!(counter.try_admit(), Err(AdmitError::Full { capacity: 0 }));
        assert!(counter.is_idle());
    }

    #[test]
    fn the_remembered_release_count_is_refreshed_only_when_the_estimate_is_full() {
        let counter = AdmissionCounter::new(3);
        for _ in 0..3 {
            counter.try_admit().unwrap();
        }
        for _ in 0..3 {
            assert!(!counter.release());
        }
        // The submitters have not looked at `released` yet.
        assert_eq!(counter.submitted.0.seen_released.load(Ordering::Relaxed), 0);
        counter.try_admit().unwrap();
        assert_eq!(
            counter.submitted.0.seen_released.load(Ordering::Relaxed),
            3,
            "the fourth admission found the estimate full and read the real count"
        );
        assert_eq!(counter.in_flight(), 1);
        counter.try_admit().unwrap();
        counter.try_admit().unwrap();
        assert_eq!(counter.try_admit(), Err(AdmitError::Full { capacity: 3 }));
    }

    #[test]
    fn closing_refuses_new_work_and_only_escalates() {
        let counter = AdmissionCounter::new(4);
        assert!(counter.is_open());
        assert_eq!(counter.close(AdmissionState::Open), AdmissionState::Open);
        assert!(counter.is_open());
        assert_eq!(
            counter.close(AdmissionState::Cancelling),
            AdmissionState::Open,
            "the state before"
        );
        assert_eq!(
            counter.close(AdmissionState::Draining),
            AdmissionState::Cancelling
        );
        assert_eq!(counter.state(), AdmissionState::Cancelling, "no way back");
        assert!(counter.is_cancelling_relaxed());
        assert_eq!(counter.try_admit(), Err(AdmitError::Closed));
        assert_eq!(
            counter.in_flight(),
            0,
            "a refused admission leaves no count"
        );
        assert!(counter.is_idle());
    }

    #[test]
    fn only_the_last_release_after_a_close_asks_for_a_wake_up() {
        let counter = AdmissionCounter::new(4);
        for _ in 0..3 {
            counter.try_admit().unwrap();
        }
        assert!(!counter.release(), "open: nobody is waiting");
        assert_eq!(
            counter.close(AdmissionState::Draining),
            AdmissionState::Open
        );
        assert!(!counter.is_idle());
        assert!(!counter.release());
        assert!(counter.release());
        assert!(counter.is_idle());
    }

    #[test]
    fn errors_say_which_bound() {
        extern crate std;
        use std::string::ToString;
        assert_eq!(
            AdmitError::Full { capacity: 8 }.to_string(),
            "all 8 admissions are in use"
        );
        assert_eq!(AdmitError::Closed.to_string(), "admission is closed");
    }
}
