//! Cooperative cancellation: [`CancelFlag`], a one-shot flag, and
//! [`CancellationToken`], the `Copy` handles that share it.

use core::fmt;

use crate::sync::{AtomicBool, Ordering};

/// A one-shot cooperative cancellation flag.
///
/// The flag is set at most once. Work that may be cancelled receives a
/// [`CancellationToken`] (a `Copy` borrow of the flag, from
/// [`token`](Self::token)) and polls it at points where stopping is safe;
/// anyone holding a token or the flag can request cancellation. Usable from
/// a `static` (the constructor is `const`); work that outlives the caller's
/// stack frame shares the flag through an `Arc` or a `static`.
///
/// # What cancellation is not
///
/// - It never interrupts code: nothing stops a closure, kills a thread or
///   rolls back side effects. Work that never polls runs to the end.
/// - A request is not an outcome. Requesting cancellation does not make a
///   task [`Cancelled`](crate::TaskState::Cancelled): a running task stays
///   [`Running`](crate::TaskState::Running) until it notices the request and
///   stops (and its owner records `Running → Cancelled`), or finishes
///   anyway. Only a task that has not started can be cancelled outright
///   ([`AtomicTaskState::try_cancel_pending`](crate::AtomicTaskState::try_cancel_pending)).
/// - A flag cannot be reset: a new piece of work gets a new flag.
///
/// # Memory ordering
///
/// The request that sets the flag is a `Release` operation and every
/// observation ([`is_requested`](Self::is_requested), and a request that
/// finds the flag already set) is an `Acquire` one. Hence: whatever the
/// requesting thread wrote *before* its request (say, a reason code in
/// another atomic) is visible to a thread *after* it observes the flag set.
/// Nothing else is ordered: the flag does not make unrelated task data safe
/// to share, it does not order writes made after the request, and an
/// observer that reads "not requested" learns nothing (the request may land
/// a moment later). Visibility is eventual: a polling task sees a request
/// in finite time, with no bound promised.
///
/// # Examples
///
/// ```
/// use dinah_core::{CancelFlag, CancellationRequested, CancellationToken};
///
/// fn sum_until_cancelled(items: &[u64], token: CancellationToken<'_>) -> Result<u64, CancellationRequested> {
///     let mut sum = 0;
///     for item in items {
///         token.check()?; // a safe point to stop at
///         sum += item;
///     }
///     Ok(sum)
/// }
///
/// static SHUTDOWN: CancelFlag = CancelFlag::new();
/// assert_eq!(sum_until_cancelled(&[1, 2, 3], SHUTDOWN.token()), Ok(6));
/// assert!(SHUTDOWN.request(), "the first request wins");
/// assert!(!SHUTDOWN.token().request_cancellation(), "later ones are no-ops");
/// assert_eq!(sum_until_cancelled(&[1, 2, 3], SHUTDOWN.token()), Err(CancellationRequested));
/// ```
pub struct CancelFlag {
    requested: AtomicBool,
}

impl CancelFlag {
    /// A flag with no request.
    #[cfg(not(dinah_loom))]
    #[must_use]
    pub const fn new() -> Self {
        Self {
            requested: AtomicBool::new(false),
        }
    }

    /// A flag with no request.
    #[cfg(dinah_loom)]
    #[must_use]
    pub fn new() -> Self {
        Self {
            requested: AtomicBool::new(false),
        }
    }

    /// Requests cancellation. Returns `true` only for the one call that set
    /// the flag; every other call (concurrent or later) returns `false` and
    /// changes nothing.
    ///
    /// Setting the flag is a `Release`; finding it already set is an
    /// `Acquire` (see [memory ordering](Self#memory-ordering)).
    pub fn request(&self) -> bool {
        self.requested
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Has cancellation been requested? (`Acquire`.)
    ///
    /// `false` means only "not yet, as far as this thread can see".
    #[must_use]
    #[inline]
    pub fn is_requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }

    /// A token sharing this flag.
    #[must_use]
    pub const fn token(&self) -> CancellationToken<'_> {
        CancellationToken { flag: self }
    }
}

impl Default for CancelFlag {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CancelFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelFlag")
            .field("requested", &self.is_requested())
            .finish()
    }
}

/// A handle on a [`CancelFlag`]: any copy can request cancellation and
/// every copy observes it.
///
/// A token is a borrow, so it is `Copy` and cannot outlive its flag. Work
/// that outlives the caller's stack frame shares the flag itself (for
/// example in an `Arc` or a `static`) and borrows tokens from it.
#[derive(Clone, Copy)]
pub struct CancellationToken<'a> {
    flag: &'a CancelFlag,
}

impl<'a> CancellationToken<'a> {
    /// Requests cancellation; `true` only for the call that set the flag
    /// (see [`CancelFlag::request`]).
    pub fn request_cancellation(&self) -> bool {
        self.flag.request()
    }

    /// Has cancellation been requested? (see [`CancelFlag::is_requested`]).
    #[must_use]
    pub fn is_cancellation_requested(&self) -> bool {
        self.flag.is_requested()
    }

    /// A safe point for `?`: `Ok(())` to carry on, or
    /// `Err(CancellationRequested)` to stop.
    ///
    /// # Errors
    ///
    /// [`CancellationRequested`] if cancellation has been requested.
    pub fn check(&self) -> Result<(), CancellationRequested> {
        if self.is_cancellation_requested() {
            Err(CancellationRequested)
        } else {
            Ok(())
        }
    }

    /// The flag this token shares.
    #[must_use]
    pub const fn flag(&self) -> &'a CancelFlag {
        self.flag
    }
}

impl<'a> From<&'a CancelFlag> for CancellationToken<'a> {
    fn from(flag: &'a CancelFlag) -> Self {
        flag.token()
    }
}

impl fmt::Debug for CancellationToken<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationToken")
            .field("requested", &self.is_cancellation_requested())
            .finish()
    }
}

/// Work stopped at a safe point because cancellation was requested.
///
/// Returned by [`CancellationToken::check`]. It reports that the *request*
/// was seen, so the work can return early; recording the task as
/// [`Cancelled`](crate::TaskState::Cancelled) is its owner's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CancellationRequested;

impl fmt::Display for CancellationRequested {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("work stopped because cancellation was requested")
    }
}

impl core::error::Error for CancellationRequested {}

#[cfg(all(test, not(dinah_loom)))]
mod tests {
    use super::*;

    extern crate std;
    use std::string::ToString;
    use std::sync::Barrier;
    use std::vec::Vec;

    const THREADS: usize = if cfg!(miri) { 4 } else { 16 };

    #[test]
    fn copies_share_one_flag() {
        let flag = CancelFlag::new();
        let token = flag.token();
        let copy = token;
        let from: CancellationToken<'_> = (&flag).into();
        assert!(!copy.is_cancellation_requested());
        assert_eq!(token.check(), Ok(()));
        assert!(token.request_cancellation());
        for observer in [token, copy, from, flag.token()] {
            assert!(observer.is_cancellation_requested());
            assert_eq!(observer.check(), Err(CancellationRequested));
            assert!(core::ptr::eq(observer.flag(), &flag));
        }
        assert!(flag.is_requested());
        assert!(!copy.request_cancellation());
        assert!(!flag.request());
    }

    #[test]
    fn debug_and_display() {
        let flag = CancelFlag::default();
        assert_eq!(
            std::format!("{:?}", flag.token()),
            "CancellationToken { requested: false }"
        );
        flag.request();
        assert_eq!(std::format!("{flag:?}"), "CancelFlag { requested: true }");
        assert_eq!(
            CancellationRequested.to_string(),
            "work stopped because cancellation was requested"
        );
    }

    #[test]
    fn concurrent_requests_have_exactly_one_winner() {
        let rounds = if cfg!(miri) { 2 } else { 32 };
        for _ in 0..rounds {
            let flag = CancelFlag::new();
            let barrier = Barrier::new(THREADS);
            let firsts = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|_| {
                        let token = flag.token();
                        let barrier = &barrier;
                        scope.spawn(move || {
                            barrier.wait();
                            token.request_cancellation()
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|handle| handle.join().expect("requester panicked"))
                    .filter(|&first| first)
                    .count()
            });
            assert_eq!(firsts, 1);
            assert!(flag.is_requested());
        }
    }

    #[test]
    fn observers_see_a_racing_request() {
        // One requester and THREADS observers start together; each observer
        // spins until it sees the request, so the test ends only if every
        // observer eventually does (no sleeps, no timing assumptions).
        let flag = CancelFlag::new();
        let barrier = Barrier::new(THREADS + 1);
        std::thread::scope(|scope| {
            let observers: Vec<_> = (0..THREADS)
                .map(|_| {
                    let token = flag.token();
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        let mut spins: u64 = 0;
                        while !token.is_cancellation_requested() {
                            spins += 1;
                            std::thread::yield_now();
                        }
                        spins
                    })
                })
                .collect();
            let requester = {
                let token = flag.token();
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    token.request_cancellation()
                })
            };
            assert!(requester.join().expect("requester panicked"));
            for observer in observers {
                observer.join().expect("observer panicked");
            }
        });
        assert!(flag.is_requested());
    }

    #[test]
    fn data_written_before_the_request_is_visible_after_observing_it() {
        use crate::sync::AtomicU64;
        let flag = CancelFlag::new();
        let reason = AtomicU64::new(0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                reason.store(42, Ordering::Relaxed);
                assert!(flag.request());
            });
            scope.spawn(|| {
                while !flag.is_requested() {
                    std::thread::yield_now();
                }
                assert_eq!(reason.load(Ordering::Relaxed), 42);
            });
        });
    }
}
