//! Local execution: the same task sets through dinah's scoped
//! `Scheduler::run_parallel`, dinah's domain-backed batches
//! (`Domain::run_batch`), a re-implementation of the v0.1 batch-barrier
//! scheduler, Rayon's `par_iter` on dedicated pools, and a sequential loop;
//! plus single-job submit-to-result latency on a domain against Rayon
//! `spawn` with a one-shot channel, with the workers hot and after they
//! went idle.
//!
//! Results and their reading live in `docs/benchmarks.md`. Task sets are
//! built outside the timed region (`iter_batched`); every variant runs the
//! same closures and returns the same checked results.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, SamplingMode, criterion_group, criterion_main,
};
use rayon::prelude::*;

use dinah_core::TaskQueue;
use dinah_std::{Scheduler, ShutdownPolicy};

#[path = "support/cpu_work.rs"]
mod cpu_work;
#[path = "support/pools.rs"]
mod pools;
use cpu_work::{check, tasks};
use pools::{domain, rayon_pool};

/// Worker counts every parallel variant runs with.
const WORKERS: [usize; 2] = [2, 4];
/// Tasks per batch in the CPU workloads.
const CPU_TASKS: usize = 256;
/// The idle gap before each idle-latency sample: far longer than Rayon's
/// workers spin before they sleep (a few dozen yields).
const IDLE_GAP: Duration = Duration::from_millis(1);

/// The same tasks in a scheduler queue (boxed only so a 10,000-slot queue
/// does not sit on the stack).
fn queued<F, const N: usize>(tasks: Vec<F>) -> Box<TaskQueue<F, N>> {
    let mut queue: Box<TaskQueue<F, N>> = Box::default();
    for task in tasks {
        assert!(queue.try_push(task).is_ok());
    }
    queue
}

/// The v0.1 `Scheduler::run_parallel`, re-implemented as published (v0.1
/// points 047 and 059): `min(max_workers, tasks)` scoped workers start once
/// per call and are reused across batches; each batch of up to
/// `max_workers` tasks is handed out one task per worker, and a barrier
/// joins the batch before the next one is dispatched. The calling thread
/// coordinates and runs no task.
fn v01_run_parallel<F, T, E>(tasks: Vec<F>, max_workers: usize) -> Vec<Result<T, E>>
where
    F: FnOnce() -> Result<T, E> + Send,
    T: Send,
    E: Send,
{
    let workers = max_workers.min(tasks.len());
    let mut results = Vec::with_capacity(tasks.len());
    if workers == 0 {
        return results;
    }
    let inboxes: Vec<Mutex<Option<F>>> = (0..workers).map(|_| Mutex::new(None)).collect();
    let outboxes: Vec<Mutex<Option<Result<T, E>>>> =
        (0..workers).map(|_| Mutex::new(None)).collect();
    let barrier = Barrier::new(workers + 1);
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        for (inbox, outbox) in inboxes.iter().zip(&outboxes) {
            let (barrier, stop) = (&barrier, &stop);
            scope.spawn(move || {
                loop {
                    barrier.wait(); // batch dispatched (or stop)
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let task = inbox.lock().unwrap_or_else(PoisonError::into_inner).take();
                    if let Some(task) = task {
                        let result = task();
                        *outbox.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
                    }
                    barrier.wait(); // batch joined
                }
            });
        }
        let mut tasks = tasks.into_iter();
        loop {
            let mut dispatched = 0;
            for inbox in &inboxes {
                match tasks.next() {
                    Some(task) => {
                        *inbox.lock().unwrap_or_else(PoisonError::into_inner) = Some(task);
                        dispatched += 1;
                    }
                    None => break,
                }
            }
            if dispatched == 0 {
                stop.store(true, Ordering::Release);
                barrier.wait();
                break;
            }
            barrier.wait();
            barrier.wait();
            for outbox in &outboxes[..dispatched] {
                let result = outbox.lock().unwrap_or_else(PoisonError::into_inner).take();
                results.push(result.expect("every dispatched task reports"));
            }
        }
    });
    results
}

/// Runs one workload through every variant, in one group.
fn workload<const N: usize>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    count: usize,
    iterations: u64,
) {
    assert!(count <= N);
    group.bench_function("sequential", |b| {
        b.iter_batched(
            || tasks(count, iterations),
            |tasks| {
                let results: Vec<_> = tasks.into_iter().map(|task| task()).collect();
                check(&results, count, iterations);
            },
            BatchSize::PerIteration,
        );
    });
    for workers in WORKERS {
        let pool = rayon_pool(workers);
        group.bench_function(format!("rayon-par-iter/{workers}"), |b| {
            b.iter_batched(
                || tasks(count, iterations),
                |tasks| {
                    let results: Vec<_> =
                        pool.install(|| tasks.into_par_iter().map(|task| task()).collect());
                    check(&results, count, iterations);
                },
                BatchSize::PerIteration,
            );
        });
        drop(pool);

        let domain = domain(workers);
        group.bench_function(format!("dinah-domain-batch/{workers}"), |b| {
            b.iter_batched(
                || tasks(count, iterations),
                |tasks| {
                    let results = domain.run_batch(tasks).expect("admitted");
                    check(&results, count, iterations);
                },
                BatchSize::PerIteration,
            );
        });
        domain
            .shutdown(ShutdownPolicy::Drain, Duration::from_secs(60))
            .expect("domain shuts down");

        let scheduler = Scheduler::new();
        group.bench_function(format!("dinah-scheduler-run-parallel/{workers}"), |b| {
            b.iter_batched(
                || queued::<_, N>(tasks(count, iterations)),
                |mut queue| {
                    let results = scheduler
                        .run_parallel(&mut queue, workers)
                        .expect("non-zero workers");
                    check(&results, count, iterations);
                },
                BatchSize::PerIteration,
            );
        });

        group.bench_function(format!("v01-batch-barrier/{workers}"), |b| {
            b.iter_batched(
                || tasks(count, iterations),
                |tasks| {
                    let results = v01_run_parallel(tasks, workers);
                    check(&results, count, iterations);
                },
                BatchSize::PerIteration,
            );
        });
    }
}

fn noop(c: &mut Criterion) {
    let mut group = c.benchmark_group("noop-256");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    workload::<256>(&mut group, 256, 0);
    group.finish();

    // More and longer samples than the other groups: on small VMs a
    // 10,000-task batch's time swings by 2x between samples (where the
    // scheduler puts the woken workers), and ten samples left the median
    // at the mercy of a few.
    let mut group = c.benchmark_group("noop-10000");
    group
        .sample_size(40)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    workload::<10_000>(&mut group, 10_000, 0);
    group.finish();
}

fn cpu(c: &mut Criterion) {
    for (name, iterations) in [("cpu-100k-x256", 100_000), ("cpu-1m-x256", 1_000_000)] {
        let mut group = c.benchmark_group(name);
        group
            .sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        workload::<CPU_TASKS>(&mut group, CPU_TASKS, iterations);
        group.finish();
    }
}

/// Submit-to-result of one no-op job: dinah's domain handle against Rayon
/// `spawn` plus a crossbeam one-shot channel, both on 2-thread pools.
fn latency(c: &mut Criterion) {
    let domain = domain(2);
    let pool = rayon_pool(2);
    let dinah_one = |value: u64| {
        domain
            .try_submit(move |_| Ok::<_, ()>(black_box(value)))
            .expect("admitted")
            .join()
            .expect("no-op job")
    };
    let rayon_one = |value: u64| {
        let (sender, receiver) = crossbeam_channel::bounded(1);
        pool.spawn(move || {
            let _ = sender.send(black_box(value));
        });
        receiver.recv().expect("rayon job sends")
    };

    let mut group = c.benchmark_group("latency-hot");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("dinah-domain-submit-join", |b| {
        b.iter(|| assert_eq!(dinah_one(7), 7));
    });
    group.bench_function("rayon-spawn-oneshot", |b| {
        b.iter(|| assert_eq!(rayon_one(7), 7));
    });
    group.finish();

    // Each sample sleeps `IDLE_GAP` first so the workers are asleep; only
    // submit-to-result is timed.
    let idle = |one: &dyn Fn(u64) -> u64, iterations: u64| {
        let mut total = Duration::ZERO;
        for _ in 0..iterations {
            thread::sleep(IDLE_GAP);
            let start = Instant::now();
            let value = one(7);
            total += start.elapsed();
            assert_eq!(value, 7);
        }
        total
    };
    let mut group = c.benchmark_group("latency-idle");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(200));
    group.bench_function("dinah-domain-submit-join", |b| {
        b.iter_custom(|iterations| idle(&dinah_one, iterations));
    });
    group.bench_function("rayon-spawn-oneshot", |b| {
        b.iter_custom(|iterations| idle(&rayon_one, iterations));
    });
    group.finish();

    domain
        .shutdown(ShutdownPolicy::Drain, Duration::from_secs(60))
        .expect("domain shuts down");
}

criterion_group!(benches, noop, cpu, latency);
criterion_main!(benches);
