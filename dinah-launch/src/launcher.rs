//! `dinah-run`: start N local ranks of a dinah program, as `mpirun` does.
//!
//! The launcher binds a control listener on `127.0.0.1:0`, starts N copies
//! of the program, each in a process group of its own, and gives each its
//! identity in the environment ([`ENV_RANK`], [`ENV_WORLD_SIZE`],
//! [`ENV_RUN_ID`], [`ENV_LAUNCHER`], [`ENV_LAUNCH_TIMEOUT_MS`]). Each rank
//! binds its transport listener on port 0 and reports the bound address to
//! the launcher ([`LaunchEnv::rendezvous`], or `dinah_tcp::Membership::from_env`);
//! when every rank has reported, the launcher sends every rank the full
//! address list. No port is chosen before it is bound, so concurrent runs
//! on one machine never race for ports. The wire format of this exchange
//! is in [`control`](self#control-protocol) below.
//!
//! While the ranks run, the launcher prefixes each line they print with
//! `[rank] ` (see [`OutputSink`]) and watches them:
//!
//! - a rank that exits non-zero or is killed by a signal fails the run;
//!   the others get [`LaunchConfig::grace`] to exit on their own (none by
//!   default), then their process groups are killed;
//! - a rank that neither reports its address nor exits within
//!   [`LaunchConfig::startup_timeout`] fails the run, and so does any rank
//!   still running when [`LaunchConfig::timeout`] passes;
//! - the run succeeds only if every rank exits with code 0.
//!
//! Every wait is bounded by one of these timeouts. A rank also keeps its
//! control connection open as a lifeline: if the launcher dies (even by
//! `SIGKILL`), the connection closes and the rank exits, so no rank
//! outlives its launcher. A program that never calls
//! [`LaunchEnv::rendezvous`] (a plain `hostname`, say) may still be
//! launched: it has the start-up timeout to exit with code 0.
//!
//! # Control protocol
//!
//! One TCP connection per rank, opened by the rank. Every message is a
//! length-prefixed frame (`u32` little-endian), then the magic `DNRL`, the
//! protocol version ([`CONTROL_VERSION`]), a kind byte and a reserved zero
//! byte. The rank sends a *report* (run ID, world size, rank, its
//! listener's address); the launcher answers with the *members* list (the
//! address of every rank, in rank order) or a *refusal* ([`Refusal`]): a
//! report from another run, a duplicate or out-of-range rank, another rank
//! that failed or exited first, or the start-up timeout. Malformed messages
//! are typed [`ControlError`]s; lengths are checked against
//! [`MAX_MESSAGE_BYTES`] before anything is allocated. Connections that do
//! not speak the protocol are refused and closed without failing the run.
//!
//! # Examples
//!
//! Starting two ranks of `/bin/true` from a program (the `dinah-run`
//! binary does the same with a [`PrefixedStdio`] sink):
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use dinah_core::WorldSize;
//! use dinah_launch::launcher::{LaunchConfig, PrefixedStdio, launch};
//!
//! let config = LaunchConfig::new(WorldSize::new(2)?, "/bin/true").timeout(Duration::from_secs(10));
//! let report = launch(&config, Arc::new(PrefixedStdio));
//! assert!(report.is_success(), "{report}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`LaunchEnv::rendezvous`]: crate::LaunchEnv::rendezvous

mod args;
pub(crate) mod arrivals;
pub(crate) mod control;
mod interrupts;
mod output;
mod process;
mod report;
mod run;

use core::fmt;
use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

pub use args::{ArgsError, Cli, HELP};
pub use control::{CONTROL_VERSION, ControlError, MAX_MESSAGE_BYTES, MAX_RANKS, Refusal};
pub(crate) use control::{Message, ReadError, Report, read_message, write_message};
use dinah_core::WorldSize;
pub use interrupts::Interrupts;
pub use output::{MAX_LINE_BYTES, OutputSink, PrefixedStdio, Stream};
pub use process::ExitKind;
pub(crate) use process::signal_name;
pub use report::{LaunchReport, RankReport};
pub use run::{launch, launch_until};

/// The rank of the process (`0..world size`).
pub const ENV_RANK: &str = "DINAH_RANK";
/// The number of ranks in the run.
pub const ENV_WORLD_SIZE: &str = "DINAH_WORLD_SIZE";
/// The run ID every rank passes to `Runtime::builder` (decimal `u64`).
pub const ENV_RUN_ID: &str = "DINAH_RUN_ID";
/// The launcher's control address (`127.0.0.1:port`).
pub const ENV_LAUNCHER: &str = "DINAH_LAUNCHER";
/// How long a rank may wait for the address list, in milliseconds.
pub const ENV_LAUNCH_TIMEOUT_MS: &str = "DINAH_LAUNCH_TIMEOUT_MS";

/// The run timeout when none is given: ten minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The start-up timeout when none is given (capped by the run timeout).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long ranks get to exit after the launcher passed them an interrupt,
/// when none is given.
pub const DEFAULT_INTERRUPT_GRACE: Duration = Duration::from_secs(5);

/// What to launch and how long each phase may take.
///
/// Built with [`new`](Self::new) and the chained setters (one per field),
/// run with [`launch`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchConfig {
    /// The number of ranks.
    pub ranks: WorldSize,
    /// The program every rank runs.
    pub program: OsString,
    /// The program's arguments.
    pub args: Vec<OsString>,
    /// The bound on the whole run: ranks still running when it passes are
    /// killed and the run fails.
    pub timeout: Duration,
    /// How long every rank has to report its address (or exit) after it
    /// starts; never more than [`timeout`](Self#structfield.timeout) in effect.
    pub startup_timeout: Duration,
    /// After the first rank fails, how long the others may keep running to
    /// exit on their own before their process groups are killed (zero
    /// kills them at once; the run timeout still applies).
    pub grace: Duration,
    /// After the launcher passed an interrupt ([`Interrupts`]) on to the
    /// ranks, how long they may take to exit before their process groups
    /// are killed (a second interrupt kills them at once).
    pub interrupt_grace: Duration,
    /// The run ID given to every rank (`None`: random).
    pub run_id: Option<u64>,
    /// Environment variables set in every rank, besides the launcher's own
    /// environment, which every rank inherits.
    pub env: Vec<(OsString, OsString)>,
    /// The addresses the ranks' listeners bind, dealt out in turn (rank
    /// `r` gets `hosts[r % hosts.len()]`, as `DINAH_BIND`); empty: every
    /// rank on `127.0.0.1`. Several loopback addresses stand for several
    /// hosts on one machine.
    pub hosts: Vec<IpAddr>,
}

impl LaunchConfig {
    /// `ranks` copies of `program`, with the default timeouts, no grace
    /// period and a random run ID.
    pub fn new(ranks: WorldSize, program: impl Into<OsString>) -> Self {
        Self {
            ranks,
            program: program.into(),
            args: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            grace: Duration::ZERO,
            interrupt_grace: DEFAULT_INTERRUPT_GRACE,
            run_id: None,
            env: Vec::new(),
            hosts: Vec::new(),
        }
    }

    /// Appends one argument for the program.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Appends arguments for the program.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets [`timeout`](Self#structfield.timeout) ([`DEFAULT_TIMEOUT`] if
    /// not set).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets [`startup_timeout`](Self#structfield.startup_timeout)
    /// ([`DEFAULT_STARTUP_TIMEOUT`] if not set).
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Sets [`grace`](Self#structfield.grace) (zero if not set).
    #[must_use]
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Sets [`interrupt_grace`](Self#structfield.interrupt_grace)
    /// ([`DEFAULT_INTERRUPT_GRACE`] if not set).
    #[must_use]
    pub fn interrupt_grace(mut self, grace: Duration) -> Self {
        self.interrupt_grace = grace;
        self
    }

    /// Fixes the run ID (random if not set).
    #[must_use]
    pub fn run_id(mut self, run_id: u64) -> Self {
        self.run_id = Some(run_id);
        self
    }

    /// Adds an environment variable for every rank.
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Sets [`hosts`](Self#structfield.hosts).
    #[must_use]
    pub fn hosts(mut self, hosts: impl IntoIterator<Item = IpAddr>) -> Self {
        self.hosts = hosts.into_iter().collect();
        self
    }

    /// The address rank `rank`'s listener binds, if [`hosts`](Self#structfield.hosts)
    /// names any.
    pub fn host_of(&self, rank: u32) -> Option<IpAddr> {
        let count = u32::try_from(self.hosts.len()).ok().filter(|&n| n > 0)?;
        self.hosts.get((rank % count) as usize).copied()
    }

    /// The start-up timeout in effect: at most the run timeout.
    pub fn effective_startup_timeout(&self) -> Duration {
        self.startup_timeout.min(self.timeout)
    }
}

/// Something the launcher did or saw, in the order it happened (see
/// [`OutputSink::event`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchEvent {
    /// The control listener is bound; the ranks are about to start.
    Listening {
        /// Its address (what [`ENV_LAUNCHER`] holds).
        control: SocketAddr,
        /// The run ID.
        run_id: u64,
    },
    /// A rank's process started.
    Spawned {
        /// The rank.
        rank: u32,
        /// Its process ID (also its process group ID).
        pid: u32,
    },
    /// A rank reported the address of its listener.
    Reported {
        /// The rank.
        rank: u32,
        /// Its listener's address.
        addr: SocketAddr,
    },
    /// Every rank reported; the address list went out.
    Rendezvous,
    /// A connection that did not deliver a valid report for this run was
    /// refused and closed (each of the first three; later ones are summed
    /// up in [`RejectedMore`](Self::RejectedMore)).
    Rejected {
        /// Where it came from.
        peer: SocketAddr,
    },
    /// More connections were refused since the last report of them: after
    /// the first few, refusals are reported in summaries like this one, at
    /// most one a second, so a flood of strangers does not flood the
    /// terminal.
    RejectedMore {
        /// How many since the last report.
        count: u64,
        /// Where the last of them came from.
        last: SocketAddr,
    },
    /// The launcher was interrupted and passed the signal on to the
    /// process groups of the ranks still running.
    Forwarded {
        /// The signal's number.
        signal: i32,
        /// How many ranks it went to.
        ranks: u32,
    },
    /// A rank's process ended.
    Exited {
        /// The rank.
        rank: u32,
        /// How.
        exit: ExitKind,
    },
    /// The launcher killed a rank's process group.
    Killed {
        /// The rank.
        rank: u32,
    },
}

impl fmt::Display for LaunchEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Listening { control, run_id } => {
                write!(f, "control listener on {control}, run ID {run_id}")
            }
            Self::Spawned { rank, pid } => write!(f, "rank {rank} started as pid {pid}"),
            Self::Reported { rank, addr } => write!(f, "rank {rank} listens on {addr}"),
            Self::Rendezvous => f.write_str("every rank reported; sent the address list"),
            Self::Rejected { peer } => write!(f, "refused a control connection from {peer}"),
            Self::RejectedMore { count, last } => write!(
                f,
                "refused {count} more control connection(s), the last from {last}"
            ),
            Self::Forwarded { signal, ranks } => match signal_name(*signal) {
                Some(name) => write!(f, "passed {name} on to {ranks} rank(s)"),
                None => write!(f, "passed signal {signal} on to {ranks} rank(s)"),
            },
            Self::Exited { rank, exit } => write!(f, "rank {rank} {exit}"),
            Self::Killed { rank } => write!(f, "killed the process group of rank {rank}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setters_keep_what_they_are_given() {
        let config = LaunchConfig::new(WorldSize::new(3).unwrap(), "prog")
            .arg("a")
            .args(["b", "c"])
            .timeout(Duration::from_secs(5))
            .startup_timeout(Duration::from_secs(9))
            .grace(Duration::from_millis(250))
            .run_id(42)
            .env("K", "V");
        assert_eq!(config.ranks.get(), 3);
        assert_eq!(config.program, "prog");
        assert_eq!(config.args, ["a", "b", "c"]);
        assert_eq!(config.timeout, Duration::from_secs(5));
        assert_eq!(config.startup_timeout, Duration::from_secs(9));
        assert_eq!(
            config.effective_startup_timeout(),
            Duration::from_secs(5),
            "capped by the run timeout"
        );
        assert_eq!(config.grace, Duration::from_millis(250));
        assert_eq!(config.run_id, Some(42));
        assert_eq!(config.env, [(OsString::from("K"), OsString::from("V"))]);
    }

    #[test]
    fn events_read_as_sentences() {
        let event = LaunchEvent::Exited {
            rank: 1,
            exit: ExitKind::Code(0),
        };
        assert_eq!(event.to_string(), "rank 1 exited with code 0");
        assert_eq!(
            LaunchEvent::Spawned { rank: 0, pid: 42 }.to_string(),
            "rank 0 started as pid 42"
        );
    }

    #[test]
    fn defaults_are_bounded() {
        let config = LaunchConfig::new(WorldSize::ONE, "prog");
        assert_eq!(config.timeout, DEFAULT_TIMEOUT);
        assert_eq!(config.effective_startup_timeout(), DEFAULT_STARTUP_TIMEOUT);
        assert_eq!(config.grace, Duration::ZERO);
        assert_eq!(config.run_id, None);
    }
}
