//! `cargo xtask soak`: four ranks over TCP making many calls with random
//! deadlines, deadline overruns and dropped calls, each rank's resident
//! memory sampled every second (`examples/soak.rs`, which launches its own
//! ranks through the launcher library). It fails when a call is lost or
//! answered wrongly, when memory grows after the warm-up, or when a rank
//! does not shut down cleanly. The `soak` CI lane runs a million calls;
//! `--calls` takes any size.

use anyhow::{Result, bail};

use crate::lanes::LaneRun;

/// Calls of the `soak` CI lane and the default of `cargo xtask soak`.
pub(crate) const CI_CALLS: u64 = 1_000_000;

/// Parses `[--calls N]`.
pub(crate) fn parse(args: &[String]) -> Result<u64> {
    match args {
        [] => Ok(CI_CALLS),
        [flag, value] if flag == "--calls" => match value.replace(['_', ','], "").parse() {
            Ok(0) | Err(_) => bail!("`--calls` needs a positive number, got `{value}`"),
            Ok(calls) => Ok(calls),
        },
        _ => bail!("`soak` takes --calls N"),
    }
}

/// Builds the soak in release and runs it for `calls` calls over all
/// ranks.
pub(crate) fn run(lane: &LaneRun, calls: u64) -> Result<()> {
    lane.cargo(["build", "--release", "--example", "soak"])
        .run()?;
    let program = crate::lanes::target_dir().join("release/examples/soak");
    lane.cmd(&program)
        .args(["--calls", &calls.to_string()])
        .run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_parse_with_a_default() {
        let parse =
            |args: &[&str]| parse(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>());
        assert_eq!(parse(&[]).unwrap(), CI_CALLS);
        assert_eq!(parse(&["--calls", "50_000_000"]).unwrap(), 50_000_000);
        assert!(parse(&["--calls", "0"]).is_err());
        assert!(parse(&["--calls"]).is_err());
        assert!(parse(&["--fast", "1"]).is_err());
    }
}
