//! Freezing a rank's process with `SIGSTOP` until another process wakes
//! it: how the liveness tests make a peer that keeps its connections open
//! and says nothing.
//!
//! A stopped process should run again only on `SIGCONT`, and stay running
//! after it, but the kernel of the CI machines now and then resumes one
//! that nobody continued, and stops again one that was woken (see "Frozen
//! ranks in tests" in `docs/ci.md`). So the waker leaves a wake file before
//! it sends `SIGCONT`, the frozen rank stops itself again for as long as it
//! finds no such file, the waker sends `SIGCONT` until the rank took the
//! file, and then on until the rank has ended: a wake can neither be lost
//! nor be made up, and a woken rank does not freeze again.
#![allow(
    dead_code,
    reason = "each test file uses the part of the harness it needs"
)]

use std::path::PathBuf;
use std::process::ExitStatus;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long [`wake`] keeps waking a rank that does not take its wake file.
const WAKE_PATIENCE: Duration = Duration::from_secs(30);

/// The file that tells process `pid` it was woken on purpose.
fn wake_file(pid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("dinah-wake-{pid}"))
}

/// Sends `signal` (`-STOP`, `-CONT`) to `pid` with `kill(1)`; returns
/// how `kill` ended.
#[expect(
    clippy::disallowed_methods,
    reason = "the test stops and wakes a rank's process; kill(1) needs no unsafe"
)]
fn send(signal: &str, pid: u32) -> ExitStatus {
    std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs")
}

/// This process, ready to be frozen: made before its pid is given to the
/// waker, so that a wake file left by an earlier process with the same pid
/// is gone before the waker can leave a real one.
pub(crate) struct Freezer {
    pid: u32,
    file: PathBuf,
}

impl Freezer {
    /// Clears this process's wake file.
    pub(crate) fn prepare() -> Self {
        let pid = std::process::id();
        let file = wake_file(pid);
        let _ = std::fs::remove_file(&file);
        Self { pid, file }
    }

    /// The pid the waker needs.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Stops this process until [`wake`] wakes it; returns how many times
    /// it was resumed without a wake and stopped itself again.
    pub(crate) fn freeze_until_woken(self) -> u32 {
        let mut resumed_unwoken = 0;
        loop {
            let status = send("-STOP", self.pid);
            assert!(status.success(), "kill -STOP {}: {status}", self.pid);
            if std::fs::remove_file(&self.file).is_ok() {
                return resumed_unwoken;
            }
            resumed_unwoken += 1;
        }
    }
}

/// Wakes process `pid`, frozen in [`Freezer::freeze_until_woken`]: leaves
/// its wake file, then sends `SIGCONT` until the process took the file (a
/// `SIGCONT` that lands between its look for the file and its next stop
/// is lost). Returns a thread that keeps sending `SIGCONT` every 50 ms
/// until the process has ended, for the same kernel also stops again, now
/// and then, a process that was stopped and woken; join it to wait for
/// the process's end, or drop it to keep it awake as long as this process
/// lives.
///
/// # Panics
///
/// If the process ended without taking the file, or has not taken it
/// after [`WAKE_PATIENCE`]; the file is removed first.
pub(crate) fn wake(pid: u32) -> JoinHandle<()> {
    let file = wake_file(pid);
    std::fs::write(&file, b"").expect("the wake file is written");
    let until = Instant::now() + WAKE_PATIENCE;
    while file.exists() {
        let failure = if Instant::now() >= until {
            Some(format!("process {pid} was not woken in {WAKE_PATIENCE:?}"))
        } else {
            let status = send("-CONT", pid);
            // The process may have taken the file and ended since the look
            // above; if the file is still there, it ended without a wake.
            (!status.success() && file.exists())
                .then(|| format!("process {pid} ended before it was woken"))
        };
        if let Some(failure) = failure {
            let _ = std::fs::remove_file(&file);
            panic!("{failure}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::spawn(move || {
        while is_alive(pid) {
            let _ = send("-CONT", pid);
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// Is `pid` a live process (neither gone nor a zombie)?
fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}
