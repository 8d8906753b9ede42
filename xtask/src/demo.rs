//! `cargo xtask demo`: dinah's main job, the most complete example there is.
//!
//! The list below grows with the project; the first entry whose example file
//! exists is run. When no example exists the command says so and fails.

use anyhow::{Result, bail};

use crate::cmd::Cmd;
use crate::mpi;
use crate::project_root;

const LANE: &str = "demo";

/// Examples in order of completeness: the first one present is the demo.
const DEMOS: &[&str] = &["remote_actions", "runtime_basics", "core_basics"];

/// The MPI demo, run under `mpirun -n 4`.
const MPI_DEMO: &str = "mpi_actions";

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
        if !example_exists(MPI_DEMO) {
            bail!(
                "the MPI demo (examples/{MPI_DEMO}.rs) has not landed yet; see the MPI transport issue"
            );
        }
        mpi::require_toolchain(LANE)?;
        Cmd::new(LANE, "cargo")
            .args([
                "build",
                "--release",
                "--features",
                "mpi",
                "--example",
                MPI_DEMO,
            ])
            .run()?;
        let exe = project_root()
            .join("target/release/examples")
            .join(MPI_DEMO);
        return mpi::mpirun(LANE, 4).arg(exe).run();
    }
    let Some(name) = DEMOS.iter().find(|name| example_exists(name)) else {
        bail!(
            "no demo exists yet: none of examples/{{{}}}.rs has landed",
            DEMOS.join(",")
        );
    };
    Cmd::new(LANE, "cargo")
        .args(["run", "--release", "--quiet", "--example", name])
        .run()
}
