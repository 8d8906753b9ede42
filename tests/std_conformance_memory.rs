//! The transport conformance suite over the in-memory transport in
//! threaded mode: one owner thread per rank, at world sizes 1, 2 and 4.

#[path = "support/conformance.rs"]
mod conformance;

use std::sync::Arc;

use conformance::{Case, RankCtx, RankState};
use dinah_core::WorldSize;
use dinah_std::transport::memory::{FaultPlan, SimMode, SimNetwork};

fn run_threaded(world_size: u32, name: &'static str, case: Case) {
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

macro_rules! conformance_cases {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn world_1() {
                super::run_threaded(1, stringify!($case), super::conformance::$case);
            }
            #[test]
            fn world_2() {
                super::run_threaded(2, stringify!($case), super::conformance::$case);
            }
            #[test]
            fn world_4() {
                super::run_threaded(4, stringify!($case), super::conformance::$case);
            }
        }
    )*};
}

conformance_cases!(
    pass,
    reuse,
    handler_error,
    handler_panic,
    deadline_and_late_result,
    cancel_before_start,
    cancel_while_running,
    future_drop_sends_cancel,
    scope_exit_cancels,
    saturation,
    control_under_saturation,
    clean_shutdown,
    shutdown_timeout,
);

#[test]
fn every_case_is_run_here() {
    assert_eq!(
        conformance::CASES.len(),
        13,
        "add the new case to conformance_cases!"
    );
}
