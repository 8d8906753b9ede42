//! What a launch leaves behind: how every rank ended and the first failure.

use core::fmt;
use std::net::SocketAddr;

use super::ExitKind;
use crate::LaunchError;

/// How one rank of a launch went.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankReport {
    /// The rank.
    pub rank: u32,
    /// Its process ID, if it started.
    pub pid: Option<u32>,
    /// The address it reported, if it did.
    pub addr: Option<SocketAddr>,
    /// How it ended (`None`: it never started, or it could not be reaped
    /// before the launcher gave up on it).
    pub exit: Option<ExitKind>,
    /// Whether the launcher killed it.
    pub killed: bool,
}

impl RankReport {
    pub(crate) fn new(rank: u32) -> Self {
        Self {
            rank,
            pid: None,
            addr: None,
            exit: None,
            killed: false,
        }
    }
}

/// The outcome of [`launch`](super::launch): every rank's end and the
/// first failure, if any.
///
/// The `Display` form is what `dinah-run` prints when a run fails: the
/// failure with its causes, then the ranks the launcher killed.
#[derive(Debug)]
pub struct LaunchReport {
    pub(crate) run_id: u64,
    pub(crate) control: Option<SocketAddr>,
    pub(crate) ranks: Vec<RankReport>,
    pub(crate) error: Option<LaunchError>,
    pub(crate) rejected_connections: u32,
}

impl LaunchReport {
    /// The run ID the ranks were given.
    pub fn run_id(&self) -> u64 {
        self.run_id
    }

    /// The launcher's control address, if it was bound.
    pub fn control(&self) -> Option<SocketAddr> {
        self.control
    }

    /// Every rank, in rank order.
    pub fn ranks(&self) -> &[RankReport] {
        &self.ranks
    }

    /// The first failure of the run (`None`: every rank exited with 0).
    pub fn error(&self) -> Option<&LaunchError> {
        self.error.as_ref()
    }

    /// Connections to the control listener that were refused (they did not
    /// deliver a valid report of this run).
    pub fn rejected_connections(&self) -> u32 {
        self.rejected_connections
    }

    /// Did every rank exit with code 0?
    pub fn is_success(&self) -> bool {
        self.error.is_none()
    }

    /// The exit code for the launcher's own process: 0 on success, else
    /// [`LaunchError::exit_code`].
    pub fn exit_code(&self) -> u8 {
        self.error.as_ref().map_or(0, LaunchError::exit_code)
    }

    /// The report on success, the first failure otherwise.
    ///
    /// # Errors
    ///
    /// The run's first failure.
    pub fn into_result(self) -> Result<Self, LaunchError> {
        match self.error {
            None => Ok(self),
            Some(error) => Err(error),
        }
    }
}

impl fmt::Display for LaunchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.error {
            None => write!(f, "all {} rank(s) exited with code 0", self.ranks.len())?,
            Some(error) => {
                write!(f, "{error}")?;
                let mut source = core::error::Error::source(error);
                while let Some(cause) = source {
                    write!(f, ": {cause}")?;
                    source = cause.source();
                }
            }
        }
        let killed: Vec<String> = self
            .ranks
            .iter()
            .filter(|r| r.killed)
            .map(|r| r.rank.to_string())
            .collect();
        if !killed.is_empty() {
            write!(f, "; killed rank(s) {}", killed.join(", "))?;
        }
        let lost: Vec<String> = self
            .ranks
            .iter()
            .filter(|r| r.pid.is_some() && r.exit.is_none())
            .map(|r| r.rank.to_string())
            .collect();
        if !lost.is_empty() {
            write!(f, "; could not reap rank(s) {}", lost.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(error: Option<LaunchError>) -> LaunchReport {
        let mut ranks: Vec<_> = (0..3).map(RankReport::new).collect();
        for rank in &mut ranks {
            rank.pid = Some(100 + rank.rank);
            rank.exit = Some(ExitKind::Code(0));
        }
        ranks[1].exit = Some(ExitKind::Code(3));
        ranks[2].exit = Some(ExitKind::Signal(9));
        ranks[2].killed = true;
        LaunchReport {
            run_id: 5,
            control: None,
            ranks,
            error,
            rejected_connections: 0,
        }
    }

    #[test]
    fn a_failed_report_names_the_cause_and_the_killed() {
        let failed = report(Some(LaunchError::RankFailed {
            rank: 1,
            exit: ExitKind::Code(3),
        }));
        assert!(!failed.is_success());
        assert_eq!(failed.exit_code(), 3);
        assert_eq!(
            failed.to_string(),
            "rank 1 exited with code 3; killed rank(s) 2"
        );
        assert!(matches!(
            failed.into_result(),
            Err(LaunchError::RankFailed { rank: 1, .. })
        ));
    }

    #[test]
    fn a_successful_report_says_so() {
        let mut ok = report(None);
        for rank in &mut ok.ranks {
            rank.exit = Some(ExitKind::Code(0));
            rank.killed = false;
        }
        assert!(ok.is_success());
        assert_eq!(ok.exit_code(), 0);
        assert_eq!(ok.to_string(), "all 3 rank(s) exited with code 0");
        assert_eq!(ok.into_result().map(|r| r.run_id()).ok(), Some(5));
    }
}
