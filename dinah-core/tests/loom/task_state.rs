//! `AtomicTaskState` under every interleaving loom explores.

use ::loom::sync::Arc;
use ::loom::sync::atomic::{AtomicU64, Ordering};
use ::loom::thread;
use dinah_core::{AtomicTaskState, InvalidTaskTransition, TaskState};

/// A worker claiming a task races a canceller: exactly one wins, the loser
/// is told the state the winner left, and the final state is the winner's.
#[test]
fn claim_and_cancel_have_exactly_one_winner() {
    ::loom::model(|| {
        let state = Arc::new(AtomicTaskState::new(TaskState::Pending));
        let worker = {
            let state = Arc::clone(&state);
            thread::spawn(move || state.try_claim())
        };
        let cancel = state.try_cancel_pending();
        let claim = worker.join().expect("worker panicked");

        match (claim, cancel) {
            (Ok(()), Err(lost)) => {
                assert_eq!(
                    lost,
                    InvalidTaskTransition {
                        from: TaskState::Running,
                        to: TaskState::Cancelled
                    }
                );
                assert_eq!(state.load(), TaskState::Running);
            }
            (Err(lost), Ok(())) => {
                assert_eq!(
                    lost,
                    InvalidTaskTransition {
                        from: TaskState::Cancelled,
                        to: TaskState::Running
                    }
                );
                assert_eq!(state.load(), TaskState::Cancelled);
            }
            other => panic!("expected exactly one winner, got {other:?}"),
        }
    });
}

/// Two workers race to claim; the winner finishes the task. Whatever a
/// thread observes is a state the task really passed through, in order.
#[test]
fn two_claimers_one_runs() {
    ::loom::model(|| {
        let state = Arc::new(AtomicTaskState::new(TaskState::Pending));
        let spawn_worker = |state: Arc<AtomicTaskState>| {
            thread::spawn(move || {
                if state.try_claim().is_ok() {
                    state
                        .transition(TaskState::Running, TaskState::Completed)
                        .expect("only the claimer moves a running task");
                    true
                } else {
                    // The loser sees the task claimed or already finished.
                    let seen = state.load();
                    assert!(
                        matches!(seen, TaskState::Running | TaskState::Completed),
                        "loser saw {seen}"
                    );
                    false
                }
            })
        };
        let a = spawn_worker(Arc::clone(&state));
        let b = spawn_worker(Arc::clone(&state));
        let ran = [a, b].map(|worker| worker.join().expect("worker panicked"));
        assert_eq!(ran.iter().filter(|&&ran| ran).count(), 1);
        assert_eq!(state.load(), TaskState::Completed);
    });
}

/// A result written before `Running -> Completed` is visible to a thread
/// that observes `Completed` (Release on the transition, Acquire on load).
#[test]
fn completion_publishes_the_result() {
    ::loom::model(|| {
        let state = Arc::new(AtomicTaskState::new(TaskState::Running));
        let result = Arc::new(AtomicU64::new(0));
        let worker = {
            let (state, result) = (Arc::clone(&state), Arc::clone(&result));
            thread::spawn(move || {
                result.store(42, Ordering::Relaxed);
                state
                    .transition(TaskState::Running, TaskState::Completed)
                    .expect("the task is running");
            })
        };
        if state.load() == TaskState::Completed {
            assert_eq!(result.load(Ordering::Relaxed), 42);
        }
        worker.join().expect("worker panicked");
    });
}
