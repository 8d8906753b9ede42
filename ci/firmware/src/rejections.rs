//! Every rejection of the protocol's table (`docs/protocol.md`,
//! "Rejections", rows 1 to 31), each from bytes a peer could send: the
//! first failure is the one returned, with the same error on this target
//! as on the host.

use dinah_core::ProtocolLimits;
use dinah_core::wire::{
    Channel, ErrorCode, HEADER_LEN, Header, HeaderField, Message, MessageKind, ProtocolError,
    StreamDecoder, decode_frame, encode_frame,
};

use crate::fixtures::{self, call, ctx, ctx_with, origin};
use crate::report::check;

/// Offsets in a header (see `Header`'s layout).
mod at {
    pub const VERSION: usize = 4;
    pub const KIND: usize = 6;
    pub const TAIL_WIDTH: usize = 7;
    pub const ORIGIN: usize = 8;
    pub const PAYLOAD_LEN: usize = 12;
    pub const SEGMENTS: usize = 16;
    pub const ERROR_CODE: usize = 18;
    pub const ERROR_DETAIL: usize = 20;
    pub const RESERVED_B: usize = 22;
    pub const REQUEST: usize = 24;
    pub const DEADLINE: usize = 56;
    pub const TRACE: usize = 64;
    pub const FRAMES_SENT: usize = 72;
}

const INPUT: [&[u8]; 2] = [b"left", b"right"];

fn header_of(message: Message, segments: &[&[u8]]) -> [u8; HEADER_LEN] {
    Header::new(origin(), message, segments, &ProtocolLimits::DEFAULT)
        .expect("a valid header")
        .encode()
}

fn request() -> [u8; HEADER_LEN] {
    fixtures::request(&INPUT).encode()
}

fn result() -> [u8; HEADER_LEN] {
    header_of(Message::Result { call: call() }, &INPUT)
}

fn error() -> [u8; HEADER_LEN] {
    let message = Message::Error {
        call: call(),
        code: ErrorCode::UserFailure,
    };
    header_of(message, &[b"oops"])
}

fn goodbye() -> [u8; HEADER_LEN] {
    header_of(Message::Goodbye { frames_sent: 3 }, &[])
}

fn cancel() -> [u8; HEADER_LEN] {
    header_of(Message::Cancel { call: call() }, &[])
}

/// `bytes` with `value` (little-endian, its width) written at `at`.
fn patch<const N: usize>(
    mut bytes: [u8; HEADER_LEN],
    at: usize,
    value: [u8; N],
) -> [u8; HEADER_LEN] {
    bytes[at..at + N].copy_from_slice(&value);
    bytes
}

fn decode(bytes: &[u8], channel: Channel) -> Result<Header, ProtocolError> {
    Header::decode(bytes, &ctx(channel))
}

/// A whole request frame with `segments` in `out`: header, length table,
/// payload. Returns its length.
fn request_frame(segments: &[&[u8]], out: &mut [u8]) -> usize {
    encode_frame(&fixtures::request(segments), segments, out).expect("fits")
}

pub fn run() {
    use Channel::{Action, Control};
    use ProtocolError as E;
    let rows: [(&str, bool); 26] = [
        (
            "1 short header",
            matches!(decode(&request()[..79], Action), Err(E::ShortHeader { .. })),
        ),
        ("2 long header", {
            let mut long = [0u8; HEADER_LEN + 1];
            long[..HEADER_LEN].copy_from_slice(&request());
            matches!(decode(&long, Action), Err(E::LongHeader { .. }))
        }),
        (
            "3 bad magic",
            matches!(
                decode(&patch(request(), 0, *b"HTTP"), Action),
                Err(E::BadMagic { .. })
            ),
        ),
        (
            "4 another version",
            matches!(
                decode(&patch(request(), at::VERSION, 99u16.to_le_bytes()), Action),
                Err(E::UnsupportedVersion { found: 99 })
            ),
        ),
        (
            "5 unknown kind",
            matches!(
                decode(&patch(request(), at::KIND, [9]), Action),
                Err(E::UnknownKind { code: 9 })
            ),
        ),
        (
            "6 a hello",
            matches!(
                decode(
                    &patch(request(), at::KIND, [MessageKind::Hello.code()]),
                    Action
                ),
                Err(E::UnexpectedHello)
            ),
        ),
        (
            "7 reserved byte",
            matches!(
                decode(&patch(request(), at::RESERVED_B, [1]), Action),
                Err(E::ReservedNotZero)
            ),
        ),
        (
            "8 tail width naming none",
            matches!(
                decode(&patch(request(), at::TAIL_WIDTH, [5]), Action),
                Err(E::InvalidTailWidth { code: 5 })
            ),
        ),
        (
            "9 kind on the wrong channel",
            matches!(decode(&request(), Control), Err(E::ChannelMismatch { .. })),
        ),
        (
            "10 origin outside the world",
            matches!(
                decode(&patch(request(), at::ORIGIN, 9u32.to_le_bytes()), Action),
                Err(E::OriginOutOfWorld { .. })
            ),
        ),
        (
            "11 another origin",
            matches!(
                decode(&patch(request(), at::ORIGIN, 2u32.to_le_bytes()), Action),
                Err(E::OriginMismatch { .. })
            ),
        ),
        (
            "12 zero request id",
            matches!(
                decode(&patch(request(), at::REQUEST, [0u8; 8]), Action),
                Err(E::ZeroId { .. })
            ),
        ),
        (
            "13 zero deadline",
            matches!(
                decode(&patch(request(), at::DEADLINE, [0u8; 8]), Action),
                Err(E::ZeroDeadline)
            ),
        ),
        (
            "14 deadline in a result",
            matches!(
                decode(&patch(result(), at::DEADLINE, 1u64.to_le_bytes()), Action),
                Err(E::UnexpectedField {
                    field: HeaderField::Deadline,
                    ..
                })
            ),
        ),
        (
            "15 trace in a goodbye",
            matches!(
                decode(&patch(goodbye(), at::TRACE, 1u64.to_le_bytes()), Control),
                Err(E::UnexpectedField {
                    kind: MessageKind::Goodbye,
                    field: HeaderField::Trace
                })
            ),
        ),
        (
            "16 error code outside an error",
            matches!(
                decode(
                    &patch(request(), at::ERROR_CODE, 1u16.to_le_bytes()),
                    Action
                ),
                Err(E::UnexpectedField {
                    field: HeaderField::ErrorCode,
                    ..
                })
            ),
        ),
        (
            "17 unknown error code",
            matches!(
                decode(
                    &patch(
                        patch(error(), at::ERROR_CODE, 3u16.to_le_bytes()),
                        at::ERROR_DETAIL,
                        1u16.to_le_bytes()
                    ),
                    Action
                ),
                Err(E::UnknownErrorCode { code: 3, detail: 1 })
            ),
        ),
        (
            "18 frames sent outside a goodbye",
            matches!(
                decode(
                    &patch(request(), at::FRAMES_SENT, 1u64.to_le_bytes()),
                    Action
                ),
                Err(E::UnexpectedField {
                    field: HeaderField::FramesSent,
                    ..
                })
            ),
        ),
        (
            "19 payload in a cancel",
            matches!(
                decode(&patch(cancel(), at::SEGMENTS, 1u16.to_le_bytes()), Control),
                Err(E::UnexpectedPayload { .. })
            ),
        ),
        (
            "20 error without one segment",
            matches!(
                decode(&patch(error(), at::SEGMENTS, 2u16.to_le_bytes()), Action),
                Err(E::ErrorSegmentCount { count: 2 })
            ),
        ),
        (
            "21 too many segments",
            matches!(
                decode(
                    &patch(request(), at::SEGMENTS, u16::MAX.to_le_bytes()),
                    Action
                ),
                Err(E::TooManySegments { .. })
            ),
        ),
        (
            "22 error text too long",
            matches!(
                decode(
                    &patch(error(), at::PAYLOAD_LEN, 1_000_000u32.to_le_bytes()),
                    Action
                ),
                Err(E::ErrorTextTooLong { .. })
            ),
        ),
        (
            "23 frame too large",
            matches!(
                decode(
                    &patch(request(), at::PAYLOAD_LEN, u32::MAX.to_le_bytes()),
                    Action
                ),
                Err(E::FrameTooLarge { .. })
            ),
        ),
        (
            "24 payload with no segments",
            matches!(
                decode(&patch(request(), at::SEGMENTS, 0u16.to_le_bytes()), Action),
                Err(E::LengthMismatch { sum: 0, .. })
            ),
        ),
        (
            "25 tail width on a cancel",
            matches!(
                decode(&patch(cancel(), at::TAIL_WIDTH, [3]), Control),
                Err(E::InvalidTailWidth { code: 3 })
            ),
        ),
        ("26 segment too large", segment_too_large()),
    ];
    for (row, ok) in rows {
        check(format_args!("rejection {row}"), ok);
    }
    frames();
}

/// Row 26: a 5,000-byte segment where at most 4,096 (the smallest limit
/// a hello may carry) are allowed.
fn segment_too_large() -> bool {
    let big = [7u8; 5_000];
    let mut frame = [0u8; 5_200];
    let len = request_frame(&[b"left", &big], &mut frame);
    let mut small = ProtocolLimits::DEFAULT;
    small.max_segment_bytes = 4_096;
    matches!(
        decode_frame(&frame[..len], &ctx_with(Channel::Action, small)),
        Err(ProtocolError::SegmentTooLarge { index: 1, .. })
    )
}

/// Rows 27 to 31: what only the whole frame, or the stream, shows.
fn frames() {
    use ProtocolError as E;
    let mut frame = [0u8; 128];
    let len = request_frame(&INPUT, &mut frame);
    let action = ctx(Channel::Action);
    // The first length entry says 3 instead of 4: the sum falls short.
    let mut short_sum = frame;
    short_sum[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&3u32.to_le_bytes());
    check(
        "rejection 27 lengths that do not add up",
        matches!(
            decode_frame(&short_sum[..len], &action),
            Err(E::LengthMismatch { .. })
        ),
    );
    check(
        "rejection 28 a frame cut short",
        matches!(
            decode_frame(&frame[..len - 1], &action),
            Err(E::Truncated { .. })
        ),
    );
    check(
        "rejection 29 bytes after the frame",
        matches!(
            decode_frame(&frame[..len + 1], &action),
            Err(E::TrailingBytes { .. })
        ),
    );
    let error = Header::new(
        origin(),
        Message::Error {
            call: call(),
            code: ErrorCode::UserFailure,
        },
        &[b"oops"],
        &ProtocolLimits::DEFAULT,
    )
    .expect("a valid error");
    let mut text = [0u8; 128];
    let text_len = encode_frame(&error, &[b"oops"], &mut text).expect("fits");
    text[text_len - 1] = 0xff;
    check(
        "rejection 30 error text not UTF-8",
        matches!(
            decode_frame(&text[..text_len], &action),
            Err(E::ErrorTextNotUtf8 { valid_up_to: 3 })
        ),
    );
    let mut stream = StreamDecoder::new(action);
    let mut input = &frame[..len - 5];
    let mut fed = true;
    while !input.is_empty() {
        match stream.decode(input) {
            Ok((used, _)) => input = &input[used..],
            Err(_) => {
                fed = false;
                break;
            }
        }
    }
    check(
        "rejection 31 a stream closed inside a frame",
        fed && matches!(stream.finish(), Err(E::Truncated { .. })),
    );
}
