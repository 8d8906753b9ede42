//! Frames whose last segment is held apart from the rest.
//!
//! A large payload need not be copied next to its frame's head: a sender
//! can hand a transport the head (header, length table and every segment
//! but the last) and the last segment as two buffers, and a receiver can
//! receive them into two buffers, so that the last segment's buffer
//! becomes the decoded value. The bytes on the wire are the same as for a
//! whole frame; only where they are held differs.
//!
//! [`decode_split_frame`] checks such a frame as [`decode_frame`] checks a
//! whole one, and also that the detached part is exactly the last
//! segment. Error frames are never split.
//!
//! [`decode_frame`]: super::decode_frame

use super::frame::check_parts;
use super::{
    DecodeContext, HEADER_LEN, Header, LENGTH_ENTRY_LEN, MessageKind, ProtocolError, Segments,
};

/// A decoded, fully validated frame held as a head and a detached last
/// segment of [`tail_len`](Self::tail_len) bytes, borrowing the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitFrameRef<'a> {
    header: Header,
    /// The length table without the last segment's entry.
    table: &'a [u8],
    /// Every segment but the last, back to back.
    payload: &'a [u8],
    tail: usize,
}

/// Decodes a frame held as `head` (header, length table, every segment but
/// the last) and a last segment of `tail_len` bytes kept elsewhere.
///
/// Checks what [`decode_frame`](super::decode_frame) checks for the frame
/// of `head.len() + tail_len` bytes, in the same order, then that the
/// detached part is exactly the last segment.
///
/// # Errors
///
/// Any error of [`decode_frame`](super::decode_frame), then
/// [`ProtocolError::MisplacedSplit`] if `tail_len` is zero or not the
/// last segment's length, or the frame is an error frame.
///
/// # Examples
///
/// ```
/// use dinah_core::wire::{decode_split_frame, encode_frame, Call, Channel, DecodeContext, Header, Message};
/// use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, WorldSize};
///
/// let world = WorldSize::new(2)?;
/// let limits = ProtocolLimits::DEFAULT;
/// let call = Call {
///     request: RequestId::MIN,
///     action: ActionId::new(7)?,
///     domain: DomainId::MIN,
///     trace: None,
/// };
/// let payload: [&[u8]; 2] = [b"small", b"the large one"];
/// let header = Header::new(Rank::ZERO, Message::Result { call }, &payload, &limits)?;
/// let mut bytes = vec![0; header.frame_len()];
/// encode_frame(&header, &payload, &mut bytes)?;
///
/// // The last segment travelled in a buffer of its own.
/// let (head, tail) = bytes.split_at(header.frame_len() - payload[1].len());
/// let ctx = DecodeContext::new(Channel::Action, Rank::ZERO, world, limits)?;
/// let frame = decode_split_frame(head, tail.len(), &ctx)?;
/// assert_eq!(frame.head_segments().collect::<Vec<_>>(), [&b"small"[..]]);
/// assert_eq!(frame.tail_len(), tail.len());
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
pub fn decode_split_frame<'a>(
    head: &'a [u8],
    tail_len: usize,
    ctx: &DecodeContext,
) -> Result<SplitFrameRef<'a>, ProtocolError> {
    let (header, table, payload) = check_parts(head, tail_len, ctx)?;
    SplitFrameRef::new(header, table, payload, tail_len)
}

impl<'a> SplitFrameRef<'a> {
    /// The view of a checked frame whose last `tail` bytes are detached.
    fn new(
        header: Header,
        table: &'a [u8],
        payload: &'a [u8],
        tail: usize,
    ) -> Result<Self, ProtocolError> {
        let (before, last) = match table.split_last_chunk::<LENGTH_ENTRY_LEN>() {
            Some((before, last)) => (before, u32::from_le_bytes(*last)),
            None => (table, 0),
        };
        let misplaced = ProtocolError::MisplacedSplit { last, tail };
        if tail == 0 || last as usize != tail || header.kind() == MessageKind::Error {
            return Err(misplaced);
        }
        // The frame's length was checked: the head holds every other
        // segment, exactly.
        Ok(Self {
            header,
            table: before,
            payload,
            tail,
        })
    }

    /// The frame `head` with a detached last segment of `tail_len` bytes,
    /// which [`decode_split_frame`] already validated into `header`,
    /// viewed again without repeating the checks (as
    /// [`FrameRef::from_decoded`](super::FrameRef::from_decoded) for a
    /// whole frame).
    ///
    /// Returns `None` if the parts are not `header`'s frame length or the
    /// tail is not its last segment.
    pub fn from_decoded(header: Header, head: &'a [u8], tail_len: usize) -> Option<Self> {
        if head.len().checked_add(tail_len)? != header.frame_len() {
            return None;
        }
        let (fixed, payload) = head.split_at_checked(header.head_len())?;
        let table = fixed.get(HEADER_LEN..)?;
        Self::new(header, table, payload, tail_len).ok()
    }

    /// The frame's header (its counts include the detached segment).
    pub const fn header(&self) -> &Header {
        &self.header
    }

    /// The segments held in the head, in order: every segment but the
    /// last.
    pub fn head_segments(&self) -> Segments<'a> {
        Segments::new(self.table, self.payload)
    }

    /// The length of the detached last segment.
    pub const fn tail_len(&self) -> usize {
        self.tail
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::vec;
    use std::vec::Vec;

    use super::*;
    use crate::wire::{Call, Channel, ErrorCode, Message, decode_frame, encode_frame};
    use crate::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, WorldSize};

    fn call() -> Call {
        Call {
            request: RequestId::MIN,
            action: ActionId::MIN,
            domain: DomainId::MIN,
            trace: None,
        }
    }

    fn ctx() -> DecodeContext {
        let world = WorldSize::new(2).unwrap();
        DecodeContext::new(Channel::Action, Rank::ZERO, world, ProtocolLimits::DEFAULT).unwrap()
    }

    fn frame(message: Message, segments: &[&[u8]]) -> Vec<u8> {
        let header = Header::new(Rank::ZERO, message, segments, &ProtocolLimits::DEFAULT).unwrap();
        let mut bytes = vec![0; header.frame_len()];
        encode_frame(&header, segments, &mut bytes).unwrap();
        bytes
    }

    #[test]
    fn a_split_at_the_last_segment_reads_as_the_whole_frame() {
        let segments: [&[u8]; 3] = [b"a", b"bc", b"the tail"];
        let bytes = frame(Message::Result { call: call() }, &segments);
        let whole = decode_frame(&bytes, &ctx()).unwrap();
        let (head, tail) = bytes.split_at(bytes.len() - segments[2].len());
        let split = decode_split_frame(head, tail.len(), &ctx()).unwrap();
        assert_eq!(split.header(), whole.header());
        let mut all: Vec<&[u8]> = split.head_segments().collect();
        all.push(tail);
        assert_eq!(all, whole.segments().collect::<Vec<_>>());
        let again = SplitFrameRef::from_decoded(*split.header(), head, tail.len());
        assert_eq!(again, Some(split));
    }

    #[test]
    fn a_split_anywhere_else_is_refused() {
        let segments: [&[u8]; 2] = [b"abc", b"defg"];
        let bytes = frame(Message::Result { call: call() }, &segments);
        for tail in [0, 1, 3, 5, 7] {
            let head = &bytes[..bytes.len() - tail];
            assert_eq!(
                decode_split_frame(head, tail, &ctx()),
                Err(ProtocolError::MisplacedSplit { last: 4, tail }),
                "a tail of {tail}"
            );
        }
        assert!(
            SplitFrameRef::from_decoded(
                *decode_frame(&bytes, &ctx()).unwrap().header(),
                &bytes[..bytes.len() - 3],
                3
            )
            .is_none()
        );
    }

    #[test]
    fn a_wrong_total_is_reported_as_for_a_whole_frame() {
        let segments: [&[u8]; 1] = [b"payload"];
        let bytes = frame(Message::Result { call: call() }, &segments);
        let head = &bytes[..bytes.len() - 7];
        let expected = bytes.len();
        assert_eq!(
            decode_split_frame(head, 6, &ctx()),
            Err(ProtocolError::Truncated {
                expected,
                actual: expected - 1
            })
        );
        assert_eq!(
            decode_split_frame(head, 8, &ctx()),
            Err(ProtocolError::TrailingBytes {
                expected,
                actual: expected + 1
            })
        );
        assert_eq!(
            decode_split_frame(&bytes[..10], 7, &ctx()),
            Err(ProtocolError::ShortHeader { len: 10 })
        );
    }

    #[test]
    fn an_error_frame_is_never_split() {
        let message = Message::Error {
            call: call(),
            code: ErrorCode::UserFailure,
        };
        let bytes = frame(message, &[b"text"]);
        let head = &bytes[..bytes.len() - 4];
        assert_eq!(
            decode_split_frame(head, 4, &ctx()),
            Err(ProtocolError::MisplacedSplit { last: 4, tail: 4 })
        );
    }

    #[test]
    fn a_header_for_segments_held_anywhere_matches_the_whole_payload() {
        let limits = ProtocolLimits::DEFAULT;
        let message = Message::Result { call: call() };
        let segments: [&[u8]; 3] = [b"ab", b"cde", b"f"];
        let whole = Header::new(Rank::ZERO, message, &segments, &limits).unwrap();
        // "cde" held apart: the inline bytes are "ab" and "f".
        let apart =
            Header::packed_with_detached(Rank::ZERO, message, [2, 3, 1], b"abf", 3, &limits);
        assert_eq!(apart, Ok(whole));
        let sum = Header::packed_with_detached(Rank::ZERO, message, [2, 3, 1], b"abf", 2, &limits);
        assert!(matches!(
            sum,
            Err(ProtocolError::LengthMismatch { sum: 6, .. })
        ));
        let error = Message::Error {
            call: call(),
            code: ErrorCode::UserFailure,
        };
        assert_eq!(
            Header::packed_with_detached(Rank::ZERO, error, [3], b"", 3, &limits),
            Err(ProtocolError::MisplacedSplit { last: 3, tail: 3 })
        );
    }

    #[test]
    fn a_header_for_a_detached_tail_matches_the_whole_payload() {
        let limits = ProtocolLimits::DEFAULT;
        let message = Message::Result { call: call() };
        let segments: [&[u8]; 2] = [b"ab", b"cde"];
        let whole = Header::new(Rank::ZERO, message, &segments, &limits).unwrap();
        let packed = Header::packed_with_tail(Rank::ZERO, message, [2, 3], b"ab", 3, &limits);
        assert_eq!(packed, Ok(whole));
        assert_eq!(
            Header::packed_with_tail(Rank::ZERO, message, [2, 3], b"abc", 2, &limits),
            Err(ProtocolError::MisplacedSplit { last: 3, tail: 2 })
        );
        let error = Message::Error {
            call: call(),
            code: ErrorCode::UserFailure,
        };
        assert_eq!(
            Header::packed_with_tail(Rank::ZERO, error, [3], b"", 3, &limits),
            Err(ProtocolError::MisplacedSplit { last: 3, tail: 3 })
        );
    }
}
