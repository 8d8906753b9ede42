//! Running programs under OpenMPI's `mpirun`.
//!
//! MPI test targets are the root `tests/mpi_*.rs` files: `harness = false`
//! programs with their own `main` (one `MPI_Init` per process, every case in
//! order on every rank). The `mpi` lane builds each and runs it at the world
//! sizes in [`WORLD_SIZES`], then runs the MPI example ([`EXAMPLE`]) at
//! [`EXAMPLE_RANKS`] ranks, as `cargo xtask demo --mpi` does; a non-zero exit
//! of any rank makes `mpirun` exit non-zero and fails the lane.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cmd::{Cmd, on_path};
use crate::lanes::{LaneRun, rust_file_stems};
use crate::project_root;
use crate::setup::{apt_hint, have_libclang, have_mpi};

/// The world sizes every MPI test runs at.
pub(crate) const WORLD_SIZES: &[u32] = &[1, 2, 4];

/// The MPI example: `examples/mpi_actions.rs`.
pub(crate) const EXAMPLE: &str = "mpi_actions";

/// The world size the MPI example runs at.
pub(crate) const EXAMPLE_RANKS: u32 = 4;

/// The limit for one `mpirun` of one program.
const PER_RUN_LIMIT: Duration = Duration::from_secs(180);

/// Fails with an install hint unless OpenMPI and libclang are present.
pub(crate) fn require_toolchain(lane: &str) -> Result<()> {
    if !have_mpi() {
        bail!(
            "lane `{lane}`: MPI is not installed (no mpicc/mpirun on PATH); install it with:\n    {}",
            apt_hint()
        );
    }
    if !have_libclang() {
        bail!(
            "lane `{lane}`: libclang is missing (the `mpi` crate's bindgen needs it); install it with:\n    {}",
            apt_hint()
        );
    }
    let version = Cmd::new(lane, launcher())
        .arg("--version")
        .quiet()
        .read()
        .unwrap_or_default();
    if !version.contains("Open MPI") && !version.contains("OpenRTE") {
        bail!(
            "lane `{lane}`: `{} --version` does not report Open MPI. dinah's MPI lanes need OpenMPI: \
             MPICH 4.0 deadlocks on a send to self at one rank and runs ~400x slower oversubscribed.\n    {}",
            launcher(),
            apt_hint()
        );
    }
    Ok(())
}

/// `mpirun` if present, else `mpiexec`.
pub(crate) fn launcher() -> &'static str {
    if on_path("mpirun") {
        "mpirun"
    } else {
        "mpiexec"
    }
}

/// An `mpirun -n ranks` command for `lane` with the environment OpenMPI
/// needs here: running as root, 4 ranks on 2 cores (oversubscription, no
/// core binding) and no cross-memory-attach (often denied in containers).
pub(crate) fn mpirun(lane: &str, ranks: u32) -> Cmd {
    Cmd::new(lane, launcher())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("PRTE_MCA_rmaps_default_mapping_policy", ":oversubscribe")
        .env("OMPI_MCA_hwloc_base_binding_policy", "none")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
        .args(["-n", &ranks.to_string(), "--oversubscribe"])
}

/// The MPI test programs: root `tests/mpi_*.rs`.
pub(crate) fn test_names() -> Result<Vec<String>> {
    Ok(rust_file_stems(&project_root().join("tests"))?
        .into_iter()
        .filter(|name| name.starts_with("mpi_"))
        .collect())
}

/// Builds one test target of the root package with the `mpi` feature and
/// returns its executable.
fn build_test(lane: &LaneRun, name: &str) -> Result<PathBuf> {
    let json = lane
        .cargo([
            "test",
            "--no-run",
            "--features",
            "mpi",
            "--message-format=json",
            "--test",
            name,
        ])
        .read()?;
    executable_from_json(&json, name)
}

/// Picks the `"executable"` of the artifact for test `name` out of cargo's
/// JSON messages (no JSON parser needed: cargo escapes paths as JSON
/// strings and ours contain no quotes).
pub(crate) fn executable_from_json(json: &str, name: &str) -> Result<PathBuf> {
    let target_marker = format!("\"name\":\"{name}\"");
    json.lines()
        .filter(|line| {
            line.contains("\"reason\":\"compiler-artifact\"") && line.contains(&target_marker)
        })
        .find_map(|line| {
            let start = line.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + line[start..].find('"')?;
            Some(PathBuf::from(&line[start..end]))
        })
        .with_context(|| format!("cargo reported no executable for test `{name}`"))
}

/// The cargo profile the MPI example is built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// `dev`: the same build of dinah with `mpi` as the test programs.
    Dev,
    /// `release`: what a user runs.
    Release,
}

/// Builds [`EXAMPLE`] with the `mpi` feature in `profile` and runs it under
/// `mpirun -n` [`EXAMPLE_RANKS`]. The example checks its own answers and
/// exits non-zero on a wrong one or a failed call; that exit, or a run
/// longer than the per-run limit, is an error.
pub(crate) fn run_example(lane: &LaneRun, profile: Profile) -> Result<()> {
    require_toolchain(lane.name())?;
    let mut build = lane.cargo([
        "build",
        "--features",
        "mpi",
        "--example",
        EXAMPLE,
        "--message-format=json",
    ]);
    if profile == Profile::Release {
        build = build.arg("--release");
    }
    // Cargo names the executable (it honours CARGO_TARGET_DIR).
    let exe = executable_from_json(&build.read()?, EXAMPLE)?;
    println!("--- {EXAMPLE} at {EXAMPLE_RANKS} ranks");
    mpirun(lane.name(), EXAMPLE_RANKS)
        .arg(exe)
        .timeout(PER_RUN_LIMIT)
        .run()
}

pub(crate) fn run_tests(lane: &LaneRun) -> Result<()> {
    require_toolchain(lane.name())?;
    let names = test_names()?;
    if names.is_empty() {
        bail!(
            "lane `{}`: no MPI test programs (tests/mpi_*.rs) found",
            lane.name()
        );
    }
    // The transport crate's own tests: unit tests of its MPI-free logic and
    // doctests (among them the compile-fail proof that its driver is not
    // `Send`).
    lane.cargo(["test", "--package", "dinah-mpi"]).run()?;
    for name in &names {
        let exe = build_test(lane, name)?;
        for &ranks in WORLD_SIZES {
            println!("--- {name} at {ranks} rank(s)");
            mpirun(lane.name(), ranks)
                .arg(&exe)
                .timeout(PER_RUN_LIMIT)
                .run()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_executable_of_the_named_test() {
        let json = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"other"},"executable":"/t/other-1"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"mpi_smoke"},"executable":"/t/mpi_smoke-2"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        assert_eq!(
            executable_from_json(json, "mpi_smoke").unwrap(),
            PathBuf::from("/t/mpi_smoke-2")
        );
        assert!(executable_from_json(json, "missing").is_err());
    }

    #[test]
    fn the_mpi_example_exists() {
        let path = project_root()
            .join("examples")
            .join(format!("{EXAMPLE}.rs"));
        assert!(path.is_file(), "{} is missing", path.display());
    }

    #[test]
    fn mpirun_sets_root_and_oversubscription() {
        let line = mpirun("mpi", 4).arg("prog").display();
        assert!(line.contains("OMPI_ALLOW_RUN_AS_ROOT=1"));
        assert!(line.contains("-n 4 --oversubscribe prog"));
    }
}
