//! The soak: four ranks over TCP make a million calls (or as many as
//! `--calls` says, over all ranks) to random peers, with random deadlines,
//! calls that outlive their deadline, and calls dropped while in flight
//! (their cancellation races the request). Every rank samples its resident
//! memory each second; after the warm-up (the first fifth of its calls) it
//! must not grow by more than an eighth plus 8 MiB. Every call must end
//! exactly once (its result, or a deadline or cancellation error), every
//! result must be right, and every rank must shut down cleanly.
//!
//! ```sh
//! cargo run --release --example soak -- --calls 1000000   # launches 4 ranks itself
//! cargo xtask soak [--calls N]                            # the same, as a task
//! ```
//!
//! Each rank prints one line of figures (calls, per second, outcomes,
//! memory); `docs/reliability.md` keeps the latest.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the soak reports its figures"
)]

use std::error::Error;
use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dinah::launch::launcher::{ENV_RANK, LaunchConfig, PrefixedStdio, launch};
use dinah::prelude::*;
use dinah::tcp::{EnvProblem, LaunchEnv, LaunchError};

type Result<T, E = Box<dyn Error + Send + Sync>> = std::result::Result<T, E>;

/// Calls over all ranks unless `--calls` says otherwise.
const DEFAULT_CALLS: u64 = 1_000_000;

/// Calls each rank keeps in flight.
const IN_FLIGHT: usize = 256;

/// The worker domain of the slow action.
const SLOW: DomainId = match DomainId::new(2) {
    Ok(id) => id,
    Err(_) => panic!("2 is a valid domain ID"),
};

const PATIENCE: Duration = Duration::from_secs(120);

/// Adds one, on the rank it is sent to.
#[derive(WireValue, Action)]
#[action(name = "soak.Add/1", output = u64)]
struct Add(u64);

/// Works for a number of microseconds (cooperatively cancellable), then
/// answers its number.
#[derive(WireValue, Action)]
#[action(name = "soak.Slow/1", output = u64)]
struct Slow {
    micros: u64,
    n: u64,
}

/// SplitMix64: one step of the stream in `state`.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// This process's resident memory in KiB (`VmRSS` in `/proc/self/status`).
fn rss_kib() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .ok_or("no VmRSS in /proc/self/status")?;
    Ok(line.trim().trim_end_matches("kB").trim().parse()?)
}

/// How the calls of one rank ended.
#[derive(Debug, Default)]
struct Tally {
    ok: u64,
    deadline: u64,
    dropped: u64,
    other: u64,
}

/// Resident memory over the run.
#[derive(Debug, Default)]
struct Memory {
    samples: Vec<u64>,
    /// The index of the first sample after the warm-up.
    warm: Option<usize>,
}

impl Memory {
    fn sample(&mut self) -> Result<u64> {
        let kib = rss_kib()?;
        self.samples.push(kib);
        Ok(kib)
    }

    /// Marks the warm-up's end at the latest sample (once).
    fn warmed_up(&mut self) {
        if self.warm.is_none() {
            self.warm = Some(self.samples.len().saturating_sub(1));
        }
    }

    /// The first sample after the warm-up, the largest one after it, and
    /// whether the largest stays within an eighth plus 8 MiB of the first.
    fn verdict(&self) -> (u64, u64, bool) {
        let from = self
            .warm
            .unwrap_or(0)
            .min(self.samples.len().saturating_sub(1));
        let base = self.samples.get(from).copied().unwrap_or(0);
        let peak = self.samples[from..].iter().copied().max().unwrap_or(base);
        (base, peak, peak <= base + base / 8 + 8 * 1024)
    }
}

fn rank_main(launch: LaunchEnv, calls: u64) -> Result<()> {
    let mut builder = Runtime::builder(
        launch.run_id(),
        ProtocolLimits::default(),
        RuntimeLimits::default(),
    )?;
    builder.domain(SLOW, NonZeroUsize::MIN)?;
    builder.register::<Add, _>(|Add(n)| Ok(n + 1))?;
    builder.register_with_context::<Slow, _>(SLOW, |Slow { micros, n }, ctx| {
        let until = Instant::now() + Duration::from_micros(micros);
        while Instant::now() < until {
            if ctx.is_cancelled() {
                return Err(ActionError::new("cancelled"));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(n)
    })?;
    let hello = builder.hello()?;
    let (handle, driver) = TcpTransport::connect(launch.rendezvous()?, hello)?;
    let mut runtime = builder.start(handle, driver)?;
    let (me, world) = (runtime.rank(), runtime.world());
    let mine = calls / u64::from(world.get())
        + u64::from(u64::from(me.get()) < calls % u64::from(world.get()));
    let started = Instant::now();
    let (tally, memory) = soak(&mut runtime, mine)?;
    let elapsed = started.elapsed();
    runtime.barrier(PATIENCE)?;
    let report = runtime.shutdown(Duration::from_secs(30))?;
    let (base, peak, steady) = memory.verdict();
    println!(
        "soak: rank {}: {mine} calls in {:.1} s ({:.0}/s): {} answered, {} past their deadline, {} dropped, {} other; rss {} KiB after warm-up, peak after {} KiB over {} samples: {}; shutdown clean: {}",
        me.get(),
        elapsed.as_secs_f64(),
        mine as f64 / elapsed.as_secs_f64(),
        tally.ok,
        tally.deadline,
        tally.dropped,
        tally.other,
        base,
        peak,
        memory.samples.len(),
        if steady { "steady" } else { "GREW" },
        report.is_clean(),
    );
    if tally.ok + tally.deadline + tally.dropped + tally.other != mine {
        return Err(format!("rank {}: calls lost: {tally:?} of {mine}", me.get()).into());
    }
    if tally.other > 0 {
        return Err(format!("rank {}: unexpected outcomes: {tally:?}", me.get()).into());
    }
    if !steady {
        return Err(format!(
            "rank {}: resident memory grew after the warm-up: {base} KiB then {peak} KiB ({:?})",
            me.get(),
            memory.samples
        )
        .into());
    }
    if !report.is_clean() {
        return Err(format!("rank {}: unclean shutdown: {report}", me.get()).into());
    }
    Ok(())
}

/// Makes `calls` calls from this rank, [`IN_FLIGHT`] at a time.
fn soak(runtime: &mut Runtime, calls: u64) -> Result<(Tally, Memory)> {
    let client = runtime.client();
    let world = runtime.world();
    let mut rng = 0x50a4_u64 ^ u64::from(runtime.rank().get()).wrapping_mul(0x9e37);
    let mut tally = Tally::default();
    let mut memory = Memory::default();
    memory.sample()?;
    let mut next_sample = Instant::now() + Duration::from_secs(1);
    let warm_up = calls / 5;
    // What each slot's call should answer (`None`: none is right).
    let mut expected = vec![None; IN_FLIGHT];
    let mut set: CallSet<u64> = CallSet::with_capacity(IN_FLIGHT);
    let mut issued = 0;
    let mut ended = 0;
    while ended < calls {
        while issued < calls && set.len() < IN_FLIGHT {
            let r = splitmix64(&mut rng);
            let target = world.rank((r % u64::from(world.get())) as u32)?;
            let n = r >> 8;
            match r % 100 {
                // One call in ten is dropped at once: its cancellation
                // races its request.
                0..=9 => {
                    drop(client.spawn_on(target, Add(n)));
                    tally.dropped += 1;
                    ended += 1;
                }
                // One in ten works longer than its deadline allows.
                10..=19 => {
                    let deadline = Duration::from_micros(200 + r % 800);
                    let slow = Slow {
                        micros: 2_000 + (r >> 16) % 3_000,
                        n,
                    };
                    let slot = set
                        .push(client.spawn_on_with(target, slow, SpawnOptions::deadline(deadline)))
                        .map_err(|_| "the call set is full")?;
                    expected[slot] = None;
                }
                // The rest: random deadlines from 50 ms to 5 s.
                _ => {
                    let deadline = Duration::from_millis(50 + (r >> 20) % 4_950);
                    let slot = set
                        .push(client.spawn_on_with(
                            target,
                            Add(n),
                            SpawnOptions::deadline(deadline),
                        ))
                        .map_err(|_| "the call set is full")?;
                    expected[slot] = Some(n + 1);
                }
            }
            issued += 1;
        }
        if set.is_empty() {
            continue;
        }
        let (slot, result) = runtime
            .block_on(set.join_next())
            .ok_or("the call set ended early")?;
        ended += 1;
        match (result, expected[slot]) {
            (Ok(answer), Some(right)) if answer == right => tally.ok += 1,
            (Err(RuntimeError::DeadlineExceeded { .. }), _) => tally.deadline += 1,
            (Ok(_), None) => tally.ok += 1,
            (other, right) => {
                eprintln!("soak: unexpected outcome {other:?} (expected {right:?})");
                tally.other += 1;
            }
        }
        if Instant::now() >= next_sample {
            next_sample += Duration::from_secs(1);
            memory.sample()?;
            if ended >= warm_up {
                memory.warmed_up();
            }
        }
    }
    memory.sample()?;
    memory.warmed_up();
    Ok((tally, memory))
}

/// `--calls N` from the command line.
fn calls_arg() -> Result<u64> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().position(|a| a == "--calls") {
        Some(at) => Ok(args
            .get(at + 1)
            .ok_or("--calls needs a number")?
            .replace('_', "")
            .parse()?),
        None => Ok(DEFAULT_CALLS),
    }
}

/// Not started by `dinah-run`: start four ranks of this program through
/// the same launcher library, passing the arguments on.
fn launch_self(calls: u64) -> Result<ExitCode> {
    let exe = std::env::current_exe()?;
    println!(
        "soak: launching 4 ranks of {} for {calls} calls",
        exe.display()
    );
    let config = LaunchConfig::new(WorldSize::new(4)?, exe)
        .args(["--calls".to_owned(), calls.to_string()])
        .timeout(Duration::from_secs(3600));
    let report = launch(&config, Arc::new(PrefixedStdio));
    if !report.is_success() {
        eprintln!("soak: {report}");
    }
    Ok(ExitCode::from(report.exit_code()))
}

fn main() -> ExitCode {
    let outcome = calls_arg().and_then(|calls| match LaunchEnv::from_env() {
        Ok(env) => rank_main(env, calls).map(|()| ExitCode::SUCCESS),
        Err(LaunchError::Env {
            var,
            problem: EnvProblem::Missing,
        }) if var == ENV_RANK => launch_self(calls),
        Err(error) => Err(error.into()),
    });
    outcome.unwrap_or_else(|error| {
        eprintln!("soak: {error}");
        ExitCode::FAILURE
    })
}
