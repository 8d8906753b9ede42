//! The transport conformance suite over TCP on loopback: one owner thread
//! per rank in this process, every rank's listener pre-bound on
//! `127.0.0.1:0`, at world sizes 1, 2 and 4.

#[path = "support/conformance.rs"]
mod conformance;

use std::sync::Arc;

use conformance::{Case, RankCtx, RankState};
use dinah_core::WorldSize;
use dinah_tcp::{Membership, TcpTransport};

fn run_tcp(world_size: u32, name: &'static str, case: Case) {
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

macro_rules! conformance_cases {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn world_1() {
                super::run_tcp(1, stringify!($case), super::conformance::$case);
            }
            #[test]
            fn world_2() {
                super::run_tcp(2, stringify!($case), super::conformance::$case);
            }
            #[test]
            fn world_4() {
                super::run_tcp(4, stringify!($case), super::conformance::$case);
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
