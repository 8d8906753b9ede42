//! Building a queue: inline slots (`const`) or caller-provided storage.

use core::marker::PhantomData;

use super::{MpmcQueue, MpmcSlot, MpmcStorageError};
use crate::padded::Padded;
use crate::sync::AtomicUsize;

/// `one_lap` for a queue of `capacity` slots: the smallest power of two
/// strictly greater than `capacity`, or `None` when it would exceed a
/// quarter of the `usize` range (lap distances must fit in an `isize`).
pub(super) const fn one_lap_for(capacity: usize) -> Option<usize> {
    const MAX_ONE_LAP: usize = 1 << (usize::BITS - 2);
    match capacity.checked_add(1) {
        Some(above) => match above.checked_next_power_of_two() {
            Some(one_lap) if one_lap <= MAX_ONE_LAP => Some(one_lap),
            _ => None,
        },
        None => None,
    }
}

impl<T, const N: usize> MpmcQueue<T, [MpmcSlot<T>; N]> {
    /// An empty queue with `N` inline slots.
    ///
    /// A `const fn`, so the queue can be a `static`. `N == 0` (and an `N`
    /// too large to number, which no real array reaches) fails to compile.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{ArrayMpmcQueue, MpmcPushError};
    ///
    /// static COMPLETIONS: ArrayMpmcQueue<u64, 16> = ArrayMpmcQueue::new();
    /// COMPLETIONS.try_push(7)?;
    /// assert_eq!(COMPLETIONS.pop(), Some(7));
    /// # Ok::<(), MpmcPushError<u64>>(())
    /// ```
    #[cfg(not(dinah_loom))]
    pub const fn new() -> Self {
        Self::from_parts(MpmcSlot::array(), array_one_lap::<N>())
    }

    /// An empty queue with `N` inline slots.
    ///
    /// Not `const` under `--cfg dinah_loom`, where the atomics are loom's.
    #[cfg(dinah_loom)]
    pub fn new() -> Self {
        Self::from_parts(MpmcSlot::array(), array_one_lap::<N>())
    }
}

/// `one_lap` for `N` inline slots, checked when the queue type is
/// instantiated: an invalid `N` is a compile error, not a run-time panic.
const fn array_one_lap<const N: usize>() -> usize {
    const {
        assert!(N > 0, "an MpmcQueue needs a capacity of at least one");
        match one_lap_for(N) {
            Some(one_lap) => one_lap,
            None => panic!("an MpmcQueue capacity must be at most usize::MAX / 4"),
        }
    }
}

impl<T, const N: usize> Default for MpmcQueue<T, [MpmcSlot<T>; N]> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, S: AsRef<[MpmcSlot<T>]>> MpmcQueue<T, S> {
    #[cfg(not(dinah_loom))]
    const fn from_parts(storage: S, one_lap: usize) -> Self {
        Self {
            tail: Padded(AtomicUsize::new(0)),
            head: Padded(AtomicUsize::new(0)),
            one_lap,
            storage,
            _items: PhantomData,
        }
    }

    #[cfg(dinah_loom)]
    fn from_parts(storage: S, one_lap: usize) -> Self {
        Self {
            tail: Padded(AtomicUsize::new(0)),
            head: Padded(AtomicUsize::new(0)),
            one_lap,
            storage,
            _items: PhantomData,
        }
    }

    /// An empty queue over caller-provided slots; its capacity is the number
    /// of slots.
    ///
    /// The storage is taken over once, for the queue's whole life. Slots are
    /// reset first, so storage left over from an earlier queue can be
    /// reused (items still in it are dropped). Taking `AsMut` guarantees
    /// that no other queue uses the same slots at the same time.
    ///
    /// # Errors
    ///
    /// [`MpmcStorageError::Empty`] for zero slots;
    /// [`MpmcStorageError::TooLarge`] for more than `usize::MAX / 4`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{MpmcQueue, MpmcStorageError, MpmcSlot};
    ///
    /// let mut slots: [MpmcSlot<&str>; 3] = MpmcSlot::array();
    /// let queue = MpmcQueue::with_storage(&mut slots[..])?;
    /// assert_eq!(queue.capacity(), 3);
    /// assert!(queue.try_push("job").is_ok());
    /// assert_eq!(queue.pop(), Some("job"));
    ///
    /// let none: Vec<MpmcSlot<u8>> = Vec::new();
    /// assert_eq!(MpmcQueue::with_storage(none).err(), Some(MpmcStorageError::Empty));
    /// # Ok::<(), MpmcStorageError>(())
    /// ```
    pub fn with_storage(mut storage: S) -> Result<Self, MpmcStorageError>
    where
        S: AsMut<[MpmcSlot<T>]>,
    {
        let slots = storage.as_mut();
        if slots.is_empty() {
            return Err(MpmcStorageError::Empty);
        }
        let Some(one_lap) = one_lap_for(slots.len()) else {
            return Err(MpmcStorageError::TooLarge { slots: slots.len() });
        };
        for slot in slots.iter_mut() {
            *slot = MpmcSlot::new();
        }
        Ok(Self::from_parts(storage, one_lap))
    }
}
