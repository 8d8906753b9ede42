//! Encoding the runtime's frames.

use dinah_core::wire::{
    Call, ErrorCode, HEADER_LEN, Header, LENGTH_ENTRY_LEN, Message, ProtocolError,
    RelativeDeadline, encode_head, truncate_error_text,
};
use dinah_core::{LimitField, ProtocolLimits, Rank};

use super::error::{RuntimeError, Side};
use crate::action::{IN_PLACE_FROM, SegmentWriter};

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

/// The frame of `message` from `origin` carrying `payload`.
///
/// A payload of at least [`IN_PLACE_FROM`] bytes whose writer kept the
/// exact room for the head (see [`with_frame_writer`]) becomes the frame
/// without a copy: the head is written into that room and the writer's
/// buffer is taken. Any other payload is copied, after the head, into one
/// buffer from this thread's
/// [`frame_buffers`](crate::transport::frame_buffers), nothing zeroed
/// first.
///
/// [`with_frame_writer`]: crate::action::with_frame_writer
pub(crate) fn with_payload(
    origin: Rank,
    message: Message,
    payload: &mut SegmentWriter,
    limits: &ProtocolLimits,
) -> Result<Vec<u8>, ProtocolError> {
    let bytes = payload.bytes();
    let header = Header::packed(origin, message, payload.lens(), bytes, limits)?;
    if bytes.len() >= IN_PLACE_FROM && payload.head_room() == header.head_len() {
        let mut head = [0; HEADER_LEN + LENGTH_ENTRY_LEN * MAX_IN_PLACE_SEGMENTS];
        if let Some(head) = head.get_mut(..header.head_len()) {
            write_head(&header, payload.lens(), head);
            // The writer carries on in a spare buffer as large as this
            // frame (within its own bound), so the next frame like it is
            // written without growing a buffer from nothing.
            let keep = header.frame_len().min(SCRATCH_KEEP_AFTER_FRAME);
            let replacement = || crate::transport::frame_buffers::take(keep);
            if let Some(frame) = payload.frame_in_place(head, replacement) {
                debug_assert_eq!(frame.len(), header.frame_len());
                return Ok(frame);
            }
        }
    }
    let mut frame = crate::transport::frame_buffers::take(header.frame_len());
    // The header is encoded where it goes: encoding it on the stack and
    // copying it would read, in wide loads, bytes just written in narrow
    // stores, which stalls the copy until the stores retire.
    frame.extend_from_slice(&[0; HEADER_LEN]);
    header.encode_into(head_of(&mut frame));
    for len in payload.lens() {
        // The header checked every length against the segment limit.
        frame.extend_from_slice(&(len as u32).to_le_bytes());
    }
    frame.extend_from_slice(payload.bytes());
    debug_assert_eq!(frame.len(), header.frame_len());
    Ok(frame)
}

/// The most segments a payload framed in place has (more are copied): the
/// head is assembled on the stack first.
const MAX_IN_PLACE_SEGMENTS: usize = 64;

/// The most capacity a writer asks for after its buffer became a frame
/// (the scratch writer's own bound).
const SCRATCH_KEEP_AFTER_FRAME: usize = (1 << 20) + (64 << 10);

/// Writes `header` and the length table of `lens` into `head` (exactly
/// their length).
fn write_head(header: &Header, lens: impl Iterator<Item = usize>, head: &mut [u8]) {
    header.encode_into(head_of(head));
    for (entry, len) in head[HEADER_LEN..]
        .chunks_exact_mut(LENGTH_ENTRY_LEN)
        .zip(lens)
    {
        // The header checked every length against the segment limit.
        entry.copy_from_slice(&(len as u32).to_le_bytes());
    }
}

/// The first [`HEADER_LEN`] bytes of `frame`, which has at least that
/// many.
fn head_of(frame: &mut [u8]) -> &mut [u8; HEADER_LEN] {
    frame
        .first_chunk_mut()
        .expect("the frame has room for its header")
}

/// A request frame.
pub(crate) fn request(
    origin: Rank,
    call: Call,
    deadline: RelativeDeadline,
    input: &mut SegmentWriter,
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
            // No room for the head, too little, the exact room (the large
            // payload is then framed in place), too much.
            for room in [
                None,
                Some(0),
                Some(segments.len()),
                Some(segments.len() + 1),
            ] {
                let mut writer = SegmentWriter::new();
                if let Some(room) = room {
                    writer.reserve_head(HEADER_LEN + LENGTH_ENTRY_LEN * room);
                }
                segments.iter().for_each(|segment| writer.push(segment));
                let message = Message::Result { call: call() };
                let frame =
                    with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
                let header = Header::new(Rank::ZERO, message, segments, &limits).expect("valid");
                let mut reference = vec![0; header.frame_len()];
                let len = encode_frame(&header, segments, &mut reference).expect("encodes");
                assert_eq!(frame, reference[..len], "room for {room:?} segments");
            }
        }
    }

    #[test]
    fn a_large_payload_with_the_exact_room_becomes_the_frame() {
        let limits = ProtocolLimits::default();
        let mut writer = SegmentWriter::new();
        writer.reserve_head(HEADER_LEN + LENGTH_ENTRY_LEN * 2);
        writer.push(b"small");
        writer.push(&vec![7; IN_PLACE_FROM]);
        let buffer = writer.bytes().as_ptr();
        let message = Message::Result { call: call() };
        let frame = with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
        let head = HEADER_LEN + LENGTH_ENTRY_LEN * 2;
        assert_eq!(frame[head..].as_ptr(), buffer, "not copied");
        assert!(writer.is_empty(), "the writer gave its buffer away");
        // One byte less is copied.
        let mut writer = SegmentWriter::new();
        writer.reserve_head(HEADER_LEN + LENGTH_ENTRY_LEN);
        writer.push(&vec![7; IN_PLACE_FROM - 1]);
        let buffer = writer.bytes().as_ptr();
        let frame = with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
        assert_ne!(frame[HEADER_LEN + LENGTH_ENTRY_LEN..].as_ptr(), buffer);
        assert_eq!(writer.payload_len(), IN_PLACE_FROM - 1, "kept");
    }

    #[test]
    fn payloads_beyond_the_limits_are_refused() {
        let limits = ProtocolLimits::default();
        let mut writer = SegmentWriter::new();
        writer.push(&vec![0; limits.max_segment_bytes as usize + 1]);
        let message = Message::Result { call: call() };
        assert!(matches!(
            with_payload(Rank::ZERO, message, &mut writer, &limits),
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
