//! Two ranks in one process, each with its own runtime on its own thread,
//! talking over the in-memory transport: typed remote actions, a deadline
//! that expires, a cancelled call, a scope, statistics and the shutdown
//! report.
//!
//! ```sh
//! cargo run --example remote_actions
//! ```
#![expect(clippy::print_stdout, reason = "an example reports what it does")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dinah::core::{ProtocolLimits, Rank, RuntimeLimits, WorldSize};
use dinah::std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah::std::{
    Action, ActionError, CodecError, Runtime, RuntimeError, SegmentReader, SegmentWriter,
    SpawnOptions, WireValue, schema_id,
};

/// Sums the integers in `start..end` on the target rank.
struct SumRange {
    start: u64,
    end: u64,
}

impl WireValue for SumRange {
    const SCHEMA_ID: u64 = schema_id("example.SumRange/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        (self.start, self.end).encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let (start, end) = <(u64, u64)>::decode(input)?;
        Ok(SumRange { start, end })
    }
}

impl Action for SumRange {
    const ID: u128 = 0x5a3e_0000_0000_0001;
    type Output = u64;
}

/// Works for `millis` milliseconds, stopping early if cancelled.
struct SlowTask {
    millis: u64,
}

impl WireValue for SlowTask {
    const SCHEMA_ID: u64 = schema_id("example.SlowTask/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.millis.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(|millis| SlowTask { millis })
    }
}

impl Action for SlowTask {
    const ID: u128 = 0x5a3e_0000_0000_0002;
    type Output = String;
}

const RUN_ID: u64 = 2026;

fn rank_main(
    rank: Rank,
    network: SimNetwork,
    done: Arc<[AtomicBool; 2]>,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let mut builder =
        Runtime::builder(RUN_ID, ProtocolLimits::default(), RuntimeLimits::default())?;
    builder.register::<SumRange, _>(|SumRange { start, end }| Ok((start..end).sum()))?;
    builder.register_with_context::<SlowTask, _>(
        dinah::std::DEFAULT_DOMAIN,
        |SlowTask { millis }, ctx| {
            for _ in 0..millis {
                if ctx.is_cancelled() {
                    return Err(ActionError::new("stopped early: cancelled"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(format!("worked {millis} ms"))
        },
    )?;
    let hello = builder.hello()?;
    let (handle, driver) = network.endpoint(rank, hello.handle)?;
    let mut runtime = builder.start(handle, driver)?;
    let client = runtime.client();
    let world = runtime.world();
    let peer = world.rank(1 - rank.get())?;
    let mut log = Vec::new();

    if rank == Rank::ZERO {
        // Split 0..1_000_000 between both ranks (one of the calls is local).
        let halves = [
            client.spawn_on(
                rank,
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
        log.push(format!(
            "sum of 0..1_000_000 over two ranks = {total} (expected {})",
            999_999u64 * 1_000_000 / 2
        ));

        // A deadline that expires before the work is done.
        let short = SpawnOptions::deadline(Duration::from_millis(20));
        match runtime.block_on(client.spawn_on_with(peer, SlowTask { millis: 500 }, short)) {
            Err(RuntimeError::DeadlineExceeded { after }) => {
                log.push(format!("slow task: deadline of {after:?} exceeded"))
            }
            other => log.push(format!("slow task: unexpected {other:?}")),
        }

        // A scope: the call is cancelled when the scope ends unawaited.
        runtime.scope(|s| {
            let _abandoned = s.spawn_on(peer, SlowTask { millis: 10_000 });
            log.push("scope: left with a 10 s task still running; it is cancelled".to_owned());
        });
        log.push(format!("rank 0 stats: {}", runtime.stats()));
    }

    // Both ranks keep serving until both are done.
    done[rank.index()].store(true, Ordering::SeqCst);
    runtime.block_on(std::future::poll_fn(|_| {
        if done.iter().all(|d| d.load(Ordering::SeqCst)) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }));
    let report = runtime.shutdown(Duration::from_secs(5))?;
    log.push(format!(
        "rank {} shutdown: clean = {}, {report}",
        rank.get(),
        report.is_clean()
    ));
    Ok(log.join("\n"))
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let world = WorldSize::new(2)?;
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded)?;
    let done = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let ranks: Vec<_> = world
        .ranks()
        .map(|rank| {
            let (network, done) = (network.clone(), Arc::clone(&done));
            std::thread::spawn(move || rank_main(rank, network, done))
        })
        .collect();
    for rank in ranks {
        let log = rank.join().map_err(|_| "a rank panicked")??;
        println!("{log}");
    }
    Ok(())
}
