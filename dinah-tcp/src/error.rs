//! The TCP transport's error type.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use dinah_core::Rank;
use dinah_core::wire::{Channel, HelloError, HelloField, HelloMismatch, ProtocolError};
use dinah_std::transport::{IoOp, Refusal, RefusalCause, TransportError};

use crate::config::ConfigField;
use crate::membership::MembershipError;
use dinah_launch::KeyError;

/// What went wrong in the TCP transport: while setting up (binding,
/// connecting, the hello handshake) or on an established connection.
///
/// Set-up errors about one stranger connection (garbage, a wrong hello, a
/// duplicate, silence) do not fail the set-up: that connection is dropped
/// and the error is kept in
/// [`TcpDriver::rejected`](crate::TcpDriver::rejected). Errors about a peer
/// this rank dialled, or a missing peer at the deadline, fail
/// [`TcpTransport::connect`](crate::TcpTransport::connect).
///
/// Cloneable (the `io::Error` cause is shared behind an `Arc` and returned
/// from [`source`](std::error::Error::source)); converts into the runtime's
/// [`TransportError`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TcpError {
    /// A [`TcpConfig`](crate::TcpConfig) field is invalid.
    InvalidConfig {
        /// The field.
        field: ConfigField,
    },
    /// The [`Membership`](crate::Membership) is inconsistent.
    Membership(MembershipError),
    /// This rank's own hello could not be built (its rank or limits are
    /// invalid).
    LocalHello(HelloError),
    /// An I/O operation failed.
    Io {
        /// The peer the connection belongs to, if known.
        peer: Option<Rank>,
        /// What was being done.
        op: IoOp,
        /// The operating system's error.
        source: Arc<io::Error>,
    },
    /// Connecting to a peer kept failing until the set-up deadline.
    Connect {
        /// The peer.
        peer: Rank,
        /// Its address.
        addr: SocketAddr,
        /// The last attempt's error.
        source: Arc<io::Error>,
    },
    /// A connection sent no complete hello in time.
    HelloTimeout {
        /// The peer, if this rank dialled it.
        peer: Option<Rank>,
        /// The remote address.
        addr: SocketAddr,
    },
    /// The remote end closed the connection during the handshake (a
    /// listening rank closes a connection whose hello it refuses, without
    /// answering).
    HandshakeClosed {
        /// The peer, if this rank dialled it.
        peer: Option<Rank>,
        /// The remote address.
        addr: SocketAddr,
    },
    /// The remote's hello is not a valid hello record (garbage, another
    /// protocol version, a frame instead of a hello, a rank outside its
    /// own world...).
    BadHello {
        /// The remote address.
        addr: SocketAddr,
        /// What is wrong with it.
        error: HelloError,
    },
    /// The remote's hello is valid but incompatible (another run, world
    /// size, limits or registry; this rank's own rank; another channel
    /// than the one dialled).
    Mismatch {
        /// The rank the hello claims.
        peer: Rank,
        /// The remote address.
        addr: SocketAddr,
        /// The field that differs.
        mismatch: HelloMismatch,
    },
    /// This rank dialled `expected`, and the listener there answered as
    /// `found`.
    UnexpectedPeer {
        /// The rank dialled.
        expected: Rank,
        /// The rank that answered.
        found: Rank,
        /// The remote address.
        addr: SocketAddr,
    },
    /// A rank below this one dialled it (lower ranks are dialled, never
    /// dialling: rank `i` dials every rank below `i`).
    WrongDirection {
        /// The rank that dialled.
        peer: Rank,
        /// The remote address.
        addr: SocketAddr,
    },
    /// A second connection claimed a (rank, channel) already connected.
    Duplicate {
        /// The rank claimed.
        peer: Rank,
        /// The channel claimed.
        channel: Channel,
        /// The remote address of the second connection.
        addr: SocketAddr,
    },
    /// An accepted connection that had not finished its hello was dropped
    /// to make room for newer ones: while the most connections a listener
    /// keeps waiting are waiting, each new arrival drops the oldest.
    Evicted {
        /// The remote address.
        addr: SocketAddr,
    },
    /// The other side of a connection does not hold this run's key: its
    /// proof of membership failed (see [`RunKey`](crate::RunKey)).
    AuthFailed {
        /// The rank it claimed, or the rank this side dialled.
        peer: Option<Rank>,
        /// The remote address.
        addr: SocketAddr,
    },
    /// The run is authenticated by default, and this rank has no key: none
    /// given ([`Membership::with_key`](crate::Membership::with_key)) and
    /// none in the environment (`DINAH_KEY`, `DINAH_KEY_FILE`). Turning
    /// authentication off takes
    /// [`Membership::without_authentication`](crate::Membership::without_authentication).
    NoKey,
    /// The run key in the environment could not be read.
    Key(KeyError),
    /// Set-up did not finish before its deadline.
    SetupTimeout {
        /// Connections (peer and channel) still missing.
        missing: u32,
        /// The last connection this rank refused, if any: often the
        /// missing rank's own, and why (another key, registry...).
        last_refused: Option<Box<TcpError>>,
    },
    /// A peer sent an invalid frame; its connections were closed.
    Protocol {
        /// The peer.
        peer: Rank,
        /// The channel.
        channel: Channel,
        /// What was wrong.
        error: ProtocolError,
    },
    /// A peer's goodbye announced another number of frames than arrived
    /// before it (TCP loses nothing, so the peer is broken).
    Goodbye {
        /// The peer.
        peer: Rank,
        /// The channel.
        channel: Channel,
        /// Frames the goodbye announced.
        announced: u64,
        /// Frames received before it.
        received: u64,
    },
    /// A peer sent a frame after its goodbye on the same channel.
    FrameAfterGoodbye {
        /// The peer.
        peer: Rank,
        /// The channel.
        channel: Channel,
    },
}

impl TcpError {
    /// An I/O error for `op` on the connection to `peer`.
    pub(crate) fn io(peer: Option<Rank>, op: IoOp, source: io::Error) -> Self {
        Self::Io {
            peer,
            op,
            source: Arc::new(source),
        }
    }

    /// The peer this error is about, if it names one.
    pub fn peer(&self) -> Option<Rank> {
        match self {
            Self::Io { peer, .. }
            | Self::HelloTimeout { peer, .. }
            | Self::HandshakeClosed { peer, .. } => *peer,
            Self::Connect { peer, .. }
            | Self::Mismatch { peer, .. }
            | Self::WrongDirection { peer, .. }
            | Self::Duplicate { peer, .. }
            | Self::Protocol { peer, .. }
            | Self::Goodbye { peer, .. }
            | Self::FrameAfterGoodbye { peer, .. } => Some(*peer),
            Self::UnexpectedPeer { expected, .. } => Some(*expected),
            Self::AuthFailed { peer, .. } => *peer,
            _ => None,
        }
    }

    /// This error as the runtime's statistics keep a refused connection:
    /// its address, the rank it claimed, and why.
    pub(crate) fn refusal(&self) -> Refusal {
        let (addr, cause) = match self {
            Self::BadHello { addr, .. } => (Some(*addr), RefusalCause::NotAHello),
            Self::Mismatch { addr, mismatch, .. } => {
                (Some(*addr), RefusalCause::Mismatch(mismatch.field))
            }
            Self::AuthFailed { addr, .. } => (Some(*addr), RefusalCause::AuthFailed),
            Self::Duplicate { addr, .. } => (Some(*addr), RefusalCause::Duplicate),
            Self::WrongDirection { addr, .. } => (Some(*addr), RefusalCause::WrongDirection),
            Self::HelloTimeout { addr, .. } => (Some(*addr), RefusalCause::Silent),
            Self::HandshakeClosed { addr, .. } => (Some(*addr), RefusalCause::Closed),
            Self::Evicted { addr } => (Some(*addr), RefusalCause::Evicted),
            Self::UnexpectedPeer { addr, .. } => (
                Some(*addr),
                RefusalCause::Mismatch(HelloField::DuplicateRank),
            ),
            Self::Io { source, .. } => (None, RefusalCause::Io(source.kind())),
            other => (None, RefusalCause::Io(other.io_kind())),
        };
        Refusal {
            addr,
            claimed: self.peer(),
            cause,
        }
    }

    /// The I/O error kind a [`TransportError::Io`] made from this error
    /// carries, for errors without a closer match.
    fn io_kind(&self) -> io::ErrorKind {
        match self {
            Self::InvalidConfig { .. }
            | Self::Membership(_)
            | Self::LocalHello(_)
            | Self::NoKey
            | Self::Key(_) => io::ErrorKind::InvalidInput,
            Self::AuthFailed { .. } => io::ErrorKind::PermissionDenied,
            Self::HelloTimeout { .. } | Self::SetupTimeout { .. } => io::ErrorKind::TimedOut,
            Self::HandshakeClosed { .. } | Self::Evicted { .. } => io::ErrorKind::ConnectionAborted,
            _ => io::ErrorKind::InvalidData,
        }
    }
}

impl fmt::Display for TcpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidConfig { field } => write!(f, "invalid tcp configuration: `{field}`"),
            Self::Membership(error) => write!(f, "invalid membership: {error}"),
            Self::LocalHello(error) => write!(f, "cannot build this rank's hello: {error}"),
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
            Self::Connect { peer, addr, source } => {
                write!(f, "could not connect to {peer} at {addr}: {source}")
            }
            Self::HelloTimeout {
                peer: Some(peer),
                addr,
            } => {
                write!(f, "{peer} at {addr} sent no hello in time")
            }
            Self::HelloTimeout { peer: None, addr } => {
                write!(f, "connection from {addr} sent no hello in time")
            }
            Self::HandshakeClosed {
                peer: Some(peer),
                addr,
            } => {
                write!(
                    f,
                    "{peer} at {addr} closed the connection during the handshake (it refused this rank)"
                )
            }
            Self::HandshakeClosed { peer: None, addr } => {
                write!(f, "connection from {addr} closed during the handshake")
            }
            Self::BadHello { addr, error } => write!(f, "invalid hello from {addr}: {error}"),
            Self::Mismatch {
                peer,
                addr,
                mismatch,
            } => {
                write!(f, "hello from {peer} at {addr} is incompatible: {mismatch}")
            }
            Self::UnexpectedPeer {
                expected,
                found,
                addr,
            } => {
                write!(f, "dialled {expected} at {addr}, but {found} answered")
            }
            Self::WrongDirection { peer, addr } => {
                write!(
                    f,
                    "{peer} at {addr} dialled a higher rank (ranks dial only lower ranks)"
                )
            }
            Self::Duplicate {
                peer,
                channel,
                addr,
            } => {
                write!(
                    f,
                    "second {channel} connection claiming {peer} (from {addr}) refused"
                )
            }
            Self::Evicted { addr } => {
                write!(
                    f,
                    "connection from {addr} dropped before its hello: newer connections needed its place"
                )
            }
            Self::AuthFailed {
                peer: Some(peer),
                addr,
            } => write!(
                f,
                "{peer} at {addr} failed to prove the run key: it does not hold this run's key"
            ),
            Self::AuthFailed { peer: None, addr } => write!(
                f,
                "connection from {addr} failed to prove the run key"
            ),
            Self::NoKey => f.write_str(
                "no run key: give one (Membership::with_key, DINAH_KEY or DINAH_KEY_FILE) or turn authentication off (Membership::without_authentication)",
            ),
            Self::Key(error) => write!(f, "cannot read the run key: {error}"),
            Self::SetupTimeout {
                missing,
                last_refused: None,
            } => {
                write!(
                    f,
                    "tcp set-up timed out with {missing} connection(s) missing"
                )
            }
            Self::SetupTimeout {
                missing,
                last_refused: Some(refused),
            } => {
                write!(
                    f,
                    "tcp set-up timed out with {missing} connection(s) missing; last refused: {refused}"
                )
            }
            Self::Protocol {
                peer,
                channel,
                error,
            } => {
                write!(
                    f,
                    "{peer} sent an invalid frame on the {channel} channel: {error}"
                )
            }
            Self::FrameAfterGoodbye { peer, channel } => {
                write!(
                    f,
                    "{peer} sent a frame after its goodbye on the {channel} channel"
                )
            }
            Self::Goodbye {
                peer,
                channel,
                announced,
                received,
            } => write!(
                f,
                "{peer}'s goodbye on the {channel} channel announced {announced} frame(s), {received} arrived"
            ),
        }
    }
}

impl std::error::Error for TcpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } | Self::Connect { source, .. } => Some(source.as_ref()),
            Self::Membership(error) => Some(error),
            Self::LocalHello(error) | Self::BadHello { error, .. } => Some(error),
            Self::Mismatch { mismatch, .. } => Some(mismatch),
            Self::Protocol { error, .. } => Some(error),
            Self::Key(error) => Some(error),
            _ => None,
        }
    }
}

impl From<MembershipError> for TcpError {
    fn from(error: MembershipError) -> Self {
        Self::Membership(error)
    }
}

impl From<TcpError> for TransportError {
    /// The closest [`TransportError`]: I/O errors stay I/O errors, a hello
    /// mismatch becomes [`TransportError::Handshake`], an invalid frame
    /// [`TransportError::Protocol`], the set-up deadline
    /// [`TransportError::SetupTimeout`]. The rest become
    /// [`TransportError::Io`] whose `io::Error` wraps the `TcpError`
    /// (reachable with `get_ref` and `downcast_ref`).
    fn from(error: TcpError) -> Self {
        match error {
            TcpError::Io { peer, op, source } => Self::Io { peer, op, source },
            TcpError::Connect { peer, source, .. } => Self::Io {
                peer: Some(peer),
                op: IoOp::Connect,
                source,
            },
            TcpError::Mismatch { peer, mismatch, .. } => Self::Handshake {
                peer: Some(peer),
                mismatch,
            },
            TcpError::Protocol { peer, error, .. } => Self::Protocol { peer, error },
            TcpError::SetupTimeout { missing, .. } => Self::SetupTimeout {
                missing_peers: missing,
            },
            other => {
                let peer = other.peer();
                let op = match other {
                    TcpError::InvalidConfig { .. }
                    | TcpError::Membership(_)
                    | TcpError::LocalHello(_)
                    | TcpError::NoKey
                    | TcpError::Key(_) => IoOp::Configure,
                    _ => IoOp::Read,
                };
                let kind = other.io_kind();
                Self::Io {
                    peer,
                    op,
                    source: Arc::new(io::Error::new(kind, other)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use dinah_core::WorldSize;

    use super::*;

    #[test]
    fn display_is_lowercase_without_a_trailing_period() {
        let world = WorldSize::new(3).unwrap();
        let (a, b) = (world.rank(1).unwrap(), world.rank(2).unwrap());
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let errors = [
            TcpError::InvalidConfig {
                field: ConfigField::InboxFrames,
            },
            TcpError::io(
                Some(a),
                IoOp::Write,
                io::Error::from(io::ErrorKind::BrokenPipe),
            ),
            TcpError::HelloTimeout { peer: None, addr },
            TcpError::UnexpectedPeer {
                expected: a,
                found: b,
                addr,
            },
            TcpError::Duplicate {
                peer: b,
                channel: Channel::Action,
                addr,
            },
            TcpError::SetupTimeout {
                missing: 2,
                last_refused: None,
            },
            TcpError::Goodbye {
                peer: a,
                channel: Channel::Control,
                announced: 3,
                received: 2,
            },
            TcpError::FrameAfterGoodbye {
                peer: a,
                channel: Channel::Control,
            },
        ];
        for error in errors {
            let text = error.to_string();
            assert!(
                text.chars().next().unwrap().is_lowercase() || text.starts_with("rank"),
                "{text}"
            );
            assert!(!text.ends_with('.'), "{text}");
        }
    }

    #[test]
    fn the_io_cause_is_the_source_and_survives_conversion() {
        let error = TcpError::io(None, IoOp::Accept, io::Error::other("boom"));
        assert_eq!(error.source().unwrap().to_string(), "boom");
        let transport = TransportError::from(error);
        assert!(matches!(
            &transport,
            TransportError::Io {
                op: IoOp::Accept,
                peer: None,
                ..
            }
        ));
        assert_eq!(transport.source().unwrap().to_string(), "boom");
    }

    #[test]
    fn conversion_keeps_the_typed_error_reachable() {
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let transport = TransportError::from(TcpError::HelloTimeout { peer: None, addr });
        let TransportError::Io { source, .. } = &transport else {
            panic!("{transport:?}")
        };
        assert_eq!(source.kind(), io::ErrorKind::TimedOut);
        let inner = source.get_ref().and_then(|e| e.downcast_ref::<TcpError>());
        assert!(matches!(inner, Some(TcpError::HelloTimeout { .. })));
        let timeout = TransportError::from(TcpError::SetupTimeout {
            missing: 3,
            last_refused: None,
        });
        assert!(matches!(
            timeout,
            TransportError::SetupTimeout { missing_peers: 3 }
        ));
    }
}
