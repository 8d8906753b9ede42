//! dinah's main job: four ranks in four processes, talking over TCP on
//! loopback, estimate pi by Monte Carlo with typed remote actions. Rank 0
//! keeps all the calls in flight in a `CallSet`, adds up the hits as the
//! calls finish and checks the total exactly against a sequential recount,
//! then shows a deadline expiring and a running action being cancelled.
//! Every rank then meets the others at a barrier and prints its statistics
//! and its shutdown report; a wrong count or a failed step makes the run
//! exit non-zero.
//!
//! ```sh
//! cargo xtask demo                                   # builds both, runs the next line
//! dinah-run -n 4 -- target/release/examples/tcp_demo
//! cargo run --release --example tcp_demo             # not under dinah-run: launches itself with 4 ranks
//! ```
//!
//! The samples come from per-block SplitMix64 streams seeded from the
//! block index, so any split of the blocks over any number of ranks counts
//! exactly the same hits. A point `(x, y)` of two 32-bit integers is inside
//! the quarter circle of radius 2^32 when `x^2 + y^2 < 2^64`: integer
//! arithmetic, no rounding, an exact check.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports what it does"
)]

use std::error::Error;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dinah::launch::launcher::{ENV_RANK, LaunchConfig, PrefixedStdio, launch};
use dinah::prelude::*;
use dinah::tcp::{EnvProblem, LaunchEnv, LaunchError};

type Result<T, E = Box<dyn Error + Send + Sync>> = std::result::Result<T, E>;

/// The seed of every sample stream.
const SEED: u64 = 0x00d1_4a4c_2026;
/// Blocks of samples; each has its own stream.
const BLOCKS: u32 = 64;
/// Samples per block.
const SAMPLES_PER_BLOCK: u64 = 1 << 20;
/// Blocks per remote call.
const BLOCKS_PER_CALL: u32 = 4;
/// The domain of the slow, cancellable task (the default domain counts).
const SLOW: DomainId = match DomainId::new(2) {
    Ok(id) => id,
    Err(_) => panic!("2 is a valid domain ID"),
};
/// The bound on every wait of the demo.
const PATIENCE: Duration = Duration::from_secs(30);

/// Counts the hits of `blocks` blocks starting at `first` on the target.
#[derive(WireValue, Action)]
#[action(name = "tcp_demo.CountHits/1", output = u64)]
struct CountHits {
    first: u32,
    blocks: u32,
}

/// Works for `millis` milliseconds, stopping early when cancelled.
#[derive(WireValue, Action)]
#[action(name = "tcp_demo.SlowTask/1", output = u64)]
struct SlowTask {
    millis: u64,
}

/// How many slow tasks the target started, and how many stopped early.
#[derive(WireValue, Action)]
#[action(name = "tcp_demo.SlowProgress/1", output = (u64, u64))]
struct SlowProgress;

/// What this rank's handlers record.
#[derive(Default)]
struct Counters {
    slow_started: AtomicU64,
    slow_stopped_early: AtomicU64,
}

/// SplitMix64: one step of the stream in `state`.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The samples of `blocks` that fall inside the quarter circle.
fn count_hits(blocks: Range<u32>) -> u64 {
    let mut hits = 0;
    for block in blocks {
        let mut state = SEED ^ u64::from(block).wrapping_mul(0xd6e8_feb8_6659_fd93);
        for _ in 0..SAMPLES_PER_BLOCK {
            let r = splitmix64(&mut state);
            let (x, y) = (r >> 32, r & 0xffff_ffff);
            // x, y < 2^32: each square fits a u64, and their sum
            // overflows exactly when x^2 + y^2 >= 2^64.
            hits += u64::from((x * x).checked_add(y * y).is_some());
        }
    }
    hits
}

fn rank_main(launch: LaunchEnv) -> Result<()> {
    let counters = Arc::new(Counters::default());
    let mut builder = Runtime::builder(
        launch.run_id(),
        ProtocolLimits::default(),
        RuntimeLimits::default(),
    )?;
    builder.domain(SLOW, NonZeroUsize::MIN)?;
    builder.register::<CountHits, _>(|CountHits { first, blocks }| {
        Ok(count_hits(first..first + blocks))
    })?;
    let c = Arc::clone(&counters);
    builder.register_with_context::<SlowTask, _>(SLOW, move |SlowTask { millis }, ctx| {
        c.slow_started.fetch_add(1, Ordering::SeqCst);
        for worked in 0..millis {
            if ctx.is_cancelled() {
                c.slow_stopped_early.fetch_add(1, Ordering::SeqCst);
                return Err(ActionError::new(format!("cancelled after {worked} ms")));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(millis)
    })?;
    let c = Arc::clone(&counters);
    builder.register::<SlowProgress, _>(move |SlowProgress| {
        Ok((
            c.slow_started.load(Ordering::SeqCst),
            c.slow_stopped_early.load(Ordering::SeqCst),
        ))
    })?;

    let hello = builder.hello()?;
    let (handle, driver) = TcpTransport::connect(launch.rendezvous()?, hello)?;
    let mut runtime = builder.start(handle, driver)?;
    if runtime.rank().get() == 0 {
        estimate_pi(&mut runtime)?;
        show_deadline_and_cancel(&mut runtime)?;
    }
    // A rank waiting in the barrier keeps serving, so the others wait here
    // for rank 0's calls; once all are through, nobody calls anybody, and
    // all shut down together.
    runtime.barrier(PATIENCE)?;
    println!("stats: {}", runtime.stats());
    let report = runtime.shutdown(Duration::from_secs(10))?;
    println!("shutdown: clean = {}; {report}", report.is_clean());
    Ok(())
}

/// Scatters the blocks over every rank (this one included), gathers the
/// hits as the calls finish, and checks them against a sequential recount.
fn estimate_pi(runtime: &mut Runtime) -> Result<()> {
    let client = runtime.client();
    let world = runtime.world();
    let mut calls = CallSet::with_capacity((BLOCKS / BLOCKS_PER_CALL) as usize);
    for (i, first) in (0..BLOCKS).step_by(BLOCKS_PER_CALL as usize).enumerate() {
        let target = world.rank(i as u32 % world.get())?;
        let blocks = BLOCKS_PER_CALL;
        calls.push(client.spawn_on(target, CountHits { first, blocks }))?;
    }
    let count = calls.len();
    let mut hits = 0;
    while let Some((_slot, result)) = runtime.block_on(calls.join_next()) {
        hits += result?;
    }
    let samples = u64::from(BLOCKS) * SAMPLES_PER_BLOCK;
    let pi = 4.0 * hits as f64 / samples as f64;
    println!(
        "pi ~ {pi:.6} from {samples} samples: {count} calls of {BLOCKS_PER_CALL} blocks over {} rank(s)",
        world.get()
    );
    let sequential = count_hits(0..BLOCKS);
    if sequential != hits {
        return Err(
            format!("check FAILED: {hits} hits distributed, {sequential} sequentially").into(),
        );
    }
    println!(
        "check: the sequential recount on rank 0 also finds {sequential} hits, an exact match (|pi - estimate| = {:.1e})",
        (std::f64::consts::PI - pi).abs()
    );
    Ok(())
}

/// A call whose deadline passes while it runs, and a running call that
/// is cancelled by dropping its future.
fn show_deadline_and_cancel(runtime: &mut Runtime) -> Result<()> {
    let client = runtime.client();
    let world = runtime.world();

    let target = world.rank(1 % world.get())?;
    let (_, stopped) = runtime.block_on(client.spawn_on(target, SlowProgress))?;
    let options = SpawnOptions::deadline(Duration::from_millis(100));
    match runtime.block_on(client.spawn_on_with(target, SlowTask { millis: 2_000 }, options)) {
        Err(RuntimeError::DeadlineExceeded { after }) => {
            // The expired call is cancelled at the target too.
            wait_for(runtime, "the expired task to stop", |rt| {
                Ok(slow_progress(rt, target)?.1 > stopped)
            })?;
            println!(
                "deadline: a 2 s task on rank {} with a {after:?} deadline failed with DeadlineExceeded; the task stopped early",
                target.get()
            );
        }
        other => return Err(format!("deadline: expected DeadlineExceeded, got {other:?}").into()),
    }

    let target = world.rank(2 % world.get())?;
    let (started, stopped) = runtime.block_on(client.spawn_on(target, SlowProgress))?;
    let slow = client.spawn_on(target, SlowTask { millis: 60_000 });
    wait_for(runtime, "the slow task to start", |rt| {
        Ok(slow_progress(rt, target)?.0 > started)
    })?;
    drop(slow);
    wait_for(runtime, "the cancelled task to stop", |rt| {
        Ok(slow_progress(rt, target)?.1 > stopped)
    })?;
    println!(
        "cancel: a 60 s task running on rank {} was dropped; its handler saw the cancellation and stopped",
        target.get()
    );
    Ok(())
}

fn slow_progress(runtime: &mut Runtime, target: Rank) -> Result<(u64, u64)> {
    let client = runtime.client();
    Ok(runtime.block_on(client.spawn_on(target, SlowProgress))?)
}

/// Polls `done` until it holds, for at most [`PATIENCE`].
fn wait_for(
    runtime: &mut Runtime,
    what: &str,
    mut done: impl FnMut(&mut Runtime) -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + PATIENCE;
    while !done(runtime)? {
        if Instant::now() >= deadline {
            return Err(format!("gave up waiting for {what}").into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Not started by `dinah-run`: start four ranks of this program through
/// the same launcher library.
fn launch_self() -> Result<ExitCode> {
    let exe = std::env::current_exe()?;
    println!(
        "tcp_demo: not started by dinah-run; launching 4 ranks of itself (as `dinah-run -n 4 -- {}`)",
        exe.display()
    );
    let config = LaunchConfig::new(WorldSize::new(4)?, exe).timeout(Duration::from_secs(120));
    let report = launch(&config, Arc::new(PrefixedStdio));
    if !report.is_success() {
        eprintln!("tcp_demo: {report}");
    }
    Ok(ExitCode::from(report.exit_code()))
}

fn main() -> ExitCode {
    let outcome = match LaunchEnv::from_env() {
        Ok(env) => rank_main(env).map(|()| ExitCode::SUCCESS),
        Err(LaunchError::Env {
            var,
            problem: EnvProblem::Missing,
        }) if var == ENV_RANK => launch_self(),
        Err(error) => Err(error.into()),
    };
    outcome.unwrap_or_else(|error| {
        eprintln!("tcp_demo: {error}");
        ExitCode::FAILURE
    })
}
