//! The transport conformance suite over TCP on loopback: one owner thread
//! per rank in this process, every rank's listener pre-bound on
//! `127.0.0.1:0`, at world sizes 1, 2 and 4.

#[path = "support/conformance.rs"]
#[macro_use]
mod conformance;

use std::sync::Arc;

use conformance::{Case, RankCtx, RankState};
use dinah_core::WorldSize;
use dinah_tcp::{Membership, TcpTransport};

fn run_tcp(_test: &str, world_size: u32, name: &'static str, case: Case) {
    let world = WorldSize::new(world_size).unwrap();
    let ranks: Vec<_> = Membership::loopback(world)
        .unwrap()
        .into_iter()
        .map(|membership| {
            std::thread::Builder::new()
                .name(format!("rank-{}", membership.rank().get()))
                .spawn(move || {
                    let state = Arc::new(RankState::default());
                    let builder = conformance::builder(&state);
                    let hello = builder.hello().unwrap();
                    let (handle, driver) = TcpTransport::connect(membership, hello).unwrap();
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

conformance_tests!(run_tcp);
