//! What reading a connection yields for the driver, in stream order.

use dinah_std::transport::{DownReason, Frame, TransportError};

/// One item read off a connection.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A complete, validated frame (header, length table, segments).
    Frame(Frame),
    /// The peer's goodbye arrived, and exactly the frames it announced
    /// arrived before it.
    Goodbye,
    /// A heartbeat arrived (nothing to hand over: reading it was the sign
    /// of life).
    Heartbeat,
    /// The stream ended; nothing more is read from it.
    End(End),
}

/// How a connection's stream ended.
#[derive(Debug)]
pub(crate) enum End {
    /// End of stream after the goodbye: the peer closed its side cleanly.
    Clean,
    /// The connection failed, or ended without a goodbye.
    Down {
        /// Why the peer is down.
        reason: DownReason,
        /// The error every waiter on the peer receives.
        error: TransportError,
    },
}
