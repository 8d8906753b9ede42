//! Starting, watching and killing the processes of the ranks.
//!
//! On Unix every rank runs in a process group of its own (its pid is the
//! group ID), so the launcher can kill a rank together with whatever it
//! started, and pass a signal on to all of it. Elsewhere (Windows) a rank
//! is one process: killing it ends the rank alone, and a signal passed on
//! ends it too. [`spawn`] is the only place in the crate that creates a
//! process.

use core::fmt;
use std::ffi::OsString;
use std::io;
#[cfg(unix)]
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ExitStatus, Stdio};

/// How a rank's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitKind {
    /// It exited with this code.
    Code(i32),
    /// It was terminated by this signal.
    Signal(i32),
}

impl ExitKind {
    /// Did it exit with code 0?
    pub fn success(self) -> bool {
        self == Self::Code(0)
    }

    /// The launcher's own exit code for a rank that ended like this: the
    /// rank's code (1 if it does not fit a byte or is 0), or `128 + N` for
    /// signal N, as shells report it.
    pub fn launcher_code(self) -> u8 {
        match self {
            Self::Code(code) => u8::try_from(code).ok().filter(|&c| c != 0).unwrap_or(1),
            Self::Signal(signal) => u8::try_from(128 + signal).unwrap_or(255),
        }
    }

    pub(crate) fn from_status(status: ExitStatus) -> Self {
        #[cfg(unix)]
        let signal = status.signal();
        #[cfg(not(unix))]
        let signal: Option<i32> = None;
        match (status.code(), signal) {
            (Some(code), _) => Self::Code(code),
            (None, Some(signal)) => Self::Signal(signal),
            // Neither a code nor a signal cannot happen; report it as a
            // failure rather than a success.
            (None, None) => Self::Code(-1),
        }
    }
}

impl fmt::Display for ExitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Code(code) => write!(f, "exited with code {code}"),
            Self::Signal(signal) => match signal_name(signal) {
                Some(name) => write!(f, "was killed by signal {signal} ({name})"),
                None => write!(f, "was killed by signal {signal}"),
            },
        }
    }
}

/// The name of signal `signal`, for the common ones.
#[cfg(unix)]
pub(crate) fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

/// The name of signal `signal`: the two a launcher is interrupted by.
#[cfg(not(unix))]
pub(crate) fn signal_name(signal: i32) -> Option<&'static str> {
    match signal {
        2 => Some("SIGINT"),
        15 => Some("SIGTERM"),
        _ => None,
    }
}

/// What to start for one rank.
#[derive(Debug)]
pub(crate) struct SpawnSpec<'a> {
    pub(crate) program: &'a OsString,
    pub(crate) args: &'a [OsString],
    pub(crate) env: &'a [(OsString, OsString)],
}

/// Starts one rank: stdin from `/dev/null`, stdout and stderr piped to the
/// launcher, in a new process group (on Unix).
///
/// # Errors
///
/// The operating system's error (program not found, not executable, out of
/// processes).
#[expect(
    clippy::disallowed_methods,
    reason = "the launcher's one spawn helper: every rank process is created here, in its own process group"
)]
pub(crate) fn spawn(spec: &SpawnSpec<'_>) -> io::Result<Child> {
    let mut command = std::process::Command::new(spec.program);
    command
        .args(spec.args)
        .envs(spec.env.iter().map(|(key, value)| (key, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    command.process_group(0);
    command.spawn()
}

/// Sends `SIGKILL` to the process group of `child` (and to the child
/// itself, in case it left its group).
///
/// Only call this for a child that has not been reaped: until then its pid,
/// and so its group ID, cannot belong to anything else.
#[cfg(unix)]
pub(crate) fn kill_group(child: &mut Child) {
    let Ok(pgid) = libc::pid_t::try_from(child.id()) else {
        let _ = child.kill();
        return;
    };
    // SAFETY: `kill` takes two integers and touches no memory of ours. The
    // group ID is the pid of a child we spawned with `process_group(0)` and
    // have not reaped, so it names that child's group and nothing else.
    // A failure (ESRCH: the group is already empty) needs no handling.
    let _ = unsafe { libc::kill(-pgid, libc::SIGKILL) };
    // The child may have moved to another group; kill it directly too.
    let _ = child.kill();
}

/// Ends `child` (no process groups here).
#[cfg(not(unix))]
pub(crate) fn kill_group(child: &mut Child) {
    let _ = child.kill();
}

/// Sends `signal` to the process group of `child`, or to the child alone
/// if that fails (it left its group, and took the group's ID with it). A
/// rank so hears it once. An error (the rank is gone) needs no handling:
/// reaping sees that.
#[cfg(unix)]
pub(crate) fn signal_group(child: &mut Child, signal: i32) {
    let Ok(pgid) = libc::pid_t::try_from(child.id()) else {
        return;
    };
    // SAFETY: `kill` takes two integers and touches no memory of ours. As
    // in `kill_group`, the child is not reaped, so its pid names its own
    // group and nothing else.
    unsafe {
        if libc::kill(-pgid, signal) != 0 {
            let _ = libc::kill(pgid, signal);
        }
    }
}

/// Without signals to pass on, an interrupt ends `child`.
#[cfg(not(unix))]
pub(crate) fn signal_group(child: &mut Child, _signal: i32) {
    let _ = child.kill();
}

#[cfg(all(test, unix))]
mod tests {
    use std::io::Read;
    use std::time::{Duration, Instant};

    use super::*;

    /// Polls `child` until it exits or `deadline` passes.
    fn wait_until(child: &mut Child, deadline: Instant) -> io::Result<Option<ExitStatus>> {
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn sh(script: &str) -> Child {
        let program = OsString::from("/bin/sh");
        let args = [OsString::from("-c"), OsString::from(script)];
        spawn(&SpawnSpec {
            program: &program,
            args: &args,
            env: &[],
        })
        .unwrap()
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn exit_kinds_map_to_shell_codes() {
        assert!(ExitKind::Code(0).success());
        assert!(!ExitKind::Signal(9).success());
        assert_eq!(ExitKind::Code(3).launcher_code(), 3);
        assert_eq!(ExitKind::Code(256).launcher_code(), 1);
        assert_eq!(ExitKind::Code(-1).launcher_code(), 1);
        assert_eq!(ExitKind::Signal(libc::SIGKILL).launcher_code(), 137);
        assert_eq!(
            ExitKind::Signal(libc::SIGABRT).to_string(),
            "was killed by signal 6 (SIGABRT)"
        );
        assert_eq!(ExitKind::Signal(50).to_string(), "was killed by signal 50");
    }

    #[test]
    fn exit_codes_and_environment_reach_the_launcher() {
        let program = OsString::from("/bin/sh");
        let args = [
            OsString::from("-c"),
            OsString::from("echo \"$DINAH_TEST_VALUE\"; exit 3"),
        ];
        let env = [(
            OsString::from("DINAH_TEST_VALUE"),
            OsString::from("from the launcher"),
        )];
        let mut child = spawn(&SpawnSpec {
            program: &program,
            args: &args,
            env: &env,
        })
        .unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = wait_until(&mut child, soon()).unwrap().expect("exited");
        assert_eq!(ExitKind::from_status(status), ExitKind::Code(3));
        assert_eq!(out, "from the launcher\n");
    }

    #[test]
    fn killing_the_group_also_kills_grandchildren() {
        // The shell starts a grandchild, prints its pid and waits for it.
        let mut child = sh("sleep 600 & echo $!; wait");
        let mut stdout = child.stdout.take().unwrap();
        let mut line = Vec::new();
        let mut byte = [0];
        while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
        let grandchild: u32 = String::from_utf8(line).unwrap().trim().parse().unwrap();
        assert!(is_alive(grandchild), "the grandchild runs before the kill");
        kill_group(&mut child);
        let status = wait_until(&mut child, soon())
            .unwrap()
            .expect("the child died");
        assert_eq!(
            ExitKind::from_status(status),
            ExitKind::Signal(libc::SIGKILL)
        );
        let deadline = soon();
        while is_alive(grandchild) {
            assert!(
                Instant::now() < deadline,
                "the grandchild {grandchild} survived the group kill"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_signal_reaches_the_rank_that_handles_it() {
        let mut child = sh("trap 'exit 7' TERM; echo ready; while :; do sleep 0.01; done");
        // The shell prints once its trap is set.
        let mut ready = [0u8; 6];
        child
            .stdout
            .as_mut()
            .expect("piped")
            .read_exact(&mut ready)
            .unwrap();
        assert_eq!(&ready, b"ready\n");
        signal_group(&mut child, libc::SIGTERM);
        let status = wait_until(&mut child, soon()).unwrap().expect("exited");
        assert_eq!(ExitKind::from_status(status), ExitKind::Code(7));
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

    #[test]
    fn a_missing_program_is_an_error() {
        let program = OsString::from("/nonexistent/dinah-no-such-program");
        let error = spawn(&SpawnSpec {
            program: &program,
            args: &[],
            env: &[],
        })
        .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn waiting_is_bounded() {
        let mut child = sh("sleep 600");
        assert_eq!(wait_until(&mut child, Instant::now()).unwrap(), None);
        kill_group(&mut child);
        assert!(wait_until(&mut child, soon()).unwrap().is_some());
    }
}
