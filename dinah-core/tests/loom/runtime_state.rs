//! `AtomicRuntimeState` under every interleaving loom explores.

use ::loom::sync::Arc;
use ::loom::thread;
use dinah_core::{AtomicRuntimeState, RuntimeState, RuntimeTransitionError};

/// Can a runtime observed in `earlier` later be observed in `later`?
/// Written from the lifecycle diagram, independently of the crate's table.
fn reachable(earlier: RuntimeState, later: RuntimeState) -> bool {
    use RuntimeState::{Bootstrapping, Created, Draining, Failed, Running, Stopped};
    let step = |state| match state {
        Created => 0,
        Bootstrapping => 1,
        Running => 2,
        Draining => 3,
        Stopped | Failed => 4,
    };
    match (earlier, later) {
        _ if earlier == later => true,
        (Stopped | Failed, _) => false,
        // Failed is reachable from every non-terminal state.
        (_, Failed) => true,
        (_, _) => step(earlier) < step(later),
    }
}

/// Two threads start a shutdown at once: exactly one succeeds, the other
/// sees the drain already under way, and the runtime ends `Draining`.
#[test]
fn racing_begin_draining_has_exactly_one_winner() {
    ::loom::model(|| {
        let state = Arc::new(AtomicRuntimeState::new(RuntimeState::Running));
        let other = {
            let state = Arc::clone(&state);
            thread::spawn(move || {
                let result = state.begin_draining();
                // Its own RMW has ordered it after the drain began.
                assert_eq!(state.load(), RuntimeState::Draining);
                result
            })
        };
        let mine = state.begin_draining();
        let theirs = other.join().expect("shutdown thread panicked");

        let lost = RuntimeTransitionError {
            from: RuntimeState::Draining,
            to: RuntimeState::Draining,
        };
        match (mine, theirs) {
            (Ok(RuntimeState::Running), Err(error)) | (Err(error), Ok(RuntimeState::Running)) => {
                assert_eq!(error, lost);
            }
            other => panic!("expected exactly one winner, got {other:?}"),
        }
        assert_eq!(state.load(), RuntimeState::Draining);
        assert!(!state.accepts_work());
    });
}

/// The owner walks the whole lifecycle while another thread fails the
/// runtime and a reader samples it: the reader's observations only move
/// forward along legal paths, and the end state is consistent with who won.
#[test]
fn observers_never_see_an_illegal_sequence() {
    ::loom::model(|| {
        let state = Arc::new(AtomicRuntimeState::new(RuntimeState::Created));
        let owner = {
            let state = Arc::clone(&state);
            thread::spawn(move || {
                let path = [
                    (RuntimeState::Created, RuntimeState::Bootstrapping),
                    (RuntimeState::Bootstrapping, RuntimeState::Running),
                    (RuntimeState::Running, RuntimeState::Draining),
                    (RuntimeState::Draining, RuntimeState::Stopped),
                ];
                for (from, to) in path {
                    if let Err(error) = state.transition(from, to) {
                        // Only a failure can get in the owner's way.
                        assert_eq!(error.from, RuntimeState::Failed);
                        return false;
                    }
                }
                true
            })
        };
        let failer = {
            let state = Arc::clone(&state);
            thread::spawn(move || state.fail())
        };

        let mut seen = [RuntimeState::Created; 3];
        for slot in &mut seen {
            *slot = state.load();
        }
        for pair in seen.windows(2) {
            assert!(
                reachable(pair[0], pair[1]),
                "saw {} then {}",
                pair[0],
                pair[1]
            );
        }

        let completed = owner.join().expect("owner panicked");
        let failed = failer.join().expect("failer panicked");
        let end = state.load();
        match failed {
            Ok(previous) => {
                assert_eq!(end, RuntimeState::Failed);
                assert!(!completed);
                assert!(matches!(
                    previous,
                    RuntimeState::Bootstrapping | RuntimeState::Running | RuntimeState::Draining
                ));
            }
            Err(error) => {
                // Too early (still Created) or too late (already Stopped).
                assert!(matches!(
                    error.from,
                    RuntimeState::Created | RuntimeState::Stopped
                ));
                if error.from == RuntimeState::Stopped {
                    assert!(completed);
                    assert_eq!(end, RuntimeState::Stopped);
                }
            }
        }
        assert!(reachable(seen[2], end));
    });
}
