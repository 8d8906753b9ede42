//! `cargo xtask bench [NAME]...`: the full benchmarks.
//!
//! Benchmarks live in the root `benches/` (criterion or the bench harness
//! there) and compare dinah with its peer (Rayon, raw TCP, raw MPI) in the
//! same run. `--report` runs them all and writes `docs/benchmarks.md`
//! (see `report.rs`).

use anyhow::{Result, bail};

use crate::cmd::Cmd;
use crate::lanes::rust_file_stems;
use crate::project_root;

const LANE: &str = "bench";

/// The benchmark targets: the root `benches/*.rs` files.
pub(crate) fn bench_names() -> Result<Vec<String>> {
    rust_file_stems(&project_root().join("benches"))
}

pub(crate) fn run(names: &[String]) -> Result<()> {
    if let Some(position) = names.iter().position(|name| name == "--report") {
        let mut rest: Vec<&String> = names.iter().collect();
        rest.remove(position);
        return match rest[..] {
            [] => crate::report::run(None),
            [flag, dir] if flag == "--from" => crate::report::run(Some(dir)),
            _ => bail!("usage: cargo xtask bench --report [--from DIR]"),
        };
    }
    let available = bench_names()?;
    if available.is_empty() {
        bail!("no benchmarks have landed yet (benches/ is empty)");
    }
    let selected: Vec<&String> = if names.is_empty() {
        available.iter().collect()
    } else {
        names.iter().collect()
    };
    for name in &selected {
        if !available.contains(name) {
            bail!(
                "no benchmark named `{name}`; available: {}",
                available.join(", ")
            );
        }
    }
    for name in selected {
        if name == MPI_BENCH {
            run_mpi()?;
            continue;
        }
        Cmd::new(LANE, "cargo")
            .args(["bench", "--bench", name])
            .timeout(std::time::Duration::from_secs(3600))
            .run()?;
    }
    Ok(())
}

/// The MPI benchmark: a program for two ranks, so `cargo bench` cannot
/// launch it; it is built with `--no-run` and run under `mpirun -n 2`.
const MPI_BENCH: &str = "mpi";

fn run_mpi() -> Result<()> {
    mpi_command()?.run()
}

/// The MPI benchmark built and ready to run under `mpirun -n 2`.
pub(crate) fn mpi_command() -> Result<Cmd> {
    crate::mpi::require_toolchain(LANE, crate::mpi::Library::OpenMpi)?;
    let json = Cmd::new(LANE, "cargo")
        .args([
            "bench",
            "--no-run",
            "--features",
            "mpi",
            "--bench",
            MPI_BENCH,
            "--message-format=json",
        ])
        .read()?;
    let exe = crate::mpi::executable_from_json(&json, MPI_BENCH)?;
    Ok(crate::mpi::mpirun(LANE, 2)
        .arg(exe)
        .arg("--bench")
        .timeout(std::time::Duration::from_secs(1800)))
}
