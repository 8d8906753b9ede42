//! [`RequestIdAllocator`]: origin-scoped request IDs, monotonic and never
//! reused within a run.

use core::fmt;

use crate::sync::{AtomicU64, Ordering};
use crate::{IdError, IdKind, RequestId};

/// Hands out [`RequestId`]s for one origin: monotonic, never reused.
///
/// A request is identified on the wire by the pair (origin rank,
/// [`RequestId`]). Each rank therefore owns one allocator for the whole run
/// and takes every outgoing request's ID from it; IDs from different
/// origins may coincide, which is fine because the origin is part of the
/// key. Within one allocator every ID is handed out at most once, in
/// increasing order, and the allocator never wraps: after it has handed out
/// `u64::MAX` it reports [`IdError::Exhausted`] for good. (At a billion
/// requests a second that takes more than 580 years, but a receiver's
/// duplicate detection relies on IDs never coming back, so the edge is
/// handled rather than assumed away.)
///
/// Lock-free: [`allocate`](Self::allocate) is a compare-exchange loop on one
/// counter that retries only when another thread allocated in between.
/// Usable from a `static` (the constructors are `const`).
///
/// # Examples
///
/// ```
/// use dinah_core::{IdError, RequestId, RequestIdAllocator};
///
/// static IDS: RequestIdAllocator = RequestIdAllocator::new();
/// let first = IDS.allocate()?;
/// let second = IDS.allocate()?;
/// assert_eq!((first.get(), second.get()), (1, 2));
/// assert_eq!(IDS.peek_next(), Some(RequestId::new(3)?));
/// # Ok::<(), IdError>(())
/// ```
///
/// # Memory ordering
///
/// `Relaxed` throughout. Uniqueness needs no ordering with other memory:
/// all allocations are read-modify-writes of one counter, which form a
/// single order in which each one reads the value the previous one wrote,
/// so no two can return the same ID. The same order makes IDs increase:
/// along one thread, and across threads whenever one allocation happens
/// before another (for example, a thread that received an ID through a
/// channel and then allocates gets a larger one). An ID does not publish
/// anything; send data along with it by other means.
pub struct RequestIdAllocator {
    /// The next ID to hand out, or 0 once `u64::MAX` has been handed out
    /// (0 is never a valid ID, so it doubles as the "exhausted" mark).
    next: AtomicU64,
}

impl RequestIdAllocator {
    /// An allocator whose first ID is 1.
    #[cfg(not(dinah_loom))]
    #[must_use]
    pub const fn new() -> Self {
        Self::starting_at(RequestId::MIN)
    }

    /// An allocator whose first ID is 1.
    #[cfg(dinah_loom)]
    #[must_use]
    pub fn new() -> Self {
        Self::starting_at(RequestId::MIN)
    }

    /// An allocator whose first ID is `first`.
    ///
    /// For resuming after IDs a previous allocator of the same run handed
    /// out (start past the last one), and for tests near the top of the
    /// range.
    #[cfg(not(dinah_loom))]
    #[must_use]
    pub const fn starting_at(first: RequestId) -> Self {
        Self {
            next: AtomicU64::new(first.get()),
        }
    }

    /// An allocator whose first ID is `first`.
    #[cfg(dinah_loom)]
    #[must_use]
    pub fn starting_at(first: RequestId) -> Self {
        Self {
            next: AtomicU64::new(first.get()),
        }
    }

    /// Takes the next ID.
    ///
    /// # Errors
    ///
    /// `IdError::Exhausted { kind: IdKind::Request }` once `u64::MAX` has
    /// been handed out; every later call fails the same way.
    #[inline]
    pub fn allocate(&self) -> Result<RequestId, IdError> {
        let mut current = self.next.load(Ordering::Relaxed);
        loop {
            let Ok(id) = RequestId::new(current) else {
                return Err(IdError::Exhausted {
                    kind: IdKind::Request,
                });
            };
            // `u64::MAX + 1` wraps to 0: the exhausted mark, not a reuse.
            let next = current.wrapping_add(1);
            match self.next.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(id),
                Err(actual) => current = actual,
            }
        }
    }

    /// The ID the next [`allocate`](Self::allocate) would return if no other
    /// thread allocates first, or `None` once the allocator is exhausted.
    #[must_use]
    pub fn peek_next(&self) -> Option<RequestId> {
        RequestId::new(self.next.load(Ordering::Relaxed)).ok()
    }

    /// Has every ID been handed out?
    #[must_use]
    pub fn is_exhausted(&self) -> bool {
        self.peek_next().is_none()
    }
}

impl Default for RequestIdAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RequestIdAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestIdAllocator")
            .field("next", &self.peek_next())
            .finish()
    }
}

#[cfg(all(test, not(dinah_loom)))]
mod tests {
    use super::*;

    extern crate std;
    use std::collections::BTreeSet;
    use std::vec::Vec;

    fn id(value: u64) -> RequestId {
        RequestId::new(value).expect("non-zero")
    }

    const EXHAUSTED: IdError = IdError::Exhausted {
        kind: IdKind::Request,
    };

    #[test]
    fn starts_at_one_and_counts_up() {
        let ids = RequestIdAllocator::default();
        assert_eq!(ids.peek_next(), Some(id(1)));
        for expected in 1..=5 {
            assert_eq!(ids.allocate(), Ok(id(expected)));
        }
        assert_eq!(ids.peek_next(), Some(id(6)));
        assert!(!ids.is_exhausted());
    }

    #[test]
    fn exhaustion_at_the_top_is_permanent() {
        let ids = RequestIdAllocator::starting_at(id(u64::MAX - 1));
        assert_eq!(ids.allocate(), Ok(id(u64::MAX - 1)));
        assert_eq!(ids.peek_next(), Some(RequestId::MAX));
        assert_eq!(ids.allocate(), Ok(RequestId::MAX));
        assert!(ids.is_exhausted());
        assert_eq!(ids.peek_next(), None);
        for _ in 0..3 {
            assert_eq!(ids.allocate(), Err(EXHAUSTED));
        }
        assert_eq!(std::format!("{ids:?}"), "RequestIdAllocator { next: None }");
    }

    #[test]
    fn starting_at_max_hands_out_exactly_one() {
        let ids = RequestIdAllocator::starting_at(RequestId::MAX);
        assert_eq!(ids.allocate(), Ok(RequestId::MAX));
        assert_eq!(ids.allocate(), Err(EXHAUSTED));
    }

    #[test]
    fn usable_from_a_static() {
        static IDS: RequestIdAllocator = RequestIdAllocator::new();
        let a = IDS.allocate().expect("fresh allocator");
        let b = IDS.allocate().expect("fresh allocator");
        assert!(a < b);
    }

    #[test]
    fn concurrent_allocations_are_unique_and_increasing_per_thread() {
        const THREADS: usize = if cfg!(miri) { 3 } else { 8 };
        const PER_THREAD: usize = if cfg!(miri) { 20 } else { 5_000 };
        let ids = RequestIdAllocator::new();
        let per_thread: Vec<Vec<RequestId>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    let ids = &ids;
                    scope.spawn(move || {
                        (0..PER_THREAD)
                            .map(|_| ids.allocate().expect("far from exhaustion"))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("allocator thread panicked"))
                .collect()
        });
        let mut all = BTreeSet::new();
        for list in &per_thread {
            assert!(list.windows(2).all(|pair| pair[0] < pair[1]));
            for &allocated in list {
                assert!(all.insert(allocated), "{allocated} handed out twice");
            }
        }
        let total = (THREADS * PER_THREAD) as u64;
        // Dense: exactly 1..=total, nothing skipped.
        assert_eq!(all.first(), Some(&id(1)));
        assert_eq!(all.last(), Some(&id(total)));
        assert_eq!(ids.peek_next(), Some(id(total + 1)));
    }

    #[test]
    fn concurrent_exhaustion_hands_out_the_last_ids_once() {
        const THREADS: usize = if cfg!(miri) { 3 } else { 8 };
        let ids = RequestIdAllocator::starting_at(id(u64::MAX - 3));
        let got: Vec<Result<RequestId, IdError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    let ids = &ids;
                    scope.spawn(move || [ids.allocate(), ids.allocate()])
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|handle| handle.join().expect("allocator thread panicked"))
                .collect()
        });
        let mut ok: Vec<u64> = got
            .iter()
            .filter_map(|r| r.ok())
            .map(RequestId::get)
            .collect();
        ok.sort_unstable();
        assert_eq!(ok, [u64::MAX - 3, u64::MAX - 2, u64::MAX - 1, u64::MAX]);
        assert_eq!(
            got.iter().filter(|r| **r == Err(EXHAUSTED)).count(),
            2 * THREADS - 4
        );
        assert!(ids.is_exhausted());
    }
}
