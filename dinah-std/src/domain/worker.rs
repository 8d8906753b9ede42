//! Which worker the calling thread is.
//!
//! A domain numbers its workers from its configuration's
//! [`first_worker`](crate::DomainConfig::first_worker): worker thread
//! `index` of its Rayon pool is `first_worker + index`. Each worker thread
//! records its own ID when it starts, so trace events and job contexts can
//! name it without knowing which domain's pool they are on; a runtime gives
//! each of its domains its own range, so no two live workers of one runtime
//! share an ID.

use std::cell::Cell;

use dinah_core::WorkerId;

thread_local! {
    static CURRENT: Cell<Option<WorkerId>> = const { Cell::new(None) };
}

/// The ID of worker `index` of a domain whose first worker is `first`, or
/// `None` if it would pass [`WorkerId::MAX`].
pub(crate) fn nth(first: WorkerId, index: usize) -> Option<WorkerId> {
    let index = u64::try_from(index).ok()?;
    WorkerId::new(first.get().checked_add(index)?).ok()
}

/// Marks the calling thread as worker `id` (a domain's start handler).
pub(crate) fn enter(id: Option<WorkerId>) {
    CURRENT.with(|current| current.set(id));
}

/// The worker the calling thread is, if it is one of a domain's workers.
pub(crate) fn current() -> Option<WorkerId> {
    CURRENT.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_are_numbered_from_the_first() {
        let first = WorkerId::new(5).unwrap();
        assert_eq!(nth(first, 0), Some(first));
        assert_eq!(nth(first, 3), WorkerId::new(8).ok());
        assert_eq!(nth(WorkerId::MAX, 0), Some(WorkerId::MAX));
        assert_eq!(nth(WorkerId::MAX, 1), None);
    }

    #[test]
    fn a_thread_is_a_worker_only_once_marked() {
        let marked = std::thread::spawn(|| {
            let before = current();
            enter(WorkerId::new(9).ok());
            (before, current())
        })
        .join()
        .unwrap();
        assert_eq!(marked, (None, WorkerId::new(9).ok()));
        assert_eq!(current(), None, "another thread's mark does not leak");
    }
}
