//! Encoding the runtime's frames.

use dinah_core::wire::{
    Call, ErrorCode, Header, Message, ProtocolError, RelativeDeadline, encode_head,
    truncate_error_text,
};
use dinah_core::{LimitField, ProtocolLimits, Rank};

use super::error::{RuntimeError, Side};
use crate::action::SegmentWriter;

/// Encodes `header` with `segments` into a new exactly-sized buffer.
fn encode<S: AsRef<[u8]>>(header: &Header, segments: &[S]) -> Result<Vec<u8>, ProtocolError> {
    // Only the head is zeroed before it is written; the payload is
    // appended. Zeroing a large frame first (and faulting in its pages
    // twice over) cost more than the copy itself.
    let mut frame = Vec::with_capacity(header.frame_len());
    frame.resize(header.head_len(), 0);
    encode_head(header, segments, &mut frame)?;
    for segment in segments {
        frame.extend_from_slice(segment.as_ref());
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use dinah_core::wire::encode_frame;
    use dinah_core::{ActionId, DomainId, RequestId};

    fn call() -> Call {
        Call {
            request: RequestId::MIN,
            action: ActionId::MIN,
            domain: DomainId::MIN,
            trace: None,
        }
    }

    #[test]
    fn appended_frames_match_the_core_encoder_byte_for_byte() {
        let limits = ProtocolLimits::default();
        let big = vec![0xA5_u8; 200_000];
        let segments: [&[u8]; 3] = [b"head", &big, b""];
        let header = Header::new(
            Rank::ZERO,
            Message::Result { call: call() },
            &segments,
            &limits,
        )
        .expect("within the limits");
        let appended = encode(&header, &segments).expect("encodes");
        let mut reference = vec![0; header.frame_len()];
        let len = encode_frame(&header, &segments, &mut reference).expect("encodes");
        assert_eq!(appended.len(), len);
        assert_eq!(appended, reference[..len]);
    }

    #[test]
    fn segments_that_do_not_match_the_header_are_refused() {
        let limits = ProtocolLimits::default();
        let header = Header::new(
            Rank::ZERO,
            Message::Result { call: call() },
            &[b"abc"],
            &limits,
        )
        .expect("within the limits");
        assert!(matches!(
            encode(&header, &[b"abcd"]),
            Err(ProtocolError::LengthMismatch { .. })
        ));
    }
}
