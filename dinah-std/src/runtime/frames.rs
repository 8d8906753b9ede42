//! Encoding the runtime's frames.

use dinah_core::wire::{
    Call, ErrorCode, Header, Message, ProtocolError, RelativeDeadline, encode_head,
    truncate_error_text,
};
use dinah_core::{LimitField, ProtocolLimits, Rank};

use super::error::{RuntimeError, Side};
use crate::action::SegmentWriter;

/// Encodes `header` with `segments` into a buffer from this thread's
/// [`frame_buffers`](crate::transport::frame_buffers).
fn encode<S: AsRef<[u8]>>(header: &Header, segments: &[S]) -> Result<Vec<u8>, ProtocolError> {
    // Only the head is zeroed before it is written; the payload is
    // appended. Zeroing a large frame first (and faulting in its pages
    // twice over) cost more than the copy itself.
    let mut frame = crate::transport::frame_buffers::take(header.frame_len());
    frame.resize(header.head_len(), 0);
    encode_head(header, segments, &mut frame)?;
    for segment in segments {
        frame.extend_from_slice(segment.as_ref());
    }
    Ok(frame)
}

/// The frame of `message` from `origin` carrying `payload`: one buffer
/// (from this thread's [`frame_buffers`](crate::transport::frame_buffers))
/// written in order (header, length table, the writer's bytes in one
/// copy), nothing zeroed first.
pub(crate) fn with_payload(
    origin: Rank,
    message: Message,
    payload: &SegmentWriter,
    limits: &ProtocolLimits,
) -> Result<Vec<u8>, ProtocolError> {
    let bytes = payload.bytes();
    let header = Header::packed(origin, message, payload.lens(), bytes, limits)?;
    let mut frame = crate::transport::frame_buffers::take(header.frame_len());
    frame.extend_from_slice(&header.encode());
    for len in payload.lens() {
        // The header checked every length against the segment limit.
        frame.extend_from_slice(&(len as u32).to_le_bytes());
    }
    frame.extend_from_slice(bytes);
    debug_assert_eq!(frame.len(), header.frame_len());
    Ok(frame)
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

/// The protocol limit a frame that could not be encoded ran into.
pub(crate) fn limit_of(error: ProtocolError) -> LimitField {
    match error {
        ProtocolError::TooManySegments { .. } => LimitField::MaxSegments,
        ProtocolError::SegmentTooLarge { .. } => LimitField::MaxSegmentBytes,
        ProtocolError::ErrorTextTooLong { .. } => LimitField::MaxErrorTextBytes,
        _ => LimitField::MaxFrameBytes,
    }
}

/// The local error for a frame that cannot be encoded within the limits.
pub(crate) fn encode_error(error: ProtocolError) -> RuntimeError {
    RuntimeError::ResourceExhausted {
        limit: limit_of(error),
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
    fn payload_frames_match_the_core_encoder_byte_for_byte() {
        let limits = ProtocolLimits::default();
        let big = vec![0x5A_u8; 70_000];
        let cases: [&[&[u8]]; 4] = [&[], &[b""], &[b"one"], &[b"head", &big, b"", b"tail"]];
        for segments in cases {
            let mut writer = SegmentWriter::new();
            segments.iter().for_each(|segment| writer.push(segment));
            let message = Message::Result { call: call() };
            let frame = with_payload(Rank::ZERO, message, &writer, &limits).expect("encodes");
            let header = Header::new(Rank::ZERO, message, segments, &limits).expect("valid");
            let mut reference = vec![0; header.frame_len()];
            let len = encode_frame(&header, segments, &mut reference).expect("encodes");
            assert_eq!(frame, reference[..len]);
        }
    }

    #[test]
    fn payloads_beyond_the_limits_are_refused() {
        let limits = ProtocolLimits::default();
        let mut writer = SegmentWriter::new();
        writer.push(&vec![0; limits.max_segment_bytes as usize + 1]);
        let message = Message::Result { call: call() };
        assert!(matches!(
            with_payload(Rank::ZERO, message, &writer, &limits),
            Err(ProtocolError::SegmentTooLarge { .. } | ProtocolError::FrameTooLarge { .. })
        ));
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
