//! Model-based property tests for the task and runtime state machines and
//! the request sequencer.
//!
//! Each property drives the real type with a random sequence of operations
//! and a plain reference model side by side, comparing every result and the
//! resulting state. The models' transition tables are written out here as
//! allowed-pair lists, independently of the crate's `can_transition_to`.
#![cfg(not(dinah_loom))]

use std::collections::BTreeSet;

use dinah_core::{
    AtomicRuntimeState, AtomicTaskState, InvalidTaskTransition, RequestId, RequestSequencer,
    RuntimeState, RuntimeTransitionError, SequenceError, TaskState, WorldSize,
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

// ------------------------------------------------------------- sequencer

#[derive(Debug, Clone, Copy)]
enum SeqOp {
    /// Peek the next ID to this target, then commit it or not (a refused
    /// send).
    Send { target: u32, sent: bool },
}

fn seq_ops() -> impl Strategy<Value = Vec<SeqOp>> {
    proptest::collection::vec(
        (0_u32..5, prop_oneof![4 => Just(true), 1 => Just(false)])
            .prop_map(|(target, sent)| SeqOp::Send { target, sent }),
        0..2 * MAX_OPS,
    )
}

proptest! {
    #![proptest_config(config())]

    /// Against a model of one counter per target: each target's committed
    /// IDs number 0, 1, 2, ... without gaps in commit order, a peek that
    /// is not committed is handed out again, and no ID is ever handed out
    /// for two requests, whatever the target.
    #[test]
    fn sequencer_matches_the_model(size in 1_u32..5, ops in seq_ops()) {
        let world = WorldSize::new(size).expect("non-zero");
        let mut ids = RequestSequencer::with_storage(vec![0; size as usize], world).expect("sized");
        let mut model = vec![0_u64; size as usize];
        let mut committed = BTreeSet::new();
        for SeqOp::Send { target, sent } in ops {
            let Ok(rank) = world.rank(target) else {
                let outside = WorldSize::new(8).expect("non-zero").rank(target).expect("in 8");
                prop_assert_eq!(ids.peek(outside), Err(SequenceError::NoSuchRank { target: outside }));
                continue;
            };
            let id = ids.peek(rank).expect("far from the top");
            prop_assert_eq!(id.sequence(world), (rank, model[target as usize]));
            if sent {
                ids.commit(rank);
                prop_assert!(committed.insert(id), "{} handed out twice", id);
                model[target as usize] += 1;
            }
            prop_assert_eq!(ids.sent(rank), model[target as usize]);
        }
    }

    /// Splitting an ID into its target and number inverts making it, for
    /// world sizes that are powers of two (split with a mask and a shift)
    /// and sizes that are not (split by division), and agrees with the
    /// division everywhere.
    #[test]
    fn sequence_inverts_in_sequence(
        size in prop_oneof![1_u32..70, (0_u32..32).prop_map(|bits| 1 << bits), any::<u32>()],
        target in any::<u32>(),
        seq in any::<u64>(),
    ) {
        let world = WorldSize::new(size.max(1)).expect("non-zero");
        let rank = world.rank(target % world.get()).expect("in the world");
        let seq = seq % (u64::MAX / u64::from(world.get()));
        let id = RequestId::in_sequence(rank, world, seq).expect("fits");
        prop_assert_eq!(id.sequence(world), (rank, seq));
        let zero_based = id.get() - 1;
        let size = u64::from(world.get());
        prop_assert_eq!(u64::from(rank.get()), zero_based % size);
        prop_assert_eq!(seq, zero_based / size);
    }
}
