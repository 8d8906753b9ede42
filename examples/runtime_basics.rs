//! The explicit local primitives in one tour: a bounded queue that hands a
//! rejected task back, a sequential drain, a parallel drain with results in
//! FIFO order, a cancellation token shared by clones, and opt-in metrics and
//! tracing.
//!
//! Run with `cargo run --example runtime_basics`.
#![expect(
    clippy::print_stdout,
    reason = "an example prints what it demonstrates"
)]

use std::error::Error;

use dinah::core::{RuntimeMetrics, TaskId, TaskQueue, TraceBuffer, TraceEvent, TraceEventKind};
use dinah::std::{CancellationToken, Scheduler, Shared};

type Task<'a> = Box<dyn FnOnce() -> Result<u64, String> + Send + 'a>;

fn main() -> Result<(), Box<dyn Error>> {
    let scheduler = Scheduler::new();
    let metrics = RuntimeMetrics::new();
    let trace: TraceBuffer<32> = TraceBuffer::new();

    // 1. A bounded queue: the fifth task does not fit and comes back.
    let mut queue: TaskQueue<Task<'_>, 4> = TaskQueue::new();
    for n in 1..=5_u64 {
        let task: Task<'_> = Box::new(move || {
            if n == 3 {
                Err(format!("task {n} failed"))
            } else {
                Ok(n * n)
            }
        });
        if let Err(full) = queue.try_push(task) {
            // Nothing is lost: the rejected task comes back and can still run.
            let result = scheduler.schedule(full.into_inner());
            println!(
                "queue full ({} of {}): task {n} handed back, run directly: {result:?}",
                queue.len(),
                queue.capacity()
            );
        }
    }

    // 2. Sequential drain on this thread: FIFO results, errors kept in place.
    let results = scheduler.run_until_empty(&mut queue);
    println!("sequential results: {results:?}");

    // 3. Parallel drain: results stay in FIFO order; the side effects happen
    //    in whatever order the workers finish, so sort them to print. These
    //    tasks record metrics and trace events; nothing records by itself.
    let finished = Shared::new(Vec::new());
    let mut queue: TaskQueue<Task<'_>, 8> = TaskQueue::new();
    for n in 1..=8_u64 {
        let (finished, metrics, trace) = (finished.clone(), &metrics, &trace);
        let task: Task<'_> = Box::new(move || {
            let id = TaskId::new(n).map_err(|error| error.to_string())?;
            metrics.record_started();
            trace
                .record(TraceEvent::task(TraceEventKind::Started, id))
                .ok();
            let value = (1..=n * 1_000).sum::<u64>();
            finished.lock().map_err(|error| error.to_string())?.push(n);
            metrics.record_completed();
            trace
                .record(TraceEvent::task(TraceEventKind::Completed, id))
                .ok();
            Ok(value)
        });
        if queue.try_push(task).is_ok() {
            metrics.record_submitted();
        }
    }
    let results = scheduler.run_parallel(&mut queue, 3)?;
    let mut side_effects = finished.lock()?.clone();
    side_effects.sort_unstable();
    println!("parallel results (FIFO): {results:?}");
    println!("tasks that finished (sorted): {side_effects:?}");

    // 4. Cooperative cancellation: a clone sees the request.
    let token = CancellationToken::new();
    let observer = token.clone();
    let first = token.request_cancellation();
    metrics.record_cancellation_requested();
    println!(
        "cancellation: first request {first}, clone observes it: {}, second request {}",
        observer.is_cancellation_requested(),
        observer.request_cancellation()
    );

    // 5. Opt-in metrics and trace: nothing above was recorded automatically.
    println!("metrics: {}", metrics.snapshot());
    let events = trace.snapshot();
    let completed = events
        .iter()
        .filter(|event| event.kind == TraceEventKind::Completed)
        .count();
    println!(
        "trace: {} events recorded ({completed} completions), capacity {}",
        events.len(),
        trace.capacity()
    );
    Ok(())
}
