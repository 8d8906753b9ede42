//! `cargo xtask`: the dinah workspace's task runner.
//!
//! ```text
//! cargo xtask ci [--lane NAME]... [--skip NAME]...   every CI lane, in order
//! cargo xtask setup                                  install what is missing
//! cargo xtask demo [--mpi]                           the README's main job
//! cargo xtask bench [NAME]...                        full benchmarks
//! cargo xtask bench --report [--from DIR]            every benchmark, and docs/benchmarks.md from it
//! cargo xtask sim [--seeds N] [--base B]             the fault simulation over N seeds
//! cargo xtask soak [--calls N]                       four ranks over TCP, N calls, memory watched
//! cargo xtask lanes                                  list the CI lanes
//! ```
//!
//! Every external command goes through [`cmd::Cmd`], which echoes it, runs
//! it from the workspace root under a watchdog and names the lane in its
//! error.

// The task runner talks to a terminal; printing is its job.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "xtask reports to the terminal"
)]

mod bench;
mod ci;
mod cmd;
mod demo;
mod embedded;
mod lanes;
mod mpi;
mod report;
mod setup;
mod sim;
mod soak;
#[cfg(test)]
mod tidy;

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  ci [--lane NAME]... [--skip NAME]...   run the CI lanes in order (runs `setup` first)
  setup                                  install the toolchains, targets, MPI and tools CI needs
  demo [--mpi]                           run dinah's main job (the most complete example)
  bench [NAME]...                        run the full benchmarks (all, or the named ones)
  bench --report [--from DIR]            run every benchmark once and write docs/benchmarks.md
                                         and docs/plots/ from that run (or from the saved DIR)
  sim [--seeds N] [--base B]             the fault-injection simulation over N seeds (default
                                         20,000 from seed 1,000), in release, with seeds per second
  soak [--calls N]                       four ranks over TCP making N calls (default 1,000,000) with
                                         random deadlines and drops; fails if memory grows
  lanes                                  list the CI lanes with their time limits
";

fn main() {
    if let Err(error) = run(std::env::args().skip(1).collect()) {
        eprintln!("xtask: error: {error:#}");
        std::process::exit(1);
    }
}

fn run(args: Vec<String>) -> Result<()> {
    let Some((command, rest)) = args.split_first() else {
        print!("{USAGE}");
        bail!("no command given");
    };
    match command.as_str() {
        "ci" => ci::run(&ci::CiArgs::parse(rest)?),
        "setup" => {
            expect_no_args("setup", rest)?;
            setup::run()
        }
        "demo" => demo::run(&demo::DemoArgs::parse(rest)?),
        "bench" => bench::run(rest),
        "soak" => {
            let calls = soak::parse(rest)?;
            let lane = lanes::LaneRun::new("soak", std::time::Duration::from_secs(24 * 3600));
            soak::run(&lane, calls)
        }
        "sim" => {
            let args = sim::SimArgs::parse(rest)?;
            let lane = lanes::LaneRun::new("sim", std::time::Duration::from_secs(24 * 3600));
            sim::run(&lane, &args)
        }
        "lanes" => {
            expect_no_args("lanes", rest)?;
            for lane in lanes::ALL {
                println!(
                    "{:<12} {:>4} min  {}",
                    lane.name,
                    lane.limit.as_secs() / 60,
                    lane.what
                );
            }
            Ok(())
        }
        "help" | "--help" | "-h" => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            print!("{USAGE}");
            bail!("unknown command `{other}`")
        }
    }
}

fn expect_no_args(command: &str, rest: &[String]) -> Result<()> {
    if let Some(extra) = rest.first() {
        bail!("`{command}` takes no arguments, got `{extra}`");
    }
    Ok(())
}

/// The workspace root: the parent of this crate's manifest directory.
///
/// Taken from the environment `cargo run` gives the process when there is
/// one, and only otherwise from the path compiled in: two checkouts that
/// share a target directory share this binary too, and the compiled-in path
/// would be that of whichever checkout built it last.
pub(crate) fn project_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest_dir
        .parent()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")))
        .to_path_buf()
}
