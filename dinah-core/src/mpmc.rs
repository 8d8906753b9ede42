//! A bounded multi-producer, multi-consumer FIFO queue for `no_std`:
//! [`MpmcQueue`] (algorithm, guarantees and memory ordering are documented
//! there), its slots [`MpmcSlot`] and its errors.

use core::fmt;
use core::marker::PhantomData;

use crate::sync::{AtomicUsize, Ordering, fence};

mod build;
mod error;
mod slot;

pub use error::{MpmcPushError, MpmcStorageError};
pub use slot::MpmcSlot;

use crate::padded::Padded;
use slot::{Backoff, FULL};

/// A bounded MPMC queue whose `N` slots live inline (in a `static`, on the
/// stack, or inside another value).
///
/// Built with the `const fn` [`MpmcQueue::new`].
pub type ArrayMpmcQueue<T, const N: usize> = MpmcQueue<T, [MpmcSlot<T>; N]>;

/// A bounded multi-producer, multi-consumer FIFO queue.
///
/// The queue is shared by reference between threads (or cores): any of
/// them may [`try_push`](MpmcQueue::try_push) and [`pop`](MpmcQueue::pop)
/// at the same time. It is the shared counterpart of the single-owner
/// [`TaskQueue`](crate::TaskQueue): a bounded queue that several producers
/// and consumers use without a lock around it, for example to carry
/// results from worker threads to the thread that collects them, or work
/// between the cores of a microcontroller; [`Drainers`](crate::Drainers)
/// counts the threads that drain such a queue. Its capacity is fixed when
/// it is built, from a const generic ([`ArrayMpmcQueue`], whose
/// [`new`](MpmcQueue::new) is a `const fn`) or from storage the caller
/// provides once ([`MpmcQueue::with_storage`], for example a
/// `Box<[MpmcSlot<T>]>` sized from run-time limits).
///
/// # Storage
///
/// `S` is the slot storage: `[MpmcSlot<T>; N]` for [`ArrayMpmcQueue`], or
/// any owned or exclusively borrowed slice of slots given to
/// [`with_storage`](Self::with_storage) (`Box<[MpmcSlot<T>]>`,
/// `&mut [MpmcSlot<T>]`, ...). The queue is `Send` and `Sync` when `T` is
/// `Send` (and the storage type allows it). Dropping the queue drops the
/// items still in it.
///
/// Items that are not `Send` make the queue neither `Send` nor `Sync`:
///
/// ```compile_fail
/// fn shared<Q: Sync>(_: &Q) {}
/// let queue: dinah_core::ArrayMpmcQueue<std::rc::Rc<u8>, 2> = dinah_core::ArrayMpmcQueue::new();
/// shared(&queue);
/// ```
///
/// # Full means full, empty means empty
///
/// Many bounded MPMC queues (the classic per-slot-sequence design, as in
/// `heapless::mpmc` or `rigtorp::MPMCQueue`) fail a push when the slot
/// they need still belongs to a pop that has claimed it but not finished
/// releasing it, even though the queue holds fewer items than its capacity.
/// A caller that just popped an item and pushes it back can then see `Full`.
/// This queue tells the two cases apart: [`MpmcQueue::try_push`] returns
/// [`MpmcPushError::Full`] only when the queue really held `capacity` items,
/// and waits (spinning) while a slot is merely being released; symmetrically,
/// [`MpmcQueue::pop`] returns `None` only when the queue really was empty,
/// and waits while a claimed push is still writing its item.
///
/// The price is progress: a push that is not rejected may wait for a pop
/// that was preempted inside that short window (and a pop for a push), so
/// the queue is not lock-free. A push never waits for another push, nor a
/// pop for another pop, and neither waits when the queue is full or empty
/// respectively. On a single core the queue must not be used both from an
/// interrupt handler and from the code that handler interrupts (the handler
/// could spin forever on a slot the interrupted code is releasing), exactly
/// as for a spin lock.
///
/// # Algorithm
///
/// The design follows crossbeam's `ArrayQueue` (after Dmitry Vyukov's
/// bounded MPMC queue), in safe Rust. Two indices, `tail` for producers and
/// `head` for consumers, each pack a *lap* (how many times the index went
/// around the ring, in the high bits) and a slot *index* (in the low bits).
/// With `one_lap` the smallest power of two above the capacity, index
/// `i + 1` follows `i` within a lap, and after the last slot the index
/// returns to zero while the lap grows by `one_lap`; wrapping arithmetic
/// keeps this correct when the counters overflow.
///
/// Each slot has a stamp: the lap it is waiting for, plus a `FULL` bit.
///
/// - A push reads `tail` = (lap, i). If slot `i`'s stamp is `lap` (empty,
///   waiting for this lap), it claims the slot by moving `tail` forward with
///   a compare-and-swap, stores the item and sets the stamp to `lap | FULL`.
///   If the stamp is from an earlier lap, the slot still belongs to the
///   previous lap (its item is there, or a pop is releasing the slot, or a
///   push is still storing the item): the queue is full if `head` is
///   exactly one lap behind `tail`; otherwise a pop has claimed that item
///   and is releasing the slot, so the push waits and retries. A stamp from
///   this lap or a later one means `tail` was stale; it is reloaded.
/// - A pop reads `head` = (lap, i). If the stamp is `lap | FULL`, it claims
///   the slot by moving `head` forward, takes the item and sets the stamp to
///   `lap + one_lap`, handing the slot to the next lap's push. If the stamp
///   has not reached `lap | FULL` (this lap's item is not stored yet, or the
///   previous lap's pop is still releasing the slot), the queue is empty if
///   `tail == head`; otherwise a push has claimed the slot, so the pop waits
///   for its item and retries. A stamp from a later lap means `head` was
///   stale; it is reloaded.
///
/// The compare-and-swap on an index gives exactly one thread each slot in
/// each lap, and the stamp tells the next thread when the slot is free, so
/// the lock around each slot's value (`unsafe` is forbidden in this crate,
/// so the value cannot live in an `UnsafeCell`) is never contended: it only
/// makes the ownership that the stamps already establish visible to the
/// compiler. Items come out in the order their pushes claimed positions;
/// one producer's items therefore come out in the order it pushed them.
///
/// Lap counters wrap after about `usize::MAX / one_lap` laps; a thread
/// stalled for that many operations between reading an index and acting on
/// it could mistake an old lap for the current one (the ABA problem that
/// crossbeam's queue accepts too). With 32-bit `usize` that is billions of
/// operations; with 64-bit it cannot happen in practice.
///
/// # Memory ordering
///
/// - The first load of `tail` (push) or `head` (pop), and every reload
///   after a failed attempt, is `Relaxed`: it only picks which slot to try.
///   Nothing is decided on it alone; the stamp and the compare-and-swap
///   decide.
/// - Stamp loads are `Acquire` and stamp stores `Release`. The store is the
///   last thing the slot's owner does, after storing or taking the item, so
///   the next owner, whose `Acquire` load sees that stamp, finds the item
///   (and the slot's lock) in the state the previous owner left it.
/// - The compare-and-swap that claims a slot is `SeqCst` on success. It needs
///   no `Acquire` for the item (the stamp load provided that), but it must
///   be in the single total order of `SeqCst` operations that the full and
///   empty checks below rely on. On failure it is `Relaxed`: the returned
///   index is only a new starting point.
/// - Before deciding "full" (or "empty"), an operation issues a `SeqCst`
///   fence and then loads the other index (`Relaxed`, ordered by the
///   fence). A load after a `SeqCst` fence sees every `SeqCst` modification
///   of that index that precedes the fence in the total order, so the check
///   cannot read a `head` (or `tail`) older than a pop (or push) that has
///   already taken effect. `Full` is therefore reported only when, at the
///   fence, `head + one_lap == tail`, and `None` only when `head == tail`.
///   In particular, if a pop returned before a push started (for example
///   the consumer signalled the producer through any `Release`/`Acquire`
///   pair), that push sees the pop's effect.
/// - [`len`](MpmcQueue::len), [`is_empty`](MpmcQueue::is_empty) and
///   [`is_full`](MpmcQueue::is_full) load the indices with `SeqCst`, so the
///   pair they compare belongs to the same total order as the claims; `len`
///   also retries until `tail` did not move while it read `head`.
///
/// # Examples
///
/// ```
/// use std::thread;
/// use dinah_core::{ArrayMpmcQueue, MpmcPushError};
///
/// static QUEUE: ArrayMpmcQueue<u32, 4> = ArrayMpmcQueue::new();
///
/// thread::scope(|scope| {
///     for producer in 0..2 {
///         scope.spawn(move || {
///             for item in 0..8 {
///                 let mut item = producer * 100 + item;
///                 // Retry while full: the consumer below is draining.
///                 while let Err(error) = QUEUE.try_push(item) {
///                     item = error.into_inner();
///                     thread::yield_now();
///                 }
///             }
///         });
///     }
///     let mut received = Vec::new();
///     while received.len() < 16 {
///         match QUEUE.pop() {
///             Some(item) => received.push(item),
///             None => thread::yield_now(),
///         }
///     }
///     received.sort();
///     assert_eq!(received[..3], [0, 1, 2]);
///     assert_eq!(received[8..11], [100, 101, 102]);
/// });
/// assert!(QUEUE.is_empty());
/// # Ok::<(), MpmcPushError<u32>>(())
/// ```
pub struct MpmcQueue<T, S: AsRef<[MpmcSlot<T>]>> {
    /// Where the next push goes: lap in the high bits, index in the low.
    tail: Padded<AtomicUsize>,
    /// Where the next pop comes from, packed like `tail`.
    head: Padded<AtomicUsize>,
    /// The smallest power of two greater than the capacity.
    one_lap: usize,
    storage: S,
    /// The items live in `storage`; this only names `T`, without affecting
    /// `Send`/`Sync` (those follow from the storage).
    _items: PhantomData<fn() -> T>,
}

impl<T, S: AsRef<[MpmcSlot<T>]>> MpmcQueue<T, S> {
    /// The number of items the queue can hold.
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().len()
    }

    /// Appends `item` at the back of the queue.
    ///
    /// Waits, spinning, only while the slot it needs is being released by a
    /// pop that already removed that slot's item (see [Full means full,
    /// empty means empty](Self#full-means-full-empty-means-empty)); never
    /// while the queue is really full.
    ///
    /// # Errors
    ///
    /// [`MpmcPushError::Full`] holding `item` when the queue holds
    /// `capacity` items; nothing is modified.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{ArrayMpmcQueue, MpmcPushError};
    ///
    /// let queue: ArrayMpmcQueue<u8, 1> = ArrayMpmcQueue::new();
    /// queue.try_push(1)?;
    /// assert_eq!(queue.try_push(2), Err(MpmcPushError::Full(2)));
    /// # Ok::<(), MpmcPushError<u8>>(())
    /// ```
    pub fn try_push(&self, item: T) -> Result<(), MpmcPushError<T>> {
        let slots = self.storage.as_ref();
        let mut backoff = Backoff::new();
        let mut tail = self.tail.load(Ordering::Relaxed);
        loop {
            let lap = self.lap(tail);
            let slot = &slots[self.index(tail)];
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == lap {
                // The slot is empty and waiting for this lap: claim it.
                let next = self.advance(tail);
                match self.tail.compare_exchange_weak(
                    tail,
                    next,
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // The guard is released at the end of this statement;
                        // `previous` (always `None`) is dropped after it.
                        let previous = slot.value.lock().replace(item);
                        debug_assert!(previous.is_none(), "a claimed slot held an item");
                        slot.stamp.store(lap | FULL, Ordering::Release);
                        return Ok(());
                    }
                    Err(current) => {
                        tail = current;
                        backoff.spin();
                    }
                }
            } else if self.laps_between(stamp, lap) > 0 {
                // The slot still belongs to the previous lap: its item is
                // there, or a pop has claimed it and is releasing the slot,
                // or (with a stale view) a push is still storing it.
                fence(Ordering::SeqCst);
                let head = self.head.load(Ordering::Relaxed);
                if head.wrapping_add(self.one_lap) == tail {
                    return Err(MpmcPushError::Full(item));
                }
                backoff.spin();
                tail = self.tail.load(Ordering::Relaxed);
            } else {
                // Another push already used this slot in this lap: `tail`
                // was stale.
                backoff.spin();
                tail = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Removes and returns the oldest item, or `None` when the queue is
    /// empty.
    ///
    /// Waits, spinning, only while the oldest slot has been claimed by a push
    /// that is still storing its item; never while the queue is really
    /// empty.
    pub fn pop(&self) -> Option<T> {
        let slots = self.storage.as_ref();
        let mut backoff = Backoff::new();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let lap = self.lap(head);
            let slot = &slots[self.index(head)];
            let stamp = slot.stamp.load(Ordering::Acquire);
            if stamp == lap | FULL {
                // The slot holds this lap's item: claim it.
                let next = self.advance(head);
                match self.head.compare_exchange_weak(
                    head,
                    next,
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let item = slot.value.lock().take();
                        debug_assert!(item.is_some(), "a claimed full slot was empty");
                        slot.stamp
                            .store(lap.wrapping_add(self.one_lap), Ordering::Release);
                        return item;
                    }
                    Err(current) => {
                        head = current;
                        backoff.spin();
                    }
                }
            } else if self.laps_between(stamp, lap) >= 0 {
                // The slot has not received this lap's item: the queue is
                // empty, or a push has claimed the slot and is still storing
                // (possibly after a pop of the previous lap releases it).
                fence(Ordering::SeqCst);
                let tail = self.tail.load(Ordering::Relaxed);
                if tail == head {
                    return None;
                }
                backoff.spin();
                head = self.head.load(Ordering::Relaxed);
            } else {
                // Another pop already took this slot's item in this lap:
                // `head` was stale.
                backoff.spin();
                head = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// The number of queued items.
    ///
    /// Exact when no push or pop runs concurrently. Under concurrency it is
    /// a value the queue really had at some instant during the call (always
    /// between zero and the capacity), possibly outdated by the time it is
    /// returned: use it for statistics and heuristics, not to predict
    /// whether the next push or pop succeeds.
    pub fn len(&self) -> usize {
        let capacity = self.capacity();
        loop {
            let tail = self.tail.load(Ordering::SeqCst);
            let head = self.head.load(Ordering::SeqCst);
            if self.tail.load(Ordering::SeqCst) != tail {
                continue;
            }
            let (head_index, tail_index) = (self.index(head), self.index(tail));
            return if head_index < tail_index {
                tail_index - head_index
            } else if head_index > tail_index {
                capacity - head_index + tail_index
            } else if head == tail {
                0
            } else {
                capacity
            };
        }
    }

    /// Was the queue empty when checked? (Outdated as soon as another thread
    /// pushes.)
    pub fn is_empty(&self) -> bool {
        let head = self.head.load(Ordering::SeqCst);
        let tail = self.tail.load(Ordering::SeqCst);
        head == tail
    }

    /// Was the queue full when checked? (Outdated as soon as another thread
    /// pops.)
    pub fn is_full(&self) -> bool {
        let tail = self.tail.load(Ordering::SeqCst);
        let head = self.head.load(Ordering::SeqCst);
        head.wrapping_add(self.one_lap) == tail
    }

    /// The slot index packed in `position`.
    fn index(&self, position: usize) -> usize {
        position & (self.one_lap - 1)
    }

    /// The lap packed in `position`.
    fn lap(&self, position: usize) -> usize {
        position & !(self.one_lap - 1)
    }

    /// The signed distance from the lap recorded in `stamp` to `lap`:
    /// positive when `stamp` is from an earlier lap, zero for the same lap,
    /// negative when `stamp` is ahead. The laps an operation compares are
    /// at most one lap apart and `one_lap` is at most a quarter of the
    /// `usize` range, so the wrapping difference read as signed is exact.
    fn laps_between(&self, stamp: usize, lap: usize) -> isize {
        lap.wrapping_sub(self.lap(stamp)) as isize
    }

    /// The position after `position`: the next index, or index zero of the
    /// next lap after the last slot.
    fn advance(&self, position: usize) -> usize {
        if self.index(position) + 1 < self.capacity() {
            position + 1
        } else {
            self.lap(position).wrapping_add(self.one_lap)
        }
    }
}

impl<T, S: AsRef<[MpmcSlot<T>]>> Drop for MpmcQueue<T, S> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

impl<T, S: AsRef<[MpmcSlot<T>]>> fmt::Debug for MpmcQueue<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MpmcQueue")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
