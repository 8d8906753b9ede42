//! Encoding the runtime's frames.

use dinah_core::wire::{
    Call, ErrorCode, Header, Message, ProtocolError, RelativeDeadline, encode_frame,
    truncate_error_text,
};
use dinah_core::{LimitField, ProtocolLimits, Rank};

use super::error::{RuntimeError, Side};
use crate::action::SegmentWriter;

/// Encodes `header` with `segments` into a new exactly-sized buffer.
fn encode<S: AsRef<[u8]>>(header: &Header, segments: &[S]) -> Result<Vec<u8>, ProtocolError> {
    let mut frame = vec![0; header.frame_len()];
    let len = encode_frame(header, segments, &mut frame)?;
    frame.truncate(len);
    Ok(frame)
}

/// Calls `f` with the writer's segments as a slice, on the stack for the
/// common case of a few segments.
fn with_segments<R>(writer: &SegmentWriter, f: impl FnOnce(&[&[u8]]) -> R) -> R {
    const INLINE: usize = 8;
    if writer.len() <= INLINE {
        let mut inline: [&[u8]; INLINE] = [&[]; INLINE];
        for (slot, segment) in inline.iter_mut().zip(writer.segments()) {
            *slot = segment;
        }
        f(&inline[..writer.len()])
    } else {
        let segments: Vec<&[u8]> = writer.segments().collect();
        f(&segments)
    }
}

/// The frame of `message` from `origin` carrying `payload`.
pub(crate) fn with_payload(
    origin: Rank,
    message: Message,
    payload: &SegmentWriter,
    limits: &ProtocolLimits,
) -> Result<Vec<u8>, ProtocolError> {
    with_segments(payload, |segments| {
        let header = Header::new(origin, message, segments, limits)?;
        encode(&header, segments)
    })
}

/// A request frame.
pub(crate) fn request(
    origin: Rank,
    call: Call,
    deadline: RelativeDeadline,
    input: &SegmentWriter,
    limits: &ProtocolLimits,
) -> Result<Vec<u8>, ProtocolError> {
    with_payload(origin, Message::Request { call, deadline }, input, limits)
}

/// An error frame; the text is cut to what `limits` allow. Never fails:
/// an error frame with a valid text always fits valid limits.
pub(crate) fn error(
    origin: Rank,
    call: Call,
    code: ErrorCode,
    text: &str,
    limits: &ProtocolLimits,
) -> Vec<u8> {
    let text = truncate_error_text(text, limits.max_error_text_bytes as usize);
    let segments = [text.as_bytes()];
    let header = Header::new(origin, Message::Error { call, code }, &segments, limits)
        .expect("an error text within the limits always makes a valid frame");
    encode(&header, &segments).expect("the buffer is sized from the header")
}

/// A cancel frame (no payload).
pub(crate) fn cancel(origin: Rank, call: Call) -> Vec<u8> {
    let header =
        Header::without_payload(origin, Message::Cancel { call }).expect("a cancel has no payload");
    encode::<&[u8]>(&header, &[]).expect("the buffer is sized from the header")
}

/// The local error for a frame that cannot be encoded within the limits.
pub(crate) fn encode_error(error: ProtocolError) -> RuntimeError {
    let limit = match error {
        ProtocolError::TooManySegments { .. } => LimitField::MaxSegments,
        ProtocolError::SegmentTooLarge { .. } => LimitField::MaxSegmentBytes,
        ProtocolError::ErrorTextTooLong { .. } => LimitField::MaxErrorTextBytes,
        _ => LimitField::MaxFrameBytes,
    };
    RuntimeError::ResourceExhausted {
        limit,
        side: Side::Local,
    }
}
