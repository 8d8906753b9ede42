//! Rayon against dinah in alternating processes, for the local rows that a
//! single criterion run cannot settle on small VMs.
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

#[path = "support/pools.rs"]
mod pools;
use pools::{domain, rayon_pool};

/// The cases: a name, and what one child measures (how many samples, and
/// the work of one).
const CASES: [Case; 4] = [
    Case::Batch { workers: 2 },
    Case::Batch { workers: 4 },
    Case::Latency { idle: false },
    Case::Latency { idle: true },
];

/// Tasks per batch in the batch cases.
const BATCH_TASKS: u64 = 10_000;
/// The idle gap before each idle-latency sample.
const IDLE_GAP: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// A batch of 10,000 no-op tasks on `workers` workers.
    Batch { workers: usize },
    /// Submit-to-result of one no-op job on 2 workers, hot or after idle.
    Latency { idle: bool },
}

impl Case {
    fn name(self) -> String {
        match self {
            Self::Batch { workers } => format!("noop-10000/{workers}"),
            Self::Latency { idle: false } => "latency-hot".into(),
            Self::Latency { idle: true } => "latency-idle".into(),
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
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Rayon,
    Dinah,
}

impl Variant {
    const BOTH: [Self; 2] = [Self::Rayon, Self::Dinah];

    fn name(self) -> &'static str {
        match self {
            Self::Rayon => "rayon",
            Self::Dinah => "dinah",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::BOTH
            .into_iter()
            .find(|variant| variant.name() == name)
    }
}

fn no_op_tasks() -> Vec<impl FnOnce() -> Result<u64, ()> + Send> {
    (0..BATCH_TASKS)
        .map(|index| move || Ok(black_box(index)))
        .collect()
}

fn check<E>(results: &[Result<u64, E>]) {
    assert_eq!(results.len() as u64, BATCH_TASKS);
    for (index, result) in results.iter().enumerate() {
        assert!(matches!(result, Ok(value) if *value == index as u64));
    }
}

/// Measures `case` with `variant` in this process: the median sample.
fn measure(case: Case, variant: Variant, samples: usize) -> Duration {
    let mut times = Vec::with_capacity(samples);
    match case {
        Case::Batch { workers } => match variant {
            Variant::Rayon => {
                let pool = rayon_pool(workers);
                for _ in 0..samples {
                    let tasks = no_op_tasks();
                    let start = Instant::now();
                    let results: Vec<_> =
                        pool.install(|| tasks.into_par_iter().map(|task| task()).collect());
                    check(&results);
                    drop(results);
                    times.push(start.elapsed());
                }
            }
            Variant::Dinah => {
                let domain = domain(workers);
                for _ in 0..samples {
                    let tasks = no_op_tasks();
                    let start = Instant::now();
                    let results = domain.run_batch(tasks).expect("admitted");
                    check(&results);
                    drop(results);
                    times.push(start.elapsed());
                }
                domain
                    .shutdown(ShutdownPolicy::Drain, Duration::from_secs(60))
                    .expect("domain shuts down");
            }
        },
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
            for variant in Variant::BOTH {
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
    println!("benches/alternate: {rounds} rounds, one child process per case and variant\n");
    println!("| case | Rayon | dinah | dinah / Rayon | children (Rayon; dinah) |");
    println!("| --- | --- | --- | --- | --- |");
    for case in CASES {
        let mut rayon = Vec::with_capacity(rounds);
        let mut dinah = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            rayon.push(child(case, Variant::Rayon));
            dinah.push(child(case, Variant::Dinah));
        }
        let list = |times: &[Duration]| {
            times
                .iter()
                .map(|time| format!("{:.2}", time.as_secs_f64() * 1e6))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let (r, d) = (median(&mut rayon), median(&mut dinah));
        println!(
            "| {} | {:.2} µs | {:.2} µs | {:.2}x | {}; {} |",
            case.name(),
            r.as_secs_f64() * 1e6,
            d.as_secs_f64() * 1e6,
            d.as_secs_f64() / r.as_secs_f64(),
            list(&rayon),
            list(&dinah),
        );
    }
}
