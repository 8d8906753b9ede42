//! The CI lanes: what each runs and how long it may take.
//!
//! `cargo xtask ci` runs [`ALL`] in order and stops at the first failure.
//! xtask alone adds `-D warnings`; the lint lists live in `Cargo.toml`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cmd::Cmd;
use crate::{demo, mpi, project_root};

/// One CI lane.
#[derive(Debug)]
pub(crate) struct Lane {
    pub(crate) name: &'static str,
    pub(crate) what: &'static str,
    /// The watchdog limit for the whole lane.
    pub(crate) limit: Duration,
    run: fn(&LaneRun) -> Result<()>,
}

/// A lane while it runs: builds commands whose timeout is what is left of
/// the lane's limit.
#[derive(Debug)]
pub(crate) struct LaneRun {
    name: &'static str,
    deadline: Instant,
}

impl LaneRun {
    pub(crate) fn new(name: &'static str, limit: Duration) -> Self {
        Self {
            name,
            deadline: Instant::now() + limit,
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// A command with the rest of this lane's time as its limit.
    pub(crate) fn cmd(&self, program: impl AsRef<OsStr>) -> Cmd {
        let left = self.deadline.saturating_duration_since(Instant::now());
        Cmd::new(self.name, program).timeout(left.max(Duration::from_secs(1)))
    }

    /// A command limited to `limit` or to the rest of this lane's time,
    /// whichever ends first.
    pub(crate) fn cmd_within(&self, program: impl AsRef<OsStr>, limit: Duration) -> Cmd {
        let left = self.deadline.saturating_duration_since(Instant::now());
        Cmd::new(self.name, program).timeout(left.min(limit).max(Duration::from_secs(1)))
    }

    /// `cargo` with the given arguments.
    pub(crate) fn cargo<I, S>(&self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.cmd("cargo").args(args)
    }
}

impl Lane {
    pub(crate) fn run(&self) -> Result<()> {
        (self.run)(&LaneRun::new(self.name, self.limit))
    }
}

const fn minutes(n: u64) -> Duration {
    Duration::from_secs(n * 60)
}

/// Every lane, in CI order.
pub(crate) const ALL: &[Lane] = &[
    Lane {
        name: "fmt",
        what: "cargo fmt --check",
        limit: minutes(3),
        run: fmt,
    },
    Lane {
        name: "clippy",
        what: "clippy -D warnings: all targets, the libraries alone, then everything with MPI",
        limit: minutes(20),
        run: clippy,
    },
    Lane {
        name: "doc",
        what: "rustdoc -D warnings",
        limit: minutes(15),
        run: doc,
    },
    Lane {
        name: "portability",
        what: "cargo check of the default workspace for macOS and Windows (no linker needed)",
        limit: minutes(15),
        run: portability,
    },
    Lane {
        name: "test",
        what: "cargo test (unit, integration, doc, repo checks)",
        limit: minutes(25),
        run: test,
    },
    Lane {
        name: "sim-long",
        what: "fault-injection property test over 20,000 more seeds (release)",
        limit: minutes(15),
        run: sim_long,
    },
    Lane {
        name: "examples",
        what: "run every non-MPI example (tcp_hello under dinah-run -n 2)",
        limit: minutes(10),
        run: examples,
    },
    Lane {
        name: "soak",
        what: "four ranks over TCP, 1,000,000 calls with random deadlines and drops, memory watched",
        limit: minutes(5),
        run: soak,
    },
    Lane {
        name: "msrv",
        what: "build and test on Rust 1.85.0",
        limit: minutes(25),
        run: msrv,
    },
    Lane {
        name: "nostd",
        what: "dinah-core on thumbv7em, no std/alloc in its tree",
        limit: minutes(10),
        run: nostd,
    },
    Lane {
        name: "embedded",
        what: "dinah-core on a Cortex-M4F under QEMU (mps2-an386): the firmware's checks, then its sizes",
        limit: minutes(10),
        run: embedded,
    },
    Lane {
        name: "loom",
        what: "loom model checks of dinah-core's atomics",
        limit: minutes(15),
        run: loom,
    },
    Lane {
        name: "miri",
        what: "dinah-core's and the scheduler's tests under Miri",
        limit: minutes(20),
        run: miri,
    },
    Lane {
        name: "mpi",
        what: "MPI tests under mpirun at 1, 2 and 4 ranks, the MPI example at 4, tcp_hello under mpirun at 4",
        limit: minutes(20),
        run: mpi_lane,
    },
    Lane {
        name: "mpi-mpich",
        what: "the mpi lane against MPICH: built with mpicc.mpich, run under mpiexec.mpich (tcp_hello too)",
        limit: minutes(20),
        run: mpi_mpich_lane,
    },
    Lane {
        name: "fuzz",
        what: "each cargo-fuzz target for a bounded time",
        limit: minutes(15),
        run: fuzz,
    },
    Lane {
        name: "bench-smoke",
        what: "every benchmark once, briefly",
        limit: minutes(20),
        run: bench_smoke,
    },
];

/// Looks a lane up by name.
pub(crate) fn find(name: &str) -> Result<&'static Lane> {
    ALL.iter().find(|lane| lane.name == name).with_context(|| {
        let names: Vec<_> = ALL.iter().map(|lane| lane.name).collect();
        format!("no lane named `{name}`; lanes are: {}", names.join(", "))
    })
}

/// The packages that need MPI; every lane but the MPI ones leaves them out.
const MPI_PACKAGES: &[&str] = &["dinah-mpi"];

fn exclude_mpi() -> Vec<String> {
    let mut args = vec!["--workspace".to_owned()];
    for package in MPI_PACKAGES {
        args.push("--exclude".to_owned());
        args.push((*package).to_owned());
    }
    args
}

/// The MSRV toolchain, as `cargo +1.85.0`.
pub(crate) const MSRV: &str = "1.85.0";
/// The no_std target the core must build for.
pub(crate) const NOSTD_TARGET: &str = "thumbv7em-none-eabihf";

/// The targets the `portability` lane checks the default workspace for:
/// the platforms users write code on besides Linux. Checking needs each
/// target's standard library, not its linker.
pub(crate) const PORTABILITY_TARGETS: &[&str] = &["x86_64-apple-darwin", "x86_64-pc-windows-msvc"];

fn fmt(lane: &LaneRun) -> Result<()> {
    lane.cargo(["fmt", "--all", "--check"]).run()?;
    for manifest in standalone_manifests() {
        lane.cargo(["fmt", "--check", "--manifest-path"])
            .arg(manifest)
            .run()?;
    }
    Ok(())
}

fn clippy(lane: &LaneRun) -> Result<()> {
    lane.cargo(["clippy"])
        .args(exclude_mpi())
        .args(["--all-targets", "--", "-D", "warnings"])
        .run()?;
    // The libraries alone, without the features the tests' dev-dependencies
    // turn on (`tracing`, `serde`): the code those features leave out must
    // be clean too.
    lane.cargo(["clippy"])
        .args(exclude_mpi())
        .args(["--lib", "--bins", "--", "-D", "warnings"])
        .run()?;
    mpi::require_toolchain(lane.name(), mpi::Library::OpenMpi)?;
    lane.cargo([
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ])
    .run()
}

fn doc(lane: &LaneRun) -> Result<()> {
    mpi::require_toolchain(lane.name(), mpi::Library::OpenMpi)?;
    lane.cargo(["doc", "--no-deps", "--workspace", "--all-features"])
        .env("RUSTDOCFLAGS", "-D warnings")
        .run()
}

fn portability(lane: &LaneRun) -> Result<()> {
    // Every target of every default member for macOS; libraries and
    // binaries for Windows, whose tests and examples use Unix processes
    // and signals.
    for &target in PORTABILITY_TARGETS {
        let mut check = lane.cargo(["check", "--target", target]);
        if target.contains("apple") {
            check = check.arg("--all-targets");
        }
        check.run()?;
    }
    Ok(())
}

fn test(lane: &LaneRun) -> Result<()> {
    lane.cargo(["test"]).args(exclude_mpi()).run()
}

fn sim_long(lane: &LaneRun) -> Result<()> {
    // The `test` lane runs seeds 0..1000 of the same property; this one
    // continues from there, in release. `cargo xtask sim --seeds 100000` is the
    // on-demand size.
    crate::sim::run(
        lane,
        &crate::sim::SimArgs {
            seeds: crate::sim::CI_SEEDS,
            base: crate::sim::FIRST_SEED,
        },
    )
}

/// Examples that are programs for `dinah-run` (they fail without it), with
/// the ranks the `examples` lane starts; it runs the others bare.
const LAUNCHED_EXAMPLES: &[(&str, u32)] = &[("tcp_hello", 2)];

/// The launcher's bound on the run of each launched example.
const LAUNCHED_EXAMPLE_LIMIT: Duration = Duration::from_secs(60);

/// How the `examples` lane runs one example.
#[derive(Debug, PartialEq, Eq)]
enum ExampleRun<'a> {
    /// `cargo run --release --example NAME`.
    Bare(&'a str),
    /// Under `dinah-run -n RANKS`, built in release.
    Launched(&'a str, u32),
}

/// The runs of the `examples` lane, in the order of `names`: every
/// example but the MPI ones (`mpi_*`, which the `mpi` lane runs).
fn example_runs(names: &[String]) -> Vec<ExampleRun<'_>> {
    names
        .iter()
        // MPI examples run in the `mpi` lane, the soak in its own.
        .filter(|name| !name.starts_with("mpi_") && name.as_str() != "soak")
        .map(|name| {
            match LAUNCHED_EXAMPLES
                .iter()
                .find(|(launched, _)| launched == name)
            {
                Some(&(_, ranks)) => ExampleRun::Launched(name, ranks),
                None => ExampleRun::Bare(name),
            }
        })
        .collect()
}

fn examples(lane: &LaneRun) -> Result<()> {
    let names = example_names(&project_root().join("examples"))?;
    let runs = example_runs(&names);
    if runs.is_empty() {
        bail!("lane `examples`: no examples found under examples/");
    }
    for run in runs {
        match run {
            ExampleRun::Bare(name) => lane
                .cargo(["run", "--release", "--example"])
                .arg(name)
                .run()?,
            ExampleRun::Launched(name, ranks) => {
                demo::run_launched(lane, name, ranks, LAUNCHED_EXAMPLE_LIMIT)?;
            }
        }
    }
    Ok(())
}

fn soak(lane: &LaneRun) -> Result<()> {
    crate::soak::run(lane, crate::soak::CI_CALLS)
}

fn msrv(lane: &LaneRun) -> Result<()> {
    let toolchain = format!("+{MSRV}");
    let mut excludes = exclude_mpi();
    excludes.extend(["--exclude".to_owned(), "xtask".to_owned()]);
    lane.cargo([toolchain.as_str(), "build", "--all-targets"])
        .args(&excludes)
        .run()?;
    lane.cargo([toolchain.as_str(), "test"])
        .args(&excludes)
        .run()?;
    mpi::require_toolchain(lane.name(), mpi::Library::OpenMpi)?;
    lane.cargo([
        toolchain.as_str(),
        "build",
        "--all-targets",
        "--package",
        "dinah-mpi",
    ])
    .run()
}

/// Every feature combination `dinah-core` offers to no_std users.
const CORE_FEATURE_SETS: &[&[&str]] = &[&[], &["portable-atomic-critical-section"]];

fn nostd(lane: &LaneRun) -> Result<()> {
    for features in CORE_FEATURE_SETS {
        let mut cmd = lane.cargo([
            "build",
            "--package",
            "dinah-core",
            "--target",
            NOSTD_TARGET,
            "--no-default-features",
        ]);
        if !features.is_empty() {
            cmd = cmd.arg("--features").arg(features.join(","));
        }
        cmd.run()?;
    }
    // The link check: a `#![no_std]` binary with its own panic handler that
    // depends on dinah-core. If anything in the tree links `std`, the build
    // fails with a duplicate `panic_impl` lang item; if anything needs
    // `alloc`, it fails for want of a global allocator.
    let check = project_root().join("ci/nostd-check/Cargo.toml");
    lane.cargo(["build", "--manifest-path"]).arg(&check).run()?;
    lane.cargo(["build", "--manifest-path"])
        .arg(&check)
        .args(["--target", NOSTD_TARGET])
        .run()
}

fn embedded(lane: &LaneRun) -> Result<()> {
    crate::embedded::run(lane)
}

fn loom(lane: &LaneRun) -> Result<()> {
    // A separate target directory: the cfg changes every crate's build, and
    // sharing would throw away the normal build's artifacts each time.
    let cmd = lane
        .cargo([
            "test",
            "--package",
            "dinah-core",
            "--release",
            "--test",
            "loom",
        ])
        .env("RUSTFLAGS", "--cfg dinah_loom")
        .env("CARGO_TARGET_DIR", target_dir().join("loom"))
        .env("LOOM_MAX_PREEMPTIONS", "2");
    // `tests/loom.rs` is `#![cfg(dinah_loom)]`: if the cfg did not reach
    // rustc (`CARGO_ENCODED_RUSTFLAGS` in the environment wins over
    // `RUSTFLAGS`, for instance), the binary holds no tests and would pass
    // without checking anything. Refuse that.
    let listing = cmd.clone().args(["--", "--list"]).read()?;
    let tests = listed_tests(&listing);
    if tests == 0 {
        bail!(
            "lane `{}`: the loom test binary contains no tests; `--cfg dinah_loom` did not \
             reach rustc (is CARGO_ENCODED_RUSTFLAGS set?)",
            lane.name()
        );
    }
    println!("==> [{}] {tests} loom models", lane.name());
    cmd.run()
}

/// The number of tests a libtest `--list` printed (`name: test` lines).
fn listed_tests(listing: &str) -> usize {
    listing
        .lines()
        .filter(|line| line.ends_with(": test"))
        .count()
}

/// Property-test cases under Miri: the interpreter is ~1000x slower (the core
/// has no `unsafe`; Miri guards its dependencies and atomics), the
/// properties run in full in the `test` lane.
const MIRI_PROPTEST_CASES: &str = "2";

fn miri(lane: &LaneRun) -> Result<()> {
    // Every dinah-core test runs: unit, integration (property tests with
    // few cases, stress tests with the `cfg(miri)` round counts) and doc
    // tests. Isolation stays on: the property tests turn off proptest's
    // failure file under `cfg(miri)`, so nothing needs the file system or
    // the host clock, and runs are reproducible.
    let nightly = format!("+{}", crate::setup::NIGHTLY);
    let target = miri_target_dir(&target_dir(), &project_root());
    let miri_test = |args: &[&str]| {
        lane.cargo([nightly.as_str(), "miri", "test"].iter().chain(args))
            .env("CARGO_TARGET_DIR", &target)
    };
    miri_test(&["--package", "dinah-core"])
        .env("PROPTEST_CASES", MIRI_PROPTEST_CASES)
        .env("MIRIFLAGS", "-Zmiri-env-forward=PROPTEST_CASES")
        .run()?;
    // The only `unsafe` outside the FFI crates: the scheduler's
    // uninitialised result slots. Its unit tests use `cfg(miri)` sizes.
    // (dinah-mpi's `unsafe` is MPI calls, dinah-launch's the launcher's
    // libc calls, and dinah-tcp's its socket reads and its registrations
    // with the poller, all of which Miri cannot execute.) Also the batch results, which free their
    // failures by hand (safe code, but Miri's leak check proves each one
    // is freed once). And a frame's tail of numbers (`transport::tail`),
    // cast between vectors of one layout by bytemuck's `unsafe`, the
    // packed numbers read into new vectors (`action::packed`) and the
    // spare buffers that keep tails of numbers (`transport::frame_buffers`).
    // dinah-std's unit tests whose names start with one of `filters`.
    let std_unit_tests = |filters: &[&str]| {
        let args: Vec<&str> = ["--package", "dinah-std", "--lib", "--"]
            .iter()
            .chain(filters)
            .copied()
            .collect();
        miri_test(&args)
    };
    std_unit_tests(&[
        "scheduler::",
        "domain::batch_results::",
        "transport::tail::",
        "transport::frame_buffers::",
        "action::packed::",
    ])
    .run()?;
    // The other: the uninitialised result slots of domain batches, which
    // `batch_drive`'s unit tests fill through real domains, on the caller
    // and on Rayon workers, and the helper jobs that borrow the batch
    // through an erased lifetime (`domain::helpers`). Rayon's deques use crossbeam-epoch, which
    // Stacked Borrows rejects and whose tagged pointers (integer casts)
    // hide its global garbage lists from Miri's leak check, so these run
    // under Tree Borrows with permissive provenance and without the leak
    // check; use-after-free, double drops and reads of unwritten slots
    // are still caught. (`batch_results`' own tests above keep the leak
    // check for the failures a batch frees by hand.)
    std_unit_tests(&["domain::batch_drive::", "domain::helpers::"])
        .env(
            "MIRIFLAGS",
            "-Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-ignore-leaks",
        )
        .run()
}

/// Where the miri lane builds: a directory per checkout under `target`.
///
/// cargo-miri's test "binaries" are files recording how to run the test
/// (the checkout's directory and environment at the time they were first
/// built), and cargo does not rewrite them when only the checkout moved.
/// Two clones sharing one target directory would otherwise run each
/// other's tests, or fail once the other clone is gone.
fn miri_target_dir(target: &Path, root: &Path) -> PathBuf {
    let name: String = root
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    target.join("miri-by-checkout").join(name.trim_matches('-'))
}

/// How long each fuzz target runs in CI (`DINAH_FUZZ_SECONDS` overrides).
const FUZZ_SECONDS_DEFAULT: u64 = 60;

fn fuzz(lane: &LaneRun) -> Result<()> {
    let seconds = std::env::var("DINAH_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(FUZZ_SECONDS_DEFAULT);
    let dir = project_root().join("fuzz");
    let targets = rust_file_stems(&dir.join("fuzz_targets"))?;
    if targets.is_empty() {
        bail!("lane `fuzz`: no fuzz targets under fuzz/fuzz_targets");
    }
    let nightly = format!("+{}", crate::setup::NIGHTLY);
    for target in targets {
        let corpus = dir.join("corpus").join(&target);
        lane.cargo([nightly.as_str(), "fuzz", "run", "--fuzz-dir"])
            .arg(&dir)
            .arg(&target)
            .arg(&corpus)
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .arg("-print_final_stats=1")
            .env("CARGO_TARGET_DIR", target_dir().join("fuzz"))
            .run()?;
    }
    Ok(())
}

/// Cargo's target directory: `CARGO_TARGET_DIR` or `<root>/target`.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("target"))
}

fn mpi_lane(lane: &LaneRun) -> Result<()> {
    mpi::run_tests(lane, mpi::Library::OpenMpi)?;
    // Unoptimised: it reuses the debug builds of the dependencies the tests
    // just made (only dinah-mpi and dinah are built again, without the
    // test hooks), and the example is quick without optimisation too.
    mpi::run_example(lane, mpi::Library::OpenMpi, mpi::Profile::Dev)?;
    mpi::run_tcp_example(lane, mpi::Library::OpenMpi)
}

fn mpi_mpich_lane(lane: &LaneRun) -> Result<()> {
    mpi::run_tests(lane, mpi::Library::Mpich)?;
    mpi::run_example(lane, mpi::Library::Mpich, mpi::Profile::Dev)?;
    mpi::run_tcp_example(lane, mpi::Library::Mpich)
}

fn bench_smoke(lane: &LaneRun) -> Result<()> {
    let benches = crate::bench::bench_names()?;
    if benches.is_empty() {
        bail!("lane `bench-smoke`: no benchmarks found under benches/");
    }
    // `--test` makes criterion (and the custom harnesses) run every
    // benchmark once without measuring.
    lane.cargo(["bench", "--benches"])
        .args(exclude_mpi())
        .args(["--", "--test"])
        .run()
}

/// Manifests of the standalone crates that `--workspace` does not reach.
fn standalone_manifests() -> Vec<PathBuf> {
    [
        "ci/nostd-check/Cargo.toml",
        "ci/firmware/Cargo.toml",
        "fuzz/Cargo.toml",
    ]
    .iter()
    .map(|path| project_root().join(path))
    .filter(|path| path.is_file())
    .collect()
}

/// The names of the examples in `dir` (files `*.rs`), sorted.
pub(crate) fn example_names(dir: &Path) -> Result<Vec<String>> {
    rust_file_stems(dir)
}

/// The stems of the `*.rs` files directly in `dir`, sorted.
pub(crate) fn rust_file_stems(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    if !dir.is_dir() {
        return Ok(names);
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            if let Some(stem) = path.file_stem() {
                names.push(stem.to_string_lossy().into_owned());
            }
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mpich_lane_runs_right_after_the_openmpi_one() {
        let names: Vec<&str> = ALL.iter().map(|lane| lane.name).collect();
        let mpi = names.iter().position(|&name| name == "mpi").unwrap();
        assert_eq!(names.get(mpi + 1), Some(&"mpi-mpich"), "{names:?}");
    }

    #[test]
    fn listed_tests_counts_only_test_lines() {
        let listing = "loom::mpmc::race: test\nloom::trace::drain: test\n\n2 tests, 0 benchmarks\n";
        assert_eq!(listed_tests(listing), 2);
        assert_eq!(listed_tests("\n0 tests, 0 benchmarks\n"), 0);
    }

    #[test]
    fn the_examples_lane_launches_tcp_hello_with_two_ranks() {
        let names: Vec<String> = [
            "core_basics",
            "mpi_actions",
            "soak",
            "tcp_demo",
            "tcp_hello",
        ]
        .map(String::from)
        .into();
        assert_eq!(
            example_runs(&names),
            [
                ExampleRun::Bare("core_basics"),
                ExampleRun::Bare("tcp_demo"),
                ExampleRun::Launched("tcp_hello", 2),
            ]
        );
    }

    #[test]
    fn every_launched_example_exists() {
        let names = example_names(&project_root().join("examples")).unwrap();
        for (name, _) in LAUNCHED_EXAMPLES {
            assert!(
                names.iter().any(|n| n == name),
                "examples/{name}.rs is missing"
            );
        }
    }

    #[test]
    fn each_checkout_has_its_own_miri_target_dir() {
        let target = Path::new("/cache/target");
        let a = miri_target_dir(target, Path::new("/check/work/main"));
        let b = miri_target_dir(target, Path::new("/tmp/ci-clone"));
        assert_eq!(a, target.join("miri-by-checkout").join("check-work-main"));
        assert_ne!(a, b);
        assert_eq!(a, miri_target_dir(target, Path::new("/check/work/main")));
    }
}
