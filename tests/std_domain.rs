//! Worker domains: bounded admission, panics as typed failures, shutdown
//! policies with exact accounting, instrumentation, batches and the
//! completion-queue path.
//!
//! No test asserts on wall-clock time: jobs that must stay busy wait at a
//! [`Gate`] the test opens, and "has started" is observed through counters.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use dinah_core::{
    CancellationRequested, DomainId, TaskFailureKind, TaskOutcome, TaskQueue, TraceBuffer,
    TraceEventKind,
};
use dinah_std::{
    CompletionQueue, Domain, DomainConfig, Instrumentation, JobHandle, ShutdownPolicy,
    TrySubmitError,
};

#[path = "support/gate.rs"]
mod gate;
use gate::Gate;

/// Long enough never to expire in a passing run; only a hang would reach it.
const PATIENCE: Duration = Duration::from_secs(120);

fn nz(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

fn config(workers: usize, queue: usize) -> DomainConfig {
    DomainConfig::new(DomainId::new(1).unwrap(), nz(workers), nz(queue))
}

fn start(workers: usize, queue: usize) -> Domain {
    Domain::start(config(workers, queue), None).unwrap()
}

fn wait_for(counter: &AtomicUsize, at_least: usize) {
    while counter.load(Ordering::SeqCst) < at_least {
        thread::yield_now();
    }
}

/// Submits one job per worker that signals it runs and then waits at
/// `gate`; returns once every worker is busy.
fn occupy_workers(domain: &Domain, gate: &Arc<Gate>) -> Vec<JobHandle<(), ()>> {
    let running = Arc::new(AtomicUsize::new(0));
    let handles = (0..domain.workers())
        .map(|_| {
            let (gate, running) = (Arc::clone(gate), Arc::clone(&running));
            domain
                .try_submit(move |_| {
                    running.fetch_add(1, Ordering::SeqCst);
                    gate.wait();
                    Ok(())
                })
                .unwrap()
        })
        .collect();
    wait_for(&running, domain.workers());
    handles
}

#[test]
fn saturation_hands_jobs_back_and_loses_nothing() {
    let domain = start(1, 2);
    assert_eq!(domain.capacity(), 3);
    let gate = Arc::new(Gate::default());
    let runs: Arc<Vec<AtomicU8>> = Arc::new((0..4).map(|_| AtomicU8::new(0)).collect());
    let job = |index: usize| {
        let (gate, runs) = (Arc::clone(&gate), Arc::clone(&runs));
        move |_: &dinah_std::JobContext<'_>| {
            gate.wait();
            runs[index].fetch_add(1, Ordering::SeqCst);
            Ok::<usize, ()>(index)
        }
    };
    let admitted: Vec<_> = (0..3).map(|i| domain.try_submit(job(i)).unwrap()).collect();
    assert_eq!(domain.in_flight(), 3);

    // The fourth job comes back, unrun, inside the error.
    let refused = domain.try_submit(job(3)).unwrap_err();
    assert!(matches!(refused, TrySubmitError::Full(_)));
    assert!(refused.is_full());
    let returned = refused.into_inner();
    // A batch is refused the same way, with its tasks.
    let batch = domain.run_batch(vec![|| Ok::<_, ()>(())]).unwrap_err();
    assert_eq!(batch.into_inner().len(), 1);

    gate.open();
    for (index, handle) in admitted.into_iter().enumerate() {
        assert_eq!(handle.join(), Ok(index));
    }
    // The returned job is intact: it can be submitted again and runs once.
    let again = domain.try_submit(returned).unwrap();
    assert_eq!(again.join(), Ok(3));
    assert!(runs.iter().all(|count| count.load(Ordering::SeqCst) == 1));
    let report = domain.shutdown(ShutdownPolicy::Drain, PATIENCE).unwrap();
    assert_eq!(report.cancelled, 0);
}

#[test]
fn a_panic_becomes_a_typed_failure_and_the_domain_keeps_working() {
    let domain = start(2, 16);
    let panicking = domain
        .try_submit(|_| -> Result<(), ()> { panic!("handler exploded at step {}", 7) })
        .unwrap();
    let failure = panicking.join().unwrap_err();
    assert_eq!(failure.kind(), TaskFailureKind::Panicked);
    assert_eq!(failure.panic_message(), Some("handler exploded at step 7"));
    assert_eq!(failure.error(), None);

    let returned = domain.try_submit(|_| Err::<(), _>("no such file")).unwrap();
    assert_eq!(
        returned.join().unwrap_err().into_error(),
        Some("no such file")
    );

    // Every worker still serves jobs.
    let handles: Vec<_> = (0..16_u32)
        .map(|i| domain.try_submit(move |_| Ok::<_, ()>(i * 2)).unwrap())
        .collect();
    for (i, handle) in (0..16_u32).zip(handles) {
        assert_eq!(handle.join(), Ok(i * 2));
    }

    // In a batch, a panicking task fails alone.
    let tasks: Vec<Box<dyn FnOnce() -> Result<u32, ()> + Send>> = vec![
        Box::new(|| Ok(1)),
        Box::new(|| panic!("task two")),
        Box::new(|| Ok(3)),
    ];
    let results = domain.run_batch(tasks).unwrap();
    assert_eq!(results[0].as_ref().ok(), Some(&1));
    assert_eq!(
        results[1].as_ref().unwrap_err().panic_message(),
        Some("task two")
    );
    assert_eq!(results[2].as_ref().ok(), Some(&3));
    assert_eq!(results.failed(), 1);
    domain.shutdown(ShutdownPolicy::Drain, PATIENCE).unwrap();
}

/// An admitted job of [`submit_under_load`]: its index and handle.
type Admitted = (usize, JobHandle<usize, ()>);

/// Hammers `domain` from several threads until shutdown begins (started by
/// this function once `before_shutdown` jobs were admitted); returns every
/// admitted job's handle with its index, and the number of jobs handed
/// back.
fn submit_under_load(
    domain: &Domain,
    policy: ShutdownPolicy,
    runs: &Arc<Vec<AtomicU8>>,
    before_shutdown: usize,
) -> (Vec<Admitted>, usize) {
    let next = AtomicUsize::new(0);
    let admitted = AtomicUsize::new(0);
    let handles = Mutex::new(Vec::new());
    let refused = AtomicUsize::new(0);
    thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::SeqCst);
                    if index >= runs.len() {
                        return;
                    }
                    let runs = Arc::clone(runs);
                    let job = move |_: &dinah_std::JobContext<'_>| {
                        runs[index].fetch_add(1, Ordering::SeqCst);
                        // A little work so the queue actually fills.
                        let mut x = index as u64;
                        for _ in 0..2_000 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                        }
                        Ok::<usize, ()>(index)
                    };
                    match domain.try_submit(job) {
                        Ok(handle) => {
                            handles.lock().unwrap().push((index, handle));
                            admitted.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(TrySubmitError::Full(_)) => {
                            refused.fetch_add(1, Ordering::SeqCst);
                            thread::yield_now();
                        }
                        Err(TrySubmitError::ShuttingDown(_)) => {
                            refused.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        Err(other) => panic!("unexpected refusal {other}"),
                    }
                }
            });
        }
        wait_for(&admitted, before_shutdown);
        domain.begin_shutdown(policy);
    });
    (handles.into_inner().unwrap(), refused.into_inner())
}

#[test]
fn drain_shutdown_under_load_completes_every_admitted_job_once() {
    let domain = start(2, 32);
    let runs: Arc<Vec<AtomicU8>> = Arc::new((0..20_000).map(|_| AtomicU8::new(0)).collect());
    let (handles, _refused) = submit_under_load(&domain, ShutdownPolicy::Drain, &runs, 200);
    assert!(!domain.is_accepting());
    let report = domain.shutdown(ShutdownPolicy::Drain, PATIENCE).unwrap();
    assert_eq!(
        (report.policy, report.cancelled, report.workers_joined),
        (ShutdownPolicy::Drain, 0, 2)
    );
    let mut admitted = vec![false; runs.len()];
    for (index, handle) in handles {
        assert_eq!(handle.join(), Ok(index));
        admitted[index] = true;
    }
    for (index, count) in runs.iter().enumerate() {
        let expected = u8::from(admitted[index]);
        assert_eq!(count.load(Ordering::SeqCst), expected, "job {index}");
    }
}

#[test]
fn cancel_queued_shutdown_under_load_runs_or_reports_every_job_once() {
    let domain = start(2, 64);
    let runs: Arc<Vec<AtomicU8>> = Arc::new((0..20_000).map(|_| AtomicU8::new(0)).collect());
    let (handles, _refused) = submit_under_load(&domain, ShutdownPolicy::CancelQueued, &runs, 200);
    let report = domain
        .shutdown(ShutdownPolicy::CancelQueued, PATIENCE)
        .unwrap();
    assert_eq!(report.policy, ShutdownPolicy::CancelQueued);
    let (mut completed, mut cancelled) = (0, 0);
    let mut admitted = vec![false; runs.len()];
    for (index, handle) in handles {
        admitted[index] = true;
        match handle.join() {
            Ok(value) => {
                assert_eq!(value, index);
                assert_eq!(runs[index].load(Ordering::SeqCst), 1, "completed once");
                completed += 1;
            }
            Err(failure) => {
                assert_eq!(failure.kind(), TaskFailureKind::Cancelled);
                assert_eq!(runs[index].load(Ordering::SeqCst), 0, "never ran");
                cancelled += 1;
            }
        }
    }
    assert!(completed >= 1);
    assert_eq!(
        report.cancelled, cancelled,
        "the report counts every cancelled job"
    );
    for (index, count) in runs.iter().enumerate() {
        if !admitted[index] {
            assert_eq!(count.load(Ordering::SeqCst), 0, "refused job {index} ran");
        }
    }
}

#[test]
fn cancel_queued_reports_every_queued_job_at_once() {
    let domain = start(2, 5);
    let gate = Arc::new(Gate::default());
    let running = occupy_workers(&domain, &gate);
    let queued: Vec<_> = (0..5)
        .map(|i| domain.try_submit(move |_| Ok::<_, ()>(i)).unwrap())
        .collect();
    assert_eq!(domain.queued(), 5);
    // Workers are all busy, yet the queued jobs are reported right away.
    assert_eq!(domain.begin_shutdown(ShutdownPolicy::CancelQueued), 5);
    for handle in queued {
        assert!(handle.is_finished());
        assert_eq!(
            handle.join().unwrap_err().kind(),
            TaskFailureKind::Cancelled
        );
    }
    assert!(matches!(
        domain.try_submit(|_| Ok::<_, ()>(0)),
        Err(TrySubmitError::ShuttingDown(_))
    ));
    gate.open();
    let report = domain.shutdown(ShutdownPolicy::Drain, PATIENCE).unwrap();
    assert_eq!(report.policy, ShutdownPolicy::CancelQueued, "never relaxed");
    assert_eq!(report.cancelled, 5);
    for handle in running {
        assert_eq!(handle.join(), Ok(()));
    }
}

#[test]
fn shutdown_with_stuck_jobs_times_out_with_exact_counts() {
    let domain = start(2, 3);
    let gate = Arc::new(Gate::default());
    let stuck = occupy_workers(&domain, &gate);
    let queued: Vec<_> = (0..3)
        .map(|i| domain.try_submit(move |_| Ok::<_, ()>(i)).unwrap())
        .collect();

    let timeout = domain
        .shutdown(ShutdownPolicy::Drain, Duration::from_millis(50))
        .unwrap_err();
    assert_eq!(timeout.domain, DomainId::new(1).unwrap());
    assert_eq!(timeout.policy, ShutdownPolicy::Drain);
    assert_eq!(timeout.running, 2, "the two stuck jobs");
    assert_eq!(
        timeout.cancelled, 3,
        "the queued jobs, cancelled at the deadline"
    );
    assert_eq!((timeout.live_workers, timeout.workers), (2, 2));
    assert!(timeout.to_string().contains("2 jobs still running"));

    // Nothing was dropped: the queued jobs are reported cancelled, and the
    // stuck ones still deliver once released.
    for handle in queued {
        assert_eq!(
            handle.join().unwrap_err().kind(),
            TaskFailureKind::Cancelled
        );
    }
    gate.open();
    for handle in stuck {
        assert_eq!(handle.join(), Ok(()));
    }
}

#[test]
fn metrics_and_trace_match_the_events() {
    let trace = Arc::new(TraceBuffer::<256>::new());
    let instrumentation = Arc::new(Instrumentation::with_trace(trace.clone()));
    let domain = Domain::start(config(1, 8), Some(Arc::clone(&instrumentation))).unwrap();

    // 3 completed, 1 returned error, 1 panic.
    for i in 0..3 {
        assert_eq!(
            domain.try_submit(move |_| Ok::<_, ()>(i)).unwrap().join(),
            Ok(i)
        );
    }
    assert!(
        domain
            .try_submit(|_| Err::<(), _>(()))
            .unwrap()
            .join()
            .is_err()
    );
    assert!(
        domain
            .try_submit(|_| -> Result<(), ()> { panic!("counted") })
            .unwrap()
            .join()
            .is_err()
    );

    // A job cancelled while queued behind a busy worker: requested and
    // acknowledged, never started.
    let gate = Arc::new(Gate::default());
    let blocker = occupy_workers(&domain, &gate);
    let queued = domain.try_submit(|_| Ok::<_, ()>(())).unwrap();
    assert!(queued.cancel());
    gate.open();
    assert_eq!(
        queued.join().unwrap_err().kind(),
        TaskFailureKind::Cancelled
    );
    for handle in blocker {
        assert_eq!(handle.join(), Ok(()));
    }

    // A running job that sees a request and acknowledges it.
    let started = Arc::new(AtomicUsize::new(0));
    let acknowledging = {
        let started = Arc::clone(&started);
        domain
            .try_submit(move |ctx| {
                started.fetch_add(1, Ordering::SeqCst);
                while !ctx.is_cancellation_requested() {
                    thread::yield_now();
                }
                ctx.check()?;
                Ok::<_, CancellationRequested>(())
            })
            .unwrap()
    };
    wait_for(&started, 1);
    assert!(acknowledging.cancel());
    assert_eq!(
        acknowledging.join().unwrap_err().kind(),
        TaskFailureKind::Cancelled
    );

    // A batch of 4 tasks, one failing.
    let tasks: Vec<_> = (0..4_u32)
        .map(|i| move || if i == 2 { Err(i) } else { Ok(i) })
        .collect();
    let results = domain.run_batch(tasks).unwrap();
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1);
    assert_eq!(results.failed(), 1);

    domain.shutdown(ShutdownPolicy::Drain, PATIENCE).unwrap();

    // Jobs: 5 + 1 blocker + 1 cancelled + 1 acknowledging; batch tasks: 4.
    let snapshot = instrumentation.metrics().snapshot();
    assert_eq!(snapshot.submitted, 12);
    assert_eq!(
        snapshot.started,
        5 + 1 + 1 + 4,
        "the queued cancelled job never started"
    );
    assert_eq!(snapshot.completed, 3 + 1 + 3);
    assert_eq!(snapshot.failed, 2 + 1);
    assert_eq!(snapshot.cancellation_requested, 2);
    assert_eq!(snapshot.cancellation_acknowledged, 2);

    let events = trace.snapshot();
    let count = |kind| events.iter().filter(|event| event.kind == kind).count() as u64;
    assert_eq!(count(TraceEventKind::Submitted), snapshot.submitted);
    assert_eq!(count(TraceEventKind::Started), snapshot.started);
    assert_eq!(count(TraceEventKind::Completed), snapshot.completed);
    assert_eq!(count(TraceEventKind::Failed), snapshot.failed);
    assert_eq!(
        count(TraceEventKind::CancellationRequested),
        snapshot.cancellation_requested
    );
    assert_eq!(
        count(TraceEventKind::CancellationAcknowledged),
        snapshot.cancellation_acknowledged
    );
    assert_eq!(instrumentation.trace_rejected(), 0);
    let domain_id = DomainId::new(1).unwrap();
    assert!(events.iter().all(|event| event.domain == Some(domain_id)));
    // Worker-side events name the worker; submissions happen on this
    // thread, and so do the batch's tasks: with one worker, the caller is
    // the batch's only worker.
    let started_on = |on_worker: bool| {
        events
            .iter()
            .filter(|event| event.kind == TraceEventKind::Started)
            .filter(|event| event.worker.is_some() == on_worker)
            .count()
    };
    assert_eq!(started_on(true), 5 + 1 + 1);
    assert_eq!(started_on(false), 4);
    assert!(
        events
            .iter()
            .filter(|event| event.kind == TraceEventKind::Submitted)
            .all(|event| event.worker.is_none())
    );
}

#[test]
fn batch_results_keep_fifo_order() {
    let domain = start(2, 4);
    let weights: Vec<u64> = (0..1_000).map(|i| (i * 7919) % 97).collect();
    let data = &weights; // tasks borrow from the caller
    for round in 0..4_u64 {
        let tasks: Vec<_> = (0..weights.len())
            .map(|index| {
                move || {
                    let mut x = round;
                    for _ in 0..data[index] * 50 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    let _ = x;
                    if index % 10 == 9 {
                        Err(index)
                    } else {
                        Ok(index)
                    }
                }
            })
            .collect();
        let results = domain.run_batch(tasks).unwrap();
        assert_eq!(results.len(), weights.len());
        assert_eq!(results.failed(), weights.len() / 10);
        for (index, result) in results.into_iter().enumerate() {
            match result {
                Ok(value) => assert_eq!(value, index),
                Err(failure) => {
                    assert_eq!(index % 10, 9);
                    assert_eq!(failure.into_error(), Some(index));
                }
            }
        }
    }
    // The queue form drains a TaskQueue in FIFO order too.
    let mut queue: TaskQueue<_, 64> = TaskQueue::new();
    for n in 0..64_usize {
        assert!(queue.try_push(move || Ok::<_, ()>(n)).is_ok());
    }
    let results = domain.run_queue(&mut queue).unwrap();
    assert!(queue.is_empty());
    assert!(results.into_iter().enumerate().all(|(i, r)| r == Ok(i)));
    assert_eq!(
        domain.in_flight(),
        0,
        "a batch holds one admission, released on return"
    );
}

/// A batch heavy enough to be handed off to the workers (estimated well
/// above a millisecond) keeps its order, its errors and its panics, and
/// never runs more than `workers` tasks at once.
#[test]
fn a_heavy_batch_keeps_order_errors_and_panics() {
    let domain = start(2, 4);
    let active = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    let tasks: Vec<_> = (0..40_usize)
        .map(|index| {
            let (active, most) = (&active, &most);
            move || {
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                thread::sleep(Duration::from_micros(100));
                active.fetch_sub(1, Ordering::SeqCst);
                match index {
                    17 => panic!("task 17 panics"),
                    23 => Err(index),
                    _ => Ok(index),
                }
            }
        })
        .collect();
    let results = domain.run_batch(tasks).unwrap();
    assert_eq!(results.len(), 40);
    assert_eq!(results.failed(), 2);
    for (index, result) in results.into_iter().enumerate() {
        match (index, result) {
            (17, Err(failure)) => {
                assert_eq!(failure.kind(), TaskFailureKind::Panicked);
                assert_eq!(failure.panic_message(), Some("task 17 panics"));
            }
            (23, Err(failure)) => assert_eq!(failure.into_error(), Some(23)),
            (_, Ok(value)) => assert_eq!(value, index),
            (_, Err(failure)) => panic!("task {index} failed: {failure}"),
        }
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 2, "{most} tasks at once on 2 workers");
    assert_eq!(domain.in_flight(), 0);
    // The domain keeps working.
    let again = domain.run_batch(vec![|| Ok::<_, ()>(5)]).unwrap();
    assert_eq!(again.into_iter().next().map(Result::ok), Some(Some(5)));
}

/// Wakes a parked owner thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

#[test]
fn completions_reach_the_owner_thread_with_their_keys() {
    let domain = start(2, 14);
    let capacity = nz(domain.capacity());
    let completions = Arc::new(CompletionQueue::<u64, u64, String>::new(capacity));
    completions.register_waker(&Waker::from(Arc::new(Unpark(thread::current()))));

    let total = 200_u64;
    let mut submitted = 0;
    let mut received = vec![false; total as usize];
    let mut outstanding = 0;
    while submitted < total || outstanding > 0 {
        while submitted < total {
            let key = submitted;
            match domain.try_submit_to(&completions, key, move |_| {
                if key % 13 == 0 {
                    Err(format!("key {key}"))
                } else {
                    Ok(key * 3)
                }
            }) {
                Ok(_) => {
                    submitted += 1;
                    outstanding += 1;
                }
                Err(error) if error.is_full() => break,
                Err(error) => panic!("unexpected refusal {error}"),
            }
        }
        match completions.pop() {
            Some(completion) => {
                outstanding -= 1;
                let key = completion.key;
                assert!(
                    !std::mem::replace(&mut received[key as usize], true),
                    "once"
                );
                match completion.outcome {
                    TaskOutcome::Completed(value) => assert_eq!(value, key * 3),
                    TaskOutcome::Failed(failure) => {
                        assert_eq!(failure.into_error(), Some(format!("key {key}")));
                    }
                }
            }
            // Woken by the waker after each push (or spuriously).
            None => thread::park_timeout(Duration::from_millis(10)),
        }
    }
    assert!(received.iter().all(|&r| r));
    assert_eq!((completions.len(), completions.reserved()), (0, 0));
    domain.shutdown(ShutdownPolicy::Drain, PATIENCE).unwrap();
}

#[test]
fn shutdown_cancels_queued_completion_jobs_through_the_queue() {
    let domain = start(1, 4);
    let gate = Arc::new(Gate::default());
    let running = occupy_workers(&domain, &gate);
    let completions = Arc::new(CompletionQueue::<u8, u8, ()>::new(nz(8)));
    let ran = Arc::new(AtomicBool::new(false));
    for key in 0..3 {
        let ran = Arc::clone(&ran);
        domain
            .try_submit_to(&completions, key, move |_| {
                ran.store(true, Ordering::SeqCst);
                Ok(key)
            })
            .unwrap();
    }
    assert_eq!(domain.begin_shutdown(ShutdownPolicy::CancelQueued), 3);
    let keys: Vec<_> = std::iter::from_fn(|| completions.pop())
        .map(|completion| {
            assert_eq!(
                completion.outcome.failure().map(|f| f.kind()),
                Some(TaskFailureKind::Cancelled)
            );
            completion.key
        })
        .collect();
    assert_eq!(keys, [0, 1, 2], "reported in admission order");
    assert!(!ran.load(Ordering::SeqCst));
    gate.open();
    domain
        .shutdown(ShutdownPolicy::CancelQueued, PATIENCE)
        .unwrap();
    for handle in running {
        assert_eq!(handle.join(), Ok(()));
    }
}

#[test]
fn public_handles_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Domain>();
    send_sync::<dinah_std::JobCanceller>();
    send_sync::<CompletionQueue<u64, String, String>>();
    send_sync::<Instrumentation>();
    send::<JobHandle<String, String>>();
    send::<dinah_std::JoinTimeoutError<String, String>>();
    send_sync::<TrySubmitError<fn()>>();
    send_sync::<dinah_std::DomainShutdownTimeout>();
}

#[test]
fn a_cancelling_shutdown_skips_the_batch_tasks_not_started() {
    cancelling_shutdown_skips_batch_tasks(None);
}

#[test]
fn an_instrumented_batch_reports_the_tasks_a_cancelling_shutdown_skipped() {
    let instrumentation = Arc::new(Instrumentation::with_trace(Arc::new(
        TraceBuffer::<256>::new(),
    )));
    cancelling_shutdown_skips_batch_tasks(Some(Arc::clone(&instrumentation)));
    let snapshot = instrumentation.metrics().snapshot();
    assert_eq!(snapshot.submitted, 64);
    assert_eq!(snapshot.started, 1, "only the first task started");
    assert_eq!(snapshot.completed, 1);
    assert_eq!(snapshot.failed, 0);
    // Each skipped task finished cancelled: a request, acknowledged.
    assert_eq!(snapshot.cancellation_requested, 63);
    assert_eq!(snapshot.cancellation_acknowledged, 63);
}

fn cancelling_shutdown_skips_batch_tasks(instrumentation: Option<Arc<Instrumentation>>) {
    const TASKS: usize = 64;
    // One worker: Rayon runs the batch's first task first, then the rest
    // in order on the same thread.
    let domain = Domain::start(config(1, 4), instrumentation).unwrap();
    let gate = Gate::default();
    let started = AtomicUsize::new(0);
    let ran_later = AtomicUsize::new(0);
    thread::scope(|scope| {
        let (domain, gate, started, ran_later) = (&domain, &gate, &started, &ran_later);
        let batch = scope.spawn(move || {
            let tasks: Vec<Box<dyn FnOnce() -> Result<usize, ()> + Send + '_>> = (0..TASKS)
                .map(
                    |index| -> Box<dyn FnOnce() -> Result<usize, ()> + Send + '_> {
                        if index == 0 {
                            Box::new(|| {
                                started.fetch_add(1, Ordering::SeqCst);
                                gate.wait();
                                Ok(0)
                            })
                        } else {
                            Box::new(move || {
                                ran_later.fetch_add(1, Ordering::SeqCst);
                                Ok(index)
                            })
                        }
                    },
                )
                .collect();
            domain.run_batch(tasks).unwrap()
        });
        wait_for(started, 1);
        // The batch is no queued job: nothing to take from the queue.
        assert_eq!(domain.begin_shutdown(ShutdownPolicy::CancelQueued), 0);
        gate.open();
        let results = batch.join().unwrap();
        assert_eq!(results.len(), TASKS);
        assert_eq!(results[0].as_ref().ok(), Some(&0));
        assert_eq!(results.failed(), TASKS - 1);
        assert!(results[1..].iter().all(|result| {
            result
                .as_ref()
                .is_err_and(|f| f.kind() == TaskFailureKind::Cancelled)
        }));
        // Handed out by value, the failures are whole `TaskFailure`s.
        let owned = results.into_vec();
        assert_eq!(
            owned[TASKS - 1].as_ref().map_err(|f| f.kind()),
            Err(TaskFailureKind::Cancelled)
        );
    });
    assert_eq!(ran_later.load(Ordering::SeqCst), 0, "no task started late");
    let report = domain
        .shutdown(ShutdownPolicy::CancelQueued, PATIENCE)
        .unwrap();
    assert_eq!(report.cancelled, TASKS - 1);
}

#[test]
fn a_job_behind_a_blocked_one_runs_on_a_free_worker() {
    // The first job has started (so the queue is empty again) and blocks
    // until the second one has run: the second must get the other worker,
    // not wait for the first job's worker.
    let domain = start(2, 4);
    let first_started = Arc::new(AtomicUsize::new(0));
    let second_ran = Arc::new(Gate::default());
    let first = {
        let (started, second_ran) = (Arc::clone(&first_started), Arc::clone(&second_ran));
        domain
            .try_submit(move |_| {
                started.fetch_add(1, Ordering::SeqCst);
                second_ran.wait();
                Ok::<_, ()>(1)
            })
            .unwrap()
    };
    wait_for(&first_started, 1);
    let second = {
        let second_ran = Arc::clone(&second_ran);
        domain
            .try_submit(move |_| {
                second_ran.open();
                Ok::<_, ()>(2)
            })
            .unwrap()
    };
    // A backstop, not a timing check: without a free worker the second job
    // would never run, and the first would wait for it forever.
    let second = second
        .join_timeout(PATIENCE)
        .unwrap_or_else(|_| panic!("the second job never got the free worker"));
    assert_eq!(second, Ok(2));
    assert_eq!(first.join(), Ok(1));
    domain.shutdown(ShutdownPolicy::Drain, PATIENCE).unwrap();
}
