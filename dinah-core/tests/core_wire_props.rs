//! Property tests of the wire codec against plain reference models.
//!
//! - Headers and hellos round-trip over their whole value space, and
//!   decoding is canonical (whatever decodes re-encodes to the same bytes).
//! - Every single-byte corruption of a valid header or hello is rejected
//!   or decodes to a different valid value; random bytes never panic.
//! - The stream decoder yields the frames of the model (a `Vec` of
//!   messages and segments) for any chunking of the byte stream, and stops
//!   at the first invalid frame with the error whole-message decoding
//!   gives; lengths beyond the limits are rejected before any payload byte
//!   is consumed.
//! - Error texts are accepted exactly when `std::str::from_utf8` accepts
//!   them, with the same `valid_up_to`, whichever decoder reads them.
//!
//! The last test keeps the fuzz seed corpus (`fuzz/corpus/*/seed-*`) in
//! step with the codec.

use std::path::{Path, PathBuf};

use dinah_core::wire::{
    Call, Channel, DecodeContext, ErrorCode, FrameAssembler, HEADER_LEN, HELLO_LEN, Header, Hello,
    HelloAuth, Message, MessageKind, PartPlace, PartedFrameRef, PartedSegment, ProtocolError,
    RelativeDeadline, StreamDecoder, StreamEvent, TailWidth, TraceId, check_compatible,
    decode_frame, decode_parted_frame, decode_split_frame, encode_frame, limit_field_from_code,
};
use dinah_core::{
    ActionId, DomainId, ERROR_TEXT_CAP, FRAME_BYTES_CAP, Fingerprint, ProtocolLimits, Rank,
    RequestId, SEGMENTS_CAP, WorldSize,
};
use proptest::collection::vec;
use proptest::prelude::*;

// ---------------------------------------------------------------- strategies

/// Edges first, then anything.
fn nonzero_u64() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1), Just(u64::MAX), 1..=u64::MAX]
}

fn call() -> impl Strategy<Value = Call> {
    (
        nonzero_u64(),
        prop_oneof![Just(1u128), Just(u128::MAX), 1..=u128::MAX],
        nonzero_u64(),
        prop_oneof![Just(0u64), any::<u64>()],
    )
        .prop_map(|(request, action, domain, trace)| Call {
            request: RequestId::new(request).unwrap(),
            action: ActionId::new(action).unwrap(),
            domain: DomainId::new(domain).unwrap(),
            trace: TraceId::new(trace),
        })
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    prop_oneof![
        Just(ErrorCode::UnknownAction),
        Just(ErrorCode::UnknownDomain),
        Just(ErrorCode::UserFailure),
        Just(ErrorCode::HandlerPanicked),
        Just(ErrorCode::Cancelled),
        Just(ErrorCode::DeadlineExceeded),
        Just(ErrorCode::DuplicateResultUnavailable),
        Just(ErrorCode::ProtocolViolation),
        Just(ErrorCode::ShuttingDown),
        (1u16..=17).prop_map(|code| ErrorCode::ResourceExhausted {
            limit: limit_field_from_code(code).unwrap()
        }),
    ]
}

fn message_on(channel: Channel) -> BoxedStrategy<Message> {
    let goodbye = any::<u64>().prop_map(|frames_sent| Message::Goodbye { frames_sent });
    match channel {
        Channel::Control => prop_oneof![
            3 => call().prop_map(|call| Message::Cancel { call }),
            1 => goodbye,
            1 => Just(Message::Heartbeat),
        ]
        .boxed(),
        Channel::Action => prop_oneof![
            3 => (call(), nonzero_u64()).prop_map(|(call, deadline)| Message::Request {
                call,
                deadline: RelativeDeadline::from_nanos(deadline).unwrap(),
            }),
            3 => call().prop_map(|call| Message::Result { call }),
            2 => (call(), error_code()).prop_map(|(call, code)| Message::Error { call, code }),
            1 => goodbye,
        ]
        .boxed(),
    }
}

fn channel() -> impl Strategy<Value = Channel> {
    prop_oneof![Just(Channel::Control), Just(Channel::Action)]
}

/// A world and a rank in it, over the whole `u32` range.
fn world_and_rank() -> impl Strategy<Value = (WorldSize, Rank)> {
    prop_oneof![Just(1u32), 2..=8u32, 1..=u32::MAX]
        .prop_flat_map(|size| (Just(size), 0..size))
        .prop_map(|(size, rank)| {
            let world = WorldSize::new(size).unwrap();
            (world, world.rank(rank).unwrap())
        })
}

/// The widest limits there are.
fn cap_limits() -> ProtocolLimits {
    let mut limits = ProtocolLimits::DEFAULT;
    limits.max_frame_bytes = FRAME_BYTES_CAP;
    limits.max_segment_bytes = FRAME_BYTES_CAP;
    limits.max_segments = SEGMENTS_CAP;
    limits.max_error_text_bytes = ERROR_TEXT_CAP;
    limits
}

static ZEROS: [u8; 4096] = [0; 4096];

/// Segment lengths for `message` (up to the segment cap), as slices of a
/// zero buffer (zero bytes are valid UTF-8, so they suit error texts).
fn segment_lengths(message: &Message) -> BoxedStrategy<Vec<usize>> {
    match message.kind() {
        MessageKind::Error => (0..=ERROR_TEXT_CAP as usize)
            .prop_map(|len| vec![len])
            .boxed(),
        MessageKind::Request | MessageKind::Result => {
            vec(0usize..=4096, 0..=usize::from(SEGMENTS_CAP)).boxed()
        }
        _ => Just(Vec::new()).boxed(),
    }
}

/// A valid header over the whole value space, with the context it decodes
/// in.
fn header_in_context() -> impl Strategy<Value = (Header, DecodeContext)> {
    (channel(), world_and_rank())
        .prop_flat_map(|(channel, world_rank)| {
            (Just(channel), Just(world_rank), message_on(channel))
        })
        .prop_flat_map(|(channel, world_rank, message)| {
            (
                Just(channel),
                Just(world_rank),
                Just(message),
                segment_lengths(&message),
            )
        })
        .prop_map(|(channel, (world, origin), message, lengths)| {
            let segments: Vec<&[u8]> = lengths.iter().map(|&len| &ZEROS[..len]).collect();
            let header = Header::new(origin, message, &segments, &cap_limits()).unwrap();
            let ctx = DecodeContext::new(channel, origin, world, cap_limits()).unwrap();
            (header, ctx)
        })
}

fn payload_for(message: &Message) -> BoxedStrategy<Vec<Vec<u8>>> {
    match message.kind() {
        MessageKind::Error => prop_oneof![
            vec(any::<char>(), 0..12).prop_map(|chars| chars.into_iter().collect::<String>()),
            Just(String::new()),
        ]
        .prop_map(|text| vec![text.into_bytes()])
        .boxed(),
        MessageKind::Request | MessageKind::Result => vec(vec(any::<u8>(), 0..24), 0..5).boxed(),
        _ => Just(Vec::new()).boxed(),
    }
}

/// The reference model of a stream: frames as plain values.
#[derive(Debug, Clone, PartialEq)]
struct ModelFrame {
    header: Header,
    segments: Vec<Vec<u8>>,
}

const WORLD: u32 = 3;

fn stream_ctx(channel: Channel) -> DecodeContext {
    let world = WorldSize::new(WORLD).unwrap();
    DecodeContext::new(
        channel,
        world.rank(1).unwrap(),
        world,
        ProtocolLimits::DEFAULT,
    )
    .unwrap()
}

fn model_frames(channel: Channel) -> impl Strategy<Value = Vec<ModelFrame>> {
    vec(
        (
            message_on(channel).prop_flat_map(|message| (Just(message), payload_for(&message))),
            0..5u8,
        ),
        0..6,
    )
    .prop_map(|frames| {
        let origin = WorldSize::new(WORLD).unwrap().rank(1).unwrap();
        frames
            .into_iter()
            .map(|((message, segments), width)| {
                let header =
                    Header::new(origin, message, &segments, &ProtocolLimits::DEFAULT).unwrap();
                // A width where the frame may carry one: a request's or
                // result's last segment.
                let width = TailWidth::from_log2(width).unwrap();
                ModelFrame {
                    header: header.with_tail_width(width).unwrap_or(header),
                    segments,
                }
            })
            .collect()
    })
}

fn encode(frame: &ModelFrame) -> Vec<u8> {
    let mut out = vec![0; frame.header.frame_len()];
    let len = encode_frame(&frame.header, &frame.segments, &mut out).unwrap();
    assert_eq!(len, out.len());
    out
}

/// Chunk sizes: all ones, the whole stream at once, or a random cycle.
fn chunking() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        Just(vec![1]),
        Just(vec![usize::MAX]),
        vec(1usize..=97, 1..16),
        vec(1usize..=600, 1..16),
    ]
}

// ------------------------------------------------------------ stream driver

/// Feeds `bytes` to a stream decoder in the given chunk sizes (cycled).
/// Returns the frames, the first error, and how many bytes had been
/// consumed before it.
fn stream_decode(
    ctx: DecodeContext,
    bytes: &[u8],
    chunks: &[usize],
) -> (Vec<ModelFrame>, Option<ProtocolError>, usize) {
    stream_decode_with(ctx, bytes, chunks, false)
}

/// [`stream_decode`], and with `whole` each step first offers the input to
/// [`StreamDecoder::decode_whole`] (as the TCP reader does), taking the
/// event-wise path only when it declines.
fn stream_decode_with(
    ctx: DecodeContext,
    bytes: &[u8],
    chunks: &[usize],
    whole: bool,
) -> (Vec<ModelFrame>, Option<ProtocolError>, usize) {
    let mut decoder = StreamDecoder::new(ctx);
    let mut frames = Vec::new();
    let mut current: Option<(Header, Vec<u32>, Vec<u8>)> = None;
    let mut consumed = 0;
    let mut sizes = chunks.iter().cycle();
    let mut rest = bytes;
    while !rest.is_empty() {
        let size = (*sizes.next().unwrap()).min(rest.len());
        let (mut input, tail) = rest.split_at(size);
        rest = tail;
        loop {
            if whole {
                match decoder.decode_whole(input) {
                    Ok(Some((len, header))) => {
                        assert!(current.is_none(), "a whole frame inside a frame");
                        let frame = &input[..len];
                        let mut segments = Vec::new();
                        let mut at = header.head_len();
                        for entry in frame[HEADER_LEN..at].chunks_exact(4) {
                            let len = u32::from_le_bytes(entry.try_into().unwrap()) as usize;
                            segments.push(frame[at..at + len].to_vec());
                            at += len;
                        }
                        assert_eq!(at, len);
                        // Decoding is canonical: the header re-encodes to the frame's bytes.
                        assert_eq!(header.encode()[..], frame[..HEADER_LEN]);
                        frames.push(ModelFrame { header, segments });
                        consumed += len;
                        input = &input[len..];
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        assert_eq!(decoder.decode(&[]), Err(error));
                        assert_eq!(decoder.decode_whole(input), Err(error));
                        return (frames, Some(error), consumed);
                    }
                }
            }
            let (used, event) = match decoder.decode(input) {
                Ok(step) => step,
                Err(error) => {
                    // A failed decoder stays failed.
                    assert_eq!(decoder.decode(&[]), Err(error));
                    return (frames, Some(error), consumed);
                }
            };
            consumed += used;
            input = &input[used..];
            match event {
                None => break,
                Some(StreamEvent::FrameStart(header)) => {
                    assert!(current.is_none());
                    current = Some((header, Vec::new(), Vec::new()));
                }
                Some(StreamEvent::SegmentLength { index, len }) => {
                    let (_, lengths, payload) = current.as_mut().unwrap();
                    assert!(payload.is_empty(), "a length after payload");
                    assert_eq!(usize::from(index), lengths.len());
                    lengths.push(len);
                }
                Some(StreamEvent::Payload(bytes)) => {
                    current.as_mut().unwrap().2.extend_from_slice(bytes)
                }
                Some(StreamEvent::FrameEnd) => {
                    let (header, lengths, payload) = current.take().unwrap();
                    let mut segments = Vec::new();
                    let mut at = 0;
                    for len in lengths {
                        segments.push(payload[at..at + len as usize].to_vec());
                        at += len as usize;
                    }
                    assert_eq!(at, payload.len());
                    frames.push(ModelFrame { header, segments });
                }
            }
        }
        assert!(input.is_empty());
    }
    assert_eq!(decoder.frames(), frames.len() as u64);
    (frames, None, consumed)
}

fn whole_decode(ctx: &DecodeContext, bytes: &[u8]) -> Result<ModelFrame, ProtocolError> {
    decode_frame(bytes, ctx).map(|frame| ModelFrame {
        header: *frame.header(),
        segments: frame.segments().map(<[u8]>::to_vec).collect(),
    })
}

// ---------------------------------------------------------------- properties

/// The default configuration (so `PROPTEST_CASES` applies), with at most 4
/// cases and no regression file under Miri, whose isolation forbids the
/// file system.
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if cfg!(miri) {
        config.cases = config.cases.min(4);
        config.failure_persistence = None;
    }
    config
}

/// The segments of `frame` read with its parts `parts` at `places`.
fn read_parted(
    frame: &PartedFrameRef<'_>,
    places: &[PartPlace],
    parts: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let mut segments = frame.segments();
    let mut next = places.iter().copied().zip(parts).peekable();
    let mut read = Vec::new();
    while let Some(segment) = segments.next(next.peek().map(|(place, _)| *place)) {
        read.push(match segment {
            PartedSegment::Inline(bytes) => bytes.to_vec(),
            PartedSegment::Apart => next
                .next()
                .map(|(_, part)| part.clone())
                .unwrap_or_default(),
        });
    }
    read
}

/// The bytes of `head` with `parts` inserted at `places`.
fn reassemble(head: &[u8], places: &[PartPlace], parts: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut from = 0;
    for (place, part) in places.iter().zip(parts) {
        bytes.extend_from_slice(&head[from..place.at]);
        bytes.extend_from_slice(part);
        from = place.at;
    }
    bytes.extend_from_slice(&head[from..]);
    bytes
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn header_round_trips_over_the_value_space((header, ctx) in header_in_context()) {
        let bytes = header.encode();
        prop_assert_eq!(Header::decode(&bytes, &ctx), Ok(header));
        // Within the limits it was built for.
        prop_assert!(header.frame_len() <= FRAME_BYTES_CAP as usize);
        prop_assert!(header.segment_count() <= SEGMENTS_CAP);
    }

    #[test]
    fn a_frame_split_anywhere_decodes_as_whole_or_is_refused(
        frames in model_frames(Channel::Action),
        cut in any::<prop::sample::Index>(),
    ) {
        // Held as a head and a detached tail: exactly the whole frame's
        // header and segments when the tail is the last segment, the
        // split's error anywhere else.
        let ctx = stream_ctx(Channel::Action);
        for frame in &frames {
            let bytes = encode(frame);
            let tail = cut.index(bytes.len() + 1);
            let (head, rest) = bytes.split_at(bytes.len() - tail);
            let split = decode_split_frame(head, rest.len(), &ctx);
            let last = frame.segments.last().map_or(0, Vec::len);
            let splittable = frame.header.kind() != MessageKind::Error;
            if tail > 0 && tail == last && splittable {
                let split = split.unwrap();
                prop_assert_eq!(split.header(), &frame.header);
                let mut segments: Vec<Vec<u8>> = split.head_segments().map(<[u8]>::to_vec).collect();
                segments.push(rest.to_vec());
                prop_assert_eq!(&segments, &frame.segments);
            } else if head.len() >= frame.header.head_len() {
                prop_assert_eq!(
                    split,
                    Err(ProtocolError::MisplacedSplit { last: last as u32, tail })
                );
            } else {
                // Cut inside the header or the table: refused as a head
                // too short to read.
                prop_assert!(split.is_err());
            }
            // The header for a payload held so agrees with the whole one.
            if splittable && last > 0 {
                let lens = frame.segments.iter().map(Vec::len);
                let before = frame.segments[..frame.segments.len() - 1].concat();
                let packed = Header::packed_with_tail(
                    frame.header.origin(),
                    *frame.header.message(),
                    lens,
                    &before,
                    last,
                    &ProtocolLimits::DEFAULT,
                )
                .and_then(|header| header.with_tail_width(frame.header.tail_width()));
                prop_assert_eq!(packed, Ok(frame.header));
            }
        }
    }

    #[test]
    fn a_frame_with_any_segments_held_apart_reads_as_whole(
        frames in model_frames(Channel::Action),
        picks in vec(any::<bool>(), 0..40),
        moved_to in any::<prop::sample::Index>(),
    ) {
        // Any non-empty segments of a request or result held apart, at
        // their places: the whole frame's header and segments. With one
        // place moved, a frame the parted decoder accepts is the whole
        // frame of those bytes, read the same.
        let ctx = stream_ctx(Channel::Action);
        for frame in &frames {
            let bytes = encode(frame);
            let mut head = bytes[..frame.header.head_len()].to_vec();
            let (mut places, mut parts) = (Vec::new(), Vec::new());
            let error = frame.header.kind() == MessageKind::Error;
            for (i, segment) in frame.segments.iter().enumerate() {
                if !error && !segment.is_empty() && picks.get(i).copied().unwrap_or(false) {
                    places.push(PartPlace { at: head.len(), len: segment.len() });
                    parts.push(segment.clone());
                } else {
                    head.extend_from_slice(segment);
                }
            }
            let parted = decode_parted_frame(&head, places.iter().copied(), &ctx).unwrap();
            prop_assert_eq!(parted.header(), &frame.header);
            prop_assert_eq!(&read_parted(&parted, &places, &parts), &frame.segments);
            if places.is_empty() {
                continue;
            }
            let mut moved = places.clone();
            moved[0].at = moved_to.index(head.len() + 1);
            if let Ok(other) = decode_parted_frame(&head, moved.iter().copied(), &ctx) {
                let whole = reassemble(&head, &moved, &parts);
                let decoded = decode_frame(&whole, &ctx).unwrap();
                prop_assert_eq!(decoded.header(), other.header());
                let segments: Vec<Vec<u8>> = decoded.segments().map(<[u8]>::to_vec).collect();
                prop_assert_eq!(read_parted(&other, &moved, &parts), segments);
            }
        }
    }

    #[test]
    fn packed_headers_agree_with_headers_built_from_slices(
        message in channel().prop_flat_map(message_on),
        segments in vec(vec(any::<u8>(), 0..40), 0..6),
        (max_segments, max_segment_bytes, max_frame_bytes, max_error_text_bytes)
            in (0u16..8, 0u32..48, 60u32..400, 0u32..48),
    ) {
        // Tight limits, any kind and any bytes (error texts that are not
        // UTF-8 included), so every refusal is reached as well.
        let mut limits = ProtocolLimits::DEFAULT;
        limits.max_segments = max_segments;
        limits.max_segment_bytes = max_segment_bytes;
        limits.max_frame_bytes = max_frame_bytes;
        limits.max_error_text_bytes = max_error_text_bytes;
        let origin = Rank::ZERO;
        let split = Header::new(origin, message, &segments, &limits);
        let packed: Vec<u8> = segments.concat();
        let lens = segments.iter().map(Vec::len);
        prop_assert_eq!(Header::packed(origin, message, lens, &packed, &limits), split);
    }

    #[test]
    fn every_single_byte_corruption_of_a_header_is_caught_or_canonical(
        (header, ctx) in header_in_context(),
        position in 0..HEADER_LEN,
        delta in 1..=255u8,
    ) {
        let mut bytes = header.encode();
        bytes[position] = bytes[position].wrapping_add(delta);
        if let Ok(decoded) = Header::decode(&bytes, &ctx) {
            prop_assert_ne!(decoded, header);
            prop_assert_eq!(decoded.encode(), bytes);
        }
    }

    #[test]
    fn structured_random_headers_decode_canonically_or_not_at_all(
        fields in (
            prop_oneof![Just(1u8), 0..=8u8, any::<u8>()],
            prop_oneof![Just(0u16), Just(1), any::<u16>()],
            prop_oneof![Just(0u32), any::<u32>()],
            prop_oneof![Just(0u16), Just(1), any::<u16>()],
            prop_oneof![Just(0u16), 1..=10u16, any::<u16>()],
            prop_oneof![Just(0u16), 1..=17u16, any::<u16>()],
            prop_oneof![Just(0u64), any::<u64>()],
            prop_oneof![Just(0u128), any::<u128>()],
            prop_oneof![Just(0u64), any::<u64>()],
            prop_oneof![Just(0u64), any::<u64>()],
            prop_oneof![Just(0u64), any::<u64>()],
            prop_oneof![Just(0u64), any::<u64>()],
        ),
        origin in 0..4u32,
        channel in channel(),
    ) {
        let (kind, reserved, payload, segments, code, detail, request, action, domain, deadline, trace, frames) = fields;
        let mut bytes = Vec::with_capacity(HEADER_LEN);
        bytes.extend_from_slice(b"DNAH");
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.push(kind);
        bytes.push((reserved & 1) as u8);
        bytes.extend_from_slice(&origin.to_le_bytes());
        bytes.extend_from_slice(&payload.to_le_bytes());
        bytes.extend_from_slice(&segments.to_le_bytes());
        bytes.extend_from_slice(&code.to_le_bytes());
        bytes.extend_from_slice(&detail.to_le_bytes());
        bytes.extend_from_slice(&(reserved >> 1 & 1).to_le_bytes());
        bytes.extend_from_slice(&request.to_le_bytes());
        bytes.extend_from_slice(&action.to_le_bytes());
        bytes.extend_from_slice(&domain.to_le_bytes());
        bytes.extend_from_slice(&deadline.to_le_bytes());
        bytes.extend_from_slice(&trace.to_le_bytes());
        bytes.extend_from_slice(&frames.to_le_bytes());
        let world = WorldSize::new(2).unwrap();
        let ctx = DecodeContext::new(channel, world.rank(1).unwrap(), world, cap_limits()).unwrap();
        if let Ok(header) = Header::decode(&bytes, &ctx) {
            prop_assert_eq!(&header.encode()[..], &bytes[..]);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in vec(any::<u8>(), 0..400), chunks in chunking()) {
        let ctx = stream_ctx(Channel::Action);
        let _ = Header::decode(&bytes, &ctx);
        let _ = Hello::decode(&bytes);
        let whole = whole_decode(&ctx, &bytes);
        let (frames, error, _) = stream_decode(ctx, &bytes, &chunks);
        // The whole-frame step agrees with the event-wise one.
        let (fast, fast_error, _) = stream_decode_with(ctx, &bytes, &chunks, true);
        prop_assert_eq!(&fast, &frames);
        prop_assert_eq!(fast_error, error);
        // A message that decodes whole is one frame to the stream decoder.
        if let Ok(frame) = whole {
            prop_assert_eq!(frames, vec![frame]);
            prop_assert_eq!(error, None);
        }
    }

    #[test]
    fn magic_prefixed_garbage_never_panics(tail in vec(any::<u8>(), 0..200), chunks in chunking()) {
        let mut bytes = b"DNAH\x03\x00".to_vec();
        bytes.extend_from_slice(&tail);
        let ctx = stream_ctx(Channel::Control);
        let _ = whole_decode(&ctx, &bytes);
        let _ = stream_decode(ctx, &bytes, &chunks);
    }

    #[test]
    fn any_chunking_yields_the_model_frames(
        (channel, frames) in channel().prop_flat_map(|channel| (Just(channel), model_frames(channel))),
        chunks in chunking(),
    ) {
        let ctx = stream_ctx(channel);
        let bytes: Vec<u8> = frames.iter().flat_map(encode).collect();
        let (decoded, error, consumed) = stream_decode(ctx, &bytes, &chunks);
        prop_assert_eq!(error, None);
        prop_assert_eq!(consumed, bytes.len());
        prop_assert_eq!(&decoded, &frames);
        prop_assert_eq!(stream_decode_with(ctx, &bytes, &chunks, true), (frames.clone(), None, bytes.len()));
        // Whole-message decoding of each frame agrees with the model too.
        for frame in &frames {
            prop_assert_eq!(whole_decode(&ctx, &encode(frame)), Ok(frame.clone()));
        }
        // So does the assembler, over its own buffer.
        let mut small = *ctx.limits();
        small.max_frame_bytes = 4096;
        small.max_segment_bytes = 4096;
        small.max_error_text_bytes = 1024;
        let small = DecodeContext::new(channel, ctx.source(), ctx.world(), small).unwrap();
        let mut assembler = FrameAssembler::new(vec![0u8; 4096], small).unwrap();
        let mut assembled = Vec::new();
        let mut input = &bytes[..];
        loop {
            let (used, frame) = assembler.push(input).unwrap();
            input = &input[used..];
            match frame {
                Some(frame) => assembled.push(ModelFrame {
                    header: *frame.header(),
                    segments: frame.segments().map(<[u8]>::to_vec).collect(),
                }),
                None => break,
            }
        }
        prop_assert_eq!(assembled, frames);
        prop_assert_eq!(assembler.finish(), Ok(()));
    }

    #[test]
    fn the_stream_stops_at_the_first_bad_frame_with_the_whole_message_error(
        (channel, frames) in channel().prop_flat_map(|channel| (Just(channel), model_frames(channel))),
        bad_index in any::<prop::sample::Index>(),
        position in any::<prop::sample::Index>(),
        delta in 1..=255u8,
        chunks in chunking(),
    ) {
        prop_assume!(!frames.is_empty());
        let ctx = stream_ctx(channel);
        let bad = bad_index.index(frames.len());
        let mut encoded: Vec<Vec<u8>> = frames.iter().map(encode).collect();
        let at = position.index(encoded[bad].len());
        encoded[bad][at] = encoded[bad][at].wrapping_add(delta);
        let whole = whole_decode(&ctx, &encoded[bad]);
        let bytes: Vec<u8> = encoded.concat();
        let (decoded, error, _) = stream_decode(ctx, &bytes, &chunks);
        let (fast, fast_error, _) = stream_decode_with(ctx, &bytes, &chunks, true);
        prop_assert_eq!(&fast, &decoded);
        prop_assert_eq!(fast_error, error);
        prop_assert_eq!(&decoded[..bad.min(decoded.len())], &frames[..bad.min(decoded.len())]);
        match whole {
            Ok(frame) => {
                // The corruption made another valid frame (a payload byte,
                // a trace ID...): the stream sees it too.
                prop_assert_eq!(decoded.get(bad), Some(&frame));
            }
            Err(ProtocolError::Truncated { .. } | ProtocolError::TrailingBytes { .. }) => {
                // The frame's length changed, so the stream frames the
                // following bytes differently; it must still not panic.
            }
            Err(whole_error) => {
                prop_assert_eq!(decoded.len(), bad);
                prop_assert_eq!(error, Some(whole_error));
            }
        }
    }

    #[test]
    fn oversized_lengths_are_rejected_before_any_payload_byte(
        segments in 1..=4u16,
        oversize in 1..=u32::MAX - 64,
        in_table in any::<bool>(),
        entry in any::<prop::sample::Index>(),
    ) {
        let mut limits = ProtocolLimits::DEFAULT;
        limits.max_frame_bytes = 1024;
        limits.max_segment_bytes = 64;
        limits.max_segments = 4;
        limits.max_error_text_bytes = 64;
        let world = WorldSize::new(2).unwrap();
        let origin = world.rank(1).unwrap();
        let ctx = DecodeContext::new(Channel::Action, origin, world, limits).unwrap();
        let payload: Vec<Vec<u8>> = (0..segments).map(|_| vec![7u8; 8]).collect();
        let call = Call {
            request: RequestId::MIN,
            action: ActionId::MIN,
            domain: DomainId::MIN,
            trace: None,
        };
        let header = Header::new(origin, Message::Result { call }, &payload, &limits).unwrap();
        let mut bytes = vec![0; header.frame_len()];
        encode_frame(&header, &payload, &mut bytes).unwrap();
        let limit_of_what = if in_table {
            // One table entry claims more than the segment limit.
            let at = HEADER_LEN + 4 * entry.index(usize::from(segments));
            bytes[at..at + 4].copy_from_slice(&(64 + oversize.min(u32::MAX - 64)).to_le_bytes());
            header.head_len()
        } else {
            // The header claims more than the frame limit.
            bytes[12..16].copy_from_slice(&(1024 + oversize.min(u32::MAX - 1024)).to_le_bytes());
            HEADER_LEN
        };
        let (frames, error, consumed) = stream_decode(ctx, &bytes, &[1]);
        prop_assert!(frames.is_empty());
        prop_assert!(
            matches!(
                error,
                Some(ProtocolError::FrameTooLarge { .. } | ProtocolError::SegmentTooLarge { .. })
            ),
            "{:?}", error
        );
        prop_assert!(consumed < limit_of_what, "{} >= {}", consumed, limit_of_what);
        prop_assert_eq!(error, whole_decode(&ctx, &bytes).err());
    }

    #[test]
    fn error_texts_are_checked_like_from_utf8(
        text in prop_oneof![
            vec(any::<u8>(), 0..24),
            vec(any::<char>(), 0..8).prop_map(|chars| chars.into_iter().collect::<String>().into_bytes()),
            (vec(any::<char>(), 0..6), any::<u8>(), 0..6usize).prop_map(|(chars, byte, at)| {
                let mut bytes = chars.into_iter().collect::<String>().into_bytes();
                let at = at.min(bytes.len());
                bytes.insert(at, byte);
                bytes
            }),
        ],
        call in call(),
        chunks in chunking(),
    ) {
        let ctx = stream_ctx(Channel::Action);
        let origin = ctx.source();
        // Encode a valid frame of the same length, then swap the text in.
        let placeholder = vec![b'x'; text.len()];
        let header = Header::new(
            origin,
            Message::Error { call, code: ErrorCode::UserFailure },
            &[&placeholder],
            ctx.limits(),
        ).unwrap();
        let mut bytes = vec![0; header.frame_len()];
        encode_frame(&header, &[&placeholder], &mut bytes).unwrap();
        bytes[header.head_len()..].copy_from_slice(&text);
        let model = std::str::from_utf8(&text).map(|_| ()).map_err(|e| {
            ProtocolError::ErrorTextNotUtf8 { valid_up_to: e.valid_up_to() as u32 }
        });
        let whole = decode_frame(&bytes, &ctx);
        prop_assert_eq!(whole.map(|_| ()), model);
        if let Ok(frame) = decode_frame(&bytes, &ctx) {
            prop_assert_eq!(frame.error_text().map(str::as_bytes), Some(&text[..]));
        }
        let (frames, error, _) = stream_decode(ctx, &bytes, &chunks);
        prop_assert_eq!(error.map_or(Ok(()), Err), model);
        prop_assert_eq!(frames.len(), usize::from(model.is_ok()));
    }

    #[test]
    fn hello_round_trips_and_corruption_is_caught_or_canonical(
        run_id in any::<u128>(),
        (world, rank) in world_and_rank(),
        fingerprint in any::<u128>(),
        channel in channel(),
        limits in (
            (4096u32 + 84)..=FRAME_BYTES_CAP,
            1..=SEGMENTS_CAP,
            1..=ERROR_TEXT_CAP,
        ),
        admission in any::<u32>(),
        position in 0..HELLO_LEN,
        delta in 1..=255u8,
    ) {
        let mut protocol = ProtocolLimits::DEFAULT;
        protocol.max_frame_bytes = limits.0;
        protocol.max_segment_bytes = limits.0;
        protocol.max_segments = limits.1;
        protocol.max_error_text_bytes = limits.2;
        let hello = Hello::new(
            run_id, rank, world, protocol, Fingerprint::from_u128(fingerprint), channel,
        ).unwrap().with_admission_capacity(admission);
        let bytes = hello.encode();
        prop_assert_eq!(Hello::decode(&bytes), Ok(hello));
        let mut corrupted = bytes;
        corrupted[position] = corrupted[position].wrapping_add(delta);
        if let Ok(decoded) = Hello::decode(&corrupted) {
            prop_assert_ne!(decoded, hello);
            prop_assert_eq!(decoded.encode(), corrupted);
            // Seen from another rank, the original is accepted; a
            // corruption of the admission capacity alone is accepted too
            // (capacities are not compared), and any other corruption that
            // keeps the sender's rank and channel is refused (it changed
            // the run, world, limits or fingerprint).
            if let Some(other) = world.ranks().find(|&r| r != rank) {
                let mut local = hello;
                local.rank = other;
                prop_assert_eq!(check_compatible(&local, &hello), Ok(()));
                if decoded.with_admission_capacity(hello.admission_capacity) == hello {
                    prop_assert_eq!(check_compatible(&local, &decoded), Ok(()));
                } else if decoded.rank == hello.rank && decoded.channel == hello.channel {
                    prop_assert!(check_compatible(&local, &decoded).is_err());
                }
            }
        }
    }
}

// ------------------------------------------------------------- fuzz seeds

/// The fuzz targets read a context from the first three bytes of their
/// input (see `fuzz/fuzz_targets/*.rs`): byte 0 bit 0 = channel (1 action),
/// bit 1 = small limits; byte 1 = world size - 1; byte 2 = source rank
/// modulo the world. This writes the matching prefix for rank 1 of 4.
fn prefix(channel: Channel) -> Vec<u8> {
    vec![u8::from(channel == Channel::Action), 3, 1]
}

fn seed_frames() -> Vec<(Channel, ModelFrame)> {
    let world = WorldSize::new(4).unwrap();
    let origin = world.rank(1).unwrap();
    let call = Call {
        request: RequestId::new(42).unwrap(),
        action: ActionId::new(0xadd).unwrap(),
        domain: DomainId::new(1).unwrap(),
        trace: TraceId::new(7),
    };
    let messages = [
        (
            Channel::Action,
            Message::Request {
                call,
                deadline: RelativeDeadline::from_nanos(1_000_000).unwrap(),
            },
            vec![b"left".to_vec(), Vec::new(), b"right".to_vec()],
        ),
        (
            Channel::Action,
            Message::Result { call },
            vec![42u64.to_le_bytes().to_vec()],
        ),
        (
            Channel::Action,
            Message::Error {
                call,
                code: ErrorCode::ResourceExhausted {
                    limit: limit_field_from_code(8).unwrap(),
                },
            },
            vec!["queue full: 256 jobs".as_bytes().to_vec()],
        ),
        (Channel::Control, Message::Cancel { call }, Vec::new()),
        (
            Channel::Control,
            Message::Goodbye { frames_sent: 3 },
            Vec::new(),
        ),
        (Channel::Control, Message::Heartbeat, Vec::new()),
    ];
    messages
        .into_iter()
        .map(|(channel, message, segments)| {
            let header = Header::new(origin, message, &segments, &ProtocolLimits::DEFAULT).unwrap();
            (channel, ModelFrame { header, segments })
        })
        .collect()
}

fn seed_corpus() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut seeds = Vec::new();
    let frames = seed_frames();
    for (channel, frame) in &frames {
        let kind = frame.header.kind();
        let mut header = prefix(*channel);
        header.extend_from_slice(&frame.header.encode());
        seeds.push(("decode_header", format!("seed-{kind}"), header.clone()));
        let mut bad = header;
        bad[3 + 6] = 0x09;
        seeds.push(("decode_header", format!("seed-{kind}-bad-kind"), bad));
    }
    let mut short = prefix(Channel::Action);
    short.extend_from_slice(b"DNAH\x03\x00\x01");
    seeds.push(("decode_header", "seed-short".into(), short));

    for channel in [Channel::Action, Channel::Control] {
        let mut stream = prefix(channel);
        stream.push(0x5a);
        for (_, frame) in frames.iter().filter(|(c, _)| *c == channel) {
            stream.extend_from_slice(&encode(frame));
        }
        seeds.push(("stream_decoder", format!("seed-{channel}"), stream.clone()));
        // The last frame's kind byte made unknown.
        let last = frames.iter().rev().find(|(c, _)| *c == channel).unwrap();
        let mut bad = stream;
        let at = bad.len() - last.1.header.frame_len() + 6;
        bad[at] = 0x09;
        seeds.push(("stream_decoder", format!("seed-{channel}-bad-tail"), bad));
    }
    // The TCP reader: whole conversations, each ending with a goodbye
    // that counts the frames before it, read through a 64-byte buffer.
    for channel in [Channel::Action, Channel::Control] {
        let mut stream = prefix(channel);
        stream.extend_from_slice(&[0x5a, 15]);
        let mut sent = 0;
        for (_, frame) in frames
            .iter()
            .filter(|(c, f)| *c == channel && f.header.kind() != MessageKind::Goodbye)
        {
            stream.extend_from_slice(&encode(frame));
            sent += 1;
        }
        let origin = frames[0].1.header.origin();
        let goodbye = Header::without_payload(origin, Message::Goodbye { frames_sent: sent });
        stream.extend_from_slice(&goodbye.unwrap().encode());
        seeds.push(("tcp_reader", format!("seed-{channel}"), stream.clone()));
        let mut miscounted = stream;
        let at = miscounted.len() - HEADER_LEN + 72;
        miscounted[at] ^= 1;
        seeds.push((
            "tcp_reader",
            format!("seed-{channel}-miscounted"),
            miscounted,
        ));
    }

    let mut oversized = prefix(Channel::Action);
    oversized.push(1);
    let mut frame = encode(&frames[0].1);
    frame[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    oversized.extend_from_slice(&frame);
    seeds.push(("stream_decoder", "seed-oversized".into(), oversized));

    let world = WorldSize::new(4).unwrap();
    let hello = Hello::new(
        0x5eed,
        world.rank(1).unwrap(),
        world,
        ProtocolLimits::DEFAULT,
        Fingerprint::from_u128(0xf1f1),
        Channel::Action,
    )
    .unwrap()
    .with_admission_capacity(256);
    seeds.push((
        "decode_hello",
        "seed-action".into(),
        hello.encode().to_vec(),
    ));
    let control = hello.with_channel(Channel::Control).encode().to_vec();
    seeds.push(("decode_hello", "seed-control".into(), control.clone()));
    let mut bad = control.clone();
    bad[58] = 1;
    seeds.push(("decode_hello", "seed-reserved".into(), bad));
    let mut bad = control;
    bad[70] = 1;
    seeds.push(("decode_hello", "seed-reserved-tail".into(), bad));
    let proven = hello.with_auth(HelloAuth::HmacSha256).encode().to_vec();
    seeds.push(("decode_hello", "seed-auth".into(), proven));
    seeds
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

/// The checked-in seed corpus is exactly what the codec produces today.
/// Regenerate with `DINAH_BLESS_FUZZ_SEEDS=1 cargo test -p dinah-core
/// --test core_wire_props fuzz_seed`. (Not under Miri, which forbids the
/// file system; `valid_fuzz_seeds_decode` still runs there.)
#[cfg(not(miri))]
#[test]
fn fuzz_seed_corpus_matches_the_codec() {
    let bless = std::env::var_os("DINAH_BLESS_FUZZ_SEEDS").is_some();
    for (target, name, bytes) in seed_corpus() {
        let path = corpus_dir().join(target).join(&name);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let stored = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run with DINAH_BLESS_FUZZ_SEEDS=1)",
                path.display()
            )
        });
        assert_eq!(
            stored,
            bytes,
            "{} is stale (run with DINAH_BLESS_FUZZ_SEEDS=1)",
            path.display()
        );
    }
}

/// The valid seeds really are valid (so the fuzzers start from accepted
/// inputs).
#[test]
fn valid_fuzz_seeds_decode() {
    let world = WorldSize::new(4).unwrap();
    for (channel, frame) in seed_frames() {
        let ctx = DecodeContext::new(
            channel,
            world.rank(1).unwrap(),
            world,
            ProtocolLimits::DEFAULT,
        )
        .unwrap();
        assert_eq!(whole_decode(&ctx, &encode(&frame)), Ok(frame.clone()));
    }
}
