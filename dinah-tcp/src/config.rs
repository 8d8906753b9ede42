//! Tuning knobs of the TCP transport: timeouts, back-off and the sizes of
//! its bounded buffers.

use std::fmt;
use std::time::Duration;

/// How the TCP transport sets up its connections and how much it buffers.
///
/// The defaults suit a run on one machine or a cluster network; every
/// field is documented with its default. Build one with
/// [`TcpConfig::default`] and change fields; [`TcpConfig::validate`] (also
/// run by [`TcpTransport::connect_with`](crate::TcpTransport::connect_with))
/// refuses zero sizes and inconsistent timeouts.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use dinah_tcp::TcpConfig;
///
/// let mut config = TcpConfig::default();
/// config.setup_timeout = Duration::from_secs(5);
/// config.hello_timeout = Duration::from_millis(500);
/// config.validate()?;
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
    /// is dropped (default 5 s). A silent or slow stranger never holds up
    /// the others: each is dropped on its own timer.
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
    /// The longest the owner waits before retrying a write that found the
    /// socket full (default 200 µs). The first retry comes after 5 µs and
    /// the wait doubles up to this while the socket stays full. Only used
    /// while some connection's socket buffer is full; otherwise the owner
    /// sleeps until woken.
    pub blocked_write_retry: Duration,
}

impl TcpConfig {
    /// The defaults, as a constant.
    pub const DEFAULT: Self = Self {
        connect_timeout: Duration::from_secs(1),
        backoff_min: Duration::from_millis(2),
        backoff_max: Duration::from_millis(250),
        setup_timeout: Duration::from_secs(30),
        hello_timeout: Duration::from_secs(5),
        inbox_frames: 1024,
        write_queue_frames: 1024,
        write_queue_bytes: 4 << 20,
        write_batch_bytes: 256 << 10,
        read_buffer_bytes: 64 << 10,
        keepalive: Some(Duration::from_secs(30)),
        blocked_write_retry: Duration::from_micros(200),
    };

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

    #[test]
    fn each_bad_field_is_named() {
        type Spoil = fn(&mut TcpConfig);
        let cases: [(Spoil, ConfigField); 6] = [
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
        let off = TcpConfig {
            keepalive: None,
            ..TcpConfig::default()
        };
        assert!(off.validate().is_ok());
    }
}
