//! The v0.1 harness's cases (the seed design's "runtime benchmark
//! harness"), kept so every report has a row for each: a direct `Executor`
//! no-op call, an immediate `Scheduler` submission, a sequential queue
//! drain of 1, 16, 64 and 256 no-op tasks, and a parallel drain
//! (`Scheduler::run_parallel`) of 16, 64 and 256 no-op tasks with 2 and 4
//! workers. The 1,000,000-iteration CPU case is `cpu-1m-x256` in
//! `benches/local.rs`, beside Rayon.
//!
//! Queues are filled outside the timed region (`iter_batched`), and the
//! emptied queue and the results are dropped outside it too (criterion
//! drops what the routine returns after timing).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use dinah_core::TaskQueue;
use dinah_std::{Executor, Scheduler};

#[path = "support/cpu_work.rs"]
mod cpu_work;
use cpu_work::{check, tasks};

/// The largest queue the cases fill.
const MAX_TASKS: usize = 256;

/// `count` no-op tasks in a scheduler queue.
fn queue(count: usize) -> Box<TaskQueue<impl FnOnce() -> Result<u64, ()> + Send, MAX_TASKS>> {
    let mut queue = Box::<TaskQueue<_, MAX_TASKS>>::default();
    for task in tasks(count, 0) {
        assert!(queue.try_push(task).is_ok());
    }
    queue
}

fn calls(c: &mut Criterion) {
    let mut group = c.benchmark_group("seed");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let executor = Executor::new();
    group.bench_function("executor-noop", |b| {
        b.iter(|| executor.execute(|| Ok::<u64, ()>(black_box(7))));
    });
    let scheduler = Scheduler::new();
    group.bench_function("schedule-noop", |b| {
        b.iter(|| scheduler.schedule(|| Ok::<u64, ()>(black_box(7))));
    });
    for count in [1, 16, 64, 256] {
        group.bench_with_input(
            BenchmarkId::new("sequential-drain", count),
            &count,
            |b, &count| {
                b.iter_batched(
                    || queue(count),
                    |mut queue| {
                        let results = scheduler.run_until_empty(&mut queue);
                        check(&results, count, 0);
                        (queue, results)
                    },
                    BatchSize::SmallInput,
                );
            },
        );
    }
    for workers in [2, 4] {
        for count in [16, 64, 256] {
            group.bench_with_input(
                BenchmarkId::new(format!("parallel-drain-{workers}w"), count),
                &count,
                |b, &count| {
                    b.iter_batched(
                        || queue(count),
                        |mut queue| {
                            let results = scheduler
                                .run_parallel(&mut queue, workers)
                                .expect("workers > 0");
                            check(&results, count, 0);
                            (queue, results)
                        },
                        BatchSize::SmallInput,
                    );
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, calls);
criterion_main!(benches);
