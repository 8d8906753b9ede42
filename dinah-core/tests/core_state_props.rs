//! Model-based property tests for the task and runtime state machines and
//! the request-ID allocator.
//!
//! Each property drives the real type with a random sequence of operations
//! and a plain reference model side by side, comparing every result and the
//! resulting state. The models' transition tables are written out here as
//! allowed-pair lists, independently of the crate's `can_transition_to`.
#![cfg(not(dinah_loom))]

use std::collections::BTreeSet;

use dinah_core::{
    AtomicRuntimeState, AtomicTaskState, IdError, IdKind, InvalidTaskTransition, RequestId,
    RequestIdAllocator, RuntimeState, RuntimeTransitionError, TaskState,
};
use proptest::prelude::*;

// ---------------------------------------------------------------- models

/// The task lifecycle, as the design lists it.
const TASK_ALLOWED: &[(TaskState, TaskState)] = &[
    (TaskState::Pending, TaskState::Running),
    (TaskState::Pending, TaskState::Cancelled),
    (TaskState::Running, TaskState::Completed),
    (TaskState::Running, TaskState::Failed),
    (TaskState::Running, TaskState::Cancelled),
];

/// The runtime lifecycle, as the design lists it.
const RUNTIME_ALLOWED: &[(RuntimeState, RuntimeState)] = &[
    (RuntimeState::Created, RuntimeState::Bootstrapping),
    (RuntimeState::Bootstrapping, RuntimeState::Running),
    (RuntimeState::Running, RuntimeState::Draining),
    (RuntimeState::Draining, RuntimeState::Stopped),
    (RuntimeState::Bootstrapping, RuntimeState::Failed),
    (RuntimeState::Running, RuntimeState::Failed),
    (RuntimeState::Draining, RuntimeState::Failed),
];

/// A reference cell: the state plus the allowed-pair list.
#[derive(Debug, Clone, Copy)]
struct Model<S: 'static> {
    state: S,
    allowed: &'static [(S, S)],
}

impl<S: Copy + PartialEq> Model<S> {
    fn allowed(&self, from: S, to: S) -> bool {
        self.allowed.contains(&(from, to))
    }

    /// The plain form: move from the current state, or report it.
    fn plain(&mut self, to: S) -> Result<(), (S, S)> {
        if self.allowed(self.state, to) {
            self.state = to;
            Ok(())
        } else {
            Err((self.state, to))
        }
    }

    /// The atomic form: an illegal pair is refused as asked; a legal pair
    /// whose `from` is stale reports the actual state.
    fn atomic(&mut self, from: S, to: S) -> Result<(), (S, S)> {
        if !self.allowed(from, to) {
            Err((from, to))
        } else if self.state != from {
            Err((self.state, to))
        } else {
            self.state = to;
            Ok(())
        }
    }
}

fn task_err((from, to): (TaskState, TaskState)) -> InvalidTaskTransition {
    InvalidTaskTransition { from, to }
}

fn runtime_err((from, to): (RuntimeState, RuntimeState)) -> RuntimeTransitionError {
    RuntimeTransitionError { from, to }
}

// ------------------------------------------------------------ strategies

/// The longest operation sequence (short under Miri, which is slow).
const MAX_OPS: usize = if cfg!(miri) { 12 } else { 48 };

fn task_state() -> impl Strategy<Value = TaskState> + Clone {
    proptest::sample::select(TaskState::ALL.to_vec())
}

fn runtime_state() -> impl Strategy<Value = RuntimeState> + Clone {
    proptest::sample::select(RuntimeState::ALL.to_vec())
}

/// One attempted operation on an atomic cell. `from: None` means "the state
/// the model currently holds", so sequences reach deep states often.
#[derive(Debug, Clone, Copy)]
enum Op<S> {
    Transition {
        from: Option<S>,
        to: S,
    },
    Load,
    /// `try_claim` / `begin_draining`.
    First,
    /// `try_cancel_pending` / `fail`.
    Second,
}

fn ops<S: std::fmt::Debug + Clone + Copy + 'static>(
    state: impl Strategy<Value = S> + Clone + 'static,
) -> impl Strategy<Value = Vec<Op<S>>> {
    let op = prop_oneof![
        4 => (proptest::option::of(state.clone()), state)
            .prop_map(|(from, to)| Op::Transition { from, to }),
        1 => Just(Op::Load),
        1 => Just(Op::First),
        1 => Just(Op::Second),
    ];
    proptest::collection::vec(op, 0..MAX_OPS)
}

// ------------------------------------------------------------ properties

/// The default configuration (so `PROPTEST_CASES` applies), without the
/// regression file under Miri, whose isolation forbids the file system.
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if cfg!(miri) {
        config.failure_persistence = None;
    }
    config
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn task_state_matches_the_model(
        start in task_state(),
        attempts in proptest::collection::vec(task_state(), 0..MAX_OPS),
    ) {
        let mut model = Model { state: start, allowed: TASK_ALLOWED };
        let mut real = start;
        for to in attempts {
            prop_assert_eq!(real.can_transition_to(to), model.allowed(real, to));
            let expected = model.plain(to).map_err(task_err);
            prop_assert_eq!(real.transition(to), expected);
            prop_assert_eq!(real, model.state);
            prop_assert_eq!(real.is_terminal(), !TaskState::ALL.iter().any(|&s| model.allowed(real, s)));
        }
    }

    #[test]
    fn atomic_task_state_matches_the_model(start in task_state(), ops in ops(task_state())) {
        let mut model = Model { state: start, allowed: TASK_ALLOWED };
        let real = AtomicTaskState::new(start);
        for op in ops {
            match op {
                Op::Transition { from, to } => {
                    let from = from.unwrap_or(model.state);
                    let expected = model.atomic(from, to).map_err(task_err);
                    prop_assert_eq!(real.transition(from, to), expected);
                }
                Op::Load => {}
                Op::First => {
                    let expected = model.atomic(TaskState::Pending, TaskState::Running).map_err(task_err);
                    prop_assert_eq!(real.try_claim(), expected);
                }
                Op::Second => {
                    let expected = model.atomic(TaskState::Pending, TaskState::Cancelled).map_err(task_err);
                    prop_assert_eq!(real.try_cancel_pending(), expected);
                }
            }
            prop_assert_eq!(real.load(), model.state);
        }
    }

    #[test]
    fn runtime_state_matches_the_model(
        start in runtime_state(),
        attempts in proptest::collection::vec(runtime_state(), 0..MAX_OPS),
    ) {
        let mut model = Model { state: start, allowed: RUNTIME_ALLOWED };
        let mut real = start;
        for to in attempts {
            prop_assert_eq!(real.can_transition_to(to), model.allowed(real, to));
            let expected = model.plain(to).map_err(runtime_err);
            prop_assert_eq!(real.transition(to), expected);
            prop_assert_eq!(real, model.state);
            prop_assert_eq!(real.accepts_work(), model.state == RuntimeState::Running);
            prop_assert_eq!(real.is_terminal(), !RuntimeState::ALL.iter().any(|&s| model.allowed(real, s)));
        }
    }

    #[test]
    fn atomic_runtime_state_matches_the_model(start in runtime_state(), ops in ops(runtime_state())) {
        let mut model = Model { state: start, allowed: RUNTIME_ALLOWED };
        let real = AtomicRuntimeState::new(start);
        for op in ops {
            match op {
                Op::Transition { from, to } => {
                    let from = from.unwrap_or(model.state);
                    let expected = model.atomic(from, to).map_err(runtime_err);
                    prop_assert_eq!(real.transition(from, to), expected);
                }
                Op::Load => {}
                Op::First => {
                    let expected = model
                        .atomic(RuntimeState::Running, RuntimeState::Draining)
                        .map(|()| RuntimeState::Running)
                        .map_err(runtime_err);
                    prop_assert_eq!(real.begin_draining(), expected);
                }
                Op::Second => {
                    // `fail` moves from whichever state the runtime is in.
                    let before = model.state;
                    let expected = model
                        .atomic(before, RuntimeState::Failed)
                        .map(|()| before)
                        .map_err(runtime_err);
                    prop_assert_eq!(real.fail(), expected);
                }
            }
            prop_assert_eq!(real.load(), model.state);
            prop_assert_eq!(real.accepts_work(), model.state == RuntimeState::Running);
        }
    }
}

// ------------------------------------------------------------- allocator

/// Where an allocator starts: low, or close enough to the top to exhaust.
fn first_id() -> impl Strategy<Value = u64> {
    prop_oneof![1..1_000_u64, (u64::MAX - 40)..=u64::MAX]
}

#[derive(Debug, Clone, Copy)]
enum IdOp {
    Allocate,
    Peek,
}

fn id_ops() -> impl Strategy<Value = Vec<IdOp>> {
    proptest::collection::vec(
        prop_oneof![3 => Just(IdOp::Allocate), 1 => Just(IdOp::Peek)],
        0..2 * MAX_OPS,
    )
}

const EXHAUSTED: IdError = IdError::Exhausted {
    kind: IdKind::Request,
};

proptest! {
    #![proptest_config(config())]

    #[test]
    fn allocator_matches_the_model(first in first_id(), ops in id_ops()) {
        let ids = RequestIdAllocator::starting_at(RequestId::new(first).expect("non-zero start"));
        // The model: the next value, or `None` once u64::MAX went out.
        let mut next = Some(first);
        let mut handed_out = BTreeSet::new();
        let mut last = None;
        for op in ops {
            match op {
                IdOp::Peek => prop_assert_eq!(ids.peek_next().map(RequestId::get), next),
                IdOp::Allocate => match next {
                    Some(value) => {
                        let id = ids.allocate().expect("the model has ids left");
                        prop_assert_eq!(id.get(), value);
                        prop_assert!(handed_out.insert(value), "{} handed out twice", value);
                        prop_assert!(last < Some(value), "ids must increase");
                        last = Some(value);
                        next = value.checked_add(1);
                    }
                    None => prop_assert_eq!(ids.allocate(), Err(EXHAUSTED)),
                },
            }
            prop_assert_eq!(ids.is_exhausted(), next.is_none());
        }
    }

    /// Several threads each run their own random op list against one
    /// allocator: every ID is handed out once, each thread's IDs increase,
    /// and together they are exactly the model's range (or the range up to
    /// `u64::MAX` followed by exhaustion).
    #[test]
    fn interleaved_threads_never_repeat(
        first in first_id(),
        per_thread in proptest::collection::vec(id_ops(), 1..4),
    ) {
        let ids = RequestIdAllocator::starting_at(RequestId::new(first).expect("non-zero start"));
        let results: Vec<Vec<Result<RequestId, IdError>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = per_thread
                .iter()
                .map(|ops| {
                    let ids = &ids;
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        for op in ops {
                            match op {
                                IdOp::Allocate => out.push(ids.allocate()),
                                IdOp::Peek => {
                                    let _ = ids.peek_next();
                                }
                            }
                        }
                        out
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("allocating thread panicked"))
                .collect()
        });

        let mut all = BTreeSet::new();
        let mut exhausted = 0_u64;
        for list in &results {
            let mut last = None;
            let mut seen_exhaustion = false;
            for result in list {
                match result {
                    Ok(id) => {
                        prop_assert!(!seen_exhaustion, "an id after exhaustion");
                        prop_assert!(last < Some(*id), "ids must increase per thread");
                        last = Some(*id);
                        prop_assert!(all.insert(id.get()), "{} handed out twice", id);
                    }
                    Err(error) => {
                        prop_assert_eq!(*error, EXHAUSTED);
                        seen_exhaustion = true;
                        exhausted += 1;
                    }
                }
            }
        }
        let attempts: u64 = results.iter().map(|list| list.len() as u64).sum();
        let available = u64::MAX - first + 1;
        let granted = attempts.min(available);
        prop_assert_eq!(all.len() as u64, granted);
        prop_assert_eq!(exhausted, attempts - granted);
        if granted > 0 {
            prop_assert_eq!(all.first().copied(), Some(first));
            prop_assert_eq!(all.last().copied(), Some(first + (granted - 1)));
        }
    }
}
