//! Encoding the runtime's frames.

use dinah_core::wire::{
    Call, DecodeContext, ErrorCode, FrameRef, HEADER_LEN, Header, LENGTH_ENTRY_LEN, Message,
    PartedFrameRef, ProtocolError, RelativeDeadline, SplitFrameRef, decode_frame,
    decode_parted_frame, decode_split_frame, encode_head, truncate_error_text,
};
use dinah_core::{LimitField, ProtocolLimits, Rank};

use super::error::{RuntimeError, Side};
use crate::action::{IN_PLACE_FROM, SegmentReader, SegmentWriter};
use crate::transport::Frame;

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
/// A detached segment ([`SegmentWriter::push_owned`]) stays in its own
/// buffer: as the frame's tail if it is the last segment, as a middle part
/// otherwise (see [`Frame`]); the rest is the frame's head, built as
/// follows.
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
) -> Result<Frame, ProtocolError> {
    if payload.has_apart() {
        return with_apart(origin, message, payload, limits);
    }
    let lens = payload.inline_lens();
    let header = Header::packed(origin, message, lens, payload.bytes(), limits)?;
    Ok(Frame::whole(head_of_payload(&header, payload, None)))
}

/// [`with_payload`] for a payload with detached segments: they stay in
/// their buffers as the frame's middle parts and tail, and the header says
/// the width of the numbers they pack (a `Vec<f64>`'s: eight; see
/// [`SegmentWriter`]'s `parts_width`), so that a receiver keeps each in an
/// allocation a vector of them can take over.
#[cold]
fn with_apart(
    origin: Rank,
    message: Message,
    payload: &mut SegmentWriter,
    limits: &ProtocolLimits,
) -> Result<Frame, ProtocolError> {
    // Every length, the detached segments' included, goes into the
    // header's checks and the head's table.
    let lens: Vec<usize> = payload.lens().collect();
    let (bytes, apart) = (payload.bytes(), payload.apart_len());
    let header =
        Header::packed_with_detached(origin, message, lens.iter().copied(), bytes, apart, limits)?
            .with_tail_width(payload.parts_width())?;
    let (middle, tail) = payload.take_apart(header.head_len());
    let head = head_of_payload(&header, payload, Some(&lens));
    Ok(Frame::with_middle(head, middle, tail))
}

/// The head of `header`'s frame around the segments in `payload`'s own
/// buffer; `lens` are all the segments' lengths if some were detached
/// (and already taken), which stay in the head's length table.
#[inline(always)]
fn head_of_payload(
    header: &Header,
    payload: &mut SegmentWriter,
    lens: Option<&[usize]>,
) -> Vec<u8> {
    let inline = payload.bytes().len();
    let head_len = header.head_len() + inline;
    if inline >= IN_PLACE_FROM && payload.head_room() == header.head_len() {
        let mut head = [0; HEADER_LEN + LENGTH_ENTRY_LEN * MAX_IN_PLACE_SEGMENTS];
        if let Some(head) = head.get_mut(..header.head_len()) {
            match lens {
                None => write_head(header, payload.inline_lens(), head),
                Some(lens) => write_head(header, lens.iter().copied(), head),
            }
            // The writer carries on in a spare buffer as large as this
            // frame (within its own bound), so the next frame like it is
            // written without growing a buffer from nothing.
            let keep = head_len.min(SCRATCH_KEEP_AFTER_FRAME);
            let replacement = || crate::transport::frame_buffers::take(keep);
            if let Some(frame) = payload.frame_in_place(head, replacement) {
                debug_assert_eq!(frame.len(), head_len);
                return frame;
            }
        }
    }
    let mut frame = crate::transport::frame_buffers::take(head_len);
    // The header is encoded where it goes: encoding it on the stack and
    // copying it would read, in wide loads, bytes just written in narrow
    // stores, which stalls the copy until the stores retire.
    frame.extend_from_slice(&[0; HEADER_LEN]);
    header.encode_into(head_of(&mut frame));
    // The header checked every length against the segment limit.
    match lens {
        None => payload
            .inline_lens()
            .for_each(|len| frame.extend_from_slice(&(len as u32).to_le_bytes())),
        Some(lens) => lens
            .iter()
            .for_each(|len| frame.extend_from_slice(&(*len as u32).to_le_bytes())),
    }
    frame.extend_from_slice(payload.bytes());
    debug_assert_eq!(frame.len(), head_len);
    frame
}

/// A frame that arrived (or a job of this rank made), decoded and checked,
/// whole or split.
pub(crate) enum Received<'a> {
    /// Held in one buffer.
    Whole(FrameRef<'a>),
    /// Held as a head and a detached last segment.
    Split(SplitFrameRef<'a>),
    /// Held as a head and middle parts (and maybe a tail).
    Parted(PartedFrameRef<'a>),
}

impl Received<'_> {
    /// The frame's header.
    #[inline]
    pub(crate) fn header(&self) -> &Header {
        match self {
            Self::Whole(frame) => frame.header(),
            Self::Split(frame) => frame.header(),
            Self::Parted(frame) => frame.header(),
        }
    }
}

/// Decodes and checks `frame`: whole, split, or with middle parts.
///
/// # Errors
///
/// The frame's [`ProtocolError`]: see
/// [`decode_frame`](dinah_core::wire::decode_frame),
/// [`decode_split_frame`](dinah_core::wire::decode_split_frame) and
/// [`decode_parted_frame`](dinah_core::wire::decode_parted_frame).
#[inline]
pub(crate) fn decode_received<'a>(
    frame: &'a Frame,
    ctx: &DecodeContext,
) -> Result<Received<'a>, ProtocolError> {
    if frame.has_middle() {
        decode_parted_frame(frame.head(), frame.part_places(), ctx).map(Received::Parted)
    } else if frame.is_split() {
        decode_split_frame(frame.head(), frame.tail().len(), ctx).map(Received::Split)
    } else {
        decode_frame(frame.head(), ctx).map(Received::Whole)
    }
}

/// A reader over the payload of `frame`, which was validated into
/// `header` when it arrived (or was encoded by this rank); `None` if its
/// parts no longer match the header. A detached last segment can be
/// taken by the value read ([`SegmentReader::next_vec`]), and so can
/// middle parts.
#[inline]
pub(crate) fn payload(header: Header, frame: &mut Frame) -> Option<SegmentReader<'_>> {
    if frame.has_middle() {
        return parted_payload(header, frame);
    }
    match frame.parts_mut() {
        (head, Some(tail)) => {
            let split = SplitFrameRef::from_decoded(header, head, tail.len())?;
            Some(SegmentReader::from_split_frame(split, tail))
        }
        (head, None) => {
            let whole = FrameRef::from_decoded(header, head)?;
            Some(SegmentReader::from_frame(whole.segments()))
        }
    }
}

/// [`payload`] of a frame with middle parts.
#[cold]
fn parted_payload(header: Header, frame: &mut Frame) -> Option<SegmentReader<'_>> {
    let apart = frame.part_places().map(|place| place.len).sum();
    let (head, middle, tail) = frame.parts_apart_mut();
    let parted = PartedFrameRef::from_decoded(header, head, apart)?;
    Some(SegmentReader::from_parted_frame(parted, middle, tail))
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
) -> Result<Frame, ProtocolError> {
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
) -> Frame {
    let text = truncate_error_text(text, limits.max_error_text_bytes as usize);
    let segments = [text.as_bytes()];
    let header = Header::new(origin, Message::Error { call, code }, &segments, limits)
        .expect("an error text within the limits always makes a valid frame");
    Frame::whole(encode(&header, &segments).expect("the buffer is sized from the header"))
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
    use crate::WireValue;
    use crate::action::DETACH_FROM;
    use dinah_core::wire::{TailWidth, encode_frame};
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
                assert!(
                    frame.bytes_eq(&reference[..len]),
                    "room for {room:?} segments"
                );
                assert!(!frame.is_split(), "nothing was detached");
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
        assert_eq!(frame.head()[head..].as_ptr(), buffer, "not copied");
        assert!(writer.is_empty(), "the writer gave its buffer away");
        // One byte less is copied.
        let mut writer = SegmentWriter::new();
        writer.reserve_head(HEADER_LEN + LENGTH_ENTRY_LEN);
        writer.push(&vec![7; IN_PLACE_FROM - 1]);
        let buffer = writer.bytes().as_ptr();
        let frame = with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
        assert_ne!(
            frame.head()[HEADER_LEN + LENGTH_ENTRY_LEN..].as_ptr(),
            buffer
        );
        assert_eq!(writer.payload_len(), IN_PLACE_FROM - 1, "kept");
    }

    #[test]
    fn a_detached_last_segment_becomes_the_tail_and_reads_back_without_a_copy() {
        let limits = ProtocolLimits::default();
        let big = vec![0x5A_u8; DETACH_FROM];
        let owned = big.clone();
        let address = owned.as_ptr();
        let mut writer = SegmentWriter::new();
        writer.push(b"small");
        writer.push_owned(owned);
        let message = Message::Result { call: call() };
        let mut frame = with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
        assert!(frame.is_split());
        assert_eq!(
            writer.len(),
            1,
            "the tail was taken, the copied segment stays"
        );
        let segments: [&[u8]; 2] = [b"small", &big];
        let header = Header::new(Rank::ZERO, message, &segments, &limits).expect("valid");
        let mut reference = vec![0; header.frame_len()];
        encode_frame(&header, &segments, &mut reference).expect("encodes");
        assert!(
            frame.bytes_eq(&reference),
            "the same bytes as a whole frame"
        );

        let mut input = payload(header, &mut frame).expect("the parts match the header");
        assert_eq!(input.next_segment().unwrap(), b"small");
        let tail = input.next_vec().unwrap();
        assert_eq!(tail.as_ptr(), address, "the tail is the encoded buffer");
        input.finish().unwrap();
    }

    #[test]
    fn a_vector_of_numbers_travels_in_its_allocation_and_the_header_says_its_width() {
        let limits = ProtocolLimits::default();
        let numbers: Vec<f64> = (0..DETACH_FROM / 8).map(|i| i as f64 / 3.0).collect();
        let expected = numbers.clone();
        let address = numbers.as_ptr().cast::<u8>();
        let mut writer = SegmentWriter::new();
        writer.push(b"small");
        numbers.encode_owned(&mut writer).expect("encodes");
        let message = Message::Result { call: call() };
        let mut frame = with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
        // Kept only where a number's memory is its wire bytes; converted
        // (and copied) on a big-endian machine.
        let little = cfg!(target_endian = "little");
        let width = if little {
            TailWidth::Eight
        } else {
            TailWidth::One
        };
        assert_eq!(frame.is_split(), little);
        let wire: Vec<u8> = expected.iter().flat_map(|x| x.to_le_bytes()).collect();
        let segments: [&[u8]; 2] = [b"small", &wire];
        let header = Header::new(Rank::ZERO, message, &segments, &limits)
            .and_then(|header| header.with_tail_width(width))
            .expect("valid");
        let mut reference = vec![0; header.frame_len()];
        encode_frame(&header, &segments, &mut reference).expect("encodes");
        assert!(
            frame.bytes_eq(&reference),
            "little-endian numbers, the width said"
        );
        if little {
            assert_eq!(frame.tail(), wire);
            assert_eq!(frame.tail_width(), TailWidth::Eight);
            assert_eq!(frame.tail().as_ptr(), address, "not copied");
        }
        let mut input = payload(header, &mut frame).expect("the parts match the header");
        assert_eq!(input.next_segment().unwrap(), b"small");
        let back = Vec::<f64>::decode(&mut input).unwrap();
        assert_eq!(back, expected);
        if little {
            assert_eq!(
                back.as_ptr().cast::<u8>(),
                address,
                "the tail is the vector"
            );
        }
        input.finish().unwrap();
        // Read as another width, the same bytes are copied.
        let mut writer = SegmentWriter::new();
        expected.clone().encode_owned(&mut writer).expect("encodes");
        let mut frame = with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
        let header = Header::new(Rank::ZERO, message, &[&wire], &limits)
            .and_then(|header| header.with_tail_width(width))
            .expect("valid");
        let mut input = payload(header, &mut frame).expect("matches");
        let halves = Vec::<u32>::decode(&mut input).unwrap();
        let expected_halves: Vec<u32> = wire
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(halves, expected_halves, "the same bytes as u32s");
    }

    fn ctx() -> DecodeContext {
        let world = dinah_core::WorldSize::new(2).unwrap();
        let channel = dinah_core::wire::Channel::Action;
        DecodeContext::new(channel, Rank::ZERO, world, ProtocolLimits::default()).unwrap()
    }

    #[test]
    fn detached_segments_before_the_last_travel_as_middle_parts() {
        let limits = ProtocolLimits::default();
        let (first, last) = (vec![1u8; DETACH_FROM], vec![2u8; DETACH_FROM + 3]);
        let (first_sent, last_sent) = (first.clone(), last.clone());
        let (first_at, last_at) = (first_sent.as_ptr(), last_sent.as_ptr());
        let mut writer = SegmentWriter::new();
        writer.push(b"before");
        writer.push_owned(first_sent);
        writer.push(b"after");
        writer.push_owned(last_sent);
        assert_eq!(writer.len(), 4);
        let message = Message::Result { call: call() };
        let mut frame = with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
        assert_eq!(writer.len(), 2, "the detached segments were taken");
        assert!(frame.has_middle());
        let segments: [&[u8]; 4] = [b"before", &first, b"after", &last];
        let header = Header::new(Rank::ZERO, message, &segments, &limits).expect("valid");
        let mut reference = vec![0; header.frame_len()];
        encode_frame(&header, &segments, &mut reference).expect("encodes");
        assert!(frame.bytes_eq(&reference), "the bytes of the whole frame");
        // Each detached segment is sent from the buffer it was pushed in.
        let parts: Vec<&[u8]> = frame.wire_parts().collect();
        assert_eq!(parts.len(), 4);
        assert_eq!(parts[1].as_ptr(), first_at, "the middle part, not copied");
        assert_eq!(parts[2], b"after");
        assert_eq!(parts[3].as_ptr(), last_at, "the tail, not copied");
        // Read back: each detached segment is the value read from it.
        let decoded = decode_received(&frame, &ctx()).expect("valid");
        assert_eq!(*decoded.header(), header);
        let mut input = payload(header, &mut frame).expect("the parts match the header");
        assert_eq!(input.next_segment().unwrap(), b"before");
        let middle = input.next_vec().unwrap();
        assert_eq!(middle, first);
        assert_eq!(
            middle.as_ptr(),
            first_at,
            "the middle part is the encoded buffer"
        );
        assert_eq!(input.next_segment().unwrap(), b"after");
        let tail = input.next_vec().unwrap();
        assert_eq!(tail.as_ptr(), last_at, "the tail is the encoded buffer");
        input.finish().unwrap();
    }

    #[test]
    fn a_detached_segment_followed_by_small_ones_leaves_no_tail() {
        let limits = ProtocolLimits::default();
        let numbers: Vec<f64> = (0..DETACH_FROM / 8).map(|i| i as f64).collect();
        let sent = numbers.clone();
        let address = sent.as_ptr();
        let mut writer = SegmentWriter::new();
        sent.encode_owned(&mut writer).expect("encodes");
        writer.push(b"after");
        writer.push_owned(vec![2; DETACH_FROM - 1]);
        let message = Message::Result { call: call() };
        let mut frame = with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
        let little = cfg!(target_endian = "little");
        assert_eq!(frame.has_middle(), little);
        assert!(frame.tail().is_empty(), "the last segment is in the head");
        let wire: Vec<u8> = numbers.iter().flat_map(|x| x.to_le_bytes()).collect();
        let segments: [&[u8]; 3] = [&wire, b"after", &vec![2; DETACH_FROM - 1]];
        // The width the header says is the detached segment's, though the
        // last segment is in the head.
        let width = if little {
            TailWidth::Eight
        } else {
            TailWidth::One
        };
        let header = Header::new(Rank::ZERO, message, &segments, &limits)
            .and_then(|header| header.with_tail_width(width))
            .expect("valid");
        let mut reference = vec![0; header.frame_len()];
        encode_frame(&header, &segments, &mut reference).expect("encodes");
        assert!(frame.bytes_eq(&reference));
        let decoded = decode_received(&frame, &ctx()).expect("valid");
        assert_eq!(*decoded.header(), header);
        let mut input = payload(header, &mut frame).expect("matches");
        let back = Vec::<f64>::decode(&mut input).unwrap();
        assert_eq!(back, numbers);
        if little {
            assert_eq!(back.as_ptr(), address, "the middle part is the vector");
        }
        assert_eq!(input.next_segment().unwrap(), b"after");
        assert_eq!(input.next_vec().unwrap(), vec![2; DETACH_FROM - 1]);
        input.finish().unwrap();
    }

    #[test]
    fn a_split_that_does_not_match_the_header_is_not_read() {
        let limits = ProtocolLimits::default();
        let mut writer = SegmentWriter::new();
        writer.push_owned(vec![3; DETACH_FROM]);
        let message = Message::Result { call: call() };
        let frame = with_payload(Rank::ZERO, message, &mut writer, &limits).expect("encodes");
        let header =
            Header::new(Rank::ZERO, message, &[&vec![3; DETACH_FROM][..]], &limits).expect("valid");
        let (head, tail) = frame.into_parts();
        let mut moved = Frame::split(head[..head.len() - 1].to_vec(), tail);
        assert!(payload(header, &mut moved).is_none());
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
