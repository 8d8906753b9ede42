//! The stream decoder over arbitrary bytes in pseudo-random chunks, checked
//! against whole-message decoding frame by frame: every frame it completes
//! decodes whole to the same header and segments, and its first error is
//! the whole-message error of the same frame. A second pass over the same
//! chunks offers each input to `decode_whole` first (as the TCP reader
//! does) and must find the same frames and the same first error.
//!
//! Input: the three context bytes (see `dinah_fuzz`), one chunking seed
//! byte, then the stream.

#![no_main]

use dinah_core::wire::{
    DecodeContext, HEADER_LEN, Header, ProtocolError, StreamDecoder, StreamEvent, decode_frame,
};
use dinah_fuzz::{Chunks, split_context};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((ctx, rest)) = split_context(data) else {
        return;
    };
    let Some((&seed, stream)) = rest.split_first() else {
        return;
    };
    let mut decoder = StreamDecoder::new(ctx);
    let mut chunks = Chunks::new(seed);
    // Where the current frame started, its header, and its payload so far.
    let mut start = 0;
    let mut offset = 0;
    let mut header: Option<Header> = None;
    let mut lengths = Vec::new();
    let mut payload = Vec::new();
    let mut remaining = stream;
    let mut failure: Option<ProtocolError> = None;
    // Where each completed frame starts and ends.
    let mut frames = Vec::new();
    'outer: while !remaining.is_empty() {
        let size = chunks.next().unwrap_or(1).min(remaining.len());
        let (mut input, tail) = remaining.split_at(size);
        remaining = tail;
        loop {
            match decoder.decode(input) {
                Err(error) => {
                    failure = Some(error);
                    break 'outer;
                }
                Ok((used, event)) => {
                    input = &input[used..];
                    offset += used;
                    match event {
                        None => break,
                        Some(StreamEvent::FrameStart(h)) => {
                            assert!(header.is_none());
                            // Allocation is bounded by the validated limit.
                            assert!(h.frame_len() <= ctx.limits().max_frame_bytes as usize);
                            header = Some(h);
                        }
                        Some(StreamEvent::SegmentLength { len, .. }) => lengths.push(len),
                        Some(StreamEvent::Payload(bytes)) => payload.extend_from_slice(bytes),
                        Some(StreamEvent::FrameEnd) => {
                            let h = header.take().expect("FrameEnd after FrameStart");
                            let frame = decode_frame(&stream[start..offset], &ctx)
                                .expect("a streamed frame decodes whole");
                            assert_eq!(*frame.header(), h);
                            let streamed: Vec<usize> =
                                lengths.iter().map(|&l| l as usize).collect();
                            let whole: Vec<usize> = frame.segments().map(<[u8]>::len).collect();
                            assert_eq!(streamed, whole);
                            assert_eq!(frame.payload(), &payload[..]);
                            lengths.clear();
                            payload.clear();
                            frames.push((start, offset));
                            start = offset;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(whole_first(ctx, stream, seed), (frames, failure));
    let Some(error) = failure else {
        // Every chunk was drained, so the decoder is between frames exactly
        // when the last frame ended at the end of the input; otherwise the
        // stream was cut inside a frame.
        match decoder.finish() {
            Ok(()) => assert_eq!(start, stream.len()),
            Err(ProtocolError::Truncated { actual, .. }) => {
                assert_eq!(actual, stream.len() - start)
            }
            Err(other) => panic!("finish failed with {other}"),
        }
        return;
    };
    assert_eq!(decoder.decode(&[]), Err(error));
    // Compare with whole-message decoding of the frame that failed, when
    // all of it is present.
    let frame_bytes = &stream[start..];
    if frame_bytes.len() < HEADER_LEN {
        return;
    }
    match Header::decode(&frame_bytes[..HEADER_LEN], &ctx) {
        Err(whole) => assert_eq!(whole, error),
        Ok(h) if h.frame_len() <= frame_bytes.len() => {
            let whole = decode_frame(&frame_bytes[..h.frame_len()], &ctx);
            assert_eq!(whole.err(), Some(error));
        }
        Ok(_) => {}
    }
});

/// The same stream in the same chunks, each input offered to
/// `decode_whole` before `decode`: where each frame starts and ends, and
/// the first error.
fn whole_first(
    ctx: DecodeContext,
    stream: &[u8],
    seed: u8,
) -> (Vec<(usize, usize)>, Option<ProtocolError>) {
    let mut decoder = StreamDecoder::new(ctx);
    let mut chunks = Chunks::new(seed);
    let mut frames = Vec::new();
    let (mut start, mut offset) = (0, 0);
    let mut remaining = stream;
    while !remaining.is_empty() {
        let size = chunks.next().unwrap_or(1).min(remaining.len());
        let (mut input, tail) = remaining.split_at(size);
        remaining = tail;
        loop {
            match decoder.decode_whole(input) {
                Err(error) => return (frames, Some(error)),
                Ok(Some((len, header))) => {
                    assert_eq!(header.frame_len(), len);
                    let whole = decode_frame(&input[..len], &ctx).expect("a whole frame decodes");
                    assert_eq!(*whole.header(), header);
                    frames.push((offset, offset + len));
                    offset += len;
                    start = offset;
                    input = &input[len..];
                    continue;
                }
                Ok(None) => {}
            }
            match decoder.decode(input) {
                Err(error) => return (frames, Some(error)),
                Ok((used, event)) => {
                    input = &input[used..];
                    offset += used;
                    match event {
                        None => break,
                        Some(StreamEvent::FrameEnd) => {
                            frames.push((start, offset));
                            start = offset;
                        }
                        Some(_) => {}
                    }
                }
            }
        }
    }
    (frames, None)
}
