//! Freezing a rank's process with `SIGSTOP` until another process wakes
//! it: how the liveness tests make a peer that keeps its connections open
//! and says nothing.
//!
//! A stopped process should run again only on `SIGCONT`, but the kernel
//! of the CI machines now and then resumes one that nobody continued (see
//! "Frozen ranks in tests" in `docs/ci.md`). So the waker leaves a wake
//! file before it sends `SIGCONT`, the frozen rank stops itself again for
//! as long as it finds no such file, and the waker sends `SIGCONT` until
//! the rank took the file: a wake can neither be lost nor be made up by
//! the kernel.
#![allow(
    dead_code,
    reason = "each test file uses the part of the harness it needs"
)]

use std::path::PathBuf;
use std::process::ExitStatus;
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

/// Stops this process until [`wake`] wakes it; returns how many times it
/// was resumed without a wake and stopped itself again.
pub(crate) fn freeze_until_woken() -> u32 {
    let pid = std::process::id();
    let file = wake_file(pid);
    // A file left by an earlier process with this pid is no wake.
    let _ = std::fs::remove_file(&file);
    let mut resumed_unwoken = 0;
    loop {
        let status = send("-STOP", pid);
        assert!(status.success(), "kill -STOP {pid}: {status}");
        if std::fs::remove_file(&file).is_ok() {
            return resumed_unwoken;
        }
        resumed_unwoken += 1;
    }
}

/// Wakes process `pid`, frozen in [`freeze_until_woken`]: leaves its wake
/// file, then sends `SIGCONT` until the process took the file (a
/// `SIGCONT` that lands between its look for the file and its next stop
/// is lost).
///
/// # Panics
///
/// If the process has not taken the file after [`WAKE_PATIENCE`].
pub(crate) fn wake(pid: u32) {
    let file = wake_file(pid);
    std::fs::write(&file, b"").expect("the wake file is written");
    let until = Instant::now() + WAKE_PATIENCE;
    while file.exists() {
        assert!(Instant::now() < until, "process {pid} was never woken");
        // Fails only if the process ended, having taken the file since
        // the look above, or never to take it (the patience bounds that).
        let _ = send("-CONT", pid);
        std::thread::sleep(Duration::from_millis(10));
    }
}
