//! Running `dinah-run` from a test, with this test binary as the rank
//! program.
//!
//! A test that needs a rank program that talks to the launcher passes its
//! own name to `dinah-run` (`-- <this binary> <test> --exact`) with
//! `DINAH_TEST_RANK_OF=<test>` in the ranks' environment, and the same test
//! function, run again inside each rank, sees the variable and plays the
//! rank (the pattern of `rusty-fork`). Timeouts bound every wait.
#![allow(
    dead_code,
    reason = "each test file uses the part of the harness it needs"
)]
#![expect(
    clippy::print_stdout,
    reason = "the rank programs report what they saw on stdout"
)]

use std::ffi::OsString;
use std::io::Read;
use std::process::{Child, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Names the test whose rank program this process runs.
pub(crate) const RANK_OF: &str = "DINAH_TEST_RANK_OF";

/// Marks what a rank program reports, after whatever libtest printed.
pub(crate) const SAID: &str = "@@ ";

/// Prints one report line from a rank program.
pub(crate) fn say(text: &str) {
    println!("{SAID}{text}");
}

/// The bound on any one launch in these tests.
pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

/// Runs `rank` and returns true if this process is a rank started for
/// `test`; returns false in the test itself.
pub(crate) fn in_rank(test: &str, rank: impl FnOnce()) -> bool {
    if std::env::var(RANK_OF).is_ok_and(|of| of == test) {
        rank();
        true
    } else {
        false
    }
}

/// What a finished `dinah-run` left.
pub(crate) struct Run {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The lines rank `rank` printed on stdout, without the prefix.
    pub(crate) fn lines_of(&self, rank: u32) -> Vec<&str> {
        let prefix = format!("[{rank}] ");
        self.stdout
            .lines()
            .filter_map(|line| line.strip_prefix(&prefix))
            .collect()
    }

    /// What rank `rank` reported with [`say`] (libtest may have printed
    /// on the same line before it).
    pub(crate) fn said_by(&self, rank: u32) -> Vec<&str> {
        self.lines_of(rank)
            .into_iter()
            .filter_map(|line| line.split_once(SAID).map(|(_, said)| said))
            .collect()
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status {:?}\n--- stdout\n{}--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Starts `dinah-run` with `args`.
#[expect(
    clippy::disallowed_methods,
    reason = "the test starts the launcher binary it tests"
)]
pub(crate) fn start(args: &[OsString]) -> Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_dinah-run"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dinah-run starts")
}

/// Runs `dinah-run` with `args` to the end (killing it after [`PATIENCE`]).
pub(crate) fn dinah_run<S: Into<OsString> + Clone>(args: &[S]) -> Run {
    let args: Vec<OsString> = args.iter().cloned().map(Into::into).collect();
    let mut child = start(&args);
    let readers = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child.stderr.take().map(|s| Box::new(s) as _),
    ]
    .map(|pipe| {
        thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    });
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("dinah-run {args:?} still running after {PATIENCE:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    let [stdout, stderr] = readers.map(|reader| reader.join().unwrap());
    Run {
        status,
        stdout,
        stderr,
    }
}

pub(crate) fn sh(ranks: u32, extra: &[&str], script: &str) -> Run {
    let ranks = ranks.to_string();
    let mut args = vec!["-n", &ranks, "--timeout", "60s"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "/bin/sh", "-c", script]);
    dinah_run(&args)
}

/// `dinah-run` arguments that start this test binary as the rank program
/// of `test`.
pub(crate) fn self_as_rank(ranks: u32, extra: &[&str], test: &str) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![
        "-n".into(),
        ranks.to_string().into(),
        "-x".into(),
        format!("{RANK_OF}={test}").into(),
    ];
    args.extend(extra.iter().map(OsString::from));
    args.push("--".into());
    args.push(std::env::current_exe().unwrap().into());
    args.extend([test, "--exact", "--nocapture", "--test-threads=1"].map(OsString::from));
    args
}
