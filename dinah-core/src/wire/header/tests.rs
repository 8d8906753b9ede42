use super::decode::decode_message;
use super::*;
use crate::wire::test_support::*;
use crate::wire::{Channel, DecodeContext, ErrorCode, HeaderField, ProtocolError as E};
use crate::{IdKind, LimitField, WorldSize};

extern crate std;
use std::vec::Vec;

fn decode(bytes: &[u8], channel: Channel) -> Result<Header, ProtocolError> {
    Header::decode(bytes, &ctx(channel))
}

/// The encoded request header of the fixtures, written out by hand from the
/// layout table.
const GOLDEN_REQUEST: &str = concat!(
    "444e4148060001000100000009000000",
    "03000000000000008877665544332211",
    "100f0e0d0c0b0a090807060504030201",
    "030000000000000000ca9a3b00000000",
    "edfe0000000000000000000000000000",
);

fn hex(bytes: &[u8]) -> std::string::String {
    bytes.iter().map(|b| std::format!("{b:02x}")).collect()
}

#[test]
fn request_header_matches_the_documented_layout() {
    let header = header_of(request());
    assert_eq!(hex(&header.encode()), GOLDEN_REQUEST);
    assert_eq!(header.segment_count(), 3);
    assert_eq!(header.payload_len(), 9);
    assert_eq!(header.head_len(), HEADER_LEN + 12);
    assert_eq!(header.frame_len(), HEADER_LEN + 12 + 9);
}

#[test]
fn every_kind_round_trips_on_its_channel() {
    for (message, channel) in every_message() {
        let header = header_of(message);
        let bytes = header.encode();
        assert_eq!(decode(&bytes, channel), Ok(header), "{message:?}");
        assert_eq!(header.kind(), message.kind());
        assert_eq!(header.message(), &message);
        assert_eq!(header.origin(), rank(1));
        let mut again = [0xAA; HEADER_LEN];
        header.encode_into(&mut again);
        assert_eq!(again, bytes);
    }
    // Goodbye is allowed on the action channel too.
    let goodbye = header_of(Message::Goodbye { frames_sent: 0 });
    assert_eq!(decode(&goodbye.encode(), Channel::Action), Ok(goodbye));
}

#[test]
fn no_trace_encodes_as_zero() {
    let mut call = call();
    call.trace = None;
    let header = header_of(Message::Cancel { call });
    let bytes = header.encode();
    assert_eq!(&bytes[at::TRACE..at::TRACE + 8], &[0; 8]);
    assert_eq!(decode(&bytes, Channel::Control), Ok(header));
}

#[test]
fn length_is_checked_first() {
    let bytes = header_of(request()).encode();
    assert_eq!(
        decode(&bytes[..79], Channel::Action),
        Err(E::ShortHeader { len: 79 })
    );
    assert_eq!(decode(&[], Channel::Action), Err(E::ShortHeader { len: 0 }));
    let mut long = bytes.to_vec();
    long.push(0);
    assert_eq!(
        decode(&long, Channel::Action),
        Err(E::LongHeader { len: 81 })
    );
}

fn request_bytes() -> Vec<u8> {
    header_of(request()).encode().to_vec()
}

fn expect(bytes: Vec<u8>, channel: Channel, error: ProtocolError) {
    assert_eq!(decode(&bytes, channel), Err(error));
}

#[test]
fn magic_version_kind_and_reserved_bytes() {
    expect(
        patched(request_bytes(), 0, b"DNAX"),
        Channel::Action,
        E::BadMagic { found: *b"DNAX" },
    );
    expect(
        patched(request_bytes(), 4, &1u16.to_le_bytes()),
        Channel::Action,
        E::UnsupportedVersion { found: 1 },
    );
    expect(
        patched(request_bytes(), 4, &0u16.to_le_bytes()),
        Channel::Action,
        E::UnsupportedVersion { found: 0 },
    );
    for code in [0u8, 8, 0xFF] {
        expect(
            patched(request_bytes(), 6, &[code]),
            Channel::Action,
            E::UnknownKind { code },
        );
    }
    expect(
        patched(request_bytes(), 6, &[MessageKind::Hello.code()]),
        Channel::Action,
        E::UnexpectedHello,
    );
    for at in [22, 23] {
        expect(
            patched(request_bytes(), at, &[1]),
            Channel::Action,
            E::ReservedNotZero,
        );
    }
    for code in [5u8, 8, 0xFF] {
        expect(
            patched(request_bytes(), 7, &[code]),
            Channel::Action,
            E::InvalidTailWidth { code },
        );
    }
}

#[test]
fn the_tail_width_round_trips_on_requests_and_results_with_a_segment() {
    for (message, channel) in every_message() {
        let header = header_of(message);
        assert_eq!(header.tail_width(), TailWidth::One);
        let carries = matches!(message, Message::Request { .. } | Message::Result { .. });
        for width in TailWidth::ALL {
            let widened = header.with_tail_width(width);
            if width == TailWidth::One || carries {
                let widened = widened.expect("allowed");
                assert_eq!(widened.tail_width(), width);
                let bytes = widened.encode();
                assert_eq!(bytes[7], width.log2());
                assert_eq!(decode(&bytes, channel), Ok(widened));
            } else {
                assert_eq!(widened, Err(E::InvalidTailWidth { code: width.log2() }));
                let bytes = patched(header.encode().to_vec(), 7, &[width.log2()]);
                expect(bytes, channel, E::InvalidTailWidth { code: width.log2() });
            }
        }
    }
    // A request without segments has no last segment to be wide.
    let empty = Header::without_payload(rank(1), request()).unwrap();
    assert_eq!(
        empty.with_tail_width(TailWidth::Eight),
        Err(E::InvalidTailWidth { code: 3 })
    );
    let bytes = patched(empty.encode().to_vec(), 7, &[3]);
    expect(bytes, Channel::Action, E::InvalidTailWidth { code: 3 });
}

#[test]
fn channel_and_origin() {
    expect(
        request_bytes(),
        Channel::Control,
        E::ChannelMismatch {
            kind: MessageKind::Request,
            channel: Channel::Control,
        },
    );
    let cancel = header_of(Message::Cancel { call: call() })
        .encode()
        .to_vec();
    expect(
        cancel,
        Channel::Action,
        E::ChannelMismatch {
            kind: MessageKind::Cancel,
            channel: Channel::Action,
        },
    );
    expect(
        patched(request_bytes(), 8, &WORLD.to_le_bytes()),
        Channel::Action,
        E::OriginOutOfWorld {
            origin: WORLD,
            world_size: WORLD,
        },
    );
    expect(
        patched(request_bytes(), 8, &u32::MAX.to_le_bytes()),
        Channel::Action,
        E::OriginOutOfWorld {
            origin: u32::MAX,
            world_size: WORLD,
        },
    );
    expect(
        patched(request_bytes(), 8, &2u32.to_le_bytes()),
        Channel::Action,
        E::OriginMismatch {
            origin: rank(2),
            source: rank(1),
        },
    );
}

#[test]
fn every_runtime_kind_requires_its_three_ids() {
    for (message, channel) in every_message() {
        let kind = message.kind();
        if matches!(kind, MessageKind::Goodbye | MessageKind::Heartbeat) {
            continue;
        }
        let bytes = header_of(message).encode().to_vec();
        for (at, len, id) in [
            (at::REQUEST, 8, IdKind::Request),
            (at::ACTION, 16, IdKind::Action),
            (at::DOMAIN, 8, IdKind::Domain),
        ] {
            let zeroed = patched(bytes.clone(), at, &[0; 16][..len]);
            expect(zeroed, channel, E::ZeroId { kind, id });
        }
        // Request is checked before action, action before domain.
        let all_zero = patched(bytes.clone(), at::REQUEST, &[0; 32]);
        expect(
            all_zero,
            channel,
            E::ZeroId {
                kind,
                id: IdKind::Request,
            },
        );
    }
}

#[test]
fn deadline_rules() {
    expect(
        patched(request_bytes(), at::DEADLINE, &[0; 8]),
        Channel::Action,
        E::ZeroDeadline,
    );
    for message in [
        Message::Result { call: call() },
        Message::Error {
            call: call(),
            code: ErrorCode::Cancelled,
        },
    ] {
        let bytes = patched(header_of(message).encode().to_vec(), at::DEADLINE, &[1]);
        expect(
            bytes,
            Channel::Action,
            E::UnexpectedField {
                kind: message.kind(),
                field: HeaderField::Deadline,
            },
        );
    }
    let cancel = header_of(Message::Cancel { call: call() })
        .encode()
        .to_vec();
    expect(
        patched(cancel, at::DEADLINE, &[1]),
        Channel::Control,
        E::UnexpectedField {
            kind: MessageKind::Cancel,
            field: HeaderField::Deadline,
        },
    );
}

#[test]
fn error_code_rules() {
    // Only error frames carry one.
    for at in [at::ERROR_CODE, at::ERROR_DETAIL] {
        expect(
            patched(request_bytes(), at, &[1]),
            Channel::Action,
            E::UnexpectedField {
                kind: MessageKind::Request,
                field: HeaderField::ErrorCode,
            },
        );
    }
    let error = header_of(Message::Error {
        call: call(),
        code: ErrorCode::ResourceExhausted {
            limit: LimitField::MaxActionQueue,
        },
    })
    .encode()
    .to_vec();
    assert!(decode(&error, Channel::Action).is_ok());
    for (code, detail) in [(0u16, 0u16), (11, 0), (3, 1), (7, 0), (7, 18)] {
        let bytes = patched(error.clone(), at::ERROR_CODE, &code.to_le_bytes());
        let bytes = patched(bytes, at::ERROR_DETAIL, &detail.to_le_bytes());
        expect(bytes, Channel::Action, E::UnknownErrorCode { code, detail });
    }
}

#[test]
fn frames_sent_only_in_goodbye() {
    for (message, channel) in every_message() {
        if message.kind() == MessageKind::Goodbye {
            continue;
        }
        let bytes = patched(header_of(message).encode().to_vec(), at::FRAMES_SENT, &[1]);
        expect(
            bytes,
            channel,
            E::UnexpectedField {
                kind: message.kind(),
                field: HeaderField::FramesSent,
            },
        );
    }
}

/// The fields a transport frame carries no value in, with their offsets.
const CALL_FIELDS: [(usize, HeaderField); 7] = [
    (at::REQUEST, HeaderField::Request),
    (at::ACTION, HeaderField::Action),
    (at::DOMAIN, HeaderField::Domain),
    (at::DEADLINE, HeaderField::Deadline),
    (at::TRACE, HeaderField::Trace),
    (at::ERROR_CODE, HeaderField::ErrorCode),
    (at::ERROR_DETAIL, HeaderField::ErrorCode),
];

/// Each of `fields` set in `message`'s header is refused, naming it.
fn carries_nothing_in(message: Message, fields: &[(usize, HeaderField)]) {
    let bytes = header_of(message).encode().to_vec();
    for &(at, field) in fields {
        expect(
            patched(bytes.clone(), at, &[1]),
            Channel::Control,
            E::UnexpectedField {
                kind: message.kind(),
                field,
            },
        );
    }
}

#[test]
fn goodbye_carries_nothing_else() {
    carries_nothing_in(
        Message::Goodbye {
            frames_sent: u64::MAX,
        },
        &CALL_FIELDS,
    );
}

#[test]
fn a_heartbeat_carries_nothing_and_only_on_the_control_channel() {
    let heartbeat = header_of(Message::Heartbeat).encode().to_vec();
    assert_eq!(
        decode(&heartbeat, Channel::Control).map(|h| *h.message()),
        Ok(Message::Heartbeat)
    );
    assert!(decode(&heartbeat, Channel::Action).is_err());
    carries_nothing_in(Message::Heartbeat, &CALL_FIELDS);
    carries_nothing_in(
        Message::Heartbeat,
        &[(at::FRAMES_SENT, HeaderField::FramesSent)],
    );
}

fn shaped(message: Message, segments: u16, payload: u32) -> Vec<u8> {
    let bytes = header_of(message).encode().to_vec();
    let bytes = patched(bytes, at::SEGMENTS, &segments.to_le_bytes());
    patched(bytes, at::PAYLOAD_LEN, &payload.to_le_bytes())
}

#[test]
fn payload_shape_rules() {
    let cancel = Message::Cancel { call: call() };
    for (segments, bytes) in [(1, 0), (0, 1), (2, 7)] {
        expect(
            shaped(cancel, segments, bytes),
            Channel::Control,
            E::UnexpectedPayload {
                kind: MessageKind::Cancel,
                segments,
                bytes,
            },
        );
    }
    let goodbye = Message::Goodbye { frames_sent: 1 };
    expect(
        shaped(goodbye, 0, 5),
        Channel::Action,
        E::UnexpectedPayload {
            kind: MessageKind::Goodbye,
            segments: 0,
            bytes: 5,
        },
    );
    let error = Message::Error {
        call: call(),
        code: ErrorCode::UnknownAction,
    };
    for count in [0, 2] {
        expect(
            shaped(error, count, 0),
            Channel::Action,
            E::ErrorSegmentCount { count },
        );
    }
    let small = small_ctx(Channel::Action);
    let check = |bytes: Vec<u8>| Header::decode(&bytes, &small);
    assert_eq!(
        check(shaped(request(), 5, 0)),
        Err(E::TooManySegments { count: 5, max: 4 })
    );
    assert_eq!(
        check(shaped(error, 1, 33)),
        Err(E::ErrorTextTooLong { len: 33, max: 32 })
    );
    assert!(check(shaped(error, 1, 32)).is_ok());
    // 80 + 4 * 4 + 161 = 257 > 256.
    assert_eq!(
        check(shaped(request(), 4, 161)),
        Err(E::FrameTooLarge { len: 257, max: 256 })
    );
    assert!(check(shaped(request(), 4, 160)).is_ok());
    assert_eq!(
        check(shaped(request(), 0, 1)),
        Err(E::LengthMismatch {
            declared: 1,
            sum: 0
        })
    );
    // The largest declared payload is reported without overflow.
    assert_eq!(
        decode(&shaped(request(), 64, u32::MAX), Channel::Action),
        Err(E::FrameTooLarge {
            len: 80 + 256 + u64::from(u32::MAX),
            max: ProtocolLimits::DEFAULT.max_frame_bytes
        })
    );
}

#[test]
fn building_checks_what_the_receiver_will_check() {
    let limits = small_limits();
    let origin = rank(1);
    // Every case is built both ways, from slices and packed, with the
    // same outcome.
    let new = |message, segments: &[&[u8]]| {
        let split = Header::new(origin, message, segments, &limits);
        let packed: Vec<u8> = segments.iter().flat_map(|s| s.iter().copied()).collect();
        let lens = segments.iter().map(|s| s.len());
        assert_eq!(
            Header::packed(origin, message, lens, &packed, &limits),
            split
        );
        split
    };
    assert_eq!(
        new(Message::Cancel { call: call() }, &[b"x"]),
        Err(E::UnexpectedPayload {
            kind: MessageKind::Cancel,
            segments: 1,
            bytes: 1
        })
    );
    let error = Message::Error {
        call: call(),
        code: ErrorCode::ShuttingDown,
    };
    assert_eq!(new(error, &[]), Err(E::ErrorSegmentCount { count: 0 }));
    assert_eq!(
        new(error, &[b"a", b"b"]),
        Err(E::ErrorSegmentCount { count: 2 })
    );
    assert_eq!(
        new(error, &[&[b'x'; 33]]),
        Err(E::ErrorTextTooLong { len: 33, max: 32 })
    );
    assert_eq!(
        new(error, &[b"ok\xFF"]),
        Err(E::ErrorTextNotUtf8 { valid_up_to: 2 })
    );
    assert_eq!(
        new(request(), &[b"", b"", b"", b"", b""]),
        Err(E::TooManySegments { count: 5, max: 4 })
    );
    assert_eq!(
        new(request(), &[&[0; 65]]),
        Err(E::SegmentTooLarge {
            index: 0,
            len: 65,
            max: 64
        })
    );
    let big = [0u8; 64];
    assert_eq!(
        new(request(), &[&big, &big, &big]),
        Err(E::FrameTooLarge {
            len: 80 + 12 + 192,
            max: 256
        })
    );
    let ok = new(request(), &[b"", &big]).unwrap();
    assert_eq!((ok.segment_count(), ok.payload_len()), (2, 64));
    // Packed lengths must cover the buffer exactly.
    assert_eq!(
        Header::packed(origin, request(), [1, 1], b"abc", &limits),
        Err(E::LengthMismatch {
            declared: 3,
            sum: 2
        })
    );
    assert_eq!(
        Header::packed(origin, request(), [4], b"abc", &limits),
        Err(E::LengthMismatch {
            declared: 3,
            sum: 4
        })
    );

    // More segments than a u16 can count saturate.
    let many: Vec<&[u8]> = std::vec![b"".as_slice(); usize::from(u16::MAX) + 2];
    assert_eq!(
        Header::new(origin, request(), &many, &ProtocolLimits::DEFAULT),
        Err(E::TooManySegments {
            count: u16::MAX,
            max: ProtocolLimits::DEFAULT.max_segments
        })
    );

    assert_eq!(
        Header::without_payload(origin, error),
        Err(E::ErrorSegmentCount { count: 0 })
    );
    let goodbye = Header::without_payload(origin, Message::Goodbye { frames_sent: 2 }).unwrap();
    assert_eq!((goodbye.segment_count(), goodbye.payload_len()), (0, 0));
    assert_eq!(goodbye.frame_len(), HEADER_LEN);
}

#[test]
fn hello_kind_is_total_in_the_field_decoder() {
    let bytes = header_of(request()).encode();
    assert_eq!(
        decode_message(&bytes, MessageKind::Hello),
        Err(E::UnexpectedHello)
    );
}

#[test]
fn a_world_of_one_accepts_only_rank_zero() {
    let world = WorldSize::ONE;
    let ctx =
        DecodeContext::new(Channel::Action, Rank::ZERO, world, ProtocolLimits::DEFAULT).unwrap();
    let header = Header::new(Rank::ZERO, request(), &[b"x"], &ProtocolLimits::DEFAULT).unwrap();
    assert_eq!(Header::decode(&header.encode(), &ctx), Ok(header));
    let bytes = patched(header.encode().to_vec(), at::ORIGIN, &1u32.to_le_bytes());
    assert_eq!(
        Header::decode(&bytes, &ctx),
        Err(E::OriginOutOfWorld {
            origin: 1,
            world_size: 1
        })
    );
}

/// Every byte of every kind's header replaced by every other value: the
/// result is rejected, or decodes to a different header that re-encodes to
/// exactly the corrupted bytes (decoding is canonical), and nothing panics.
#[test]
fn every_single_byte_corruption_is_rejected_or_canonical() {
    let step = if cfg!(miri) { 51 } else { 1 };
    for (message, channel) in every_message() {
        let original = header_of(message);
        let bytes = original.encode();
        let ctx = ctx(channel);
        for position in 0..HEADER_LEN {
            for delta in (1..=255u8).step_by(step) {
                let mut corrupted = bytes;
                corrupted[position] = corrupted[position].wrapping_add(delta);
                if let Ok(decoded) = Header::decode(&corrupted, &ctx) {
                    assert_ne!(decoded, original, "{message:?} @{position}+{delta}");
                    assert_eq!(
                        decoded.encode(),
                        corrupted,
                        "{message:?} @{position}+{delta}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_stamped_request_decodes_with_the_new_id_and_nothing_else_changed() {
    let header = header_of(request());
    let mut frame = header.encode().to_vec();
    let id = crate::RequestId::new(0x0102_0304).expect("non-zero");
    super::stamp_request_id(&mut frame, id).expect("a request frame");
    let stamped = decode(&frame, Channel::Action).expect("still valid");
    let (
        Message::Request { call, deadline },
        Message::Request {
            call: was,
            deadline: was_due,
        },
    ) = (*stamped.message(), *header.message())
    else {
        panic!("requests before and after");
    };
    assert_eq!(call.request, id);
    assert_eq!(
        (call.action, call.domain, call.trace),
        (was.action, was.domain, was.trace)
    );
    assert_eq!(deadline, was_due);
    let mut short = frame[..HEADER_LEN - 1].to_vec();
    assert_eq!(
        super::stamp_request_id(&mut short, id),
        Err(E::ShortHeader {
            len: HEADER_LEN - 1
        })
    );
    for (message, _) in every_message() {
        let other = header_of(message);
        if other.kind() != MessageKind::Request {
            let mut bytes = other.encode().to_vec();
            let before = bytes.clone();
            assert_eq!(
                super::stamp_request_id(&mut bytes, id),
                Err(E::NotARequest {
                    code: other.kind().code()
                })
            );
            assert_eq!(bytes, before, "nothing written");
        }
    }
}
