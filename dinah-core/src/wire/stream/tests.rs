use super::*;
use crate::wire::test_support::*;
use crate::wire::{Channel, ErrorCode, FrameAssembler, Message, ProtocolError as E, decode_frame};

extern crate std;
use std::vec::Vec;

/// What a decoded frame looked like, for comparisons.
#[derive(Debug, PartialEq)]
struct Decoded {
    header: Header,
    lengths: Vec<u32>,
    payload: Vec<u8>,
}

/// Feeds `bytes` in chunks of `chunk` bytes; returns the frames and the
/// first error.
fn run(
    decoder: &mut StreamDecoder,
    bytes: &[u8],
    chunk: usize,
) -> (Vec<Decoded>, Option<ProtocolError>) {
    let mut frames = Vec::new();
    let mut current: Option<Decoded> = None;
    for piece in bytes.chunks(chunk) {
        let mut input = piece;
        loop {
            match decoder.decode(input) {
                Err(error) => return (frames, Some(error)),
                Ok((used, event)) => {
                    input = &input[used..];
                    match event {
                        None => break,
                        Some(StreamEvent::FrameStart(header)) => {
                            current = Some(Decoded {
                                header,
                                lengths: Vec::new(),
                                payload: Vec::new(),
                            });
                        }
                        Some(StreamEvent::SegmentLength { index, len }) => {
                            let frame = current.as_mut().unwrap();
                            assert_eq!(usize::from(index), frame.lengths.len());
                            frame.lengths.push(len);
                        }
                        Some(StreamEvent::Payload(bytes)) => {
                            assert!(!bytes.is_empty());
                            current.as_mut().unwrap().payload.extend_from_slice(bytes);
                        }
                        Some(StreamEvent::FrameEnd) => frames.push(current.take().unwrap()),
                    }
                }
            }
        }
        assert!(input.is_empty());
    }
    (frames, None)
}

fn expected(message: Message) -> Decoded {
    Decoded {
        header: header_of(message),
        lengths: payload_of(&message)
            .iter()
            .map(|s| s.len() as u32)
            .collect(),
        payload: payload_of(&message).concat(),
    }
}

#[test]
fn every_kind_decodes_at_every_chunk_size() {
    for (message, channel) in every_message() {
        let bytes = frame_of(message);
        let mut stream = bytes.clone();
        stream.extend_from_slice(&bytes);
        for chunk in [1, 2, 3, 5, 79, 80, 81, 84, 1000] {
            let mut decoder = StreamDecoder::new(ctx(channel));
            let (frames, error) = run(&mut decoder, &stream, chunk);
            assert_eq!(error, None);
            assert_eq!(frames, [expected(message), expected(message)], "{chunk}");
            assert_eq!(decoder.frames(), 2);
            assert!(decoder.at_frame_boundary());
            assert_eq!(decoder.finish(), Ok(()));
        }
    }
}

#[test]
fn a_frame_can_end_without_consuming_input() {
    let bytes = frame_of(Message::Goodbye { frames_sent: 3 });
    let mut decoder = StreamDecoder::new(ctx(Channel::Control));
    let (used, event) = decoder.decode(&bytes).unwrap();
    assert_eq!(used, HEADER_LEN);
    assert!(matches!(event, Some(StreamEvent::FrameStart(_))));
    assert!(!decoder.at_frame_boundary());
    assert_eq!(decoder.finish(), Ok(()));
    assert_eq!(decoder.decode(&[]), Ok((0, Some(StreamEvent::FrameEnd))));
    assert_eq!(decoder.decode(&[]), Ok((0, None)));
    assert_eq!(decoder.frames(), 1);
}

#[test]
fn errors_match_whole_message_decoding_and_stick() {
    let ctx = ctx(Channel::Action);
    let good = frame_of(request());
    let bad_cases = [
        patched(frame_of(request()), 0, b"XXXX"),
        patched(frame_of(request()), 80, &10u32.to_le_bytes()),
        patched(frame_of(request()), 88, &4u32.to_le_bytes()),
        {
            let message = Message::Error {
                call: call(),
                code: ErrorCode::UnknownDomain,
            };
            let mut bytes = frame_of(message);
            bytes[84] = 0x80;
            bytes
        },
        {
            let message = Message::Error {
                call: call(),
                code: ErrorCode::UnknownDomain,
            };
            let mut bytes = frame_of(message);
            let last = bytes.len() - 1;
            bytes[last] = 0xE2;
            bytes
        },
    ];
    for bad in bad_cases {
        let whole = decode_frame(&bad, &ctx).unwrap_err();
        let mut stream = good.clone();
        stream.extend_from_slice(&bad);
        stream.extend_from_slice(&good);
        for chunk in [1, 7, 4096] {
            let mut decoder = StreamDecoder::new(ctx);
            let (frames, error) = run(&mut decoder, &stream, chunk);
            assert_eq!(frames.len(), 1);
            assert_eq!(error, Some(whole), "{chunk}");
            assert_eq!(decoder.error(), Some(whole));
            assert_eq!(decoder.decode(&good), Err(whole));
            assert_eq!(decoder.finish(), Err(whole));
        }
    }
}

#[test]
fn oversized_lengths_are_rejected_before_any_payload_byte() {
    let ctx = small_ctx(Channel::Action);
    // The header claims a 4 GiB payload: rejected at its last byte.
    let mut bytes = frame_of(request());
    bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut decoder = StreamDecoder::new(ctx);
    let mut consumed = 0;
    let error = loop {
        match decoder.decode(&bytes[consumed..consumed + 1]) {
            Ok((used, _)) => consumed += used,
            Err(error) => break error,
        }
    };
    assert_eq!(consumed, HEADER_LEN - 1);
    assert!(matches!(error, E::FrameTooLarge { .. }), "{error:?}");

    // A length table entry over the segment limit: rejected at its last
    // byte, before the payload.
    let bytes = patched(frame_of(request()), 84, &65u32.to_le_bytes());
    let mut decoder = StreamDecoder::new(ctx);
    let mut consumed = 0;
    let error = loop {
        match decoder.decode(&bytes[consumed..]) {
            Ok((used, _)) => consumed += used,
            Err(error) => break error,
        }
    };
    assert_eq!(consumed, HEADER_LEN + 4);
    assert_eq!(
        error,
        E::SegmentTooLarge {
            index: 1,
            len: 65,
            max: 64
        }
    );
}

#[test]
fn finish_reports_where_the_stream_was_cut() {
    let bytes = frame_of(request());
    for (cut, expected) in [
        (0, None),
        (10, Some(80)),
        (80, Some(101)),
        (90, Some(101)),
        (95, Some(101)),
    ] {
        let mut decoder = StreamDecoder::new(ctx(Channel::Action));
        let (_, error) = run(&mut decoder, &bytes[..cut], 1);
        assert_eq!(error, None);
        let result = decoder.finish();
        match expected {
            None => assert_eq!(result, Ok(())),
            Some(expected) => assert_eq!(
                result,
                Err(E::Truncated {
                    expected,
                    actual: cut
                }),
                "{cut}"
            ),
        }
    }
}

#[test]
fn empty_error_text_and_empty_segments() {
    let limits = crate::ProtocolLimits::DEFAULT;
    let message = Message::Error {
        call: call(),
        code: ErrorCode::Cancelled,
    };
    let header = Header::new(rank(1), message, &[b""], &limits).unwrap();
    let mut bytes = std::vec![0; header.frame_len()];
    crate::wire::encode_frame(&header, &[b""], &mut bytes).unwrap();
    let mut decoder = StreamDecoder::new(ctx(Channel::Action));
    let (frames, error) = run(&mut decoder, &bytes, 1);
    assert_eq!(error, None);
    assert_eq!(frames[0].lengths, [0]);
    assert!(frames[0].payload.is_empty());
    assert_eq!(decoder.context().channel(), Channel::Action);
}

#[test]
fn assembler_yields_whole_frames_in_one_buffer() {
    let mut stream = Vec::new();
    let messages = every_message();
    for (message, _) in messages {
        if message.kind().allowed_on(Channel::Action) {
            stream.extend_from_slice(&frame_of(message));
        }
    }
    for chunk in [1, 3, 64, 4096] {
        let mut assembler =
            FrameAssembler::new(std::vec![0u8; 4096], kib_ctx(Channel::Action)).unwrap();
        let mut seen = Vec::new();
        for piece in stream.chunks(chunk) {
            let mut input = piece;
            loop {
                let (used, frame) = assembler.push(input).unwrap();
                input = &input[used..];
                match frame {
                    Some(frame) => {
                        let segments: Vec<&[u8]> = frame.segments().collect();
                        assert_eq!(segments, payload_of(frame.header().message()));
                        seen.push(*frame.header().message());
                    }
                    None => break,
                }
            }
        }
        assert_eq!(seen.len(), 4, "{chunk}");
        assert_eq!(assembler.decoder().frames(), 4);
        assert_eq!(assembler.finish(), Ok(()));
    }
}

#[test]
fn assembler_needs_room_for_the_largest_frame_and_stays_failed() {
    let ctx = small_ctx(Channel::Action);
    assert_eq!(
        FrameAssembler::new([0u8; 255], ctx).unwrap_err(),
        E::BufferTooSmall {
            needed: 256,
            available: 255
        }
    );
    let mut assembler = FrameAssembler::new([0u8; 256], ctx).unwrap();
    let bad = patched(frame_of(request()), 0, b"nope");
    let error = assembler.push(&bad).unwrap_err();
    assert_eq!(error, E::BadMagic { found: *b"nope" });
    assert_eq!(assembler.push(&frame_of(request())).unwrap_err(), error);
    assert_eq!(assembler.finish(), Err(error));
    assert_eq!(assembler.into_inner().len(), 256);
}

#[test]
fn whole_frames_decode_in_one_step_and_partial_ones_are_left_alone() {
    for (message, channel) in every_message() {
        let bytes = frame_of(message);
        let mut decoder = StreamDecoder::new(ctx(channel));
        // Short by a byte: declined, nothing consumed or counted.
        assert_eq!(decoder.decode_whole(&bytes[..bytes.len() - 1]), Ok(None));
        assert!(decoder.at_frame_boundary());
        assert_eq!(decoder.frames(), 0);
        // Whole, with the next frame's first bytes behind it.
        let mut stream = bytes.clone();
        stream.extend_from_slice(&bytes[..10]);
        assert_eq!(
            decoder.decode_whole(&stream),
            Ok(Some((bytes.len(), header_of(message))))
        );
        assert_eq!(decoder.frames(), 1);
        assert!(decoder.at_frame_boundary());
        // Inside a frame (its header taken event by event): declined.
        let (used, event) = decoder.decode(&bytes).unwrap();
        assert!(matches!(event, Some(StreamEvent::FrameStart(_))));
        assert_eq!(decoder.decode_whole(&bytes[used..]), Ok(None));
        // The rest of the frame, event by event, ends it.
        let mut input = &bytes[used..];
        loop {
            let (used, event) = decoder.decode(input).unwrap();
            input = &input[used..];
            if event == Some(StreamEvent::FrameEnd) {
                break;
            }
        }
        assert!(input.is_empty());
        assert_eq!(decoder.frames(), 2);
    }
}

#[test]
fn a_bad_whole_frame_fails_the_decoder_with_the_whole_message_error() {
    let ctx = ctx(Channel::Action);
    let bad = patched(frame_of(request()), 80, &10u32.to_le_bytes());
    let whole = decode_frame(&bad, &ctx).unwrap_err();
    let mut decoder = StreamDecoder::new(ctx);
    assert_eq!(decoder.decode_whole(&bad), Err(whole));
    assert_eq!(decoder.error(), Some(whole));
    assert_eq!(decoder.decode_whole(&frame_of(request())), Err(whole));
    assert_eq!(decoder.decode(&[]), Err(whole));
}
