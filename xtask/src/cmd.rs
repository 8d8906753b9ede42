//! The one helper that runs external commands.
//!
//! A [`Cmd`] takes a program and its arguments (never a shell string),
//! echoes itself, runs from the workspace root and is killed, with its whole
//! process group, when its time limit passes. Errors name the lane so a red
//! CI table says where to look.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
#[cfg(unix)]
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::project_root;

/// How often the watchdog looks at a running child.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// An external command bound to a lane and a time limit.
#[derive(Debug, Clone)]
pub(crate) struct Cmd {
    lane: String,
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    dir: PathBuf,
    timeout: Duration,
    quiet: bool,
    echo_output: bool,
}

/// What a finished command left behind.
#[derive(Debug)]
struct Finished {
    status: ExitStatus,
    stdout: String,
}

impl Cmd {
    /// A command for `lane`, running `program` from the workspace root with
    /// a default ten-minute limit.
    pub(crate) fn new(lane: &str, program: impl AsRef<OsStr>) -> Self {
        Self {
            lane: lane.to_owned(),
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            envs: Vec::new(),
            dir: project_root(),
            timeout: Duration::from_secs(600),
            quiet: false,
            echo_output: false,
        }
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub(crate) fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub(crate) fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Do not echo the command (for probes such as `rustup toolchain list`).
    pub(crate) fn quiet(mut self) -> Self {
        self.quiet = true;
        self
    }

    /// Show the stdout that [`Cmd::read`] captures on the terminal as it
    /// arrives, so a failed run's output is not lost.
    pub(crate) fn echo_output(mut self) -> Self {
        self.echo_output = true;
        self
    }

    /// The command line as a user would type it.
    pub(crate) fn display(&self) -> String {
        let mut line = String::new();
        for (key, value) in &self.envs {
            line.push_str(&format!(
                "{}={} ",
                key.to_string_lossy(),
                value.to_string_lossy()
            ));
        }
        line.push_str(&self.program.to_string_lossy());
        for arg in &self.args {
            let arg = arg.to_string_lossy();
            if arg.is_empty() || arg.contains(' ') {
                line.push_str(&format!(" '{arg}'"));
            } else {
                line.push(' ');
                line.push_str(&arg);
            }
        }
        line
    }

    /// Runs with inherited stdout/stderr; a non-zero exit is an error.
    pub(crate) fn run(&self) -> Result<()> {
        let finished = self.execute(false)?;
        self.check(&finished)
    }

    /// Runs, captures stdout (stderr stays on the terminal); a non-zero exit
    /// is an error.
    pub(crate) fn read(&self) -> Result<String> {
        let finished = self.execute(true)?;
        self.check(&finished)?;
        Ok(finished.stdout)
    }

    fn check(&self, finished: &Finished) -> Result<()> {
        if finished.status.success() {
            Ok(())
        } else {
            bail!(
                "lane `{}`: `{}` failed with {}",
                self.lane,
                self.display(),
                describe(finished.status)
            )
        }
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "this is the one helper that spawns processes"
    )]
    fn execute(&self, capture: bool) -> Result<Finished> {
        if !self.quiet {
            println!("==> [{}] {}", self.lane, self.display());
        }
        let mut command = std::process::Command::new(&self.program);
        command
            .args(&self.args)
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        command.envs(self.envs.iter().map(|(key, value)| (key, value)));
        if capture {
            command.stdout(Stdio::piped());
        }
        // A fresh process group lets the watchdog kill the command together
        // with everything it started (mpirun's ranks, cargo's rustc jobs).
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn().with_context(|| {
            format!("lane `{}`: could not start `{}`", self.lane, self.display())
        })?;
        let echo = self.echo_output;
        let reader = child.stdout.take().map(|mut out| {
            thread::spawn(move || {
                let mut bytes = Vec::new();
                let mut chunk = [0_u8; 8192];
                loop {
                    let read = match out.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(read) => read,
                        Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                        // Any other error ends the capture with what came so far.
                        Err(_) => break,
                    };
                    bytes.extend_from_slice(&chunk[..read]);
                    if echo {
                        let mut terminal = std::io::stdout().lock();
                        let _ = terminal.write_all(&chunk[..read]);
                        let _ = terminal.flush();
                    }
                }
                // Invalid UTF-8 is replaced rather than failing the lane.
                String::from_utf8_lossy(&bytes).into_owned()
            })
        });
        let status = self.wait_with_watchdog(&mut child)?;
        let stdout = match reader {
            Some(reader) => reader.join().unwrap_or_default(),
            None => String::new(),
        };
        Ok(Finished { status, stdout })
    }

    fn wait_with_watchdog(&self, child: &mut Child) -> Result<ExitStatus> {
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if started.elapsed() >= self.timeout {
                kill_group(child);
                bail!(
                    "lane `{}`: `{}` still running after {:.0?}; killed it and its process group \
                     (a hung test, a stuck mpirun or a deadlock)",
                    self.lane,
                    self.display(),
                    self.timeout
                );
            }
            thread::sleep(POLL_INTERVAL);
        }
    }
}

/// Kills the child's whole process group, then reaps the child.
#[expect(
    clippy::disallowed_methods,
    reason = "the watchdog's kill must not itself be watched"
)]
fn kill_group(child: &mut Child) {
    let group = format!("-{}", child.id());
    let _ = std::process::Command::new("kill")
        .args(["-KILL", "--", &group])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal: Option<i32> = None;
    match (status.code(), signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => "an unknown status".to_owned(),
    }
}

/// Is `program` on the `PATH`?
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_quotes_arguments_with_spaces() {
        let cmd = Cmd::new("t", "cargo").args(["test", "a b"]).env("X", "1");
        assert_eq!(cmd.display(), "X=1 cargo test 'a b'");
    }

    #[test]
    fn non_zero_exit_names_the_lane() {
        let error = Cmd::new("my-lane", "false").quiet().run().unwrap_err();
        let text = format!("{error:#}");
        assert!(text.contains("lane `my-lane`"), "{text}");
        assert!(text.contains("exit code 1"), "{text}");
    }

    #[test]
    fn watchdog_kills_a_hung_command() {
        let error = Cmd::new("slow", "sleep")
            .arg("30")
            .timeout(Duration::from_millis(200))
            .quiet()
            .run()
            .unwrap_err();
        // The error only exists when the watchdog fired and killed the child.
        assert!(format!("{error:#}").contains("still running after"));
    }

    #[test]
    fn read_captures_stdout() {
        let text = Cmd::new("t", "echo").arg("hello").quiet().read().unwrap();
        assert_eq!(text.trim(), "hello");
        let shown = Cmd::new("t", "echo")
            .arg("shown")
            .quiet()
            .echo_output()
            .read()
            .unwrap();
        assert_eq!(shown.trim(), "shown");
    }
}
