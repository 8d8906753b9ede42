//! `CancelFlag` under every interleaving loom explores.

use ::loom::sync::Arc;
use ::loom::sync::atomic::{AtomicUsize, Ordering};
use ::loom::thread;
use dinah_core::CancelFlag;

/// Two requesters through separate tokens: exactly one is told it was
/// first, and both then observe the request.
#[test]
fn two_requesters_exactly_one_first() {
    ::loom::model(|| {
        let flag = Arc::new(CancelFlag::new());
        let other = {
            let flag = Arc::clone(&flag);
            thread::spawn(move || {
                let token = flag.token();
                let first = token.request_cancellation();
                assert!(token.is_cancellation_requested());
                first
            })
        };
        let mine = flag.token().request_cancellation();
        let theirs = other.join().expect("requester panicked");
        assert!(mine ^ theirs, "exactly one first request: {mine} {theirs}");
        assert!(flag.is_requested());
    });
}

/// What the requester wrote before `request()` is visible to an observer
/// once it sees the request (Release on request, Acquire on observation).
#[test]
fn a_request_publishes_prior_writes() {
    ::loom::model(|| {
        let flag = Arc::new(CancelFlag::new());
        let reason = Arc::new(AtomicUsize::new(0));
        let requester = {
            let (flag, reason) = (Arc::clone(&flag), Arc::clone(&reason));
            thread::spawn(move || {
                reason.store(7, Ordering::Relaxed);
                assert!(flag.request());
            })
        };
        if flag.token().is_cancellation_requested() {
            assert_eq!(reason.load(Ordering::Relaxed), 7);
        }
        requester.join().expect("requester panicked");
        assert_eq!(reason.load(Ordering::Relaxed), 7);
    });
}

/// A late requester that finds the flag set also synchronises with the
/// first one (its failed request is an Acquire).
#[test]
fn a_losing_request_also_observes() {
    ::loom::model(|| {
        let flag = Arc::new(CancelFlag::new());
        let reason = Arc::new(AtomicUsize::new(0));
        let requester = {
            let (flag, reason) = (Arc::clone(&flag), Arc::clone(&reason));
            thread::spawn(move || {
                reason.store(3, Ordering::Relaxed);
                flag.request()
            })
        };
        let mine = flag.request();
        if !mine {
            assert_eq!(reason.load(Ordering::Relaxed), 3);
        }
        let theirs = requester.join().expect("requester panicked");
        assert!(mine ^ theirs);
    });
}
