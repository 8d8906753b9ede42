//! [`LaunchError`]: everything that can go wrong when `dinah-run` starts a
//! run, on either side of its control connection.

use core::fmt;
use std::ffi::OsString;
use std::io;
use std::time::Duration;

use crate::launcher::{ControlError, ExitKind, Refusal};

/// What the launcher (or a rank talking to it) was doing when an I/O
/// operation failed.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchOp {
    /// Binding the launcher's control listener.
    BindControl,
    /// Accepting a rank's control connection.
    AcceptControl,
    /// A rank binding its own transport listener.
    BindListener,
    /// A rank connecting to the launcher.
    ConnectLauncher,
    /// Reading a control message.
    ReadControl,
    /// Writing a control message.
    WriteControl,
    /// Waiting for (reaping) the process of a rank.
    Wait {
        /// The rank being waited for.
        rank: u32,
    },
    /// Starting a launcher thread (output pump, control reader).
    Thread,
    /// Making the run key, or a nonce, from the operating system's random
    /// generator.
    MakeKey,
    /// Resolving the coordinator's `host:port`.
    ResolveCoordinator,
    /// Rank 0 binding the coordinator's listener.
    BindCoordinator,
    /// A rank connecting to the coordinator.
    ConnectCoordinator,
}

impl fmt::Display for LaunchOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BindControl => f.write_str("binding the launcher's control listener"),
            Self::AcceptControl => f.write_str("accepting a control connection"),
            Self::BindListener => f.write_str("binding this rank's listener"),
            Self::ConnectLauncher => f.write_str("connecting to the launcher"),
            Self::ReadControl => f.write_str("reading a control message"),
            Self::WriteControl => f.write_str("writing a control message"),
            Self::Wait { rank } => write!(f, "waiting for rank {rank}"),
            Self::Thread => f.write_str("starting a launcher thread"),
            Self::MakeKey => f.write_str("making the run key"),
            Self::ResolveCoordinator => f.write_str("resolving the coordinator's address"),
            Self::BindCoordinator => f.write_str("binding the coordinator's listener"),
            Self::ConnectCoordinator => f.write_str("connecting to the coordinator"),
        }
    }
}

/// Which wait of a launch ran out of time.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchPhase {
    /// The launcher waiting for every rank to report its address.
    Startup,
    /// The launcher waiting for every rank to exit.
    Run,
    /// A rank waiting for the launcher's address list.
    Rendezvous,
}

impl fmt::Display for LaunchPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Startup => "start-up",
            Self::Run => "run",
            Self::Rendezvous => "rendezvous",
        })
    }
}

/// What is wrong with a `DINAH_*` environment variable.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvProblem {
    /// The variable is not set.
    Missing,
    /// The value is not valid Unicode.
    NotUnicode,
    /// The value does not parse (or is out of range).
    Invalid,
}

/// An error of the `dinah-run` launcher or of a rank's rendezvous with it.
///
/// The launcher side reports it in [`LaunchReport::error`]; a rank gets it
/// from [`LaunchEnv::from_env`] or [`LaunchEnv::rendezvous`]. Causes from
/// the operating system are kept and returned by
/// [`source`](core::error::Error::source).
///
/// [`LaunchReport::error`]: crate::launcher::LaunchReport::error
/// [`LaunchEnv::from_env`]: crate::LaunchEnv::from_env
/// [`LaunchEnv::rendezvous`]: crate::LaunchEnv::rendezvous
#[non_exhaustive]
#[derive(Debug)]
pub enum LaunchError {
    /// More ranks were asked for than the launcher supports.
    TooManyRanks {
        /// The number asked for.
        requested: u32,
        /// [`MAX_RANKS`](crate::launcher::MAX_RANKS).
        max: u32,
    },
    /// A variable a rank needs (its launcher's, or a `DINAH_*` one) is
    /// missing or malformed.
    Env {
        /// The variable.
        var: &'static str,
        /// What is wrong with it.
        problem: EnvProblem,
    },
    /// An operating-system call failed.
    Io {
        /// What was being done.
        op: LaunchOp,
        /// The cause.
        source: io::Error,
    },
    /// The process of a rank could not be started (the program is missing,
    /// not executable, or the system is out of processes).
    Spawn {
        /// The rank.
        rank: u32,
        /// The program, as given.
        program: OsString,
        /// The operating system's error.
        source: io::Error,
    },
    /// The launcher was sent `SIGINT` or `SIGTERM`: it passed the signal
    /// on to every rank and ended the run.
    Interrupted {
        /// The signal's number.
        signal: i32,
    },
    /// The hostfile named by `DINAH_HOSTFILE` cannot be used.
    Hostfile {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        error: crate::env::HostfileError,
    },
    /// The run needs a key (`DINAH_KEY` or `DINAH_KEY_FILE`) and has
    /// none, and authentication was not turned off.
    NoKey,
    /// The run key in the environment cannot be read.
    Key(crate::key::KeyError),
    /// A control message was malformed.
    Protocol(ControlError),
    /// The launcher refused this rank, or aborted the rendezvous.
    Refused(Refusal),
    /// The launcher closed the control connection before sending the
    /// address list.
    LauncherClosed,
    /// A rank exited before reporting its address while other ranks wait
    /// for the address list, so the list can never be complete.
    ExitedBeforeReport {
        /// The rank.
        rank: u32,
        /// How it exited.
        exit: ExitKind,
    },
    /// A rank exited with a non-zero code or was killed by a signal (the
    /// first such rank of the run).
    RankFailed {
        /// The rank.
        rank: u32,
        /// How it exited.
        exit: ExitKind,
    },
    /// A wait of the launch ran out of time.
    Timeout {
        /// Which wait.
        phase: LaunchPhase,
        /// The limit that passed.
        after: Duration,
        /// The lowest rank that was still missing (had not reported, or
        /// had not exited); for [`LaunchPhase::Rendezvous`], this rank.
        first_missing: u32,
        /// How many ranks were missing.
        missing: u32,
    },
}

impl LaunchError {
    /// The exit code `dinah-run` uses for this error: the rank's own code
    /// when it exited non-zero, `128 + N` when it was killed by signal N,
    /// 124 on a timeout (as `timeout(1)`), `128 + N` when the launcher
    /// was interrupted by signal N (as a shell reports it), and 1
    /// otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::RankFailed { exit, .. } => exit.launcher_code(),
            Self::Interrupted { signal } => ExitKind::Signal(*signal).launcher_code(),
            Self::Timeout { .. } => 124,
            _ => 1,
        }
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyRanks { requested, max } => {
                write!(
                    f,
                    "cannot start {requested} ranks: the launcher starts at most {max}"
                )
            }
            Self::Env { var, problem } => match problem {
                EnvProblem::Missing if *var == crate::launcher::ENV_RANK => write!(
                    f,
                    "{var} is not set: start this program with dinah-run, or under srun, mpirun or mpiexec"
                ),
                EnvProblem::Missing if *var == crate::env::ENV_COORDINATOR => write!(
                    f,
                    "{var} is not set: name rank 0's host:port there, or a hostfile in {}",
                    crate::env::ENV_HOSTFILE
                ),
                EnvProblem::Missing => write!(f, "{var} is not set"),
                EnvProblem::NotUnicode => write!(f, "{var} is not valid unicode"),
                EnvProblem::Invalid => write!(f, "{var} has an invalid value"),
            },
            Self::Io { op, .. } => write!(f, "i/o error while {op}"),
            Self::Spawn { rank, program, .. } => {
                write!(
                    f,
                    "cannot start rank {rank} as `{}`",
                    program.to_string_lossy()
                )
            }
            Self::Interrupted { signal } => match crate::launcher::signal_name(*signal) {
                Some(name) => write!(
                    f,
                    "interrupted by signal {signal} ({name}), passed on to every rank"
                ),
                None => write!(f, "interrupted by signal {signal}, passed on to every rank"),
            },
            Self::Hostfile { path, error } => {
                write!(f, "the hostfile {}: {error}", path.display())
            }
            Self::NoKey => f.write_str(
                "no run key: set DINAH_KEY (64 hex digits) or DINAH_KEY_FILE on every rank, or turn authentication off (LaunchEnv::without_authentication)",
            ),
            Self::Key(error) => write!(f, "cannot read the run key: {error}"),
            Self::Protocol(error) => write!(f, "malformed control message: {error}"),
            Self::Refused(refusal) => write!(f, "the rendezvous was refused: {refusal}"),
            Self::LauncherClosed => {
                f.write_str("the launcher closed the control connection before the address list")
            }
            Self::ExitedBeforeReport { rank, exit } => {
                write!(
                    f,
                    "rank {rank} {exit} before reporting its address while other ranks waited for it"
                )
            }
            Self::RankFailed { rank, exit } => write!(f, "rank {rank} {exit}"),
            Self::Timeout {
                phase: LaunchPhase::Startup,
                after,
                first_missing,
                missing,
            } => write!(
                f,
                "{missing} rank(s) did not report an address within {after:?} (the first is rank {first_missing})"
            ),
            Self::Timeout {
                phase: LaunchPhase::Run,
                after,
                first_missing,
                missing,
            } => write!(
                f,
                "the run timed out after {after:?} with {missing} rank(s) still running (the first is rank {first_missing})"
            ),
            Self::Timeout {
                phase,
                after,
                first_missing,
                ..
            } => {
                write!(
                    f,
                    "rank {first_missing}: the {phase} timed out after {after:?}"
                )
            }
        }
    }
}

impl core::error::Error for LaunchError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } | Self::Spawn { source, .. } => Some(source),
            Self::Protocol(error) => Some(error),
            Self::Hostfile { error, .. } => Some(error),
            Self::Key(error) => Some(error),
            Self::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }
}

impl From<ControlError> for LaunchError {
    fn from(error: ControlError) -> Self {
        Self::Protocol(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_failure() {
        let failed = LaunchError::RankFailed {
            rank: 2,
            exit: ExitKind::Code(3),
        };
        assert_eq!(failed.exit_code(), 3);
        let killed = LaunchError::RankFailed {
            rank: 1,
            exit: ExitKind::Signal(9),
        };
        assert_eq!(killed.exit_code(), 137);
        let timeout = LaunchError::Timeout {
            phase: LaunchPhase::Run,
            after: Duration::from_secs(1),
            first_missing: 0,
            missing: 1,
        };
        assert_eq!(timeout.exit_code(), 124);
        assert_eq!(LaunchError::Interrupted { signal: 2 }.exit_code(), 130);
        assert_eq!(LaunchError::Interrupted { signal: 15 }.exit_code(), 143);
        assert_eq!(LaunchError::LauncherClosed.exit_code(), 1);
    }

    #[test]
    fn display_names_the_rank_and_the_cause() {
        let failed = LaunchError::RankFailed {
            rank: 2,
            exit: ExitKind::Code(3),
        };
        assert_eq!(failed.to_string(), "rank 2 exited with code 3");
        let killed = LaunchError::RankFailed {
            rank: 1,
            exit: ExitKind::Signal(9),
        };
        assert_eq!(
            killed.to_string(),
            "rank 1 was killed by signal 9 (SIGKILL)"
        );
        let missing = LaunchError::Env {
            var: "DINAH_RANK",
            problem: EnvProblem::Missing,
        };
        assert_eq!(
            missing.to_string(),
            "DINAH_RANK is not set: start this program with dinah-run, or under srun, mpirun or mpiexec"
        );
        let nowhere = LaunchError::Env {
            var: "DINAH_COORDINATOR",
            problem: EnvProblem::Missing,
        };
        assert_eq!(
            nowhere.to_string(),
            "DINAH_COORDINATOR is not set: name rank 0's host:port there, or a hostfile in DINAH_HOSTFILE"
        );
        let startup = LaunchError::Timeout {
            phase: LaunchPhase::Startup,
            after: Duration::from_secs(30),
            first_missing: 3,
            missing: 2,
        };
        assert_eq!(
            startup.to_string(),
            "2 rank(s) did not report an address within 30s (the first is rank 3)"
        );
    }

    #[test]
    fn spawn_errors_name_the_program_and_keep_their_cause() {
        use core::error::Error as _;
        let error = LaunchError::Spawn {
            rank: 3,
            program: OsString::from("./no-such-rank"),
            source: io::ErrorKind::NotFound.into(),
        };
        assert_eq!(error.to_string(), "cannot start rank 3 as `./no-such-rank`");
        assert!(error.source().is_some());
        assert_eq!(
            LaunchError::Interrupted { signal: 2 }.to_string(),
            "interrupted by signal 2 (SIGINT), passed on to every rank"
        );
    }

    #[test]
    fn io_errors_keep_their_cause() {
        use core::error::Error as _;
        let error = LaunchError::Io {
            op: LaunchOp::ConnectLauncher,
            source: io::ErrorKind::ConnectionRefused.into(),
        };
        assert_eq!(
            error.to_string(),
            "i/o error while connecting to the launcher"
        );
        let source = error.source().expect("the cause");
        assert_eq!(
            source.to_string(),
            io::Error::from(io::ErrorKind::ConnectionRefused).to_string()
        );
    }
}
