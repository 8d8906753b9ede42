//! The no_std core's primitives on their own: a bounded queue that fills up
//! and hands items back, a task walking its lifecycle (and a transition the
//! state machine refuses), a cancellation request seen through another
//! token, and the metrics and trace that recorded it all.
//!
//! Nothing here allocates: every container is sized by a const generic.
//!
//! ```sh
//! cargo run --example core_basics
//! ```
#![expect(clippy::print_stdout, reason = "an example reports what it does")]

use dinah::core::{
    CancelFlag, QueuePushError, RuntimeMetrics, TaskId, TaskQueue, TaskState, TraceBuffer,
    TraceEvent, TraceEventKind,
};

/// Statics work: every core container has a `const fn new`.
static METRICS: RuntimeMetrics = RuntimeMetrics::new();
static TRACE: TraceBuffer<16> = TraceBuffer::new();
static CANCEL: CancelFlag = CancelFlag::new();

fn record(kind: TraceEventKind, id: TaskId) {
    if let Err(full) = TRACE.record(TraceEvent::task(kind, id)) {
        println!(
            "trace full, event handed back: {:?}",
            full.into_inner().kind
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. A bounded FIFO of three task IDs: the fourth push is refused and
    //    the item comes back inside the error.
    let mut queue: TaskQueue<TaskId, 3> = TaskQueue::new();
    for n in 1..=4 {
        let id = TaskId::new(n)?;
        match queue.try_push(id) {
            Ok(()) => {
                METRICS.record_submitted();
                record(TraceEventKind::Submitted, id);
                println!("queued {id} ({}/{})", queue.len(), queue.capacity());
            }
            Err(QueuePushError::Full(rejected)) => {
                println!("queue full: {rejected} handed back, nothing lost")
            }
        }
    }

    // 2. The first task walks its lifecycle; a terminal state refuses to
    //    move, and the refusal names both ends.
    let first = queue.pop().expect("three tasks are queued");
    let mut state = TaskState::Pending;
    state.transition(TaskState::Running)?;
    METRICS.record_started();
    record(TraceEventKind::Started, first);
    state.transition(TaskState::Completed)?;
    METRICS.record_completed();
    record(TraceEventKind::Completed, first);
    match state.transition(TaskState::Running) {
        Err(refused) => println!("{first}: {refused}; state stays {state}"),
        Ok(()) => unreachable!("a completed task never runs again"),
    }

    // 3. Cooperative cancellation: a token requests it, another observes
    //    it; only the first request reports `true`.
    let second = queue.pop().expect("two tasks are left");
    let requester = CANCEL.token();
    let worker_view = CANCEL.token();
    let first_request = requester.request_cancellation();
    let second_request = requester.request_cancellation();
    METRICS.record_cancellation_requested();
    record(TraceEventKind::CancellationRequested, second);
    println!(
        "{second}: cancellation requested (first call {first_request}, second call {second_request}), \
         seen by the worker: {}",
        worker_view.is_cancellation_requested()
    );
    let mut state = TaskState::Pending;
    state.transition(TaskState::Cancelled)?;
    METRICS.record_cancellation_acknowledged();
    record(TraceEventKind::CancellationAcknowledged, second);

    // 4. What the metrics and the trace saw.
    println!("metrics: {}", METRICS.snapshot());
    let events = TRACE.snapshot();
    println!("trace ({} of {} events):", events.len(), TRACE.capacity());
    for event in &events {
        println!("  {:?} {:?}", event.kind, event.subject);
    }
    println!("still queued: {}", queue.len());
    Ok(())
}
