//! Concurrent determinism coverage (v0.1 point 089).
//!
//! Concurrency makes completion order unpredictable; these tests pin down
//! what must not vary: the FIFO-indexed result vector of
//! `Scheduler::run_parallel` for every worker limit, exact totals of
//! concurrent `Shared<T>` updates and metric counters, the capacity and
//! draining behaviour of `TraceBuffer` under concurrent producers, and the
//! `TaskQueue`, `TaskFailure`, cancellation and task-state contracts when
//! repeated. No test measures time or asserts an order between events of
//! different threads.

use std::collections::HashMap;

use dinah_core::{
    InvalidTaskTransition, MetricsSnapshot, QueuePushError, RuntimeMetrics, TaskFailure,
    TaskFailureKind, TaskId, TaskQueue, TaskState, TraceBuffer, TraceEvent, TraceEventKind,
};
use dinah_std::{CancellationToken, Scheduler, Shared, SynchronizationError};

const REPETITIONS: usize = 16;
const LIMITS: [usize; 5] = [1, 2, 3, 7, 64];

type Task<'a> = Box<dyn FnOnce() -> Result<u64, String> + Send + 'a>;

/// Deterministic work of a different length for every task.
fn mix(index: u64) -> u64 {
    (0..(index % 9 + 1) * 1_000).fold(index, |acc, step| {
        (acc ^ step)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(17)
    })
}

fn outcome(index: u64) -> Result<u64, String> {
    if index % 5 == 2 {
        Err(format!("task {index} rejected its input"))
    } else {
        Ok(mix(index))
    }
}

fn task<'a>(index: u64) -> Task<'a> {
    Box::new(move || outcome(index))
}

fn push<T, const N: usize>(queue: &mut TaskQueue<T, N>, item: T) {
    assert!(
        queue.try_push(item).is_ok(),
        "the test queue is large enough"
    );
}

#[test]
fn parallel_results_are_identical_for_every_limit_and_repetition() {
    let scheduler = Scheduler::new();
    let mut reference_queue: TaskQueue<Task<'_>, 64> = TaskQueue::new();
    (0..64).for_each(|index| push(&mut reference_queue, task(index)));
    let reference = scheduler.run_until_empty(&mut reference_queue);
    assert_eq!(
        reference.iter().filter(|result| result.is_err()).count(),
        13
    );

    for limit in LIMITS {
        for repetition in 0..REPETITIONS {
            let mut queue: TaskQueue<Task<'_>, 64> = TaskQueue::new();
            (0..64).for_each(|index| push(&mut queue, task(index)));
            let results = scheduler.run_parallel(&mut queue, limit);
            assert_eq!(
                results.as_ref(),
                Ok(&reference),
                "limit {limit}, repetition {repetition}"
            );
            assert!(queue.is_empty());
        }
    }
}

#[test]
fn concurrent_shared_updates_have_an_exact_total_and_release_their_clones()
-> Result<(), SynchronizationError> {
    for limit in LIMITS {
        for _ in 0..REPETITIONS {
            let total = Shared::new(0_u64);
            let seen = Shared::new(Vec::new());
            let mut queue: TaskQueue<Task<'_>, 64> = TaskQueue::new();
            for index in 0..64 {
                let (total, seen) = (total.clone(), seen.clone());
                push(
                    &mut queue,
                    Box::new(move || {
                        *total.lock().map_err(|error| error.to_string())? += index;
                        seen.lock().map_err(|error| error.to_string())?.push(index);
                        Ok(index)
                    }),
                );
            }
            assert_eq!(total.strong_count(), 65);
            let results = Scheduler::new().run_parallel(&mut queue, limit);
            assert_eq!(results, Ok((0..64).map(Ok).collect()));
            assert_eq!(*total.lock()?, 64 * 63 / 2);
            assert_eq!(total.strong_count(), 1, "every task dropped its clone");
            let mut seen = seen.lock()?.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..64).collect::<Vec<_>>());
        }
    }
    Ok(())
}

#[test]
fn concurrent_metric_totals_are_exact() {
    for limit in LIMITS {
        let metrics = RuntimeMetrics::new();
        let mut queue: TaskQueue<Task<'_>, 64> = TaskQueue::new();
        for index in 0..64 {
            metrics.record_submitted();
            let metrics = &metrics;
            push(
                &mut queue,
                Box::new(move || {
                    metrics.record_started();
                    let result = outcome(index);
                    if result.is_ok() {
                        metrics.record_completed();
                    } else {
                        metrics.record_failed();
                    }
                    result
                }),
            );
        }
        let results = Scheduler::new()
            .run_parallel(&mut queue, limit)
            .expect("non-zero limit");
        let failed = results.iter().filter(|result| result.is_err()).count() as u64;
        let snapshot = metrics.snapshot();
        assert_eq!(
            snapshot,
            MetricsSnapshot {
                submitted: 64,
                started: 64,
                completed: 64 - failed,
                failed,
                ..MetricsSnapshot::default()
            },
            "limit {limit}: only the recorded counters moved"
        );
    }
}

#[test]
fn trace_buffer_keeps_capacity_and_per_producer_order_under_concurrent_producers() {
    const PRODUCERS: u64 = 4;
    const EVENTS: u64 = 32;
    let trace: TraceBuffer<64> = TraceBuffer::new();
    for _ in 0..REPETITIONS {
        let mut queue: TaskQueue<Task<'_>, 4> = TaskQueue::new();
        for producer in 0..PRODUCERS {
            let trace = &trace;
            push(
                &mut queue,
                Box::new(move || {
                    let mut rejected = 0;
                    for event in 0..EVENTS {
                        let id = TaskId::new(producer * EVENTS + event + 1)
                            .map_err(|error| error.to_string())?;
                        let event = TraceEvent::task(TraceEventKind::Started, id);
                        if let Err(full) = trace.record(event) {
                            assert_eq!(full.into_inner(), event, "the rejected event comes back");
                            rejected += 1;
                        }
                    }
                    Ok(rejected)
                }),
            );
        }
        let results = Scheduler::new()
            .run_parallel(&mut queue, PRODUCERS as usize)
            .expect("four workers");
        let rejected: u64 = results.into_iter().map(|result| result.unwrap_or(0)).sum();
        assert_eq!(
            rejected,
            PRODUCERS * EVENTS - 64,
            "exactly the overflow was rejected"
        );
        assert!(trace.is_full());
        assert_eq!(trace.len(), trace.capacity());

        // Each producer's events keep their recording order.
        let snapshot = trace.snapshot();
        let mut last: HashMap<u64, u64> = HashMap::new();
        for event in &snapshot {
            let dinah_core::TraceSubject::Task(id) = event.subject else {
                panic!("only task events were recorded");
            };
            let (producer, sequence) = ((id.get() - 1) / EVENTS, (id.get() - 1) % EVENTS);
            if let Some(previous) = last.insert(producer, sequence) {
                assert!(previous < sequence, "producer {producer} out of order");
            }
        }
        assert_eq!(
            trace.drain(),
            snapshot,
            "draining returns what was recorded"
        );
        assert!(trace.is_empty());
        assert!(
            trace
                .record(TraceEvent::task(TraceEventKind::Completed, TaskId::MIN))
                .is_ok()
        );
        trace.clear();
        assert!(
            trace.is_empty(),
            "cleared and ready for the next repetition"
        );
    }
}

#[test]
fn task_queue_rejects_without_mutation_and_is_reusable() {
    let mut queue: TaskQueue<u32, 3> = TaskQueue::new();
    for value in [10, 20, 30] {
        push(&mut queue, value);
    }
    assert_eq!(queue.try_push(40), Err(QueuePushError::Full(40)));
    assert_eq!(
        queue.try_push(40).map_err(QueuePushError::into_inner),
        Err(40)
    );
    assert_eq!(
        queue.iter().copied().collect::<Vec<_>>(),
        [10, 20, 30],
        "a rejection changes nothing"
    );
    assert_eq!(queue.pop(), Some(10));
    push(&mut queue, 40);
    assert_eq!(
        std::iter::from_fn(|| queue.pop()).collect::<Vec<_>>(),
        [20, 30, 40]
    );
    push(&mut queue, 50);
    assert_eq!(
        (queue.len(), queue.pop(), queue.is_empty()),
        (1, Some(50), true)
    );
}

#[test]
fn task_failure_keeps_the_returned_error_classification() {
    #[derive(Debug, PartialEq)]
    struct DiskFull(u32);

    let failure = TaskFailure::returned(DiskFull(7));
    assert_eq!(failure.kind(), TaskFailureKind::ReturnedError);
    assert_eq!(failure.error(), Some(&DiskFull(7)));
    let mapped = failure.map_error(|DiskFull(code)| format!("disk {code} full"));
    assert_eq!(
        mapped.kind(),
        TaskFailureKind::ReturnedError,
        "mapping keeps the classification"
    );
    assert_eq!(mapped.into_error(), Some(String::from("disk 7 full")));
}

#[test]
fn repeated_contract_checks_give_the_same_answers() {
    for _ in 0..REPETITIONS {
        // Cancellation: idempotent across clones.
        let token = CancellationToken::new();
        let clone = token.clone();
        assert!(clone.request_cancellation());
        assert!(!token.request_cancellation());
        assert!(token.is_cancellation_requested() && clone.is_cancellation_requested());

        // Task states: every rejected transition names the same pair and
        // leaves the state as it was.
        for from in TaskState::ALL {
            for to in TaskState::ALL {
                let mut state = from;
                match state.transition(to) {
                    Ok(()) => assert!(from.can_transition_to(to) && state == to),
                    Err(error) => {
                        assert_eq!(error, InvalidTaskTransition { from, to });
                        assert_eq!(state, from);
                    }
                }
            }
        }

        // Metrics: each counter moves alone.
        let metrics = RuntimeMetrics::new();
        metrics.record_cancellation_requested();
        metrics.record_cancellation_requested();
        metrics.record_cancellation_acknowledged();
        let snapshot = metrics.snapshot();
        assert_eq!(
            (
                snapshot.cancellation_requested,
                snapshot.cancellation_acknowledged
            ),
            (2, 1)
        );
        assert_eq!(
            (snapshot.submitted, snapshot.completed, snapshot.failed),
            (0, 0, 0)
        );

        // Trace buffer: FIFO snapshot, full-buffer rejection, drain, reuse.
        let trace: TraceBuffer<3> = TraceBuffer::new();
        let events: Vec<TraceEvent> = (1..=4)
            .map(|id| TaskId::new(id).map(|id| TraceEvent::task(TraceEventKind::Submitted, id)))
            .collect::<Result<_, _>>()
            .expect("non-zero ids");
        for event in &events[..3] {
            assert!(trace.record(*event).is_ok());
        }
        assert_eq!(
            trace.record(events[3]).map_err(|full| full.into_inner()),
            Err(events[3])
        );
        assert_eq!(trace.snapshot().as_slice(), &events[..3]);
        assert_eq!(trace.drain().as_slice(), &events[..3]);
        assert!(trace.record(events[3]).is_ok());
        assert_eq!(trace.snapshot().as_slice(), &events[3..]);
    }
}
