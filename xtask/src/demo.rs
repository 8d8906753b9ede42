//! `cargo xtask demo`: dinah's main job, the most complete example there is.
//!
//! By default: `examples/tcp_demo.rs` as four processes on loopback TCP,
//! started by the `dinah-run` launcher exactly as a user would run it
//! (`dinah-run -n 4 -- target/release/examples/tcp_demo`). Both are built
//! in release first, so one command works on a fresh checkout. `--mpi` runs
//! the MPI demo under `mpirun -n 4` instead.
//!
//! [`run_launched`] is the launch itself, shared with the `examples` CI
//! lane, which runs `examples/tcp_hello.rs` the same way.

use std::time::Duration;

use anyhow::{Result, bail};

use crate::lanes::LaneRun;
use crate::mpi;
use crate::project_root;

const LANE: &str = "demo";

/// The TCP demo, run under `dinah-run -n` [`TCP_RANKS`].
const TCP_DEMO: &str = "tcp_demo";

/// The launcher binary of `dinah-tcp`.
const LAUNCHER: &str = "dinah-run";

/// How many ranks the TCP demo runs.
const TCP_RANKS: u32 = 4;

/// The launcher's own bound on the demo run.
const TCP_RUN_LIMIT: Duration = Duration::from_secs(120);

/// What the watchdog allows a launched run beyond the launcher's own bound,
/// so that the launcher normally ends a slow run itself and says why.
const WATCHDOG_MARGIN: Duration = Duration::from_secs(60);

/// A cold release build of the workspace on a small machine.
const BUILD_LIMIT: Duration = Duration::from_secs(30 * 60);

/// Parsed `demo` arguments.
#[derive(Debug, Default)]
pub(crate) struct DemoArgs {
    mpi: bool,
}

impl DemoArgs {
    pub(crate) fn parse(args: &[String]) -> Result<Self> {
        let mut parsed = Self::default();
        for arg in args {
            match arg.as_str() {
                "--mpi" => parsed.mpi = true,
                other => bail!("`demo` does not take `{other}` (only --mpi)"),
            }
        }
        Ok(parsed)
    }
}

fn example_exists(name: &str) -> bool {
    project_root()
        .join("examples")
        .join(format!("{name}.rs"))
        .is_file()
}

pub(crate) fn run(args: &DemoArgs) -> Result<()> {
    if args.mpi {
        if !example_exists(mpi::EXAMPLE) {
            bail!(
                "examples/{}.rs is missing: the MPI demo cannot run without it",
                mpi::EXAMPLE
            );
        }
        // The same build and run as the `mpi` CI lane's, in release.
        return mpi::run_example(
            &LaneRun::new(LANE, BUILD_LIMIT),
            mpi::Library::OpenMpi,
            mpi::Profile::Release,
        );
    }
    run_tcp_demo()
}

/// Runs the TCP demo through the launcher with [`TCP_RANKS`] ranks.
fn run_tcp_demo() -> Result<()> {
    if !example_exists(TCP_DEMO) {
        bail!("examples/{TCP_DEMO}.rs is missing: the demo cannot run without it");
    }
    let lane = LaneRun::new(LANE, BUILD_LIMIT + TCP_RUN_LIMIT + WATCHDOG_MARGIN);
    run_launched(&lane, TCP_DEMO, TCP_RANKS, TCP_RUN_LIMIT)
}

/// Builds `dinah-run` and `examples/<example>.rs` in release, then runs the
/// example as `ranks` processes through the launcher, exactly as a user
/// would (`dinah-run -n <ranks> -- target/release/examples/<example>`).
/// The launcher bounds the run by `limit` and exits non-zero if any rank
/// does, which fails the run.
pub(crate) fn run_launched(
    lane: &LaneRun,
    example: &str,
    ranks: u32,
    limit: Duration,
) -> Result<()> {
    // Cargo names the executables (it honours CARGO_TARGET_DIR).
    let json = lane
        .cargo([
            "build",
            "--release",
            "--bin",
            LAUNCHER,
            "--example",
            example,
            "--message-format=json",
        ])
        .read()?;
    let launcher = mpi::executable_from_json(&json, LAUNCHER)?;
    let exe = mpi::executable_from_json(&json, example)?;
    let ranks = ranks.to_string();
    let timeout = format!("{}s", limit.as_secs());
    lane.cmd_within(launcher, limit + WATCHDOG_MARGIN)
        .args(["-n", ranks.as_str(), "--timeout", timeout.as_str(), "--"])
        .arg(exe)
        .run()
}
