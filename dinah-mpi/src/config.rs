//! Tuning of the MPI transport.

use std::time::Duration;

/// Options of an [`MpiTransport`](crate::MpiTransport).
///
/// The defaults suit most runs; every field is public, so a configuration
/// is `MpiConfig::default()` with the fields that differ set.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use dinah_mpi::{MpiConfig, MpiTransport};
///
/// let mut config = MpiConfig::default();
/// config.bootstrap_timeout = Duration::from_secs(5);
/// let transport = MpiTransport::with_config(config);
/// assert_eq!(transport.config().bootstrap_timeout, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MpiConfig {
    /// How long [`connect`](crate::MpiTransport::connect) waits for every
    /// peer's hello before failing with
    /// [`MpiError::SetupTimeout`](crate::MpiError::SetupTimeout).
    pub bootstrap_timeout: Duration,
    /// The most messages taken on each lane and not yet handed to the
    /// runtime (received, or large frames being received). Each holds a
    /// buffer of up to the protocol's `max_frame_bytes`, so this bounds the
    /// driver's receive memory; when a lane reaches it the driver stops
    /// taking messages on that lane, and further messages wait in the
    /// posted receives and inside MPI. The bound is per lane so large
    /// action messages being received never keep a cancellation from being
    /// handed out.
    pub max_pending_receives: usize,
    /// How many receives the driver keeps posted on each lane's tag, each
    /// with a buffer of 3,968 bytes (a batch, or a frame up to that size;
    /// longer frames are announced and received apart): messages arriving
    /// are received straight into them, with no probe. They are allocated
    /// once, when the driver starts (2 x this x 3,968 bytes), and are not
    /// counted as retained bytes. More messages than this wait inside MPI
    /// until a slot is free again. At least one is posted. A rank that many
    /// others send to at once (a coordinator) may want more.
    pub posted_receives: usize,
    /// The longest one idle wait parks when nothing arrives. MPI cannot
    /// wake a parked thread, so the driver spins briefly, then parks for a
    /// doubling interval up to this bound and polls again: a smaller bound
    /// answers an idle rank's first message sooner, a larger one burns
    /// less CPU while a rank has nothing to do.
    pub max_idle_park: Duration,
    /// How long an idle wait checks for arrivals without yielding its core
    /// between checks, before it starts yielding (default 5 µs). A yield
    /// is a system call and delays the next check, so an answer that comes
    /// within this is seen sooner; beyond it, other threads that share the
    /// core get it between checks. While the runtime's workers are running
    /// jobs the wait yields from the first check, whatever this says, so
    /// that a worker on the same core is not kept from the job. Zero
    /// yields between every check. On a node with a core for every rank
    /// and worker, a longer spin answers later messages sooner too.
    pub busy_spin: Duration,
    /// Liveness (default 5 s; `None` turns it off): every quarter of it,
    /// the driver posts each peer a heartbeat on the control tag (a
    /// non-blocking send, never a collective), and a peer from which
    /// nothing arrived for this long is declared down
    /// ([`DownReason::Silent`](dinah_std::transport::DownReason::Silent)).
    /// Both happen in the owner's polls, so a rank whose runtime is not
    /// progressed for this long looks frozen to its peers (see `Liveness`
    /// in `dinah-std`).
    pub liveness_timeout: Option<Duration>,
}

impl MpiConfig {
    /// The defaults: 30 s to bootstrap, 64 pending receives, 8 posted
    /// receives per lane, idle parks of at most 1 ms, 5 µs of checking
    /// without yielding, a liveness timeout of 5 s.
    pub const DEFAULT: Self = Self {
        bootstrap_timeout: Duration::from_secs(30),
        max_pending_receives: 64,
        posted_receives: 8,
        max_idle_park: Duration::from_millis(1),
        busy_spin: Duration::from_micros(5),
        liveness_timeout: Some(Duration::from_secs(5)),
    };
}

impl Default for MpiConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}
