//! Completions pushed to a bounded queue that an owner thread drains.
//!
//! # Memory ordering
//!
//! `reserved` is raised with an `AcqRel` compare-exchange bounded by the
//! capacity and lowered with `AcqRel` after a pop removed an item. The
//! count only bounds how many items can exist; the items themselves are
//! handed over by the queue (crossbeam's `ArrayQueue`, whose slot stamps
//! are stored `Release` and loaded `Acquire`), which makes a popped
//! completion fully visible. `has_waker` is stored with `Release` after the
//! waker is in place and loaded with `Acquire` before taking the waker
//! lock; it only lets a push skip that lock when nobody ever registered.

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::Waker;

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;

use dinah_core::{LimitField, LimitProblem, LimitsError, RuntimeLimits, TaskId, TaskOutcome};

/// One finished job, as delivered to a [`CompletionQueue`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completion<K, T, E> {
    /// The key the job was submitted with (for example a request ID).
    pub key: K,
    /// The job's task ID within its domain.
    pub task: TaskId,
    /// How the job ended.
    pub outcome: TaskOutcome<T, E>,
}

/// A bounded queue of [`Completion`]s filled by domain workers and drained
/// by an owner thread. Share it as an `Arc`.
///
/// The long-lived runtime does not wait on per-job handles: its owner
/// thread drains finished jobs in batches while it also drives the
/// transport. A job submitted with
/// [`Domain::try_submit_to`](crate::Domain::try_submit_to) pushes its
/// [`Completion`] to a [`CompletionQueue`] and wakes the owner through the
/// queue's registered [`Waker`].
///
/// # Why a push never fails
///
/// Submitting a job reserves a slot in the completion queue along with
/// the domain's admission (if either is refused, neither is kept);
/// popping a completion frees its slot. At most `capacity` completions are therefore
/// reserved, queued or being pushed at any time, so the worker's push
/// always finds room and no unbounded fallback exists. Size the queue with
/// [`CompletionQueue::for_limits`] to match every domain built from the
/// same [`RuntimeLimits`].
///
/// # Examples
///
/// ```
/// use std::num::NonZeroUsize;
/// use std::sync::Arc;
/// use dinah_core::{DomainId, TaskOutcome};
/// use dinah_std::{CompletionQueue, Domain, DomainConfig};
///
/// let config = DomainConfig::new(DomainId::new(1)?, NonZeroUsize::MIN, NonZeroUsize::MIN);
/// let completions = Arc::new(CompletionQueue::<&str, u32, ()>::new(config.capacity().and_then(NonZeroUsize::new).unwrap()));
/// let domain = Domain::start(config, None)?;
/// domain.try_submit_to(&completions, "answer", |_| Ok(42))?;
/// let completion = loop {
///     if let Some(completion) = completions.pop() {
///         break completion;
///     }
///     std::thread::yield_now();
/// };
/// assert_eq!((completion.key, completion.outcome), ("answer", TaskOutcome::Completed(42)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CompletionQueue<K, T, E> {
    queue: ArrayQueue<Completion<K, T, E>>,
    /// Raised by submissions and lowered by `pop` (in a runtime, both on
    /// its owner thread); on a cache line of its own, so the workers' reads of
    /// `has_waker` and the queue's fields in `deliver` do not take the
    /// line away from the owner after every update.
    reserved: CachePadded<AtomicUsize>,
    has_waker: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl<K, T, E> CompletionQueue<K, T, E> {
    /// An empty queue with room for `capacity` completions, allocated once.
    ///
    /// # Panics
    ///
    /// If `capacity` exceeds `usize::MAX / 2` slots (no allocation that
    /// large can succeed anyway).
    #[must_use]
    pub fn new(capacity: NonZeroUsize) -> Self {
        let queue = ArrayQueue::new(capacity.get());
        Self {
            queue,
            reserved: CachePadded::new(AtomicUsize::new(0)),
            has_waker: AtomicBool::new(false),
            waker: Mutex::new(None),
        }
    }

    /// A queue with room for [`RuntimeLimits::completion_capacity`]
    /// completions: every job that all the runtime's domains can hold at
    /// once.
    ///
    /// # Errors
    ///
    /// The [`LimitsError`] of [`RuntimeLimits::validate`];
    /// [`LimitProblem::TooLarge`] on [`LimitField::MaxActionQueue`] if the
    /// capacity does not fit a `usize` on this target.
    pub fn for_limits(limits: &RuntimeLimits) -> Result<Self, LimitsError> {
        limits.validate()?;
        let capacity = limits.completion_capacity()?;
        let capacity = usize::try_from(capacity)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or(LimitsError {
                field: LimitField::MaxActionQueue,
                problem: LimitProblem::TooLarge {
                    max: usize::MAX as u64,
                },
            })?;
        Ok(Self::new(capacity))
    }

    /// Registers `waker` to be woken after every push (replacing an earlier
    /// one unless it would wake the same task).
    pub fn register_waker(&self, waker: &Waker) {
        let mut slot = self.waker.lock().unwrap_or_else(PoisonError::into_inner);
        match &*slot {
            Some(current) if current.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
        self.has_waker.store(true, Ordering::Release);
    }

    /// Removes the oldest completion, freeing its slot.
    pub fn pop(&self) -> Option<Completion<K, T, E>> {
        let completion = self.queue.pop()?;
        let previous = self.reserved.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(previous > 0, "a queued completion holds a reservation");
        Some(completion)
    }

    /// The most completions the queue holds (its slot count).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// Completions waiting to be popped.
    #[must_use]
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Is no completion waiting?
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Slots in use: completions waiting plus jobs admitted whose outcome
    /// is not delivered yet.
    #[must_use]
    pub fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Acquire)
    }

    /// Reserves a slot for one future completion; `false` if all are taken.
    pub(crate) fn try_reserve(&self) -> bool {
        let capacity = self.capacity();
        self.reserved
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |reserved| {
                (reserved < capacity).then_some(reserved + 1)
            })
            .is_ok()
    }

    /// Pushes a completion into the slot reserved for it and wakes the
    /// owner.
    pub(crate) fn deliver(&self, completion: Completion<K, T, E>) {
        if self.queue.push(completion).is_err() {
            // The reservation taken at admission guarantees room; reaching
            // this is a bug in the reservation accounting.
            unreachable!("a completion push found its reserved slot taken");
        }
        if self.has_waker.load(Ordering::Acquire) {
            let waker = self.waker.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(waker) = &*waker {
                waker.wake_by_ref();
            }
        }
    }
}

impl<K, T, E> fmt::Debug for CompletionQueue<K, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .field("reserved", &self.reserved())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;
    use std::task::Wake;

    struct CountingWaker(AtomicU32);
    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn completion(key: u32) -> Completion<u32, u32, ()> {
        Completion {
            key,
            task: TaskId::MIN,
            outcome: TaskOutcome::Completed(key * 10),
        }
    }

    #[test]
    fn reservations_bound_the_queue_and_pops_free_them() {
        let queue = CompletionQueue::new(NonZeroUsize::new(2).unwrap());
        assert!(queue.try_reserve());
        assert!(queue.try_reserve());
        assert!(!queue.try_reserve(), "capacity reached");
        queue.deliver(completion(1));
        queue.deliver(completion(2));
        assert_eq!((queue.len(), queue.reserved()), (2, 2));
        assert_eq!(queue.pop(), Some(completion(1)));
        assert_eq!(queue.reserved(), 1);
        assert!(queue.try_reserve());
        queue.deliver(completion(3));
        let keys: Vec<_> = std::iter::from_fn(|| queue.pop()).map(|c| c.key).collect();
        assert_eq!(keys, [2, 3]);
        assert_eq!((queue.len(), queue.reserved()), (0, 0));
        assert!(queue.is_empty());
    }

    #[test]
    fn every_push_wakes_the_registered_waker() {
        let queue = CompletionQueue::new(NonZeroUsize::new(4).unwrap());
        queue.try_reserve();
        queue.deliver(completion(1)); // nobody registered yet
        let counter = Arc::new(CountingWaker(AtomicU32::new(0)));
        let waker = Waker::from(Arc::clone(&counter));
        queue.register_waker(&waker);
        queue.register_waker(&waker); // same task: kept
        for key in 2..4 {
            queue.try_reserve();
            queue.deliver(completion(key));
        }
        assert_eq!(counter.0.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn sized_from_limits() {
        let limits = RuntimeLimits::default();
        let queue = CompletionQueue::<u8, u8, u8>::for_limits(&limits).unwrap();
        assert_eq!(
            queue.capacity() as u32,
            limits.completion_capacity().unwrap()
        );
        let mut invalid = limits;
        invalid.max_domains = 0;
        assert!(CompletionQueue::<u8, u8, u8>::for_limits(&invalid).is_err());
        assert!(format!("{queue:?}").contains("capacity: 516"));
    }
}
