//! Set-up at scale on one machine: N ranks of this program over TCP,
//! started by the `dinah-run` launcher library, for N = 8, 16, 32 and 64.
//! Each rank reports how long it took from its start to a connected
//! transport (rendezvous included) and to the first collective, and, once
//! set up, its resident memory, its open file descriptors and its threads;
//! the table gives the median and the largest over the ranks, and the
//! run's wall time. Every rank holds two connections to every other rank
//! (one per lane), so descriptors grow as 2 (N - 1).
//!
//! ```sh
//! cargo xtask bench tcp_scale
//! ```
//!
//! With `--test` (the CI smoke lane) it runs N = 2 once and checks the
//! reports.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the benchmark and its ranks report their measurements, and what a rank says on stderr is passed on"
)]

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use dinah_core::{ProtocolLimits, RuntimeLimits, WorldSize};
use dinah_launch::LaunchEnv;
use dinah_launch::launcher::{LaunchConfig, LaunchEvent, OutputSink, Stream, launch};
use dinah_std::Runtime;
use dinah_tcp::TcpTransport;

/// Marks a rank's report line.
const REPORT: &str = "@@ ";

/// The world sizes of a measured run.
const SIZES: [u32; 4] = [8, 16, 32, 64];

/// What one rank measured.
#[derive(Debug, Clone, Copy)]
struct Rank {
    connected_ms: f64,
    collective_ms: f64,
    rss_kib: u64,
    fds: u64,
    threads: u64,
}

/// One rank: sets up, meets the others in an all-reduce, measures, shuts
/// down.
fn rank_main(started: Instant) {
    let launch = LaunchEnv::from_env().expect("started by the launcher");
    let builder = Runtime::builder(
        launch.run_id(),
        ProtocolLimits::default(),
        RuntimeLimits::default(),
    )
    .expect("default limits");
    let (handle, driver) = TcpTransport::connect(
        launch.rendezvous().expect("the rendezvous completes"),
        builder.hello().expect("a hello"),
    )
    .expect("the ranks connect");
    let connected = started.elapsed();
    let mut runtime = builder.start(handle, driver).expect("the runtime starts");
    let world = u64::from(runtime.world().get());
    let sum = runtime
        .all_reduce(1_u64, |a, b| a + b, Duration::from_secs(120))
        .expect("every rank answers");
    assert_eq!(sum, world);
    let collective = started.elapsed();
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count() as u64);
    println!(
        "{REPORT}{:.3} {:.3} {} {fds} {}",
        connected.as_secs_f64() * 1e3,
        collective.as_secs_f64() * 1e3,
        field("VmRSS:"),
        field("Threads:"),
    );
    runtime
        .barrier(Duration::from_secs(120))
        .expect("every rank meets");
    let report = runtime
        .shutdown(Duration::from_secs(60))
        .expect("shut down");
    assert!(report.is_clean(), "{report}");
}

/// Collects the ranks' report lines.
#[derive(Default)]
struct Reports(Mutex<Vec<Rank>>);

impl OutputSink for Reports {
    fn line(&self, _rank: u32, stream: Stream, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let Some(rest) = text.split_once(REPORT).map(|(_, rest)| rest) else {
            if stream == Stream::Stderr {
                eprintln!("{text}");
            }
            return;
        };
        let numbers: Vec<f64> = rest
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        if let [connected_ms, collective_ms, rss, fds, threads] = numbers[..] {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Rank {
                    connected_ms,
                    collective_ms,
                    rss_kib: rss as u64,
                    fds: fds as u64,
                    threads: threads as u64,
                });
        }
    }

    fn event(&self, _event: &LaunchEvent) {}
}

/// The median and the largest of `values`.
fn spread(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    (values[values.len() / 2], values[values.len() - 1])
}

/// Runs `n` ranks; returns every rank's report and the wall time.
fn run(n: u32) -> (Vec<Rank>, Duration) {
    let exe = std::env::current_exe().expect("this executable");
    let config = LaunchConfig::new(WorldSize::new(n).expect("a world size"), exe)
        .arg("--rank")
        .timeout(Duration::from_secs(300))
        .startup_timeout(Duration::from_secs(120));
    let reports = Arc::new(Reports::default());
    let start = Instant::now();
    let report = launch(&config, Arc::clone(&reports) as Arc<dyn OutputSink>);
    let wall = start.elapsed();
    assert!(report.is_success(), "{report}");
    let ranks = std::mem::take(&mut *reports.0.lock().unwrap_or_else(PoisonError::into_inner));
    assert_eq!(ranks.len(), n as usize, "every rank reports");
    (ranks, wall)
}

fn main() {
    let started = Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--rank") {
        rank_main(started);
        return;
    }
    let sizes: &[u32] = if args.iter().any(|arg| arg == "--test") {
        &[2]
    } else if args.iter().any(|arg| arg == "--bench") {
        &SIZES
    } else {
        eprintln!("run it with `cargo xtask bench tcp_scale`");
        std::process::exit(2);
    };
    println!(
        "benches/tcp_scale: N ranks on one machine over TCP under the launcher; median / largest over the ranks\n"
    );
    println!(
        "| ranks | run (wall) | start to connected | start to first all-reduce | resident memory per rank | descriptors per rank | threads per rank |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for &n in sizes {
        let (ranks, wall) = run(n);
        let (connected, connected_max) = spread(ranks.iter().map(|r| r.connected_ms).collect());
        let (collective, collective_max) = spread(ranks.iter().map(|r| r.collective_ms).collect());
        let (rss, rss_max) = spread(ranks.iter().map(|r| r.rss_kib as f64 / 1024.0).collect());
        let (fds, fds_max) = spread(ranks.iter().map(|r| r.fds as f64).collect());
        let (threads, threads_max) = spread(ranks.iter().map(|r| r.threads as f64).collect());
        println!(
            "| {n} | {:.2} s | {connected:.0} / {connected_max:.0} ms | {collective:.0} / {collective_max:.0} ms | {rss:.1} / {rss_max:.1} MiB | {fds:.0} / {fds_max:.0} | {threads:.0} / {threads_max:.0} |",
            wall.as_secs_f64()
        );
    }
}
