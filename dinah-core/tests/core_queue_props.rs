//! Model-based property tests: `TaskQueue` and `MpmcQueue` against a
//! bounded `VecDeque` reference, over random single-threaded operation
//! sequences, at capacity one, powers of two and odd capacities.

use std::collections::VecDeque;

use dinah_core::{ArrayMpmcQueue, MpmcPushError, MpmcQueue, MpmcSlot, QueuePushError, TaskQueue};
use proptest::prelude::*;

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Op {
    Push(u32),
    Pop,
    Peek,
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    // Pushes and pops dominate so that sequences fill, drain and wrap.
    prop_oneof![
        6 => any::<u32>().prop_map(Op::Push),
        5 => Just(Op::Pop),
        1 => Just(Op::Peek),
        1 => Just(Op::Clear),
    ]
}

/// Long enough to wrap every capacity tested many times; shorter under
/// Miri, which interprets each step.
const MAX_OPS: usize = if cfg!(miri) { 24 } else { 200 };

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 0..MAX_OPS)
}

/// The reference: a `VecDeque` that refuses the push beyond `capacity`.
struct Model {
    items: VecDeque<u32>,
    capacity: usize,
}

impl Model {
    fn new(capacity: usize) -> Self {
        Self {
            items: VecDeque::new(),
            capacity,
        }
    }

    fn push(&mut self, item: u32) -> Result<(), u32> {
        if self.items.len() == self.capacity {
            Err(item)
        } else {
            self.items.push_back(item);
            Ok(())
        }
    }
}

fn config() -> ProptestConfig {
    let config = ProptestConfig::default();
    if cfg!(miri) {
        ProptestConfig {
            // Miri interprets every step; a handful of cases still walks
            // every path, and the `test` lane runs the full count.
            cases: config.cases.min(4),
            // Persisting failures needs the file system, which Miri's
            // isolation refuses.
            failure_persistence: None,
            ..config
        }
    } else {
        config
    }
}

fn check_task_queue<const N: usize>(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut queue: TaskQueue<u32, N> = TaskQueue::new();
    let mut model = Model::new(N);
    for op in ops {
        match op {
            Op::Push(item) => {
                let got = queue.try_push(*item).map_err(QueuePushError::into_inner);
                prop_assert_eq!(got, model.push(*item));
            }
            Op::Pop => prop_assert_eq!(queue.pop(), model.items.pop_front()),
            Op::Peek => prop_assert_eq!(queue.peek(), model.items.front()),
            Op::Clear => {
                queue.clear();
                model.items.clear();
            }
        }
        prop_assert_eq!(queue.len(), model.items.len());
        prop_assert_eq!(queue.is_empty(), model.items.is_empty());
        prop_assert_eq!(queue.is_full(), model.items.len() == N);
        prop_assert_eq!(queue.capacity(), N);
        prop_assert!(queue.iter().eq(model.items.iter()));
    }
    Ok(())
}

/// Runs `ops` on an MPMC queue (which has no peek or clear: `Peek` checks
/// `len`, `Clear` drains through `pop`).
fn check_mpmc<S: AsRef<[MpmcSlot<u32>]>>(
    queue: &MpmcQueue<u32, S>,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let capacity = queue.capacity();
    let mut model = Model::new(capacity);
    for op in ops {
        match op {
            Op::Push(item) => {
                let got = queue.try_push(*item).map_err(MpmcPushError::into_inner);
                prop_assert_eq!(got, model.push(*item));
            }
            Op::Pop => prop_assert_eq!(queue.pop(), model.items.pop_front()),
            Op::Peek => prop_assert_eq!(queue.len(), model.items.len()),
            Op::Clear => {
                let drained: Vec<u32> = std::iter::from_fn(|| queue.pop()).collect();
                prop_assert!(drained.iter().eq(model.items.iter()));
                model.items.clear();
            }
        }
        prop_assert_eq!(queue.len(), model.items.len());
        prop_assert_eq!(queue.is_empty(), model.items.is_empty());
        prop_assert_eq!(queue.is_full(), model.items.len() == capacity);
    }
    Ok(())
}

fn check_array_mpmc<const N: usize>(ops: &[Op]) -> Result<(), TestCaseError> {
    let queue: ArrayMpmcQueue<u32, N> = ArrayMpmcQueue::new();
    check_mpmc(&queue, ops)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn task_queue_matches_model(ops in ops()) {
        check_task_queue::<1>(&ops)?;
        check_task_queue::<2>(&ops)?;
        check_task_queue::<3>(&ops)?;
        check_task_queue::<7>(&ops)?;
        check_task_queue::<8>(&ops)?;
    }

    #[test]
    fn array_mpmc_queue_matches_model(ops in ops()) {
        check_array_mpmc::<1>(&ops)?;
        check_array_mpmc::<2>(&ops)?;
        check_array_mpmc::<3>(&ops)?;
        check_array_mpmc::<7>(&ops)?;
        check_array_mpmc::<8>(&ops)?;
    }

    #[test]
    fn boxed_mpmc_queue_matches_model(capacity in 1_usize..=17, ops in ops()) {
        let slots: Box<[MpmcSlot<u32>]> =
            std::iter::repeat_with(MpmcSlot::new).take(capacity).collect();
        let queue = MpmcQueue::with_storage(slots).expect("non-empty storage");
        prop_assert_eq!(queue.capacity(), capacity);
        check_mpmc(&queue, &ops)?;
    }
}
