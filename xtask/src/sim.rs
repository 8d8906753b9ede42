//! `cargo xtask sim`: the fault-injection simulation over many seeds.
//!
//! Each seed is one run of four ranks over the in-memory transport with a
//! random fault plan (loss, duplication, reordering, delay, disconnects,
//! bursts beyond every rank's share) and random calls, cancellations and
//! deadlines, checked for lost and repeated requests
//! (`tests/std_runtime_faults.rs`). The test binary is built first, in
//! release, then timed alone, so the figure printed is seeds per second
//! of simulation, not of compilation. A failing seed is printed by the
//! test with the command that replays it.

use std::time::Instant;

use anyhow::{Result, bail};

use crate::lanes::LaneRun;

/// Seeds the `sim-long` CI lane runs (after the `test` lane's first
/// thousand); `cargo xtask sim` runs as many as asked, 100,000 for the
/// published figure.
pub(crate) const CI_SEEDS: u64 = 20_000;

/// The first seed the long runs start from: the `test` lane runs seeds
/// 0 to 999 already.
pub(crate) const FIRST_SEED: u64 = 1_000;

/// The options of `cargo xtask sim`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SimArgs {
    pub(crate) seeds: u64,
    pub(crate) base: u64,
}

impl SimArgs {
    /// Parses `[--seeds N] [--base B]`.
    pub(crate) fn parse(args: &[String]) -> Result<Self> {
        let mut parsed = Self {
            seeds: CI_SEEDS,
            base: FIRST_SEED,
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let value = |args: &mut std::slice::Iter<'_, String>| -> Result<u64> {
                let Some(text) = args.next() else {
                    bail!("`{flag}` needs a number");
                };
                text.replace(['_', ','], "")
                    .parse()
                    .map_err(|_| anyhow::anyhow!("`{flag}` needs a number, got `{text}`"))
            };
            match flag.as_str() {
                "--seeds" => parsed.seeds = value(&mut args)?,
                "--base" => parsed.base = value(&mut args)?,
                other => bail!("`sim` takes --seeds N and --base B, got `{other}`"),
            }
        }
        if parsed.seeds == 0 {
            bail!("`--seeds` must be at least 1");
        }
        Ok(parsed)
    }
}

/// Builds the simulation in release, then runs `args.seeds` seeds from
/// `args.base` and prints how many ran per second.
pub(crate) fn run(lane: &LaneRun, args: &SimArgs) -> Result<()> {
    let test = [
        "test",
        "--release",
        "--test",
        "std_runtime_faults",
        "random_faults",
    ];
    lane.cargo(test).arg("--no-run").run()?;
    let started = Instant::now();
    lane.cargo(test)
        .env("DINAH_FAULT_SEEDS", args.seeds.to_string())
        .env("DINAH_FAULT_SEED_BASE", args.base.to_string())
        .run()?;
    let elapsed = started.elapsed();
    println!(
        "{}: {} seeds ({} to {}) passed in {:.1} s: {:.0} seeds/s",
        lane.name(),
        args.seeds,
        args.base,
        args.base + args.seeds - 1,
        elapsed.as_secs_f64(),
        args.seeds as f64 / elapsed.as_secs_f64().max(f64::EPSILON),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<SimArgs> {
        SimArgs::parse(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn seeds_and_base_parse_with_defaults() {
        assert_eq!(
            parse(&[]).unwrap(),
            SimArgs {
                seeds: CI_SEEDS,
                base: FIRST_SEED
            }
        );
        assert_eq!(
            parse(&["--seeds", "100_000", "--base", "5"]).unwrap(),
            SimArgs {
                seeds: 100_000,
                base: 5
            }
        );
        assert!(parse(&["--seeds"]).is_err());
        assert!(parse(&["--seeds", "many"]).is_err());
        assert!(parse(&["--seeds", "0"]).is_err());
        assert!(parse(&["--fast"]).is_err());
    }
}
