//! Tuning knobs of the TCP transport: timeouts, back-off and the sizes of
//! its bounded buffers.

use std::fmt;
use std::time::Duration;

/// How the TCP transport sets up its connections and how much it buffers.
///
/// The defaults suit a run on one machine or a cluster network; every
/// field is documented with its default. Start from
/// [`TcpConfig::default`] (or [`TcpConfig::DEFAULT`] in a `const`) and
/// change what you need with the chained `with_*` methods, one per field;
/// the fields stay public, so assigning them works too.
/// [`TcpConfig::validate`] (also run by
/// [`TcpTransport::connect_with`](crate::TcpTransport::connect_with))
/// refuses zero sizes and inconsistent timeouts; the setters do not check.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use dinah_tcp::TcpConfig;
///
/// let config = TcpConfig::default()
///     .with_setup_timeout(Duration::from_secs(5))
///     .with_hello_timeout(Duration::from_millis(500));
/// config.validate()?;
///
/// // The setters are `const`, so a configuration can be a constant.
/// const NO_KEEPALIVE: TcpConfig = TcpConfig::DEFAULT.with_keepalive(None);
/// assert_eq!(NO_KEEPALIVE.keepalive, None);
/// # Ok::<(), dinah_tcp::TcpError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpConfig {
    /// The longest one connection attempt may take (default 1 s). Refused
    /// attempts are retried with back-off until
    /// [`setup_timeout`](Self::setup_timeout).
    pub connect_timeout: Duration,
    /// The first pause between two connection attempts to the same peer
    /// (default 2 ms); it doubles after each failure.
    pub backoff_min: Duration,
    /// The longest pause between two connection attempts (default 250 ms).
    pub backoff_max: Duration,
    /// The deadline of the whole set-up: every connection to every peer
    /// established and handshaken (default 30 s).
    pub setup_timeout: Duration,
    /// How long an accepted connection may take to send its hello before it
    /// is dropped (default 2 s; a rank sends its hello as soon as it is
    /// connected). A silent or slow stranger never holds up the others:
    /// each is dropped on its own timer, or sooner to make room for newer
    /// connections when a listener already waits for a thousand.
    pub hello_timeout: Duration,
    /// Frames this rank sent to itself that may wait to be handed over
    /// (default 1024); the next one waits in the handle. (Frames from
    /// peers are read only as fast as the owner hands them over, so TCP
    /// flow control bounds them: see `read_buffer_bytes`.)
    pub inbox_frames: usize,
    /// Frames taken from the handle for one connection and not yet written
    /// (default 1024). When a connection is this far behind, its lane's
    /// next frame waits in the handle.
    pub write_queue_frames: usize,
    /// Bytes taken from the handle for one connection and not yet written
    /// (default 4 MiB; one frame is always admitted).
    pub write_queue_bytes: u64,
    /// The most bytes one vectored `write` gathers (default 256 KiB).
    pub write_batch_bytes: usize,
    /// The size of each connection's read buffer (default 64 KiB). Larger
    /// payload chunks are read straight into the frame being assembled.
    pub read_buffer_bytes: usize,
    /// TCP keep-alive: idle time before the first probe (default 30 s;
    /// `None` leaves keep-alive off). A peer that vanished without a reset
    /// is then reported down after a few unanswered probes.
    pub keepalive: Option<Duration>,
    /// The longest the owner parks while a write waits for room in a
    /// socket's buffer (default 200 µs). The socket's room wakes it sooner:
    /// a full socket is watched for writability as well as for data; this
    /// bound only matters if that report comes late. (A full socket whose
    /// stream has ended is no longer watched and is retried every 20 µs.)
    /// Only used while some connection's socket buffer is full; otherwise
    /// the owner parks until woken.
    pub blocked_write_retry: Duration,
    /// Liveness (default 5 s; `None` turns it off): every quarter of it,
    /// this rank sends each peer a heartbeat on the control connection,
    /// and a peer from which nothing arrived for this long is declared
    /// down ([`DownReason::Silent`](dinah_std::transport::DownReason::Silent)):
    /// its waiters fail at once instead of at their deadlines, and
    /// shutdown does not wait for it. Heartbeats are sent and checked
    /// while the runtime is progressed, so a rank that computes for
    /// longer than this without progressing its runtime looks frozen to
    /// its peers: run such a runtime on a thread of its own, or raise
    /// this (see `Liveness` in `dinah-std`).
    pub liveness_timeout: Option<Duration>,
    /// Up to how many live connections the owner's idle spin reads each
    /// socket itself (default 4: two peers, two connections each); with
    /// more, it asks the readiness set that holds them all. A look that
    /// reads finds an arrival and takes it in one system call, and the
    /// next poll hands it over; asking the set costs one call whatever
    /// the number of peers, but a second call, the read, follows each
    /// arrival, which lengthens every round trip (`docs/tcp.md` has the
    /// measurement). 0 always asks the set.
    pub spin_read_connections: usize,
}

impl TcpConfig {
    /// The defaults, as a constant.
    pub const DEFAULT: Self = Self {
        connect_timeout: Duration::from_secs(1),
        backoff_min: Duration::from_millis(2),
        backoff_max: Duration::from_millis(250),
        setup_timeout: Duration::from_secs(30),
        hello_timeout: Duration::from_secs(2),
        inbox_frames: 1024,
        write_queue_frames: 1024,
        write_queue_bytes: 4 << 20,
        write_batch_bytes: 256 << 10,
        read_buffer_bytes: 64 << 10,
        keepalive: Some(Duration::from_secs(30)),
        blocked_write_retry: Duration::from_micros(200),
        liveness_timeout: Some(Duration::from_secs(5)),
        spin_read_connections: 4,
    };

    /// Sets [`connect_timeout`](Self::connect_timeout): the longest one
    /// connection attempt may take.
    ///
    /// Refused attempts are retried with back-off until
    /// [`setup_timeout`](Self::setup_timeout). Default: 1 s.
    #[must_use]
    pub const fn with_connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
    }

    /// Sets [`backoff_min`](Self::backoff_min): the first pause between two
    /// connection attempts to the same peer.
    ///
    /// The pause doubles after each failure, up to
    /// [`backoff_max`](Self::backoff_max). Default: 2 ms.
    #[must_use]
    pub const fn with_backoff_min(mut self, backoff_min: Duration) -> Self {
        self.backoff_min = backoff_min;
        self
    }

    /// Sets [`backoff_max`](Self::backoff_max): the longest pause between
    /// two connection attempts.
    ///
    /// [`validate`](Self::validate) refuses a value below
    /// [`backoff_min`](Self::backoff_min). Default: 250 ms.
    #[must_use]
    pub const fn with_backoff_max(mut self, backoff_max: Duration) -> Self {
        self.backoff_max = backoff_max;
        self
    }

    /// Sets [`setup_timeout`](Self::setup_timeout): the deadline of the
    /// whole set-up.
    ///
    /// Every connection to every peer must be established and handshaken by
    /// then. Default: 30 s.
    #[must_use]
    pub const fn with_setup_timeout(mut self, setup_timeout: Duration) -> Self {
        self.setup_timeout = setup_timeout;
        self
    }

    /// Sets [`hello_timeout`](Self::hello_timeout): how long an accepted
    /// connection may take to send its hello.
    ///
    /// A connection that is silent for longer is dropped on its own timer,
    /// without holding up the others. Default: 5 s.
    #[must_use]
    pub const fn with_hello_timeout(mut self, hello_timeout: Duration) -> Self {
        self.hello_timeout = hello_timeout;
        self
    }

    /// Sets [`inbox_frames`](Self::inbox_frames): how many frames this rank
    /// sent to itself may wait to be handed over.
    ///
    /// The next one waits in the handle. Default: 1024.
    #[must_use]
    pub const fn with_inbox_frames(mut self, inbox_frames: usize) -> Self {
        self.inbox_frames = inbox_frames;
        self
    }

    /// Sets [`write_queue_frames`](Self::write_queue_frames): how many
    /// frames taken from the handle for one connection may wait to be
    /// written.
    ///
    /// When a connection is this far behind, its lane's next frame waits in
    /// the handle. Default: 1024.
    #[must_use]
    pub const fn with_write_queue_frames(mut self, write_queue_frames: usize) -> Self {
        self.write_queue_frames = write_queue_frames;
        self
    }

    /// Sets [`write_queue_bytes`](Self::write_queue_bytes): how many bytes
    /// taken from the handle for one connection may wait to be written.
    ///
    /// An empty queue always takes the next frame, however large. Default:
    /// 4 MiB.
    #[must_use]
    pub const fn with_write_queue_bytes(mut self, write_queue_bytes: u64) -> Self {
        self.write_queue_bytes = write_queue_bytes;
        self
    }

    /// Sets [`write_batch_bytes`](Self::write_batch_bytes): the most bytes
    /// one vectored `write` gathers.
    ///
    /// Default: 256 KiB.
    #[must_use]
    pub const fn with_write_batch_bytes(mut self, write_batch_bytes: usize) -> Self {
        self.write_batch_bytes = write_batch_bytes;
        self
    }

    /// Sets [`read_buffer_bytes`](Self::read_buffer_bytes): the size of
    /// each connection's read buffer.
    ///
    /// Larger payload chunks are read straight into the frame being
    /// assembled. Default: 64 KiB.
    #[must_use]
    pub const fn with_read_buffer_bytes(mut self, read_buffer_bytes: usize) -> Self {
        self.read_buffer_bytes = read_buffer_bytes;
        self
    }

    /// Sets [`keepalive`](Self::keepalive): the TCP keep-alive idle time
    /// before the first probe.
    ///
    /// `None` leaves keep-alive off. Default: 30 s (`Some`).
    #[must_use]
    pub const fn with_keepalive(mut self, keepalive: Option<Duration>) -> Self {
        self.keepalive = keepalive;
        self
    }

    /// Sets [`blocked_write_retry`](Self::blocked_write_retry): the longest
    /// the owner parks while a write waits for room in a socket's buffer
    /// (its writability wakes it sooner). Default: 200 µs.
    #[must_use]
    pub const fn with_blocked_write_retry(mut self, blocked_write_retry: Duration) -> Self {
        self.blocked_write_retry = blocked_write_retry;
        self
    }

    /// Sets [`liveness_timeout`](Self::liveness_timeout): how long a peer
    /// may stay silent before it is declared down (`None`: never).
    /// Default: 5 s.
    #[must_use]
    pub const fn with_liveness_timeout(mut self, liveness_timeout: Option<Duration>) -> Self {
        self.liveness_timeout = liveness_timeout;
        self
    }

    /// Sets [`spin_read_connections`](Self::spin_read_connections): up to
    /// how many live connections the idle spin reads each socket itself
    /// instead of asking the readiness set (0: always the set). Default: 4.
    #[must_use]
    pub const fn with_spin_read_connections(mut self, spin_read_connections: usize) -> Self {
        self.spin_read_connections = spin_read_connections;
        self
    }

    /// Checks every field.
    ///
    /// # Errors
    ///
    /// [`TcpError::InvalidConfig`](crate::TcpError::InvalidConfig) naming
    /// the first field that is zero, or `backoff_min` above `backoff_max`.
    pub fn validate(&self) -> Result<(), crate::TcpError> {
        let checks = [
            (ConfigField::ConnectTimeout, self.connect_timeout.is_zero()),
            (ConfigField::BackoffMin, self.backoff_min.is_zero()),
            (ConfigField::BackoffMax, self.backoff_max < self.backoff_min),
            (ConfigField::SetupTimeout, self.setup_timeout.is_zero()),
            (ConfigField::HelloTimeout, self.hello_timeout.is_zero()),
            (ConfigField::InboxFrames, self.inbox_frames == 0),
            (ConfigField::WriteQueueFrames, self.write_queue_frames == 0),
            (ConfigField::WriteQueueBytes, self.write_queue_bytes == 0),
            (ConfigField::WriteBatchBytes, self.write_batch_bytes == 0),
            (ConfigField::ReadBufferBytes, self.read_buffer_bytes == 0),
            (
                ConfigField::Keepalive,
                self.keepalive.is_some_and(|idle| idle.is_zero()),
            ),
            (
                ConfigField::BlockedWriteRetry,
                self.blocked_write_retry.is_zero(),
            ),
            (
                ConfigField::LivenessTimeout,
                self.liveness_timeout
                    .is_some_and(|timeout| timeout.is_zero()),
            ),
        ];
        match checks.into_iter().find(|&(_, bad)| bad) {
            Some((field, _)) => Err(crate::TcpError::InvalidConfig { field }),
            None => Ok(()),
        }
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A field of [`TcpConfig`], named by a validation error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigField {
    /// [`TcpConfig::connect_timeout`].
    ConnectTimeout,
    /// [`TcpConfig::backoff_min`].
    BackoffMin,
    /// [`TcpConfig::backoff_max`] (zero or below `backoff_min`).
    BackoffMax,
    /// [`TcpConfig::setup_timeout`].
    SetupTimeout,
    /// [`TcpConfig::hello_timeout`].
    HelloTimeout,
    /// [`TcpConfig::inbox_frames`].
    InboxFrames,
    /// [`TcpConfig::write_queue_frames`].
    WriteQueueFrames,
    /// [`TcpConfig::write_queue_bytes`].
    WriteQueueBytes,
    /// [`TcpConfig::write_batch_bytes`].
    WriteBatchBytes,
    /// [`TcpConfig::read_buffer_bytes`].
    ReadBufferBytes,
    /// [`TcpConfig::keepalive`] (a zero idle time).
    Keepalive,
    /// [`TcpConfig::blocked_write_retry`].
    BlockedWriteRetry,
    /// [`TcpConfig::liveness_timeout`] (a zero timeout).
    LivenessTimeout,
}

impl fmt::Display for ConfigField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ConnectTimeout => "connect_timeout",
            Self::BackoffMin => "backoff_min",
            Self::BackoffMax => "backoff_max",
            Self::SetupTimeout => "setup_timeout",
            Self::HelloTimeout => "hello_timeout",
            Self::InboxFrames => "inbox_frames",
            Self::WriteQueueFrames => "write_queue_frames",
            Self::WriteQueueBytes => "write_queue_bytes",
            Self::WriteBatchBytes => "write_batch_bytes",
            Self::ReadBufferBytes => "read_buffer_bytes",
            Self::Keepalive => "keepalive",
            Self::BlockedWriteRetry => "blocked_write_retry",
            Self::LivenessTimeout => "liveness_timeout",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TcpError;

    #[test]
    fn the_defaults_are_valid() {
        assert!(TcpConfig::default().validate().is_ok());
        assert_eq!(TcpConfig::default(), TcpConfig::DEFAULT);
    }

    /// Each setter, applied to the defaults, must give exactly the defaults
    /// with its own field changed: a setter that wrote another field (or
    /// none) fails here.
    #[test]
    fn each_setter_sets_its_own_field_only() {
        let base = TcpConfig::DEFAULT;
        let secs = Duration::from_secs;
        let cases = [
            (
                "connect_timeout",
                base.with_connect_timeout(secs(7)),
                TcpConfig {
                    connect_timeout: secs(7),
                    ..base
                },
            ),
            (
                "backoff_min",
                base.with_backoff_min(secs(8)),
                TcpConfig {
                    backoff_min: secs(8),
                    ..base
                },
            ),
            (
                "backoff_max",
                base.with_backoff_max(secs(9)),
                TcpConfig {
                    backoff_max: secs(9),
                    ..base
                },
            ),
            (
                "setup_timeout",
                base.with_setup_timeout(secs(10)),
                TcpConfig {
                    setup_timeout: secs(10),
                    ..base
                },
            ),
            (
                "hello_timeout",
                base.with_hello_timeout(secs(11)),
                TcpConfig {
                    hello_timeout: secs(11),
                    ..base
                },
            ),
            (
                "inbox_frames",
                base.with_inbox_frames(12),
                TcpConfig {
                    inbox_frames: 12,
                    ..base
                },
            ),
            (
                "write_queue_frames",
                base.with_write_queue_frames(13),
                TcpConfig {
                    write_queue_frames: 13,
                    ..base
                },
            ),
            (
                "write_queue_bytes",
                base.with_write_queue_bytes(14),
                TcpConfig {
                    write_queue_bytes: 14,
                    ..base
                },
            ),
            (
                "write_batch_bytes",
                base.with_write_batch_bytes(15),
                TcpConfig {
                    write_batch_bytes: 15,
                    ..base
                },
            ),
            (
                "read_buffer_bytes",
                base.with_read_buffer_bytes(16),
                TcpConfig {
                    read_buffer_bytes: 16,
                    ..base
                },
            ),
            (
                "keepalive",
                base.with_keepalive(None),
                TcpConfig {
                    keepalive: None,
                    ..base
                },
            ),
            (
                "blocked_write_retry",
                base.with_blocked_write_retry(secs(17)),
                TcpConfig {
                    blocked_write_retry: secs(17),
                    ..base
                },
            ),
            (
                "liveness_timeout",
                base.with_liveness_timeout(Some(secs(18))),
                TcpConfig {
                    liveness_timeout: Some(secs(18)),
                    ..base
                },
            ),
            (
                "spin_read_connections",
                base.with_spin_read_connections(19),
                TcpConfig {
                    spin_read_connections: 19,
                    ..base
                },
            ),
        ];
        for (field, built, expected) in cases {
            // The new value differs from the default, so a setter that
            // does nothing cannot pass.
            assert_ne!(built, base, "{field}: the setter changed nothing");
            assert_eq!(built, expected, "{field}");
        }
    }

    /// Chaining every setter gives the configuration written out field by
    /// field. The literal names every field without `..`, so a field added
    /// later does not compile here until this test (and its setter) covers
    /// it.
    #[test]
    fn chained_setters_set_every_field() {
        let chained = TcpConfig::default()
            .with_connect_timeout(Duration::from_millis(101))
            .with_backoff_min(Duration::from_millis(102))
            .with_backoff_max(Duration::from_millis(103))
            .with_setup_timeout(Duration::from_millis(104))
            .with_hello_timeout(Duration::from_millis(105))
            .with_inbox_frames(106)
            .with_write_queue_frames(107)
            .with_write_queue_bytes(108)
            .with_write_batch_bytes(109)
            .with_read_buffer_bytes(110)
            .with_keepalive(Some(Duration::from_millis(111)))
            .with_blocked_write_retry(Duration::from_millis(112))
            .with_liveness_timeout(Some(Duration::from_millis(113)))
            .with_spin_read_connections(114);
        let written_out = TcpConfig {
            connect_timeout: Duration::from_millis(101),
            backoff_min: Duration::from_millis(102),
            backoff_max: Duration::from_millis(103),
            setup_timeout: Duration::from_millis(104),
            hello_timeout: Duration::from_millis(105),
            inbox_frames: 106,
            write_queue_frames: 107,
            write_queue_bytes: 108,
            write_batch_bytes: 109,
            read_buffer_bytes: 110,
            keepalive: Some(Duration::from_millis(111)),
            blocked_write_retry: Duration::from_millis(112),
            liveness_timeout: Some(Duration::from_millis(113)),
            spin_read_connections: 114,
        };
        assert_eq!(chained, written_out);
        assert!(chained.validate().is_ok());
    }

    #[test]
    fn each_bad_field_is_named() {
        type Spoil = fn(&mut TcpConfig);
        let cases: [(Spoil, ConfigField); 7] = [
            (
                |c| c.connect_timeout = Duration::ZERO,
                ConfigField::ConnectTimeout,
            ),
            (
                |c| c.backoff_max = Duration::from_micros(1),
                ConfigField::BackoffMax,
            ),
            (|c| c.inbox_frames = 0, ConfigField::InboxFrames),
            (|c| c.write_queue_bytes = 0, ConfigField::WriteQueueBytes),
            (
                |c| c.keepalive = Some(Duration::ZERO),
                ConfigField::Keepalive,
            ),
            (
                |c| c.blocked_write_retry = Duration::ZERO,
                ConfigField::BlockedWriteRetry,
            ),
            (
                |c| c.liveness_timeout = Some(Duration::ZERO),
                ConfigField::LivenessTimeout,
            ),
        ];
        for (spoil, field) in cases {
            let mut config = TcpConfig::default();
            spoil(&mut config);
            let error = config.validate().unwrap_err();
            assert!(
                matches!(error, TcpError::InvalidConfig { field: f } if f == field),
                "{field}: {error}"
            );
        }
        let off = TcpConfig::default().with_keepalive(None);
        assert!(off.validate().is_ok());
        let off = TcpConfig::default().with_liveness_timeout(None);
        assert!(off.validate().is_ok());
    }
}
