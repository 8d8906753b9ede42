//! MPI smoke test, run by the `mpi` and `mpi-mpich` CI lanes at world sizes
//! 1, 2 and 4 (a `harness = false` program: MPI is initialised once per
//! process and only the main thread calls it).
//!
//! Every rank checks its rank against the world size and exchanges one
//! message around a ring; any failed check panics, the rank exits non-zero
//! and the launcher fails the lane.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the program reports its rank's result"
)]

use dinah::mpi::mpi;
use mpi::traits::{Communicator, Destination, Source};

#[path = "support/mpi_harness.rs"]
mod mpi_harness;

fn main() {
    // Initialises MPI and checks the world size the lane launched.
    let mpi = mpi_harness::Harness::init("mpi_smoke");
    let world = mpi.world();
    let (rank, size) = (world.rank(), world.size());
    assert!(size >= 1, "world size {size}");
    assert!(
        (0..size).contains(&rank),
        "rank {rank} outside world of {size}"
    );

    let next = (rank + 1) % size;
    let previous = (rank + size - 1) % size;
    let sent: u64 = 1_000 + u64::try_from(rank).expect("ranks are non-negative");
    let mut received: u64 = 0;
    mpi::request::scope(|scope| {
        // Immediate send so a ring (and a send to self at one rank) cannot
        // deadlock; the receive blocks until the neighbour's message lands.
        let send = world.process_at_rank(next).immediate_send(scope, &sent);
        world.process_at_rank(previous).receive_into(&mut received);
        send.wait();
    });
    let expected = 1_000 + u64::try_from(previous).expect("ranks are non-negative");
    assert_eq!(
        received, expected,
        "rank {rank} got {received} from rank {previous}"
    );
    println!("mpi_smoke: rank {rank}/{size} exchanged one message with rank {previous} and {next}");
    mpi.finish();
}
