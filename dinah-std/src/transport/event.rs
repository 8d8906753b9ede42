//! What a driver reports to the runtime.

use std::fmt;

use dinah_core::Rank;
use dinah_core::wire::Channel;

use super::Frame;
use super::error::TransportError;

/// Something that happened on the transport, reported by
/// [`TransportDriver::poll`](super::TransportDriver::poll).
#[non_exhaustive]
pub enum TransportEvent {
    /// A complete frame arrived from `from` on `channel`. The bytes are
    /// unvalidated: the runtime decodes them against its limits.
    Frame {
        /// The sender, as the transport knows it (not as the frame claims).
        from: Rank,
        /// The lane it arrived on.
        channel: Channel,
        /// Header, segment table and segments.
        frame: Frame,
    },
    /// A frame could not be delivered; it is handed back so the runtime can
    /// fail the request it belongs to.
    SendFailed {
        /// The destination.
        to: Rank,
        /// The lane.
        channel: Channel,
        /// The frame.
        frame: Frame,
        /// Why.
        error: TransportError,
    },
    /// The peer is ready: connected and handshaken.
    PeerUp {
        /// The peer.
        peer: Rank,
    },
    /// The peer is down; everything waiting on it must fail.
    PeerDown {
        /// The peer.
        peer: Rank,
        /// Why (the error every waiter receives).
        error: TransportError,
    },
    /// The peer said goodbye and every frame it announced has arrived.
    PeerDrained {
        /// The peer.
        peer: Rank,
    },
}

impl fmt::Debug for TransportEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Counts and sizes only: never payload bytes.
        match self {
            Self::Frame {
                from,
                channel,
                frame,
            } => f
                .debug_struct("Frame")
                .field("from", from)
                .field("channel", channel)
                .field("len", &frame.len())
                .finish(),
            Self::SendFailed {
                to,
                channel,
                frame,
                error,
            } => f
                .debug_struct("SendFailed")
                .field("to", to)
                .field("channel", channel)
                .field("len", &frame.len())
                .field("error", error)
                .finish(),
            Self::PeerUp { peer } => f.debug_struct("PeerUp").field("peer", peer).finish(),
            Self::PeerDown { peer, error } => f
                .debug_struct("PeerDown")
                .field("peer", peer)
                .field("error", error)
                .finish(),
            Self::PeerDrained { peer } => {
                f.debug_struct("PeerDrained").field("peer", peer).finish()
            }
        }
    }
}
