//! The transport conformance suite over MPI: every case of
//! `tests/support/conformance.rs`, in order, on every rank, each with a
//! fresh runtime over a fresh `MpiTransport` (its own duplicate of
//! `MPI_COMM_WORLD`).
//!
//! A `harness = false` program: `cargo xtask ci --lane mpi` runs it under
//! `mpirun -n 1`, `2` and `4`. By hand:
//!
//! ```sh
//! cargo test --features mpi --test mpi_conformance --no-run
//! mpirun -n 4 --oversubscribe target/debug/deps/mpi_conformance-*
//! ```
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "each rank reports its progress"
)]

#[path = "support/conformance.rs"]
mod conformance;
#[path = "support/mpi_harness.rs"]
mod mpi_harness;

use std::sync::Arc;
use std::time::Duration;

use conformance::{Case, RankCtx, RankState};
use dinah::mpi::mpi::topology::SimpleCommunicator;
use dinah::mpi::{MpiConfig, MpiTransport};

/// The liveness timeout of the suite's transports. The cases load four
/// ranks, each with up to eight calling threads, onto the CI machine's two
/// cores; under MPICH, whose progress engine spins when oversubscribed, a
/// rank was once silent past the default 5 s there. Liveness itself is
/// tested by `mpi_transport.rs`, with a stopped rank.
const LIVENESS: Duration = Duration::from_secs(30);

/// Builds a fresh runtime over a fresh transport and runs `case` on it.
fn run(world: &SimpleCommunicator, name: &str, case: Case) {
    let state = Arc::new(RankState::default());
    let builder = conformance::builder(&state);
    let hello = builder.hello().expect("the suite's registry is valid");
    let mut config = MpiConfig::DEFAULT;
    config.liveness_timeout = Some(LIVENESS);
    let (handle, driver) = MpiTransport::with_config(config)
        .connect(world, hello)
        .unwrap_or_else(|error| panic!("case {name}: connect: {error}"));
    let runtime = builder
        .start(handle, driver)
        .unwrap_or_else(|error| panic!("case {name}: start: {error}"));
    conformance::run_case(name, case, RankCtx::new(runtime, state));
}

fn main() {
    let mpi = mpi_harness::Harness::init("mpi_conformance");
    for &(name, case) in conformance::CASES {
        mpi.step(name, |world| run(world, name, case));
    }
    mpi.finish();
}
