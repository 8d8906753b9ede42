//! `dinah-run`: start N local ranks of a dinah program, like `mpirun`.
//!
//! ```sh
//! dinah-run -n 4 [--timeout 60s] [--run-id N] -- PROGRAM ARGS...
//! ```
//!
//! The launcher logic lives in [`dinah_tcp::launcher`]; this is its
//! command line. `dinah-run --help` lists the options.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool reports on its terminal"
)]

use std::process::ExitCode;
use std::sync::Arc;

use dinah_tcp::launcher::{self, Cli, HELP, LaunchEvent, OutputSink, PrefixedStdio, Stream};

/// Exit code for a command line that does not parse.
const USAGE_ERROR: u8 = 2;

/// Output as [`PrefixedStdio`], plus the launcher's events on stderr.
struct Verbose;

impl OutputSink for Verbose {
    fn line(&self, rank: u32, stream: Stream, line: &[u8]) {
        PrefixedStdio.line(rank, stream, line);
    }

    fn event(&self, event: &LaunchEvent) {
        eprintln!("dinah-run: {event}");
    }
}

fn main() -> ExitCode {
    match Cli::parse(std::env::args_os().skip(1)) {
        Ok(Cli::Run { config, verbose }) => {
            let sink: Arc<dyn OutputSink> = if verbose {
                Arc::new(Verbose)
            } else {
                Arc::new(PrefixedStdio)
            };
            let report = launcher::launch(&config, sink);
            if !report.is_success() {
                eprintln!("dinah-run: {report}");
            }
            let strangers = report.rejected_connections();
            if strangers > 0 {
                // Someone else reached the control port: worth knowing,
                // never a failure.
                eprintln!(
                    "dinah-run: refused {strangers} control connection(s) that were not ranks of this run"
                );
            }
            ExitCode::from(report.exit_code())
        }
        Ok(Cli::Help) => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Ok(Cli::Version) => {
            println!("dinah-run {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Ok(other) => {
            eprintln!("dinah-run: unsupported command line {other:?}");
            ExitCode::from(USAGE_ERROR)
        }
        Err(error) => {
            eprintln!(
                "dinah-run: {error}\nUsage: dinah-run -n N [OPTIONS] [--] PROGRAM [ARGS...]; see dinah-run --help"
            );
            ExitCode::from(USAGE_ERROR)
        }
    }
}
