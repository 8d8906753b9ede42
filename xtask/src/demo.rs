//! `cargo xtask demo`: dinah's main job, the most complete example there is.
//!
//! By default: `examples/tcp_demo.rs` as four processes on loopback TCP,
//! started by the `dinah-run` launcher exactly as a user would run it
//! (`dinah-run -n 4 -- target/release/examples/tcp_demo`). Both are built
//! in release first, so one command works on a fresh checkout. `--mpi` runs
//! the MPI demo under `mpirun -n 4` instead.

use std::time::Duration;

use anyhow::{Result, bail};

use crate::cmd::Cmd;
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

/// The launcher's own bound on the demo run (the watchdog adds a minute).
const TCP_RUN_LIMIT: Duration = Duration::from_secs(120);

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
        return mpi::run_example(&LaneRun::new(LANE, BUILD_LIMIT), mpi::Profile::Release);
    }
    run_tcp_demo()
}

/// Builds `dinah-run` and the TCP demo in release, then runs the demo
/// through the launcher with [`TCP_RANKS`] ranks.
fn run_tcp_demo() -> Result<()> {
    if !example_exists(TCP_DEMO) {
        bail!("examples/{TCP_DEMO}.rs is missing: the demo cannot run without it");
    }
    // Cargo names the executables (it honours CARGO_TARGET_DIR).
    let json = Cmd::new(LANE, "cargo")
        .args([
            "build",
            "--release",
            "--bin",
            LAUNCHER,
            "--example",
            TCP_DEMO,
            "--message-format=json",
        ])
        .timeout(BUILD_LIMIT)
        .read()?;
    let launcher = mpi::executable_from_json(&json, LAUNCHER)?;
    let demo = mpi::executable_from_json(&json, TCP_DEMO)?;
    let ranks = TCP_RANKS.to_string();
    let limit = format!("{}s", TCP_RUN_LIMIT.as_secs());
    Cmd::new(LANE, launcher)
        .args(["-n", ranks.as_str(), "--timeout", limit.as_str(), "--"])
        .arg(demo)
        .timeout(TCP_RUN_LIMIT + Duration::from_secs(60))
        .run()
}
