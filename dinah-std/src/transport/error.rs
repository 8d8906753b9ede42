//! Transport errors.

use std::fmt;
use std::io;
use std::sync::Arc;

use dinah_core::Rank;
use dinah_core::wire::{Channel, HelloMismatch, ProtocolError};

use super::Frame;

/// Why a peer is considered down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DownReason {
    /// The connection ended (EOF) without a goodbye.
    EndOfStream,
    /// The connection was reset or the pipe broke.
    Reset,
    /// The peer did not answer within the transport's timeout.
    Timeout,
    /// The peer sent bytes that are not a valid frame; the connection was
    /// closed because a byte stream cannot be resynchronised.
    ProtocolViolation,
    /// The peer failed the handshake.
    HandshakeFailed,
    /// The simulated network disconnected or partitioned the peer.
    Disconnected,
    /// The local transport closed the connection (shutdown or drop).
    LocalClose,
    /// Nothing arrived from the peer for the liveness timeout (see
    /// [`Liveness`](super::Liveness)): it is frozen, gone, or cut off.
    Silent,
}

impl fmt::Display for DownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::EndOfStream => "connection ended without a goodbye",
            Self::Reset => "connection reset",
            Self::Timeout => "peer timed out",
            Self::ProtocolViolation => "peer violated the protocol",
            Self::HandshakeFailed => "handshake failed",
            Self::Disconnected => "network disconnected",
            Self::LocalClose => "closed locally",
            Self::Silent => "peer silent for longer than the liveness timeout",
        })
    }
}

/// What a transport was doing when an I/O error happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IoOp {
    /// Binding or configuring a listener.
    Bind,
    /// Connecting to a peer.
    Connect,
    /// Accepting a connection.
    Accept,
    /// Reading from a connection.
    Read,
    /// Writing to a connection.
    Write,
    /// Configuring a socket option.
    Configure,
    /// Starting an I/O thread.
    Spawn,
}

impl fmt::Display for IoOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Bind => "bind",
            Self::Connect => "connect",
            Self::Accept => "accept",
            Self::Read => "read",
            Self::Write => "write",
            Self::Configure => "configure socket",
            Self::Spawn => "spawn i/o thread",
        })
    }
}

/// A transport failed.
///
/// Cloneable, because one failure (a peer going down) fails every future
/// waiting on that peer; the `io::Error` cause is shared behind an `Arc`
/// and returned from [`source`](std::error::Error::source).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TransportError {
    /// A peer is down; everything waiting on it fails with this.
    PeerDown {
        /// The peer.
        peer: Rank,
        /// Why it is considered down.
        reason: DownReason,
    },
    /// An I/O operation failed.
    Io {
        /// The peer the connection belongs to, if any.
        peer: Option<Rank>,
        /// What was being done.
        op: IoOp,
        /// The operating system's error.
        source: Arc<io::Error>,
    },
    /// The handshake with a peer found an incompatibility.
    Handshake {
        /// The peer, when its hello named a valid rank.
        peer: Option<Rank>,
        /// The field that disagrees.
        mismatch: HelloMismatch,
    },
    /// A peer sent an invalid frame.
    Protocol {
        /// The peer.
        peer: Rank,
        /// What was wrong with it.
        error: ProtocolError,
    },
    /// An MPI call returned an error code.
    Mpi {
        /// The MPI error code.
        code: i32,
    },
    /// Setting up the transport did not finish before its deadline.
    SetupTimeout {
        /// Peers that had not connected (the count; the transport logs
        /// which).
        missing_peers: u32,
    },
    /// The transport is closed.
    Closed,
}

impl TransportError {
    /// The peer this error is about, if it names one.
    pub fn peer(&self) -> Option<Rank> {
        match self {
            Self::PeerDown { peer, .. } | Self::Protocol { peer, .. } => Some(*peer),
            Self::Io { peer, .. } | Self::Handshake { peer, .. } => *peer,
            Self::Mpi { .. } | Self::SetupTimeout { .. } | Self::Closed => None,
        }
    }

    /// An I/O error for `op` on the connection to `peer`.
    pub fn io(peer: Option<Rank>, op: IoOp, source: io::Error) -> Self {
        Self::Io {
            peer,
            op,
            source: Arc::new(source),
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PeerDown { peer, reason } => write!(f, "{peer} is down: {reason}"),
            Self::Io {
                peer: Some(peer),
                op,
                source,
            } => write!(f, "{op} failed for {peer}: {source}"),
            Self::Io {
                peer: None,
                op,
                source,
            } => write!(f, "{op} failed: {source}"),
            Self::Handshake {
                peer: Some(peer),
                mismatch,
            } => write!(f, "handshake with {peer} failed: {mismatch}"),
            Self::Handshake {
                peer: None,
                mismatch,
            } => write!(f, "handshake failed: {mismatch}"),
            Self::Protocol { peer, error } => write!(f, "{peer} sent an invalid frame: {error}"),
            Self::Mpi { code } => write!(f, "mpi call failed with error code {code}"),
            Self::SetupTimeout { missing_peers } => {
                write!(
                    f,
                    "transport set-up timed out with {missing_peers} peer(s) missing"
                )
            }
            Self::Closed => f.write_str("transport is closed"),
        }
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source.as_ref()),
            Self::Handshake { mismatch, .. } => Some(mismatch),
            Self::Protocol { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Why a frame was not accepted for sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// The lane's outgoing queue is full.
    QueueFull {
        /// The lane.
        channel: Channel,
    },
    /// Accepting the frame would exceed the retained-bytes budget.
    RetainedBytes {
        /// The budget in bytes.
        budget: u64,
    },
    /// The destination is not a rank of this world.
    NoSuchRank {
        /// The destination.
        to: Rank,
    },
    /// The destination is down.
    PeerDown {
        /// The destination.
        to: Rank,
    },
    /// The transport is shutting down or closed.
    Closed,
}

impl fmt::Display for SendErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::QueueFull { channel } => write!(f, "the {channel} send queue is full"),
            Self::RetainedBytes { budget } => write!(f, "the {budget}-byte send budget is used up"),
            Self::NoSuchRank { to } => write!(f, "{to} is not in this world"),
            Self::PeerDown { to } => write!(f, "{to} is down"),
            Self::Closed => f.write_str("the transport is closed"),
        }
    }
}

/// A frame the transport did not accept, handed back with the reason.
pub struct TrySendError {
    kind: SendErrorKind,
    frame: Frame,
}

impl TrySendError {
    pub(crate) fn new(kind: SendErrorKind, frame: Frame) -> Self {
        Self { kind, frame }
    }

    /// Why the frame was refused.
    pub fn kind(&self) -> SendErrorKind {
        self.kind
    }

    /// The refused frame.
    pub fn into_inner(self) -> Frame {
        self.frame
    }
}

impl fmt::Debug for TrySendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrySendError")
            .field("kind", &self.kind)
            .field("frame_len", &self.frame.len())
            .finish()
    }
}

impl fmt::Display for TrySendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frame of {} bytes not sent: {}",
            self.frame.len(),
            self.kind
        )
    }
}

impl std::error::Error for TrySendError {}
