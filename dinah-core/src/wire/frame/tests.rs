use super::*;
use crate::wire::test_support::*;
use crate::wire::{Channel, ErrorCode, Message, ProtocolError as E};

extern crate std;
use std::vec::Vec;

#[test]
fn every_kind_round_trips_whole() {
    for (message, channel) in every_message() {
        let bytes = frame_of(message);
        let frame = decode_frame(&bytes, &ctx(channel)).unwrap();
        assert_eq!(frame.header(), &header_of(message));
        let segments: Vec<&[u8]> = frame.segments().collect();
        assert_eq!(segments, payload_of(&message), "{message:?}");
        assert_eq!(frame.segments().len(), segments.len());
        assert_eq!(frame.payload(), payload_of(&message).concat());
        for (index, segment) in segments.iter().enumerate() {
            assert_eq!(frame.segment(index), Some(*segment));
        }
        assert_eq!(frame.segment(segments.len()), None);
        match message {
            Message::Error { .. } => assert_eq!(frame.error_text(), Some("caf\u{e9} failed")),
            _ => assert_eq!(frame.error_text(), None),
        }
    }
}

#[test]
fn frame_layout_is_header_table_payload() {
    let bytes = frame_of(request());
    // Three segments: "left", "", "right".
    assert_eq!(&bytes[80..92], &[4, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0]);
    assert_eq!(&bytes[92..], b"leftright");
}

#[test]
fn whole_message_length_errors() {
    let bytes = frame_of(request());
    let ctx = ctx(Channel::Action);
    assert_eq!(
        decode_frame(&bytes[..10], &ctx),
        Err(E::ShortHeader { len: 10 })
    );
    // Cut inside the length table, then inside the payload.
    for cut in [84, 91, 92, 100] {
        assert_eq!(
            decode_frame(&bytes[..cut], &ctx),
            Err(E::Truncated {
                expected: 101,
                actual: cut
            }),
            "{cut}"
        );
    }
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(
        decode_frame(&long, &ctx),
        Err(E::TrailingBytes {
            expected: 101,
            actual: 102
        })
    );
    // A header-only message with a byte too many.
    let mut goodbye = frame_of(Message::Goodbye { frames_sent: 1 });
    goodbye.push(7);
    assert_eq!(
        decode_frame(&goodbye, &ctx),
        Err(E::TrailingBytes {
            expected: 80,
            actual: 81
        })
    );
}

#[test]
fn length_table_errors() {
    let ctx = ctx(Channel::Action);
    // Running sum past the declared 9 bytes at the first entry.
    let bytes = patched(frame_of(request()), 80, &10u32.to_le_bytes());
    assert_eq!(
        decode_frame(&bytes, &ctx),
        Err(E::LengthMismatch {
            declared: 9,
            sum: 10
        })
    );
    // Falling short after the last entry.
    let bytes = patched(frame_of(request()), 88, &4u32.to_le_bytes());
    assert_eq!(
        decode_frame(&bytes, &ctx),
        Err(E::LengthMismatch {
            declared: 9,
            sum: 8
        })
    );
    // Over the segment limit, even inside a truncated frame.
    let small = small_ctx(Channel::Action);
    let bytes = patched(frame_of(request()), 84, &65u32.to_le_bytes());
    assert_eq!(
        decode_frame(&bytes[..88], &small),
        Err(E::SegmentTooLarge {
            index: 1,
            len: 65,
            max: 64
        })
    );
}

#[test]
fn error_text_must_be_utf8() {
    let message = Message::Error {
        call: call(),
        code: ErrorCode::HandlerPanicked,
    };
    let mut bytes = frame_of(message);
    let last = bytes.len() - 1;
    bytes[last] = 0xC3;
    let text_len = payload_of(&message)[0].len() as u32;
    assert_eq!(
        decode_frame(&bytes, &ctx(Channel::Action)),
        Err(E::ErrorTextNotUtf8 {
            valid_up_to: text_len - 1
        })
    );
}

#[test]
fn encoding_checks_segments_and_room() {
    let header = header_of(request());
    let segments = payload_of(&request());
    let mut out = [0u8; 256];
    assert_eq!(
        encode_frame(&header, &segments[..2], &mut out),
        Err(E::SegmentCountMismatch {
            declared: 3,
            actual: 2
        })
    );
    assert_eq!(
        encode_frame(&header, &[b"left".as_slice(), b"", b"righ"], &mut out),
        Err(E::LengthMismatch {
            declared: 9,
            sum: 8
        })
    );
    assert_eq!(
        encode_frame(&header, &segments, &mut out[..100]),
        Err(E::BufferTooSmall {
            needed: 101,
            available: 100
        })
    );
    assert_eq!(
        encode_head(&header, &segments, &mut out[..91]),
        Err(E::BufferTooSmall {
            needed: 92,
            available: 91
        })
    );
    assert_eq!(
        encode_head(&header, &segments, &mut out[..79]),
        Err(E::BufferTooSmall {
            needed: 92,
            available: 79
        })
    );
    assert_eq!(encode_head(&header, &segments, &mut out), Ok(92));
    assert_eq!(&out[..92], &frame_of(request())[..92]);

    let error = Message::Error {
        call: call(),
        code: ErrorCode::UserFailure,
    };
    let header = header_of(error);
    let bad_text = [0xFFu8; 12];
    assert_eq!(header.payload_len(), 12);
    assert_eq!(
        encode_frame(&header, &[&bad_text], &mut out),
        Err(E::ErrorTextNotUtf8 { valid_up_to: 0 })
    );
}

#[test]
fn segments_iterator_is_exact_and_fused() {
    let bytes = frame_of(request());
    let frame = decode_frame(&bytes, &ctx(Channel::Action)).unwrap();
    let mut segments = frame.segments();
    assert_eq!(segments.size_hint(), (3, Some(3)));
    assert_eq!(segments.next(), Some(b"left".as_slice()));
    assert_eq!(segments.len(), 2);
    assert_eq!(segments.next(), Some(b"".as_slice()));
    assert_eq!(segments.next(), Some(b"right".as_slice()));
    assert_eq!(segments.next(), None);
    assert_eq!(segments.next(), None);
}

#[test]
fn a_decoded_frame_viewed_again_is_the_same_frame() {
    for (message, channel) in every_message() {
        let bytes = frame_of(message);
        let frame = decode_frame(&bytes, &ctx(channel)).unwrap();
        let again = FrameRef::from_decoded(*frame.header(), &bytes);
        assert_eq!(again, Some(frame), "{message:?}");
    }
}

#[test]
fn viewing_other_bytes_again_never_panics() {
    let bytes = frame_of(request());
    let header = *decode_frame(&bytes, &ctx(Channel::Action))
        .unwrap()
        .header();
    // Wrong length: refused.
    assert_eq!(
        FrameRef::from_decoded(header, &bytes[..bytes.len() - 1]),
        None
    );
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(FrameRef::from_decoded(header, &longer), None);
    // Right length, other bytes: segments are meaningless but bounded.
    for fill in [0x00, 0xff] {
        let other = std::vec![fill; bytes.len()];
        let frame = FrameRef::from_decoded(header, &other).unwrap();
        let total: usize = frame.segments().map(<[u8]>::len).sum();
        assert!(total <= frame.payload().len());
    }
}
