//! dinah calls awaited from tokio tasks.
//!
//! Two ranks in one process over the in-memory transport, each progressed
//! by a thread of its own ([`RuntimeThread`]). Tokio tasks on rank 0 call
//! rank 1 and `.await` the results like any other future; a [`CallSet`]
//! keeps 64 calls in flight and takes their results as they finish.
//!
//! ```sh
//! cargo run --example tokio_calls
//! ```
#![expect(clippy::print_stdout, reason = "an example reports what it does")]

use std::time::Duration;

use dinah::core::{ProtocolLimits, RuntimeLimits, WorldSize};
use dinah::std::transport::memory::{FaultPlan, SimMode, SimNetwork};
use dinah::std::{Action, CallSet, Runtime, RuntimeThread, WireValue};

/// Counts the set bits of a word, on the rank it is sent to.
#[derive(WireValue, Action)]
#[action(name = "example.PopCount/1", output = u32)]
struct PopCount(u64);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let world = WorldSize::new(2)?;
    let network = SimNetwork::with_mode(world, 1, FaultPlan::new(), SimMode::Threaded)?;
    let mut ranks = Vec::new();
    for rank in world.ranks() {
        let mut builder = Runtime::builder(1, ProtocolLimits::default(), RuntimeLimits::default())?;
        builder.register::<PopCount, _>(|PopCount(word)| Ok(word.count_ones()))?;
        let (handle, driver) = network.endpoint(rank, builder.hello()?.handle)?;
        ranks.push(RuntimeThread::start(builder, handle, driver)?);
    }
    let client = ranks[0].client().clone();
    let peer = world.rank(1)?;

    let tokio = tokio::runtime::Builder::new_multi_thread().build()?;
    let total = tokio.block_on(async move {
        // Eight tasks, each awaiting its calls one by one.
        let tasks: Vec<_> = (0..8_u64)
            .map(|task| {
                let client = client.clone();
                tokio::spawn(async move {
                    let mut bits = 0;
                    for word in task * 1000..task * 1000 + 100 {
                        bits += client.spawn_on(peer, PopCount(word)).await?;
                    }
                    Ok::<u32, dinah::std::RuntimeError>(bits)
                })
            })
            .collect();
        let mut total = 0;
        for task in tasks {
            total += task.await??;
        }
        // One task, 64 calls in flight, results in the order they finish.
        let mut calls = CallSet::with_capacity(64);
        let mut next = 0_u64;
        while next < 64 {
            calls.push(client.spawn_on(peer, PopCount(next)))?;
            next += 1;
        }
        while let Some((_slot, bits)) = calls.join_next().await {
            total += bits?;
            if next < 1000 {
                calls.push(client.spawn_on(peer, PopCount(next)))?;
                next += 1;
            }
        }
        Ok::<u32, Box<dyn std::error::Error>>(total)
    })?;
    let expected: u32 = (0..8_u64)
        .flat_map(|task| task * 1000..task * 1000 + 100)
        .chain(0..1000)
        .map(u64::count_ones)
        .sum();
    println!("set bits counted on rank 1: {total} (expected {expected})");
    if total != expected {
        return Err("wrong count".into());
    }
    // A shutdown waits for the peers' goodbyes: start every rank's first.
    for rank in &ranks {
        rank.begin_shutdown(Duration::from_secs(10));
    }
    for (rank, runtime) in ranks.into_iter().enumerate() {
        let report = runtime.shutdown(Duration::from_secs(10))?;
        println!("rank {rank}: {report}");
        if !report.is_clean() {
            return Err("unclean shutdown".into());
        }
    }
    Ok(())
}
