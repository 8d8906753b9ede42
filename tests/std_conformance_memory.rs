//! The transport conformance suite over the in-memory transport in
//! threaded mode: one owner thread per rank, at world sizes 1, 2 and 4.

#[path = "support/conformance.rs"]
#[macro_use]
mod conformance;

use std::sync::Arc;

use conformance::{Case, RankCtx, RankState};
use dinah_core::WorldSize;
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};

fn run_threaded(_test: &str, world_size: u32, name: &'static str, case: Case) {
    let world = WorldSize::new(world_size).unwrap();
    let network = SimNetwork::with_mode(
        world,
        u64::from(world_size),
        FaultPlan::new(),
        SimMode::Threaded,
    )
    .unwrap();
    let ranks: Vec<_> = world
        .ranks()
        .map(|rank| {
            let network = network.clone();
            std::thread::Builder::new()
                .name(format!("rank-{}", rank.get()))
                .spawn(move || {
                    let state = Arc::new(RankState::default());
                    let builder = conformance::builder(&state);
                    let hello = builder.hello().unwrap();
                    let (handle, driver) = network.endpoint(rank, hello.handle).unwrap();
                    let runtime = builder.start(handle, driver).unwrap();
                    conformance::run_case(name, case, RankCtx::new(runtime, state));
                })
                .unwrap()
        })
        .collect();
    let failures: Vec<_> = ranks
        .into_iter()
        .enumerate()
        .filter_map(|(rank, t)| t.join().err().map(|_| rank))
        .collect();
    assert!(
        failures.is_empty(),
        "case {name} at world size {world_size} failed on rank(s) {failures:?}"
    );
}

conformance_tests!(run_threaded);
