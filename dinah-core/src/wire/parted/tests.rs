extern crate std;

use std::vec;
use std::vec::Vec;

use super::*;
use crate::ProtocolLimits;
use crate::wire::test_support::{call, rank};
use crate::wire::{Channel, ErrorCode, Message, decode_frame, encode_frame};

/// Frames from rank 1 on the action lane.
fn ctx() -> DecodeContext {
    crate::wire::test_support::ctx(Channel::Action)
}

/// The frame of `segments`, whole, and as a head with the segments at
/// `apart` held apart (their places).
fn parted(
    message: Message,
    segments: &[&[u8]],
    apart: &[usize],
) -> (Vec<u8>, Vec<u8>, Vec<PartPlace>) {
    let header = Header::new(rank(1), message, segments, &ProtocolLimits::DEFAULT).unwrap();
    let mut whole = vec![0; header.frame_len()];
    encode_frame(&header, segments, &mut whole).unwrap();
    let mut head = whole[..header.head_len()].to_vec();
    let mut places = Vec::new();
    for (i, segment) in segments.iter().enumerate() {
        if apart.contains(&i) {
            places.push(PartPlace {
                at: head.len(),
                len: segment.len(),
            });
        } else {
            head.extend_from_slice(segment);
        }
    }
    (whole, head, places)
}

/// Every segment of `frame` read with `places`: inline ones as their
/// bytes, parts as `None`.
fn read<'a>(frame: &PartedFrameRef<'a>, places: &[PartPlace]) -> Vec<Option<&'a [u8]>> {
    let mut segments = frame.segments();
    let mut places = places.iter().copied().peekable();
    let mut out = Vec::new();
    while let Some(segment) = segments.next(places.peek().copied()) {
        out.push(match segment {
            PartedSegment::Inline(bytes) => Some(bytes),
            PartedSegment::Apart => {
                places.next();
                None
            }
        });
    }
    out
}

#[test]
fn parts_anywhere_read_as_the_whole_frame() {
    let segments: [&[u8]; 5] = [b"", b"first", b"", b"mid", b"last"];
    let result = Message::Result { call: call() };
    for apart in [&[1, 4][..], &[1], &[3], &[4], &[1, 3, 4], &[]] {
        let (whole, head, places) = parted(result, &segments, apart);
        let frame = decode_parted_frame(&head, places.iter().copied(), &ctx())
            .unwrap_or_else(|error| panic!("{apart:?}: {error}"));
        assert_eq!(
            frame.header(),
            decode_frame(&whole, &ctx()).unwrap().header()
        );
        assert_eq!(frame.head_len(), head.len());
        let expected: Vec<Option<&[u8]>> = segments
            .iter()
            .enumerate()
            .map(|(i, s)| (!apart.contains(&i)).then_some(*s))
            .collect();
        assert_eq!(read(&frame, &places), expected, "{apart:?}");
        let apart_len = places.iter().map(|place| place.len).sum();
        assert_eq!(
            PartedFrameRef::from_decoded(*frame.header(), &head, apart_len),
            Some(frame)
        );
        assert_eq!(
            PartedFrameRef::from_decoded(*frame.header(), &head, apart_len + 1),
            None
        );
    }
}

#[test]
fn a_part_that_is_not_one_whole_segment_is_refused() {
    let segments: [&[u8]; 3] = [b"abc", b"defg", b"hi"];
    let result = Message::Result { call: call() };
    let (_, head, places) = parted(result, &segments, &[1]);
    let at = places[0].at;
    let misplaced = |last, tail| Err(ProtocolError::MisplacedSplit { last, tail });
    // Where the second segment starts but shorter, or longer (the total
    // is then wrong before anything else).
    let short = [PartPlace { at, len: 3 }];
    assert!(matches!(
        decode_parted_frame(&head, short, &ctx()),
        Err(ProtocolError::Truncated { .. })
    ));
    // The right length one segment early: it comes before "abc".
    let early = [PartPlace { at: at - 3, len: 4 }];
    assert_eq!(decode_parted_frame(&head, early, &ctx()), misplaced(3, 4));
    // Inside the first segment.
    let inside = [PartPlace { at: at - 1, len: 4 }];
    assert_eq!(decode_parted_frame(&head, inside, &ctx()), misplaced(3, 4));
    // In the header, or past the head's end.
    let header = [PartPlace { at: 2, len: 4 }];
    assert_eq!(decode_parted_frame(&head, header, &ctx()), misplaced(3, 4));
    let past = [PartPlace {
        at: head.len() + 1,
        len: 4,
    }];
    assert_eq!(decode_parted_frame(&head, past, &ctx()), misplaced(4, 4));
    // Out of order.
    let (_, head, places) = parted(result, &segments, &[0, 2]);
    let swapped = [places[1], places[0]];
    assert!(decode_parted_frame(&head, swapped, &ctx()).is_err());
    assert!(decode_parted_frame(&head, places, &ctx()).is_ok());
}

#[test]
fn an_empty_part_or_a_part_of_an_error_frame_is_refused() {
    let segments: [&[u8]; 2] = [b"", b"x"];
    let result = Message::Result { call: call() };
    let (_, head, _) = parted(result, &segments, &[]);
    let empty = [PartPlace {
        at: head.len() - 1,
        len: 0,
    }];
    assert_eq!(
        decode_parted_frame(&head, empty, &ctx()),
        Err(ProtocolError::MisplacedSplit { last: 0, tail: 0 })
    );
    let error = Message::Error {
        call: call(),
        code: ErrorCode::UserFailure,
    };
    let (_, head, places) = parted(error, &[b"text"], &[0]);
    assert_eq!(
        decode_parted_frame(&head, places, &ctx()),
        Err(ProtocolError::MisplacedSplit { last: 0, tail: 4 })
    );
}

#[test]
fn an_error_text_without_parts_is_checked_as_for_a_whole_frame() {
    let error = Message::Error {
        call: call(),
        code: ErrorCode::UserFailure,
    };
    let (mut whole, _, _) = parted(error, &[b"text"], &[]);
    let last = whole.len() - 1;
    whole[last] = 0xFF;
    assert_eq!(
        decode_parted_frame(&whole, [], &ctx()).map(|frame| *frame.header()),
        decode_frame(&whole, &ctx()).map(|frame| *frame.header())
    );
    assert!(matches!(
        decode_parted_frame(&whole, [], &ctx()),
        Err(ProtocolError::ErrorTextNotUtf8 { .. })
    ));
}
