//! Cancellation token coverage (v0.1 points 050 and 055): every clone sees a
//! request, only the first request reports that it set the flag, and
//! concurrent requesters and observers agree. No test sleeps: threads are
//! released together by a `Barrier` and observers poll until they see the
//! request.

use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};

use dinah_core::{CancellationRequested, TaskQueue};
use dinah_std::{CancellationToken, Scheduler};

#[test]
fn clones_observe_a_request_made_through_any_clone() {
    let token = CancellationToken::new();
    let clones: Vec<_> = (0..4).map(|_| token.clone()).collect();
    assert!(
        clones
            .iter()
            .all(|clone| !clone.is_cancellation_requested())
    );
    assert!(clones[2].request_cancellation());
    assert!(token.is_cancellation_requested());
    assert!(
        clones
            .iter()
            .all(CancellationToken::is_cancellation_requested)
    );
    assert!(!token.request_cancellation(), "the flag was already set");
    assert!(
        !CancellationToken::new().is_cancellation_requested(),
        "a new token is independent"
    );
}

#[test]
fn sixteen_observers_see_one_request() {
    const OBSERVERS: usize = 16;
    let token = CancellationToken::new();
    let start = Barrier::new(OBSERVERS + 1);
    let observed = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..OBSERVERS {
            let (token, start, observed) = (token.clone(), &start, &observed);
            scope.spawn(move || {
                start.wait();
                while !token.is_cancellation_requested() {
                    std::thread::yield_now();
                }
                observed.fetch_add(1, Ordering::Relaxed);
            });
        }
        let (requester, start) = (token.clone(), &start);
        let first = scope.spawn(move || {
            start.wait();
            requester.request_cancellation()
        });
        assert_eq!(first.join().ok(), Some(true));
    });
    assert_eq!(observed.load(Ordering::Relaxed), OBSERVERS);
    assert!(!token.request_cancellation());
}

#[test]
fn simultaneous_requests_have_exactly_one_winner() {
    const REQUESTERS: usize = 16;
    for _round in 0..32 {
        let token = CancellationToken::new();
        let start = Barrier::new(REQUESTERS);
        let winners = std::thread::scope(|scope| {
            let requesters: Vec<_> = (0..REQUESTERS)
                .map(|_| {
                    let (token, start) = (token.clone(), &start);
                    scope.spawn(move || {
                        start.wait();
                        token.request_cancellation()
                    })
                })
                .collect();
            requesters
                .into_iter()
                .map(|requester| requester.join())
                .filter(|joined| matches!(joined, Ok(true)))
                .count()
        });
        assert_eq!(winners, 1);
        assert!(token.is_cancellation_requested());
    }
}

#[test]
fn borrowed_core_tokens_share_the_flag() {
    let token = CancellationToken::new();
    let core_token = token.borrow();
    assert_eq!(core_token.check(), Ok(()));
    assert!(core_token.request_cancellation());
    assert_eq!(token.borrow().check(), Err(CancellationRequested));
    assert!(token.clone().is_cancellation_requested());
}

#[test]
fn queued_tasks_poll_the_token_cooperatively() {
    // Task 3 requests cancellation; on one worker the tasks after it see the
    // request at their safe point and stop early. Nothing is interrupted:
    // task 3 itself completes normally.
    let token = CancellationToken::new();
    let mut queue: TaskQueue<Box<dyn FnOnce() -> Result<usize, CancellationRequested> + Send>, 8> =
        TaskQueue::new();
    for index in 0..8 {
        let token = token.clone();
        let task = Box::new(move || {
            token.borrow().check()?;
            if index == 3 {
                token.request_cancellation();
            }
            Ok(index)
        });
        assert!(queue.try_push(task).is_ok());
    }
    let results = Scheduler::new().run_parallel(&mut queue, 1);
    let expected: Vec<_> = (0..8)
        .map(|index| {
            if index <= 3 {
                Ok(index)
            } else {
                Err(CancellationRequested)
            }
        })
        .collect();
    assert_eq!(results, Ok(expected));
}
