//! The bounded, single-owner FIFO of pending work: [`TaskQueue`] and its
//! error [`QueuePushError`].

use core::fmt;
use core::iter::FusedIterator;

use heapless::Deque;

/// A bounded FIFO queue with room for `N` items, owned by one thread.
///
/// It is the queue a scheduler drains: it holds at most `N`
/// items, hands them out oldest first, and never grows. It is deliberately
/// not synchronised: one owner pushes and pops through `&mut self` (wrap it
/// in a lock to share it, or use [`MpmcQueue`](crate::MpmcQueue) when
/// several threads must push and pop at once). It stores work; it never
/// runs it.
///
/// When the queue is full, [`TaskQueue::try_push`] leaves the queue as it
/// was and returns the rejected item inside [`QueuePushError::Full`], so no
/// accepted or offered work is ever dropped silently.
///
/// Capacity is a const generic and [`TaskQueue::new`] is a `const fn`, so a
/// queue can live in a `static` (behind whatever lock the program uses);
/// a zero capacity is rejected at compile time.
///
/// # Examples
///
/// ```
/// use dinah_core::{QueuePushError, TaskQueue};
///
/// let mut queue: TaskQueue<&str, 2> = TaskQueue::new();
/// queue.try_push("first")?;
/// queue.try_push("second")?;
/// assert_eq!(queue.try_push("third"), Err(QueuePushError::Full("third")));
/// assert_eq!(queue.pop(), Some("first"));
/// queue.try_push("third")?;
/// assert_eq!(queue.iter().copied().collect::<Vec<_>>(), ["second", "third"]);
/// # Ok::<(), QueuePushError<&str>>(())
/// ```
///
/// Zero capacity does not compile:
///
/// ```compile_fail
/// let queue: dinah_core::TaskQueue<u32, 0> = dinah_core::TaskQueue::new();
/// ```
#[derive(Clone, Debug)]
pub struct TaskQueue<T, const N: usize> {
    items: Deque<T, N>,
}

impl<T, const N: usize> TaskQueue<T, N> {
    /// The number of items the queue can hold.
    pub const CAPACITY: usize = N;

    /// An empty queue.
    ///
    /// `N == 0` fails to compile: a queue that can hold nothing would turn
    /// every submission into an error.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::TaskQueue;
    ///
    /// // A `const fn`, so a queue can be the initial value of a static.
    /// static QUEUE: std::sync::Mutex<TaskQueue<u32, 8>> = std::sync::Mutex::new(TaskQueue::new());
    /// assert!(QUEUE.lock().map(|queue| queue.is_empty()).unwrap_or(false));
    /// ```
    pub const fn new() -> Self {
        const { assert!(N > 0, "a TaskQueue needs a capacity of at least one") };
        Self {
            items: Deque::new(),
        }
    }

    /// Appends `item` at the back of the queue.
    ///
    /// # Errors
    ///
    /// [`QueuePushError::Full`] holding `item` when the queue already holds
    /// `N` items; the queue is not modified.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{QueuePushError, TaskQueue};
    ///
    /// let mut queue: TaskQueue<u32, 1> = TaskQueue::new();
    /// queue.try_push(1)?;
    /// let rejected = queue.try_push(2).unwrap_err();
    /// assert_eq!(rejected.into_inner(), 2);
    /// assert_eq!(queue.peek(), Some(&1));
    /// # Ok::<(), QueuePushError<u32>>(())
    /// ```
    pub fn try_push(&mut self, item: T) -> Result<(), QueuePushError<T>> {
        self.items.push_back(item).map_err(QueuePushError::Full)
    }

    /// Removes and returns the oldest item, or `None` when the queue is
    /// empty.
    pub fn pop(&mut self) -> Option<T> {
        self.items.pop_front()
    }

    /// The oldest item, without removing it.
    pub fn peek(&self) -> Option<&T> {
        self.items.front()
    }

    /// The number of queued items.
    pub const fn len(&self) -> usize {
        self.items.len()
    }

    /// Is the queue empty?
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Is the queue full (the next [`try_push`](Self::try_push) fails)?
    pub fn is_full(&self) -> bool {
        self.items.is_full()
    }

    /// The number of items the queue can hold: `N`.
    pub const fn capacity(&self) -> usize {
        N
    }

    /// The queued items, oldest first, without removing them.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator + FusedIterator {
        self.items.iter()
    }

    /// Drops every queued item.
    pub fn clear(&mut self) {
        self.items.clear();
    }
}

impl<T, const N: usize> Default for TaskQueue<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

/// [`TaskQueue::try_push`] could not queue an item; the item is handed back.
///
/// `Debug` does not print the item, so `T` needs no `Debug` of its own.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum QueuePushError<T> {
    /// The queue already holds its capacity.
    Full(T),
}

impl<T> QueuePushError<T> {
    /// The item that was not queued.
    pub fn into_inner(self) -> T {
        match self {
            Self::Full(item) => item,
        }
    }

    /// Was the push rejected because the queue was full?
    pub const fn is_full(&self) -> bool {
        matches!(self, Self::Full(_))
    }
}

impl<T> fmt::Debug for QueuePushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("Full(..)"),
        }
    }
}

impl<T> fmt::Display for QueuePushError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("queue is full"),
        }
    }
}

impl<T> core::error::Error for QueuePushError<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::format;
    use std::string::ToString;
    use std::vec::Vec;

    /// Not `Debug`, not `Clone`: the error must not need either.
    struct Opaque(u32);

    #[test]
    fn new_queue_is_empty_with_its_capacity() {
        let queue: TaskQueue<u32, 3> = TaskQueue::new();
        assert!(queue.is_empty());
        assert!(!queue.is_full());
        assert_eq!(queue.len(), 0);
        assert_eq!(queue.capacity(), 3);
        assert_eq!(TaskQueue::<u32, 3>::CAPACITY, 3);
        assert_eq!(queue.peek(), None);
        assert_eq!(queue.iter().count(), 0);
        assert!(TaskQueue::<u32, 3>::default().is_empty());
    }

    #[test]
    fn pops_in_fifo_order() {
        let mut queue: TaskQueue<u32, 4> = TaskQueue::new();
        for item in 1..=4 {
            queue.try_push(item).unwrap();
        }
        assert!(queue.is_full());
        assert_eq!(queue.peek(), Some(&1));
        let popped: Vec<u32> = core::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(popped, [1, 2, 3, 4]);
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn full_queue_returns_the_item_and_is_unchanged() {
        let mut queue: TaskQueue<Opaque, 2> = TaskQueue::new();
        queue.try_push(Opaque(1)).unwrap();
        queue.try_push(Opaque(2)).unwrap();
        let error = queue.try_push(Opaque(3)).unwrap_err();
        assert!(error.is_full());
        assert_eq!(format!("{error:?}"), "Full(..)");
        assert_eq!(error.to_string(), "queue is full");
        assert_eq!(error.into_inner().0, 3);
        let kept: Vec<u32> = queue.iter().map(|item| item.0).collect();
        assert_eq!(kept, [1, 2]);
        assert_eq!(queue.len(), 2);
    }

    #[test]
    fn capacity_is_reusable_after_pop_across_wraparound() {
        let mut queue: TaskQueue<u32, 3> = TaskQueue::new();
        let mut next = 0;
        let mut expected = 0;
        for _ in 0..10 {
            while queue.try_push(next).is_ok() {
                next += 1;
            }
            assert_eq!(queue.len(), 3);
            assert_eq!(queue.pop(), Some(expected));
            assert_eq!(queue.pop(), Some(expected + 1));
            expected += 2;
        }
        let rest: Vec<u32> = queue.iter().copied().collect();
        assert_eq!(rest, [expected]);
        assert_eq!(queue.iter().next_back(), Some(&expected));
    }

    #[test]
    fn clear_empties_and_keeps_capacity() {
        let mut queue: TaskQueue<u32, 2> = TaskQueue::new();
        queue.try_push(1).unwrap();
        queue.try_push(2).unwrap();
        queue.clear();
        assert!(queue.is_empty());
        queue.try_push(3).unwrap();
        queue.try_push(4).unwrap();
        assert_eq!(queue.pop(), Some(3));
    }

    #[test]
    fn capacity_one_alternates() {
        let mut queue: TaskQueue<u32, 1> = TaskQueue::new();
        for item in 0..5 {
            queue.try_push(item).unwrap();
            assert_eq!(queue.try_push(99), Err(QueuePushError::Full(99)));
            assert_eq!(queue.pop(), Some(item));
        }
    }

    #[test]
    fn queue_in_a_static_behind_a_lock() {
        static QUEUE: crate::sync::Mutex<TaskQueue<u32, 2>> =
            crate::sync::Mutex::new(TaskQueue::new());
        QUEUE.lock().try_push(7).unwrap();
        assert_eq!(QUEUE.lock().pop(), Some(7));
    }

    #[test]
    fn clone_is_independent() {
        let mut queue: TaskQueue<u32, 2> = TaskQueue::new();
        queue.try_push(1).unwrap();
        let mut copy = queue.clone();
        assert_eq!(copy.pop(), Some(1));
        assert_eq!(queue.len(), 1);
    }
}
