//! The pieces the queue is built from: slots and the spin backoff.

use core::fmt;

use crate::sync::{AtomicUsize, Mutex, spin_loop};

/// One cell of an [`MpmcQueue`](crate::MpmcQueue)'s storage.
///
/// A slot holds at most one item plus the stamp that says whose turn it is
/// (see the [algorithm notes](crate::MpmcQueue#algorithm)). Callers only
/// create slots, with [`MpmcSlot::new`], [`MpmcSlot::array`] or `Default`, and hand
/// them to [`MpmcQueue::with_storage`](crate::MpmcQueue::with_storage); the
/// queue resets them when it takes them over, so storage can be reused.
///
/// # Examples
///
/// Storage sized at run time (here from a `Vec`; `dinah-std` uses a
/// `Box<[MpmcSlot<T>]>` sized from its limits):
///
/// ```
/// use dinah_core::{MpmcQueue, MpmcStorageError, MpmcSlot};
///
/// let slots: Box<[MpmcSlot<u32>]> = std::iter::repeat_with(MpmcSlot::new).take(100).collect();
/// let queue = MpmcQueue::with_storage(slots)?;
/// assert_eq!(queue.capacity(), 100);
/// # Ok::<(), MpmcStorageError>(())
/// ```
pub struct MpmcSlot<T> {
    /// The lap this slot is waiting for, plus [`FULL`] once the lap's item
    /// is in place.
    pub(super) stamp: AtomicUsize,
    /// The item. Only the thread that owns the slot under the stamp
    /// protocol locks it, so the lock is never contended.
    pub(super) value: Mutex<Option<T>>,
}

/// The stamp bit that marks a slot as holding its lap's item.
pub(super) const FULL: usize = 1;

impl<T> MpmcSlot<T> {
    /// An empty slot, ready for the first lap.
    #[cfg(not(dinah_loom))]
    pub const fn new() -> Self {
        Self {
            stamp: AtomicUsize::new(0),
            value: Mutex::new(None),
        }
    }

    /// An empty slot, ready for the first lap.
    #[cfg(dinah_loom)]
    pub fn new() -> Self {
        Self {
            stamp: AtomicUsize::new(0),
            value: Mutex::new(None),
        }
    }

    /// `N` empty slots: fixed-size storage for
    /// [`MpmcQueue::with_storage`](crate::MpmcQueue::with_storage).
    #[cfg(not(dinah_loom))]
    pub const fn array<const N: usize>() -> [Self; N] {
        [const { Self::new() }; N]
    }

    /// `N` empty slots: fixed-size storage for
    /// [`MpmcQueue::with_storage`](crate::MpmcQueue::with_storage).
    #[cfg(dinah_loom)]
    pub fn array<const N: usize>() -> [Self; N] {
        core::array::from_fn(|_| Self::new())
    }
}

impl<T> Default for MpmcSlot<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for MpmcSlot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MpmcSlot").finish_non_exhaustive()
    }
}

/// Exponential busy-wait for the short windows in which another thread is
/// half-way through an operation.
///
/// Each call spins twice as long as the previous one, up to a fixed cap; a
/// no_std core cannot yield to an OS scheduler, so waiting never turns into
/// sleeping. Under loom each call is a single yield to the model's
/// scheduler.
#[derive(Debug)]
pub(super) struct Backoff {
    /// Spins `2^step` times on the next call.
    #[cfg(not(dinah_loom))]
    step: u32,
}

/// Spins at most `2^SPIN_LIMIT` times per call.
#[cfg(not(dinah_loom))]
const SPIN_LIMIT: u32 = 6;

impl Backoff {
    #[cfg(not(dinah_loom))]
    pub(super) const fn new() -> Self {
        Self { step: 0 }
    }

    #[cfg(dinah_loom)]
    pub(super) const fn new() -> Self {
        Self {}
    }

    #[cfg(not(dinah_loom))]
    pub(super) fn spin(&mut self) {
        for _ in 0..1_u32 << self.step {
            spin_loop();
        }
        if self.step < SPIN_LIMIT {
            self.step += 1;
        }
    }

    #[cfg(dinah_loom)]
    pub(super) fn spin(&mut self) {
        spin_loop();
    }
}
