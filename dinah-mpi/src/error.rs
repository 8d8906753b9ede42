//! Why an MPI transport could not start.

use std::fmt;

use dinah_core::Rank;
use dinah_core::wire::{HelloError, HelloMismatch};
use mpi::Threading;

/// Starting an MPI transport failed.
///
/// Once started, the transport reports failures through the runtime's
/// [`TransportError`](dinah_std::transport::TransportError)s; this enum
/// covers [`MpiTransport::connect`](crate::MpiTransport::connect) alone.
/// The handshake is symmetric (every rank receives every rank's hello
/// before judging), so an incompatible world fails on **every** rank, each
/// naming the first peer it disagrees with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MpiError {
    /// MPI is not initialised, or already finalised.
    NotInitialized,
    /// MPI was initialised with a threading level below
    /// [`Threading::Funneled`]: the runtime's worker threads exist beside
    /// the thread that calls MPI.
    Threading {
        /// The level MPI provides.
        provided: Threading,
    },
    /// MPI provides [`Threading::Funneled`] and the calling thread is not
    /// the one that initialised MPI: only that thread may make MPI calls,
    /// so only it may own the driver.
    NotMainThread,
    /// A size in the [`MpiConfig`](crate::MpiConfig) or in the handle sizes
    /// of the hello is zero.
    ZeroCapacity,
    /// This rank's own hello could not be built (a rank outside the
    /// world, or invalid protocol limits).
    InvalidHello(HelloError),
    /// A peer's hello record could not be decoded.
    BadHello {
        /// The peer.
        peer: Rank,
        /// What was wrong with it.
        error: HelloError,
    },
    /// A peer's MPI transport frames its messages another way (a build of
    /// `dinah-mpi` with another framing version): the two would misread
    /// each other.
    FramingMismatch {
        /// The peer.
        peer: Rank,
        /// This rank's framing version.
        ours: u32,
        /// The peer's.
        theirs: u32,
    },
    /// A peer's hello claims another rank than the one MPI says sent it.
    WrongSender {
        /// The rank MPI reports as the source.
        source: Rank,
        /// The rank the hello claims.
        claimed: Rank,
    },
    /// A peer sent two hellos.
    DuplicateHello {
        /// The peer.
        peer: Rank,
    },
    /// A peer is incompatible: another run, world size, protocol version,
    /// limits or action registry.
    Handshake {
        /// The first peer (in rank order) that disagrees.
        peer: Rank,
        /// The field that differs, with both values.
        mismatch: HelloMismatch,
    },
    /// Not every peer's hello arrived before the bootstrap deadline (a
    /// rank did not start its transport, or started a different program).
    SetupTimeout {
        /// Peers whose hello is missing.
        missing_peers: u32,
    },
}

impl MpiError {
    /// The peer this error is about, if it names one.
    pub fn peer(&self) -> Option<Rank> {
        match *self {
            Self::BadHello { peer, .. }
            | Self::FramingMismatch { peer, .. }
            | Self::DuplicateHello { peer }
            | Self::Handshake { peer, .. } => Some(peer),
            Self::WrongSender { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl fmt::Display for MpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotInitialized => f.write_str("mpi is not initialised (or already finalised)"),
            Self::Threading { provided } => {
                write!(
                    f,
                    "mpi provides threading level {provided:?}, the transport needs at least Funneled"
                )
            }
            Self::NotMainThread => {
                f.write_str("mpi is funneled and this is not the thread that initialised it")
            }
            Self::ZeroCapacity => {
                f.write_str("a queue size or receive bound of the mpi transport is zero")
            }
            Self::InvalidHello(error) => write!(f, "cannot build this rank's hello: {error}"),
            Self::BadHello { peer, error } => write!(f, "invalid hello from {peer}: {error}"),
            Self::FramingMismatch { peer, ours, theirs } => write!(
                f,
                "{peer} runs mpi transport framing version {theirs}, this rank runs {ours}"
            ),
            Self::WrongSender { source, claimed } => {
                write!(f, "the hello from {source} claims to come from {claimed}")
            }
            Self::DuplicateHello { peer } => write!(f, "{peer} sent two hellos"),
            Self::Handshake { peer, mismatch } => {
                write!(f, "handshake with {peer} failed: {mismatch}")
            }
            Self::SetupTimeout { missing_peers } => {
                write!(
                    f,
                    "mpi bootstrap timed out waiting for the hello of {missing_peers} peer(s)"
                )
            }
        }
    }
}

impl std::error::Error for MpiError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::InvalidHello(error) | Self::BadHello { error, .. } => Some(error),
            Self::Handshake { mismatch, .. } => Some(mismatch),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dinah_core::WorldSize;
    use dinah_core::wire::HelloField;

    #[test]
    fn messages_are_lowercase_without_a_period_and_name_the_peer() {
        let world = WorldSize::new(4).unwrap();
        let peer = world.rank(3).unwrap();
        let mismatch = HelloMismatch {
            field: HelloField::Fingerprint,
            local: 1,
            remote: 2,
        };
        let errors = [
            MpiError::NotInitialized,
            MpiError::Threading {
                provided: Threading::Single,
            },
            MpiError::NotMainThread,
            MpiError::ZeroCapacity,
            MpiError::InvalidHello(HelloError::EmptyWorld),
            MpiError::BadHello {
                peer,
                error: HelloError::ReservedNotZero,
            },
            MpiError::FramingMismatch {
                peer,
                ours: 2,
                theirs: 3,
            },
            MpiError::WrongSender {
                source: peer,
                claimed: Rank::ZERO,
            },
            MpiError::DuplicateHello { peer },
            MpiError::Handshake { peer, mismatch },
            MpiError::SetupTimeout { missing_peers: 2 },
        ];
        for error in errors {
            let text = error.to_string();
            assert!(
                text.chars().next().is_some_and(char::is_lowercase),
                "{text}"
            );
            assert!(!text.ends_with('.'), "{text}");
        }
        let handshake = MpiError::Handshake { peer, mismatch };
        assert_eq!(handshake.peer(), Some(peer));
        assert!(
            handshake.to_string().contains("registry fingerprint"),
            "{handshake}"
        );
        assert!(std::error::Error::source(&handshake).is_some());
        assert_eq!(MpiError::SetupTimeout { missing_peers: 1 }.peer(), None);
        let framing = MpiError::FramingMismatch {
            peer,
            ours: 2,
            theirs: 3,
        };
        assert_eq!(framing.peer(), Some(peer));
        assert!(
            framing.to_string().contains("framing version 3"),
            "{framing}"
        );
    }
}
