//! The errors of worker domains.

use std::fmt;
use std::time::Duration;

use dinah_core::DomainId;

use super::shutdown::ShutdownPolicy;

/// A domain did not admit a job (or batch); the job is handed back
/// untouched.
///
/// `Debug` does not require `J: Debug`: jobs are usually closures.
#[derive(Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrySubmitError<J> {
    /// The domain already holds as many admitted jobs as its capacity
    /// (`queue_capacity + workers`); retry once some have finished.
    Full(J),
    /// The domain is shutting down and admits nothing new.
    ShuttingDown(J),
    /// The completion queue has no free slot: its owner has not drained it
    /// ([`Domain::try_submit_to`](crate::Domain::try_submit_to) only).
    CompletionsFull(J),
}

impl<J> TrySubmitError<J> {
    /// The job that was not admitted.
    pub fn into_inner(self) -> J {
        match self {
            Self::Full(job) | Self::ShuttingDown(job) | Self::CompletionsFull(job) => job,
        }
    }

    /// Is this a capacity refusal (domain or completion queue full), which
    /// a retry may overcome, rather than a shutdown?
    pub const fn is_full(&self) -> bool {
        matches!(self, Self::Full(_) | Self::CompletionsFull(_))
    }

    /// The same refusal holding `f(job)`.
    pub fn map<U>(self, f: impl FnOnce(J) -> U) -> TrySubmitError<U> {
        match self {
            Self::Full(job) => TrySubmitError::Full(f(job)),
            Self::ShuttingDown(job) => TrySubmitError::ShuttingDown(f(job)),
            Self::CompletionsFull(job) => TrySubmitError::CompletionsFull(f(job)),
        }
    }
}

impl<J> fmt::Debug for TrySubmitError<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Full(_) => "Full(..)",
            Self::ShuttingDown(_) => "ShuttingDown(..)",
            Self::CompletionsFull(_) => "CompletionsFull(..)",
        })
    }
}

impl<J> fmt::Display for TrySubmitError<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Full(_) => "worker domain is full",
            Self::ShuttingDown(_) => "worker domain is shutting down",
            Self::CompletionsFull(_) => "completion queue is full",
        })
    }
}

impl<J> std::error::Error for TrySubmitError<J> {}

/// A domain could not be started.
#[derive(Debug)]
#[non_exhaustive]
pub enum DomainStartError {
    /// `queue_capacity + workers` does not fit a `usize`.
    CapacityOverflow,
    /// The worker threads could not be created.
    Threads(rayon::ThreadPoolBuildError),
    /// `first_worker + workers - 1` passes the largest
    /// [`WorkerId`](dinah_core::WorkerId).
    WorkerIdOverflow,
}

impl fmt::Display for DomainStartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CapacityOverflow => f.write_str("worker domain capacity overflows a usize"),
            Self::Threads(_) => f.write_str("could not start the worker threads of a domain"),
            Self::WorkerIdOverflow => f.write_str("worker domain's worker ids pass the largest id"),
        }
    }
}

impl std::error::Error for DomainStartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::CapacityOverflow | Self::WorkerIdOverflow => None,
            Self::Threads(error) => Some(error),
        }
    }
}

/// A domain shutdown ran out of time; the counts are exact at the deadline.
///
/// By then every job still queued has been cancelled (counted in
/// `cancelled`, each reported `Cancelled` through its handle or completion
/// queue) and the workers have been told to exit. The `running` jobs keep
/// running on their workers, detached: each still delivers its outcome when
/// it returns, after which its worker exits. Nothing is dropped unreported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct DomainShutdownTimeout {
    /// The domain.
    pub domain: DomainId,
    /// The policy the shutdown was asked for.
    pub policy: ShutdownPolicy,
    /// The time the shutdown was given.
    pub timeout: Duration,
    /// Admitted jobs (and batches) still running at the deadline.
    pub running: usize,
    /// Queued jobs (and batch tasks) cancelled without running, including
    /// those cancelled at the deadline.
    pub cancelled: usize,
    /// Worker threads that had not exited at the deadline.
    pub live_workers: usize,
    /// The domain's worker count.
    pub workers: usize,
}

impl fmt::Display for DomainShutdownTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} did not shut down within {:?}: {} jobs still running, {} of {} workers not exited, {} queued jobs cancelled",
            self.domain,
            self.timeout,
            self.running,
            self.live_workers,
            self.workers,
            self.cancelled
        )
    }
}

impl std::error::Error for DomainShutdownTimeout {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_hand_the_job_back() {
        let full = TrySubmitError::Full(String::from("job"));
        assert!(full.is_full());
        assert_eq!(full.clone().into_inner(), "job");
        assert_eq!(full.map(|job| job.len()), TrySubmitError::Full(3));
        let closed = TrySubmitError::ShuttingDown(1);
        assert!(!closed.is_full());
        assert!(TrySubmitError::CompletionsFull(()).is_full());
    }

    #[test]
    fn messages_are_lowercase_and_debug_needs_no_debug_job() {
        struct Opaque;
        let cases = [
            (
                TrySubmitError::Full(Opaque),
                "worker domain is full",
                "Full(..)",
            ),
            (
                TrySubmitError::ShuttingDown(Opaque),
                "worker domain is shutting down",
                "ShuttingDown(..)",
            ),
            (
                TrySubmitError::CompletionsFull(Opaque),
                "completion queue is full",
                "CompletionsFull(..)",
            ),
        ];
        for (error, display, debug) in cases {
            assert_eq!(error.to_string(), display);
            assert_eq!(format!("{error:?}"), debug);
        }
        assert_eq!(
            DomainStartError::CapacityOverflow.to_string(),
            "worker domain capacity overflows a usize"
        );
        assert_eq!(
            DomainStartError::WorkerIdOverflow.to_string(),
            "worker domain's worker ids pass the largest id"
        );
    }

    #[test]
    fn timeout_message_names_the_counts() {
        let timeout = DomainShutdownTimeout {
            domain: DomainId::new(3).unwrap(),
            policy: ShutdownPolicy::Drain,
            timeout: Duration::from_millis(50),
            running: 2,
            cancelled: 5,
            live_workers: 2,
            workers: 2,
        };
        assert_eq!(
            timeout.to_string(),
            "domain#3 did not shut down within 50ms: 2 jobs still running, 2 of 2 workers not exited, 5 queued jobs cancelled"
        );
    }
}
