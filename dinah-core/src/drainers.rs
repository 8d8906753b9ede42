//! [`Drainers`]: how many threads drain a shared queue, and when a
//! submitter must start another.

use crate::sync::{AtomicUsize, Ordering, fence};

/// Counts the *drainers* of a shared queue (threads, or jobs in a thread
/// pool, that pop and run items until the queue is empty) and tells a
/// submitter when to start one, so that a busy queue costs its submitters
/// a push and a few atomic operations instead of starting a drainer per
/// item.
///
/// The protocol, for a queue whose push and emptiness check are
/// sequentially consistent (as [`MpmcQueue`](crate::MpmcQueue)'s are):
///
/// - a submitter pushes its item, then calls [`enter`](Self::enter); if
///   it returns `true`, the submitter starts a drainer (the place is
///   already taken for it);
/// - a drainer pops and runs items until the queue is empty, then calls
///   [`leave`](Self::leave); if that returns `true`, an item arrived and
///   the drainer keeps draining (its place taken again), otherwise it
///   stops.
///
/// At most `max` drainers are active at once; a submitter starts one
/// whenever fewer are.
///
/// # Why no item is left behind
///
/// `enter` issues a `SeqCst` fence after the push and then reads the
/// count; `leave` decrements the count (`SeqCst`), issues a `SeqCst` fence
/// and then checks the queue. A submitter that finds every place taken
/// read the count before the decrement of each of those drainers, so each
/// of them sees the item when it looks after its fence: the first to look
/// keeps draining, or, if every place was taken again meanwhile, the
/// drainers holding them have not left yet and the same holds for them. A
/// submitter that finds a place free starts a drainer itself.
/// `tests/loom/drainers.rs` checks this under every interleaving loom
/// explores.
///
/// # Examples
///
/// ```
/// use dinah_core::{ArrayMpmcQueue, Drainers};
///
/// let queue = ArrayMpmcQueue::<u32, 4>::new();
/// let drainers = Drainers::new(2);
///
/// // Submitting: each item starts a drainer while a place is free.
/// assert!(queue.try_push(1).is_ok());
/// assert!(drainers.enter());
/// assert!(queue.try_push(2).is_ok());
/// assert!(drainers.enter());
/// // Both places taken: the third item waits for a running drainer.
/// assert!(queue.try_push(3).is_ok());
/// assert!(!drainers.enter());
///
/// // Draining (here on this thread, for the example): each drainer pops
/// // until the queue is empty, then leaves.
/// let mut ran = Vec::new();
/// while let Some(item) = queue.pop() {
///     ran.push(item);
/// }
/// assert!(!drainers.leave(|| queue.is_empty()));
/// assert!(!drainers.leave(|| queue.is_empty()));
/// assert_eq!(ran, [1, 2, 3]);
/// assert_eq!(drainers.active(), 0);
/// ```
#[derive(Debug)]
pub struct Drainers {
    active: AtomicUsize,
    max: usize,
}

impl Drainers {
    /// At most `max` drainers at a time (a `max` of zero counts as one).
    pub fn new(max: usize) -> Self {
        Self {
            active: AtomicUsize::new(0),
            max: if max == 0 { 1 } else { max },
        }
    }

    /// The most drainers active at once.
    pub const fn max(&self) -> usize {
        self.max
    }

    /// Called by a submitter after its push: takes a place for a new
    /// drainer if fewer than `max` are active. Returns `true` if the
    /// caller must start a drainer.
    ///
    /// It starts one even when an active drainer will reach the item in
    /// the end: that drainer may be inside a long item, and the item must
    /// not wait for it while a place (a worker) is free.
    pub fn enter(&self) -> bool {
        fence(Ordering::SeqCst);
        self.claim()
    }

    /// Called by a drainer that found the queue empty, with the queue's
    /// emptiness check: gives its place back, then returns `true` if an
    /// item arrived meanwhile and it took a place again (it must keep
    /// draining), `false` if it must stop.
    pub fn leave(&self, is_empty: impl FnOnce() -> bool) -> bool {
        self.active.fetch_sub(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        !is_empty() && self.claim()
    }

    /// Drainers active now (outdated as soon as another thread enters or
    /// leaves).
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// Takes a place if one is free.
    fn claim(&self) -> bool {
        let mut active = self.active.load(Ordering::SeqCst);
        loop {
            if active >= self.max {
                return false;
            }
            match self.active.compare_exchange_weak(
                active,
                active + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => active = now,
            }
        }
    }
}

#[cfg(all(test, not(dinah_loom)))]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_by_max() {
        let drainers = Drainers::new(2);
        assert!(drainers.enter());
        assert!(drainers.enter());
        assert!(!drainers.enter(), "both places taken");
        assert_eq!(drainers.active(), 2);
        assert_eq!(drainers.max(), 2);
    }

    #[test]
    fn a_leaving_drainer_stays_for_an_item_that_arrived() {
        let drainers = Drainers::new(1);
        assert!(drainers.enter());
        // The queue had an item again: it takes its place back.
        assert!(drainers.leave(|| false));
        assert_eq!(drainers.active(), 1);
        // Empty now: it leaves, and the place is free for a submitter.
        assert!(!drainers.leave(|| true));
        assert_eq!(drainers.active(), 0);
        assert!(drainers.enter());
    }

    #[test]
    fn a_max_of_zero_still_allows_one() {
        let drainers = Drainers::new(0);
        assert!(drainers.enter());
        assert!(!drainers.enter());
    }
}
