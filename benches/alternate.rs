//! Rayon against dinah in alternating processes, for the local rows that a
//! single criterion run cannot settle on small VMs.
//!
//! The CPU case also runs a sequential child each round, for the
//! efficiency (sequential time / cores / measured time): on the 2-core
//! reference VM a criterion group's rows run seconds apart, and the VM's
//! throughput with both cores busy drifts by several percent over seconds
//! (instrumented, the slow batches had both threads' tasks run slower, for
//! Rayon and dinah alike), so a row's efficiency depends on when it ran.
//!
//! Within one process, where the scheduler places a pool's threads decides
//! the run: on the 2-core reference VM the single-job latency of Rayon and
//! dinah alike is bimodal (about 1.3 µs or 2-4 µs), and a criterion run
//! lands wholly in one mode. This harness measures each case in a fresh
//! child process per variant, alternating Rayon and dinah for a number of
//! rounds, and reports the median of the children's medians for each, and
//! their ratio. Every child runs the same work as `benches/local.rs`.
//!
//! `cargo xtask bench alternate` runs it (`ALTERNATE_ROUNDS` sets the
//! rounds, 10 by default); `--test` (the `bench-smoke` lane) runs every
//! case once, briefly, in this process.
#![expect(clippy::print_stdout, reason = "a benchmark reports its measurements")]

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use dinah_std::ShutdownPolicy;

#[path = "support/cpu_work.rs"]
mod cpu_work;
#[path = "support/pools.rs"]
mod pools;
use cpu_work::{check, tasks};
use pools::{domain, rayon_pool};

/// The cases: a name, and what one child measures (how many samples, and
/// the work of one).
const CASES: [Case; 6] = [
    Case::Batch { workers: 2 },
    Case::Batch { workers: 4 },
    Case::Latency { idle: false },
    Case::Latency { idle: true },
    Case::Cpu { workers: 2 },
    Case::Cpu { workers: 4 },
];

/// Tasks per batch in the batch cases.
const BATCH_TASKS: usize = 10_000;
/// Tasks per batch in the CPU cases, and iterations of the work per task.
const CPU_TASKS: usize = 256;
const CPU_ITERATIONS: u64 = 100_000;
/// The idle gap before each idle-latency sample.
const IDLE_GAP: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// A batch of 10,000 no-op tasks on `workers` workers.
    Batch { workers: usize },
    /// Submit-to-result of one no-op job on 2 workers, hot or after idle.
    Latency { idle: bool },
    /// A batch of [`CPU_TASKS`] tasks of [`CPU_ITERATIONS`] each on
    /// `workers` workers (or sequentially).
    Cpu { workers: usize },
}

impl Case {
    fn name(self) -> String {
        match self {
            Self::Batch { workers } => format!("noop-10000/{workers}"),
            Self::Latency { idle: false } => "latency-hot".into(),
            Self::Latency { idle: true } => "latency-idle".into(),
            Self::Cpu { workers } => format!("cpu-100k-x256/{workers}"),
        }
    }

    fn parse(name: &str) -> Option<Self> {
        CASES.into_iter().find(|case| case.name() == name)
    }

    /// Samples a child takes (`smoke`: a handful).
    fn samples(self, smoke: bool) -> usize {
        match (self, smoke) {
            (_, true) => 3,
            (Self::Batch { .. }, false) => 2_000,
            (Self::Latency { idle: false }, false) => 20_000,
            (Self::Latency { idle: true }, false) => 300,
            (Self::Cpu { .. }, false) => 20,
        }
    }

    /// The variants measured each round.
    fn variants(self) -> &'static [Variant] {
        match self {
            Self::Cpu { .. } => &[Variant::Sequential, Variant::Rayon, Variant::Dinah],
            _ => &Variant::BOTH,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// A plain loop on the child's thread (CPU case only).
    Sequential,
    Rayon,
    Dinah,
}

impl Variant {
    const BOTH: [Self; 2] = [Self::Rayon, Self::Dinah];

    fn name(self) -> &'static str {
        match self {
            Self::Sequential => "sequential",
            Self::Rayon => "rayon",
            Self::Dinah => "dinah",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::Sequential, Self::Rayon, Self::Dinah]
            .into_iter()
            .find(|variant| variant.name() == name)
    }
}

/// Times `samples` batches of `count` tasks of `iterations` each through
/// `variant` on `workers` workers; each batch's results are checked and
/// freed inside the timed region, as in `benches/local.rs`.
fn batches(
    variant: Variant,
    workers: usize,
    count: usize,
    iterations: u64,
    samples: usize,
    times: &mut Vec<Duration>,
) {
    let setup = || tasks(count, iterations);
    match variant {
        Variant::Sequential => timed(samples, times, setup, |tasks| {
            let results: Vec<_> = tasks.into_iter().map(|task| task()).collect();
            check(&results, count, iterations);
        }),
        Variant::Rayon => {
            let pool = rayon_pool(workers);
            timed(samples, times, setup, |tasks| {
                let results: Vec<_> =
                    pool.install(|| tasks.into_par_iter().map(|task| task()).collect());
                check(&results, count, iterations);
            });
        }
        Variant::Dinah => {
            let domain = domain(workers);
            timed(samples, times, setup, |tasks| {
                let results = domain.run_batch(tasks).expect("admitted");
                check(&results, count, iterations);
            });
            domain
                .shutdown(ShutdownPolicy::Drain, Duration::from_secs(60))
                .expect("domain shuts down");
        }
    }
}

/// Times `samples` runs of `run`, each on a fresh `setup()` built outside
/// the timed region.
fn timed<T>(
    samples: usize,
    times: &mut Vec<Duration>,
    mut setup: impl FnMut() -> T,
    mut run: impl FnMut(T),
) {
    for _ in 0..samples {
        let input = setup();
        let start = Instant::now();
        run(input);
        times.push(start.elapsed());
    }
}

/// Measures `case` with `variant` in this process: the median sample.
fn measure(case: Case, variant: Variant, samples: usize) -> Duration {
    let mut times = Vec::with_capacity(samples);
    match case {
        Case::Batch { workers } => batches(variant, workers, BATCH_TASKS, 0, samples, &mut times),
        Case::Cpu { workers } => batches(
            variant,
            workers,
            CPU_TASKS,
            CPU_ITERATIONS,
            samples,
            &mut times,
        ),
        Case::Latency { idle } => {
            let mut one = |sample: &mut dyn FnMut(u64) -> u64| {
                for value in 0..samples as u64 {
                    if idle {
                        std::thread::sleep(IDLE_GAP);
                    }
                    let start = Instant::now();
                    assert_eq!(sample(value), value);
                    times.push(start.elapsed());
                }
            };
            match variant {
                Variant::Sequential => unreachable!("the latency cases measure pools only"),
                Variant::Rayon => {
                    let pool = rayon_pool(2);
                    one(&mut |value| {
                        let (sender, receiver) = crossbeam_channel::bounded(1);
                        pool.spawn(move || {
                            let _ = sender.send(black_box(value));
                        });
                        receiver.recv().expect("one-shot")
                    });
                }
                Variant::Dinah => {
                    let domain = domain(2);
                    one(&mut |value| {
                        domain
                            .try_submit(move |_| Ok::<_, ()>(black_box(value)))
                            .expect("admitted")
                            .join()
                            .expect("no-op job")
                    });
                    domain
                        .shutdown(ShutdownPolicy::Drain, Duration::from_secs(60))
                        .expect("domain shuts down");
                }
            }
        }
    }
    median(&mut times)
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

/// Runs one child process measuring `case` with `variant`.
#[expect(
    clippy::disallowed_methods,
    reason = "the harness starts itself as the child; the xtask helper is not a dependency of benches"
)]
fn child(case: Case, variant: Variant) -> Duration {
    let exe = std::env::current_exe().expect("own path");
    let output = Command::new(exe)
        .args(["child", &case.name(), variant.name()])
        .output()
        .expect("child process starts");
    assert!(
        output.status.success(),
        "child {} {} failed: {}",
        case.name(),
        variant.name(),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let nanos = stdout
        .lines()
        .find_map(|line| line.strip_prefix("median_ns "))
        .and_then(|value| value.trim().parse::<u64>().ok())
        .expect("child prints its median");
    Duration::from_nanos(nanos)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [mode, case, variant] = &args[..] {
        if mode == "child" {
            let case = Case::parse(case).expect("known case");
            let variant = Variant::parse(variant).expect("known variant");
            let median = measure(case, variant, case.samples(false));
            println!("median_ns {}", median.as_nanos());
            return;
        }
    }
    if args.iter().any(|arg| arg == "--test") {
        for case in CASES {
            for &variant in case.variants() {
                let median = measure(case, variant, case.samples(true));
                println!("{} {}: smoke ok ({median:?})", case.name(), variant.name());
            }
        }
        return;
    }
    let rounds: usize = std::env::var("ALTERNATE_ROUNDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .filter(|&rounds| rounds > 0)
        .unwrap_or(10);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    println!("benches/alternate: {rounds} rounds, one child process per case and variant\n");
    let mut timing = vec![
        "| case | Rayon | dinah | dinah / Rayon | children (Rayon; dinah) |".to_owned(),
        "| --- | --- | --- | --- | --- |".to_owned(),
    ];
    let mut cpu = vec![
        format!(
            "| case | sequential | Rayon (efficiency) | dinah (efficiency) | dinah / Rayon | children (sequential; Rayon; dinah) |"
        ),
        "| --- | --- | --- | --- | --- | --- |".to_owned(),
    ];
    for case in CASES {
        // One list of child medians per variant, in `case.variants()` order.
        let variants = case.variants();
        let mut children: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); variants.len()];
        for _ in 0..rounds {
            for (list, &variant) in children.iter_mut().zip(variants) {
                list.push(child(case, variant));
            }
        }
        let lists = children
            .iter()
            .map(|times| {
                times
                    .iter()
                    .map(|time| format!("{:.2}", time.as_secs_f64() * 1e6))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("; ");
        let medians: Vec<Duration> = children.iter_mut().map(|times| median(times)).collect();
        let (r, d) = (medians[variants.len() - 2], medians[variants.len() - 1]);
        let ratio = d.as_secs_f64() / r.as_secs_f64();
        if let Case::Cpu { workers } = case {
            // The ideal: the sequential time spread over the cores the
            // workers can use.
            let ideal = medians[0].as_secs_f64() / workers.min(cores) as f64;
            cpu.push(format!(
                "| {} | {:.2} ms | {:.2} ms ({:.3}) | {:.2} ms ({:.3}) | {ratio:.3}x | {lists} |",
                case.name(),
                medians[0].as_secs_f64() * 1e3,
                r.as_secs_f64() * 1e3,
                ideal / r.as_secs_f64(),
                d.as_secs_f64() * 1e3,
                ideal / d.as_secs_f64(),
            ));
        } else {
            timing.push(format!(
                "| {} | {:.2} µs | {:.2} µs | {ratio:.2}x | {lists} |",
                case.name(),
                r.as_secs_f64() * 1e6,
                d.as_secs_f64() * 1e6,
            ));
        }
    }
    println!("{}\n", timing.join("\n"));
    println!("CPU efficiency (sequential time / {cores} cores / measured time; children in µs):\n");
    println!("{}", cpu.join("\n"));
}
