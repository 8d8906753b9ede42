//! Unit tests of the domain internals; the public contract is tested in
//! the root `tests/std_domain.rs`.

use super::*;
use dinah_core::TaskOutcome;
use std::num::NonZeroUsize;
use std::sync::atomic::AtomicBool;
use std::sync::{Condvar, Mutex};
use std::thread;
use std::time::Duration;

/// A Rayon pool of `threads` threads, for tests of the pieces that run on
/// a domain's pool without a domain.
pub(super) fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a pool starts")
}

/// A gate jobs wait at until the test opens it.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

fn domain(workers: usize, queue: usize) -> Domain {
    let config = DomainConfig::new(
        DomainId::MIN,
        NonZeroUsize::new(workers).unwrap(),
        NonZeroUsize::new(queue).unwrap(),
    );
    Domain::start(config, None).unwrap()
}

/// Occupies every worker of `domain` until `gate` opens; returns once they
/// all run.
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
    while running.load(Ordering::SeqCst) < domain.workers() {
        thread::yield_now();
    }
    handles
}

#[test]
fn start_reports_its_shape() {
    let domain = domain(2, 5);
    assert_eq!(
        (domain.id(), domain.workers(), domain.capacity()),
        (DomainId::MIN, 2, 7)
    );
    assert!(domain.is_accepting());
    assert_eq!((domain.in_flight(), domain.queued()), (0, 0));
    assert!(domain.instrumentation().is_none());
    assert!(format!("{domain:?}").contains("capacity: 7"));
}

#[test]
fn capacity_overflow_is_a_start_error() {
    let config = DomainConfig::new(
        DomainId::MIN,
        NonZeroUsize::new(2).unwrap(),
        NonZeroUsize::new(usize::MAX).unwrap(),
    );
    assert!(matches!(
        Domain::start(config, None),
        Err(DomainStartError::CapacityOverflow)
    ));
}

#[test]
fn worker_ids_count_from_the_configured_first() {
    let first = dinah_core::WorkerId::new(10).unwrap();
    let config = DomainConfig::new(DomainId::MIN, NonZeroUsize::MIN, NonZeroUsize::MIN)
        .with_first_worker(first);
    let domain = Domain::start(config, None).unwrap();
    let seen = domain
        .try_submit(|ctx| Ok::<_, ()>((ctx.worker_id(), ctx.worker_index())))
        .unwrap()
        .join();
    assert_eq!(seen, Ok((Some(first), Some(0))));
    // The submitting thread is no worker.
    assert_eq!(super::worker::current(), None);
}

#[test]
fn worker_ids_past_the_largest_are_a_start_error() {
    let config = DomainConfig::new(
        DomainId::MIN,
        NonZeroUsize::new(2).unwrap(),
        NonZeroUsize::MIN,
    )
    .with_first_worker(dinah_core::WorkerId::MAX);
    assert!(matches!(
        Domain::start(config, None),
        Err(DomainStartError::WorkerIdOverflow)
    ));
}

#[test]
fn workers_get_the_configured_names() {
    let config =
        DomainConfig::new(DomainId::MIN, NonZeroUsize::MIN, NonZeroUsize::MIN).with_name("named");
    let domain = Domain::start(config, None).unwrap();
    let name = domain
        .try_submit(|_| Ok::<_, ()>(thread::current().name().map(str::to_owned)))
        .unwrap()
        .join();
    assert_eq!(name, Ok(Some("named-0".to_owned())));
}

#[test]
fn task_ids_are_fresh_and_seen_by_the_job() {
    let domain = domain(1, 4);
    let first = domain.try_submit(|ctx| Ok::<_, ()>(ctx.task_id())).unwrap();
    let second = domain.try_submit(|ctx| Ok::<_, ()>(ctx.task_id())).unwrap();
    let (a, b) = (first.task_id(), second.task_id());
    assert_ne!(a, b);
    assert_eq!(first.join(), Ok(a));
    assert_eq!(second.join(), Ok(b));
}

#[test]
fn context_names_the_domain_and_worker() {
    let domain = domain(1, 1);
    let seen = domain
        .try_submit(|ctx| Ok::<_, ()>((ctx.domain_id(), ctx.worker_index())))
        .unwrap()
        .join();
    assert_eq!(seen, Ok((DomainId::MIN, Some(0))));
}

#[test]
fn a_job_cancelled_before_it_starts_never_runs() {
    let domain = domain(1, 2);
    let gate = Arc::new(Gate::default());
    let blockers = occupy_workers(&domain, &gate);
    let ran = Arc::new(AtomicBool::new(false));
    let queued = {
        let ran = Arc::clone(&ran);
        domain
            .try_submit(move |_| {
                ran.store(true, Ordering::SeqCst);
                Ok::<_, ()>(())
            })
            .unwrap()
    };
    assert!(queued.cancel());
    gate.open();
    let failure = queued.join().unwrap_err();
    assert_eq!(failure.kind(), dinah_core::TaskFailureKind::Cancelled);
    assert!(!ran.load(Ordering::SeqCst));
    for blocker in blockers {
        assert_eq!(blocker.join(), Ok(()));
    }
}

#[test]
fn dropping_a_domain_cancels_queued_jobs_and_detaches_running_ones() {
    let domain = domain(1, 2);
    let gate = Arc::new(Gate::default());
    let blockers = occupy_workers(&domain, &gate);
    let queued = domain.try_submit(|_| Ok::<_, ()>(7)).unwrap();
    drop(domain);
    assert_eq!(
        queued.join().unwrap_err().kind(),
        dinah_core::TaskFailureKind::Cancelled
    );
    gate.open();
    for blocker in blockers {
        assert_eq!(blocker.join(), Ok(()), "the running job still delivers");
    }
}

#[test]
fn completion_queue_refusal_releases_the_admission() {
    let domain = domain(1, 3);
    let completions = Arc::new(CompletionQueue::<u32, u32, ()>::new(NonZeroUsize::MIN));
    domain.try_submit_to(&completions, 1, |_| Ok(10)).unwrap();
    let refused = domain
        .try_submit_to(&completions, 2, |_| Ok(20))
        .unwrap_err();
    assert!(matches!(refused, TrySubmitError::CompletionsFull(_)));
    assert_eq!(refused.into_inner().0, 2);
    // Wait for the first completion; the refused job holds nothing.
    let first = loop {
        if let Some(completion) = completions.pop() {
            break completion;
        }
        thread::yield_now();
    };
    assert_eq!((first.key, first.outcome), (1, TaskOutcome::Completed(10)));
    while domain.in_flight() > 0 {
        thread::yield_now();
    }
    assert!(domain.try_submit_to(&completions, 3, |_| Ok(30)).is_ok());
}

#[test]
fn a_completion_job_lets_go_of_its_block_before_delivering() {
    let domain = domain(1, 4);
    let completions = Arc::new(CompletionQueue::<u32, u32, ()>::new(
        NonZeroUsize::new(4).unwrap(),
    ));
    let captured = Arc::new(());
    let cancellers: Vec<_> = (0..3_u32)
        .map(|key| {
            let captured = Arc::clone(&captured);
            domain
                .try_submit_to(&completions, key, move |ctx| {
                    let _held = &captured;
                    Ok(ctx.task_id().get().try_into().unwrap_or(u32::MAX))
                })
                .unwrap()
        })
        .collect();
    let mut delivered = 0;
    while delivered < cancellers.len() {
        let Some(completion) = completions.pop() else {
            thread::yield_now();
            continue;
        };
        let canceller = &cancellers[completion.key as usize];
        assert_eq!(completion.task, canceller.task_id());
        // The worker dropped its reference (and the job's closure) before
        // the outcome became visible: the canceller alone holds the block,
        // so the owner frees it.
        assert_eq!(canceller.holders(), 1);
        delivered += 1;
    }
    assert_eq!(Arc::strong_count(&captured), 1, "every closure was dropped");
    // A canceller of a finished job still answers from the shared block.
    assert!(cancellers[0].cancel());
    assert!(cancellers[0].is_cancellation_requested());
}

#[test]
fn a_batch_from_a_worker_runs_inline() {
    let domain = Arc::new(domain(2, 2));
    let inner = Arc::clone(&domain);
    let total = domain
        .try_submit(move |_| {
            let tasks: Vec<_> = (1..=10_u32).map(|i| move || Ok::<_, ()>(i)).collect();
            let results = inner.run_batch(tasks).map_err(|_| ())?;
            Ok::<_, ()>(results.into_iter().map(|r| r.unwrap()).sum::<u32>())
        })
        .unwrap()
        .join();
    assert_eq!(total, Ok(55));
}

#[test]
fn an_empty_batch_returns_at_once() {
    let domain = domain(1, 1);
    let results = domain
        .run_batch(Vec::<fn() -> Result<(), ()>>::new())
        .unwrap();
    assert!(results.is_empty());
    assert_eq!(domain.in_flight(), 0);
}

#[test]
fn cancel_all_reaches_running_jobs() {
    let domain = domain(1, 1);
    let started = Arc::new(AtomicBool::new(false));
    let handle = {
        let started = Arc::clone(&started);
        domain
            .try_submit(move |ctx| {
                started.store(true, Ordering::SeqCst);
                while !ctx.is_cancellation_requested() {
                    thread::yield_now();
                }
                ctx.check()?;
                Ok::<_, CancellationRequestedError>(())
            })
            .unwrap()
    };
    while !started.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    let report = domain
        .shutdown(ShutdownPolicy::CancelAll, Duration::from_secs(60))
        .unwrap();
    assert_eq!(report.policy, ShutdownPolicy::CancelAll);
    assert_eq!(
        handle.join().unwrap_err().kind(),
        dinah_core::TaskFailureKind::Cancelled
    );
}

type CancellationRequestedError = dinah_core::CancellationRequested;
