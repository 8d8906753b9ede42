//! What the barrier and the collectives share while one of them runs on
//! this rank: its deadline, which the owner reads every round without a
//! lock, and the one task waiting for its next arrival.

use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Waker};

use dinah_core::Instant;

/// The running operation's deadline, or none.
#[derive(Debug, Default)]
pub(crate) struct RunningDeadline {
    /// In nanoseconds of the runtime's clock; 0 while nothing runs.
    nanos: AtomicU64,
}

impl RunningDeadline {
    /// An operation that must end by `deadline` starts.
    pub(crate) fn set(&self, deadline: Instant) {
        // 0 means "none": the clock's first nanosecond rounds up.
        self.nanos
            .store(deadline.as_nanos().max(1), Ordering::Relaxed);
    }

    /// The operation ended.
    pub(crate) fn clear(&self) {
        self.nanos.store(0, Ordering::Relaxed);
    }

    /// The deadline, if an operation runs.
    pub(crate) fn get(&self) -> Option<Instant> {
        match self.nanos.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Instant::from_nanos(nanos)),
        }
    }

    /// Has the running operation's deadline passed by `now`?
    pub(crate) fn passed(&self, now: Instant) -> bool {
        self.get().is_some_and(|deadline| now >= deadline)
    }
}

/// Remembers `cx`'s waker in `waiter`, unless it already wakes the same
/// task (the waiting future is polled again and again).
pub(crate) fn remember(waiter: &mut Option<Waker>, cx: &Context<'_>) {
    match waiter {
        Some(kept) if kept.will_wake(cx.waker()) => {}
        _ => *waiter = Some(cx.waker().clone()),
    }
}

/// Wakes the task in `waiter`, if any, once.
pub(crate) fn wake(waiter: &mut Option<Waker>) {
    if let Some(kept) = waiter.take() {
        kept.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_is_set_read_and_cleared() {
        let deadline = RunningDeadline::default();
        assert_eq!(deadline.get(), None);
        assert!(!deadline.passed(Instant::from_nanos(u64::MAX)));
        deadline.set(Instant::from_nanos(1_000));
        assert_eq!(deadline.get(), Some(Instant::from_nanos(1_000)));
        assert!(!deadline.passed(Instant::from_nanos(999)));
        assert!(deadline.passed(Instant::from_nanos(1_000)));
        deadline.clear();
        assert_eq!(deadline.get(), None);
    }
}
