//! Why a frame was rejected, or could not be encoded.

use core::fmt;

use super::{Channel, HEADER_LEN, MAGIC, MessageKind, PROTOCOL_VERSION};
use crate::{IdKind, Rank};

/// A header field that must be zero for some kinds (see
/// [`ProtocolError::UnexpectedField`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeaderField {
    /// The request ID (bytes 24..32).
    Request,
    /// The action ID (bytes 32..48).
    Action,
    /// The domain ID (bytes 48..56).
    Domain,
    /// The relative deadline (bytes 56..64).
    Deadline,
    /// The trace ID (bytes 64..72).
    Trace,
    /// The error code and its detail (bytes 18..22).
    ErrorCode,
    /// The goodbye's frames-sent count (bytes 72..80).
    FramesSent,
}

impl HeaderField {
    /// The lowercase name used in messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Request => "request id",
            Self::Action => "action id",
            Self::Domain => "domain id",
            Self::Deadline => "deadline",
            Self::Trace => "trace id",
            Self::ErrorCode => "error code",
            Self::FramesSent => "frames-sent count",
        }
    }
}

impl fmt::Display for HeaderField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A frame violated the wire protocol, or could not be encoded.
///
/// Decoders check every field before returning, in a fixed order (the
/// order of the variants below, roughly), so the same bad bytes always give
/// the same error whichever decoder reads them. A connection that produced
/// one of these cannot be trusted any further: a byte stream cannot be
/// resynchronised after a bad frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProtocolError {
    /// Fewer bytes than a header.
    ShortHeader {
        /// How many bytes there were.
        len: usize,
    },
    /// More bytes than a header where exactly a header was expected.
    LongHeader {
        /// How many bytes there were.
        len: usize,
    },
    /// The first four bytes are not [`MAGIC`].
    BadMagic {
        /// The bytes found.
        found: [u8; 4],
    },
    /// A protocol version this build does not speak.
    UnsupportedVersion {
        /// The version found.
        found: u16,
    },
    /// A kind byte that names no [`MessageKind`].
    UnknownKind {
        /// The byte found.
        code: u8,
    },
    /// A hello record where a frame was expected (hellos are exchanged
    /// once, before framing starts).
    UnexpectedHello,
    /// A reserved byte (22 or 23) is not zero.
    ReservedNotZero,
    /// The tail width byte (7) names no [`TailWidth`](super::TailWidth),
    /// or names one other than bytes in a frame that is not a request or
    /// result with at least one segment.
    InvalidTailWidth {
        /// The byte found.
        code: u8,
    },
    /// A kind arrived on a channel that may not carry it.
    ChannelMismatch {
        /// The frame's kind.
        kind: MessageKind,
        /// The channel it arrived on.
        channel: Channel,
    },
    /// The origin rank is not in the world.
    OriginOutOfWorld {
        /// The origin rank found.
        origin: u32,
        /// The world's size.
        world_size: u32,
    },
    /// The origin rank is not the rank the transport received the frame
    /// from.
    OriginMismatch {
        /// The origin rank found.
        origin: Rank,
        /// The rank the frame came from.
        source: Rank,
    },
    /// A required ID is zero.
    ZeroId {
        /// The frame's kind.
        kind: MessageKind,
        /// Which ID.
        id: IdKind,
    },
    /// A request without a deadline.
    ZeroDeadline,
    /// A field this kind does not use is not zero.
    UnexpectedField {
        /// The frame's kind.
        kind: MessageKind,
        /// The field.
        field: HeaderField,
    },
    /// An error frame with a code/detail pair that names no
    /// [`ErrorCode`](super::ErrorCode).
    UnknownErrorCode {
        /// The code found.
        code: u16,
        /// The detail found.
        detail: u16,
    },
    /// A kind that carries no payload declares segments or bytes.
    UnexpectedPayload {
        /// The frame's kind.
        kind: MessageKind,
        /// Segments declared.
        segments: u16,
        /// Payload bytes declared.
        bytes: u32,
    },
    /// An error frame that does not carry exactly one segment (its text).
    ErrorSegmentCount {
        /// Segments declared.
        count: u16,
    },
    /// More segments than the negotiated limit.
    TooManySegments {
        /// Segments declared.
        count: u16,
        /// The limit.
        max: u16,
    },
    /// An error text longer than the negotiated limit.
    ErrorTextTooLong {
        /// The text's length in bytes.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// A frame longer than the negotiated limit.
    FrameTooLarge {
        /// The frame's length in bytes (header, length table and payload).
        len: u64,
        /// The limit.
        max: u32,
    },
    /// One segment longer than the negotiated limit.
    SegmentTooLarge {
        /// The segment's index.
        index: u16,
        /// Its length.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// The segment lengths do not add up to the declared payload length
    /// (reported as soon as the running sum exceeds it, or after the last
    /// segment when it falls short).
    LengthMismatch {
        /// The payload length the header declares.
        declared: u32,
        /// The sum of the segment lengths read so far.
        sum: u64,
    },
    /// A whole message is shorter than its header declares.
    Truncated {
        /// The frame length the header declares.
        expected: usize,
        /// The bytes present.
        actual: usize,
    },
    /// A whole message is longer than its header declares.
    TrailingBytes {
        /// The frame length the header declares.
        expected: usize,
        /// The bytes present.
        actual: usize,
    },
    /// An error text that is not valid UTF-8.
    ErrorTextNotUtf8 {
        /// Length of the longest valid UTF-8 prefix.
        valid_up_to: u32,
    },
    /// Encoding only: the segments given do not match the header.
    SegmentCountMismatch {
        /// Segments the header declares.
        declared: u16,
        /// Segments given.
        actual: usize,
    },
    /// Stamping only ([`stamp_request_id`](super::stamp_request_id)): the
    /// frame is not a request.
    NotARequest {
        /// The kind byte found.
        code: u8,
    },
    /// A frame held in two parts (see
    /// [`decode_split_frame`](super::decode_split_frame)) whose second
    /// part is not exactly its last segment, or is an error frame's text
    /// (error frames are never split).
    MisplacedSplit {
        /// The length of the frame's last segment (0 without segments).
        last: u32,
        /// The length of the second part.
        tail: usize,
    },
    /// Encoding or assembling only: the output buffer is too small.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::ShortHeader { len } => {
                write!(f, "header of {len} bytes is shorter than {HEADER_LEN}")
            }
            Self::LongHeader { len } => {
                write!(f, "header of {len} bytes is longer than {HEADER_LEN}")
            }
            Self::BadMagic { found } => write!(
                f,
                "bad magic {:02x?} (expected {:02x?}): not a dinah frame",
                found, MAGIC
            ),
            Self::UnsupportedVersion { found } => write!(
                f,
                "unsupported protocol version {found} (this build speaks {PROTOCOL_VERSION})"
            ),
            Self::UnknownKind { code } => write!(f, "unknown message kind {code}"),
            Self::NotARequest { code } => write!(f, "a frame of kind {code} is not a request"),
            Self::UnexpectedHello => {
                f.write_str("a hello record arrived where a frame was expected")
            }
            Self::ReservedNotZero => f.write_str("reserved header bytes are not zero"),
            Self::InvalidTailWidth { code } => write!(
                f,
                "tail width byte {code} names no width, or a width this frame cannot have"
            ),
            Self::ChannelMismatch { kind, channel } => {
                write!(
                    f,
                    "a {kind} message is not allowed on the {channel} channel"
                )
            }
            Self::OriginOutOfWorld { origin, world_size } => write!(
                f,
                "origin rank {origin} is outside the world of {world_size} rank(s)"
            ),
            Self::OriginMismatch { origin, source } => {
                write!(f, "origin {origin} does not match the sender, {source}")
            }
            Self::ZeroId { kind, id } => write!(f, "{kind} message has a zero {id} id"),
            Self::ZeroDeadline => f.write_str("request message has no deadline"),
            Self::UnexpectedField { kind, field } => {
                write!(f, "{field} must be zero in a {kind} message")
            }
            Self::UnknownErrorCode { code, detail } => {
                write!(f, "unknown error code {code} with detail {detail}")
            }
            Self::UnexpectedPayload {
                kind,
                segments,
                bytes,
            } => write!(
                f,
                "{kind} message may not carry a payload ({segments} segment(s), {bytes} bytes)"
            ),
            Self::ErrorSegmentCount { count } => write!(
                f,
                "error message must carry exactly one segment (its text), not {count}"
            ),
            Self::TooManySegments { count, max } => {
                write!(f, "{count} segments exceed the limit of {max}")
            }
            Self::ErrorTextTooLong { len, max } => {
                write!(f, "error text of {len} bytes exceeds the limit of {max}")
            }
            Self::FrameTooLarge { len, max } => {
                write!(f, "frame of {len} bytes exceeds the limit of {max}")
            }
            Self::SegmentTooLarge { index, len, max } => write!(
                f,
                "segment {index} of {len} bytes exceeds the limit of {max}"
            ),
            Self::LengthMismatch { declared, sum } => write!(
                f,
                "segment lengths add up to {sum} bytes but the header declares {declared}"
            ),
            Self::Truncated { expected, actual } => write!(
                f,
                "frame is truncated: {actual} of {expected} bytes present"
            ),
            Self::TrailingBytes { expected, actual } => write!(
                f,
                "message of {actual} bytes is longer than its {expected}-byte frame"
            ),
            Self::ErrorTextNotUtf8 { valid_up_to } => {
                write!(f, "error text is not valid utf-8 after {valid_up_to} bytes")
            }
            Self::SegmentCountMismatch { declared, actual } => write!(
                f,
                "header declares {declared} segment(s) but {actual} were given"
            ),
            Self::MisplacedSplit { last, tail } => write!(
                f,
                "a frame's detached part of {tail} bytes is not its last segment ({last} bytes)"
            ),
            Self::BufferTooSmall { needed, available } => {
                write!(f, "buffer of {available} bytes is too small for {needed}")
            }
        }
    }
}

impl core::error::Error for ProtocolError {}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    #[test]
    fn display_is_lowercase_and_says_what_failed() {
        let rank = Rank::ZERO;
        let cases = [
            (
                ProtocolError::ShortHeader { len: 3 },
                "header of 3 bytes is shorter than 80",
            ),
            (
                ProtocolError::BadMagic { found: *b"HTTP" },
                "bad magic [48, 54, 54, 50] (expected [44, 4e, 41, 48]): not a dinah frame",
            ),
            (
                ProtocolError::ChannelMismatch {
                    kind: MessageKind::Cancel,
                    channel: Channel::Action,
                },
                "a cancel message is not allowed on the action channel",
            ),
            (
                ProtocolError::OriginMismatch {
                    origin: rank,
                    source: rank,
                },
                "origin rank 0 does not match the sender, rank 0",
            ),
            (
                ProtocolError::ZeroId {
                    kind: MessageKind::Result,
                    id: IdKind::Domain,
                },
                "result message has a zero domain id",
            ),
            (
                ProtocolError::UnexpectedField {
                    kind: MessageKind::Goodbye,
                    field: HeaderField::Trace,
                },
                "trace id must be zero in a goodbye message",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }
}
