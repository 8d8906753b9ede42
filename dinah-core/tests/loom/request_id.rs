//! `RequestIdAllocator` under every interleaving loom explores.

use ::loom::sync::Arc;
use ::loom::thread;
use dinah_core::{IdError, IdKind, RequestId, RequestIdAllocator};

/// Two threads allocating at once (and the main thread too) get distinct
/// IDs, each thread's in increasing order, with none skipped.
#[test]
fn concurrent_allocations_are_distinct() {
    ::loom::model(|| {
        let ids = Arc::new(RequestIdAllocator::new());
        let other = {
            let ids = Arc::clone(&ids);
            thread::spawn(move || {
                let a = ids.allocate().expect("fresh allocator");
                let b = ids.allocate().expect("fresh allocator");
                assert!(a < b);
                [a, b]
            })
        };
        let mine = ids.allocate().expect("fresh allocator");
        let [a, b] = other.join().expect("allocator thread panicked");
        assert!(mine != a && mine != b);
        let mut all = [mine.get(), a.get(), b.get()];
        all.sort_unstable();
        assert_eq!(all, [1, 2, 3]);
        assert_eq!(ids.peek_next(), RequestId::new(4).ok());
    });
}

/// Racing at the top of the range: the last ID goes to exactly one thread,
/// the other is told the allocator is exhausted, and it stays exhausted.
#[test]
fn exhaustion_is_decided_once() {
    ::loom::model(|| {
        let ids = Arc::new(RequestIdAllocator::starting_at(RequestId::MAX));
        let other = {
            let ids = Arc::clone(&ids);
            thread::spawn(move || ids.allocate())
        };
        let mine = ids.allocate();
        let theirs = other.join().expect("allocator thread panicked");
        let exhausted = Err(IdError::Exhausted {
            kind: IdKind::Request,
        });
        match (mine, theirs) {
            (Ok(id), lost) | (lost, Ok(id)) if lost == exhausted => {
                assert_eq!(id, RequestId::MAX);
            }
            other => panic!("expected one last id and one exhaustion, got {other:?}"),
        }
        assert_eq!(ids.allocate(), exhausted);
        assert!(ids.is_exhausted());
    });
}
