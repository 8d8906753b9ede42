//! The bounded queue, the task and runtime state machines, the metrics
//! counters (64-bit atomics through the critical section) and the trace
//! buffer at its capacity.

use dinah_core::{
    MetricsSnapshot, QueuePushError, RuntimeMetrics, RuntimeState, TaskId, TaskQueue, TaskState,
    TraceBuffer, TraceEvent, TraceEventKind,
};

use crate::report::check;

pub fn run() {
    queue();
    task_states();
    runtime_states();
    metrics();
    trace();
}

fn queue() {
    let mut queue: TaskQueue<u32, 8> = TaskQueue::new();
    let filled = (0..8).all(|n| queue.try_push(n).is_ok());
    check(
        "task queue: fills to its capacity of 8",
        filled && queue.is_full(),
    );
    let refused = queue.try_push(99);
    check(
        "task queue: a full queue hands the item back",
        matches!(refused, Err(QueuePushError::Full(99))),
    );
    let drained = (0..8).all(|n| queue.pop() == Some(n));
    check(
        "task queue: drains in order and ends empty",
        drained && queue.pop().is_none() && queue.is_empty(),
    );
}

fn task_states() {
    let mut state = TaskState::Pending;
    let forward = state.transition(TaskState::Running).is_ok()
        && state.transition(TaskState::Completed).is_ok()
        && state.is_terminal();
    check("task state: pending, running, completed", forward);
    check(
        "task state: a completed task cannot run again",
        state.transition(TaskState::Running).is_err() && state == TaskState::Completed,
    );
    let mut cancelled = TaskState::Pending;
    check(
        "task state: a pending task can be cancelled",
        cancelled.transition(TaskState::Cancelled).is_ok() && cancelled.is_terminal(),
    );
}

fn runtime_states() {
    let mut state = RuntimeState::Created;
    let forward = [
        RuntimeState::Bootstrapping,
        RuntimeState::Running,
        RuntimeState::Draining,
        RuntimeState::Stopped,
    ]
    .into_iter()
    .all(|next| state.transition(next).is_ok());
    check(
        "runtime state: created to stopped, then terminal",
        forward && state.is_terminal() && !state.accepts_work(),
    );
    let mut created = RuntimeState::Created;
    check(
        "runtime state: no jump from created to draining",
        created.transition(RuntimeState::Draining).is_err(),
    );
}

fn metrics() {
    static METRICS: RuntimeMetrics = RuntimeMetrics::new();
    for _ in 0..3 {
        METRICS.record_submitted();
    }
    METRICS.record_completed();
    METRICS.record_bytes_sent(5_000_000_000);
    let snapshot: MetricsSnapshot = METRICS.snapshot();
    check(
        "metrics: counters and a 64-bit byte count",
        snapshot.submitted == 3 && snapshot.completed == 1 && snapshot.bytes_sent == 5_000_000_000,
    );
}

fn trace() {
    static TRACE: TraceBuffer<4> = TraceBuffer::new();
    let event = |n| TraceEvent::task(TraceEventKind::Started, TaskId::new(n).expect("non-zero"));
    let recorded = (1..=4).all(|n| TRACE.record(event(n)).is_ok());
    check(
        "trace: records up to its capacity of 4",
        recorded && TRACE.is_full(),
    );
    let refused = TRACE.record(event(5));
    check(
        "trace: a full buffer hands the event back",
        refused.is_err_and(|full| full.into_inner() == event(5)),
    );
    let drained = TRACE.drain();
    check(
        "trace: drains in order",
        drained.len() == 4 && drained.first() == Some(&event(1)) && TRACE.is_empty(),
    );
}
