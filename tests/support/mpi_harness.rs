//! The frame of every MPI test program (`harness = false`, run under
//! OpenMPI's `mpirun` by `cargo xtask ci --lane mpi` and under MPICH's
//! `mpiexec.mpich` by `--lane mpi-mpich`): one `MPI_Init` (Funneled) per
//! process, a check of the world size, the program's steps in order on
//! every rank, and the `Universe` dropped (`MPI_Finalize`) only at the very
//! end, after every runtime is gone.
//!
//! A failed check panics; the panic is caught and the whole job is
//! aborted with `MPI_Abort`, so the other ranks never wait for a rank that
//! is gone and `mpirun` exits non-zero at once.
#![allow(dead_code, reason = "each MPI test program uses the helpers it needs")]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use dinah::mpi::mpi;
use mpi::Threading;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::Communicator;

/// The variable through which the CI lanes name the world size they
/// launched a program at.
const EXPECT_WORLD: &str = "DINAH_EXPECT_WORLD";

/// MPI for one test program.
pub(crate) struct Harness {
    program: &'static str,
    universe: Universe,
    world: SimpleCommunicator,
}

impl Harness {
    /// Initialises MPI (Funneled) on this, the main, thread, and checks the
    /// world size against `DINAH_EXPECT_WORLD` when that is set.
    pub(crate) fn init(program: &'static str) -> Self {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Funneled)
            .expect("MPI initialises once per process");
        assert!(
            threading >= Threading::Funneled,
            "MPI granted {threading:?}, dinah needs Funneled"
        );
        let world = universe.world();
        let harness = Self {
            program,
            universe,
            world,
        };
        harness.check_world_size();
        harness
    }

    /// Aborts the job unless the world has the size `DINAH_EXPECT_WORLD`
    /// names (if it is set). A program started by another MPI library's
    /// launcher runs as singletons, each rank 0 of a world of 1, and would
    /// pass every step.
    fn check_world_size(&self) {
        let Ok(expected) = std::env::var(EXPECT_WORLD) else {
            return;
        };
        let (rank, size) = self.rank_and_size();
        if expected.trim().parse::<i32>() == Ok(size) {
            return;
        }
        eprintln!(
            "{}: rank {rank}/{size}: the world has {size} rank(s) but {EXPECT_WORLD}={expected}; \
             was the program started by another MPI library's launcher? Aborting the job",
            self.program
        );
        self.world.abort(101);
    }

    /// `MPI_COMM_WORLD`.
    pub(crate) fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// This rank and the world size.
    pub(crate) fn rank_and_size(&self) -> (i32, i32) {
        (self.world.rank(), self.world.size())
    }

    /// Runs one step on this rank; aborts the job if it panics.
    ///
    /// With `DINAH_MPI_STEPS` set (names separated by commas), only the
    /// steps named there run, on every rank alike: for repeating a few
    /// steps by hand. The `mpi` lane never sets it.
    pub(crate) fn step(&self, name: &str, step: impl FnOnce(&SimpleCommunicator)) {
        let (rank, size) = self.rank_and_size();
        if let Ok(chosen) = std::env::var("DINAH_MPI_STEPS") {
            if !chosen.split(',').any(|chosen| chosen.trim() == name) {
                return;
            }
        }
        let start = Instant::now();
        if catch_unwind(AssertUnwindSafe(|| step(&self.world))).is_err() {
            eprintln!(
                "{}: rank {rank}/{size}: `{name}` failed; aborting the job",
                self.program
            );
            self.world.abort(101);
        }
        println!(
            "{}: rank {rank}/{size}: {name} ok ({:.2?})",
            self.program,
            start.elapsed()
        );
    }

    /// Finalises MPI (waits for every rank). Every runtime must be gone.
    pub(crate) fn finish(self) {
        let Self {
            universe, world, ..
        } = self;
        drop(world);
        drop(universe);
    }
}
