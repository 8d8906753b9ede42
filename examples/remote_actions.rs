//! Two ranks in one process, each with its own runtime on its own thread,
//! talking over the in-memory transport: typed remote actions, a deadline
//! that expires, a cancelled call, a scope, statistics, a barrier and the
//! shutdown report. Rank 0 checks the sum and the expired deadline, and the
//! program exits non-zero if either is wrong.
//!
//! ```sh
//! cargo run --example remote_actions
//! ```
#![expect(clippy::print_stdout, reason = "an example reports what it does")]

use std::time::Duration;

use dinah::prelude::*;
use dinah::std::transport::memory::{FaultPlan, SimMode, SimNetwork};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Sums the integers in `start..end` on the target rank.
#[derive(WireValue, Action)]
#[action(name = "example.SumRange/1", output = u64)]
struct SumRange {
    start: u64,
    end: u64,
}

/// Works for `millis` milliseconds, stopping early if cancelled.
#[derive(WireValue, Action)]
#[action(name = "example.SlowTask/1", output = String)]
struct SlowTask {
    millis: u64,
}

const RUN_ID: u64 = 2026;

fn rank_main(rank: Rank, network: SimNetwork) -> Result<String, BoxError> {
    let mut builder =
        Runtime::builder(RUN_ID, ProtocolLimits::default(), RuntimeLimits::default())?;
    builder.register::<SumRange, _>(|SumRange { start, end }| Ok((start..end).sum()))?;
    builder.register_with_context::<SlowTask, _>(DEFAULT_DOMAIN, |SlowTask { millis }, ctx| {
        for _ in 0..millis {
            if ctx.is_cancelled() {
                return Err(ActionError::new("stopped early: cancelled"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(format!("worked {millis} ms"))
    })?;
    let hello = builder.hello()?;
    let (handle, driver) = network.endpoint(rank, hello.handle)?;
    let mut runtime = builder.start(handle, driver)?;
    let mut log = Vec::new();
    // Rank 0 does the work; a failure there is reported after the barrier
    // below, so that rank 1 is not left waiting in it.
    let outcome = if rank == Rank::ZERO {
        lead(&mut runtime, &mut log)
    } else {
        Ok(())
    };

    // Both ranks keep serving until both are done, then shut down together.
    runtime.barrier(Duration::from_secs(30))?;
    let report = runtime.shutdown(Duration::from_secs(5))?;
    log.push(format!(
        "rank {} shutdown: clean = {}, {report}",
        rank.get(),
        report.is_clean()
    ));
    outcome?;
    Ok(log.join("\n"))
}

/// Rank 0: a sum split over both ranks, a deadline that expires and a
/// scope that cancels its call.
fn lead(runtime: &mut Runtime, log: &mut Vec<String>) -> Result<(), BoxError> {
    let client = runtime.client();
    let (me, peer) = (runtime.rank(), runtime.world().rank(1)?);

    // Split 0..1_000_000 between both ranks (one of the calls is local).
    let halves = [
        client.spawn_on(
            me,
            SumRange {
                start: 0,
                end: 500_000,
            },
        ),
        client.spawn_on(
            peer,
            SumRange {
                start: 500_000,
                end: 1_000_000,
            },
        ),
    ];
    let mut total = 0;
    for half in halves {
        total += runtime.block_on(half)?;
    }
    let expected = 999_999u64 * 1_000_000 / 2;
    log.push(format!(
        "sum of 0..1_000_000 over two ranks = {total} (expected {expected})"
    ));
    if total != expected {
        return Err(format!("wrong sum: {total}, expected {expected}").into());
    }

    // A deadline that expires before the work is done.
    let short = SpawnOptions::deadline(Duration::from_millis(20));
    match runtime.block_on(client.spawn_on_with(peer, SlowTask { millis: 500 }, short)) {
        Err(RuntimeError::DeadlineExceeded { after }) => {
            log.push(format!("slow task: deadline of {after:?} exceeded"));
        }
        other => return Err(format!("slow task: expected DeadlineExceeded, got {other:?}").into()),
    }

    // A scope: the call is cancelled when the scope ends unawaited.
    runtime.scope(|s| {
        let _abandoned = s.spawn_on(peer, SlowTask { millis: 10_000 });
        log.push("scope: left with a 10 s task still running; it is cancelled".to_owned());
    });
    log.push(format!("rank 0 stats: {}", runtime.stats()));
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let world = WorldSize::new(2)?;
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded)?;
    let ranks: Vec<_> = world
        .ranks()
        .map(|rank| {
            let network = network.clone();
            std::thread::spawn(move || rank_main(rank, network))
        })
        .collect();
    for rank in ranks {
        let log = rank.join().map_err(|_| "a rank panicked")??;
        println!("{log}");
    }
    Ok(())
}
