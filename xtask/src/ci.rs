//! `cargo xtask ci`: set up, then run the lanes in order, stop at the first
//! failure and print a table of every lane.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::lanes::{self, Lane};
use crate::setup;

/// Parsed `ci` arguments.
#[derive(Debug, Default)]
pub(crate) struct CiArgs {
    /// `--lane NAME`: run only these lanes (in CI order).
    only: Vec<&'static str>,
    /// `--skip NAME`: lanes not to run; reported loudly in the table.
    skip: Vec<&'static str>,
}

impl CiArgs {
    pub(crate) fn parse(args: &[String]) -> Result<Self> {
        let mut parsed = Self::default();
        let mut iter = args.iter();
        while let Some(arg) = iter.next() {
            let list = match arg.as_str() {
                "--lane" => &mut parsed.only,
                "--skip" => &mut parsed.skip,
                other => bail!("`ci` does not take `{other}` (use --lane NAME or --skip NAME)"),
            };
            let Some(name) = iter.next() else {
                bail!("`{arg}` needs a lane name")
            };
            list.push(lanes::find(name)?.name);
        }
        Ok(parsed)
    }
}

#[derive(Debug)]
enum Outcome {
    Passed(Duration),
    Failed(Duration),
    Skipped,
    NotSelected,
    NotRun,
}

pub(crate) fn run(args: &CiArgs) -> Result<()> {
    let started = Instant::now();
    let setup_result = setup::run();
    let mut rows: Vec<(&Lane, Outcome)> = Vec::new();
    let mut failure = None;
    if let Err(error) = setup_result {
        failure = Some(error.context("setup failed; no lane ran"));
    }
    for lane in lanes::ALL {
        let outcome = if failure.is_some() {
            Outcome::NotRun
        } else if args.skip.contains(&lane.name) {
            Outcome::Skipped
        } else if !args.only.is_empty() && !args.only.contains(&lane.name) {
            Outcome::NotSelected
        } else {
            println!("\n===== lane {} ({}) =====", lane.name, lane.what);
            let lane_started = Instant::now();
            match lane.run() {
                Ok(()) => Outcome::Passed(lane_started.elapsed()),
                Err(error) => {
                    failure = Some(error);
                    Outcome::Failed(lane_started.elapsed())
                }
            }
        };
        rows.push((lane, outcome));
    }
    print_table(&rows, started.elapsed());
    match failure {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

fn print_table(rows: &[(&Lane, Outcome)], total: Duration) {
    println!("\n{:<12} {:<34} {:>9}", "lane", "result", "time");
    println!("{}", "-".repeat(57));
    for (lane, outcome) in rows {
        let (result, time) = match outcome {
            Outcome::Passed(took) => ("pass".to_owned(), format_duration(*took)),
            Outcome::Failed(took) => ("FAIL".to_owned(), format_duration(*took)),
            Outcome::Skipped => (
                "!!! SKIPPED BY --skip: NOT CHECKED !!!".to_owned(),
                String::new(),
            ),
            Outcome::NotSelected => ("not selected (--lane)".to_owned(), String::new()),
            Outcome::NotRun => ("not run (an earlier step failed)".to_owned(), String::new()),
        };
        println!("{:<12} {:<34} {:>9}", lane.name, result, time);
    }
    println!("{}", "-".repeat(57));
    println!("{:<12} {:<34} {:>9}", "total", "", format_duration(total));
    let skipped = rows
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Skipped))
        .count();
    if skipped > 0 {
        println!(
            "\nWARNING: {skipped} lane(s) skipped with --skip; this run does not prove the tree is green."
        );
    }
}

fn format_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parses_lane_and_skip() {
        let parsed = CiArgs::parse(&args(&["--lane", "fmt", "--skip", "mpi"])).unwrap();
        assert_eq!(parsed.only, ["fmt"]);
        assert_eq!(parsed.skip, ["mpi"]);
    }

    #[test]
    fn rejects_unknown_lane_and_flag() {
        assert!(CiArgs::parse(&args(&["--lane", "nope"])).is_err());
        assert!(CiArgs::parse(&args(&["--fast"])).is_err());
        assert!(CiArgs::parse(&args(&["--skip"])).is_err());
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m05s");
    }
}
