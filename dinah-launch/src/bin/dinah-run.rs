//! `dinah-run`: start N local ranks of a dinah program, like `mpirun`.
//!
//! ```sh
//! dinah-run -n 4 [--timeout 60s] [--run-id N] -- PROGRAM ARGS...
//! ```
//!
//! The launcher logic lives in [`dinah_launch::launcher`]; this is its
//! command line, and its signal handling: `SIGINT` and `SIGTERM` are
//! caught (with `signal-hook`) and handed to the launch as
//! [`Interrupts`], which passes them on to the ranks. The ranks run in
//! process groups of their own, so a Ctrl-C at the terminal reaches only
//! the launcher, and every rank hears of it from the launcher, once.
//! `dinah-run --help` lists the options.
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool reports on its terminal"
)]

use std::process::ExitCode;
use std::sync::Arc;

use dinah_launch::launcher::{
    self, Cli, HELP, Interrupts, LaunchEvent, OutputSink, PrefixedStdio, Stream,
};
#[cfg(unix)]
use signal_hook::consts::{SIGINT, SIGTERM};
#[cfg(unix)]
use signal_hook::iterator::Signals;

/// Exit code for a command line that does not parse.
const USAGE_ERROR: u8 = 2;

/// Catches `SIGINT` and `SIGTERM` from now on, recording each in the
/// returned [`Interrupts`] from a thread of its own. The third signal is
/// not recorded but acted on as if uncaught: the launcher dies of it (even
/// if its loop is stuck), and its ranks follow it when their lifelines
/// close.
///
/// # Errors
///
/// The operating system's error, if the handlers or the thread cannot be
/// set up.
#[cfg(unix)]
fn catch_interrupts() -> std::io::Result<Arc<Interrupts>> {
    let interrupts = Arc::new(Interrupts::new());
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    let recorder = Arc::clone(&interrupts);
    std::thread::Builder::new()
        .name("dinah-run-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if recorder.seen().0 >= 2 {
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                }
                recorder.raise(signal);
            }
        })?;
    Ok(interrupts)
}

/// Without Unix signals, nothing is caught: a Ctrl-C at the console
/// reaches the ranks directly, and ends the launcher too.
#[cfg(not(unix))]
#[expect(
    clippy::unnecessary_wraps,
    reason = "the same signature as the Unix version"
)]
fn catch_interrupts() -> std::io::Result<Arc<Interrupts>> {
    Ok(Arc::new(Interrupts::new()))
}

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
            let interrupts = match catch_interrupts() {
                Ok(interrupts) => interrupts,
                Err(error) => {
                    eprintln!("dinah-run: cannot catch SIGINT and SIGTERM: {error}");
                    return ExitCode::FAILURE;
                }
            };
            let report = launcher::launch_until(&config, sink, &interrupts);
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
