//! The TCP transport's reading path end to end, without a socket: the
//! bytes a peer sends, read in pseudo-random chunks into a read buffer of
//! a fuzzed size (payloads at least that large go straight into their
//! frame), through the connection's frame reader, which recognises the
//! goodbye and heartbeats. Checked against a model that walks the same
//! stream frame by frame with the core's whole-frame decoder: the same
//! frames, goodbye and heartbeats in the same order, byte for byte; an
//! error exactly when the model finds one (an invalid frame, a goodbye
//! whose count is wrong, a frame after the goodbye, a stream cut inside a
//! frame); and no frame buffer beyond `max_frame_bytes`.
//!
//! Input: the three context bytes (see `dinah_fuzz`), one chunking seed
//! byte, one read-buffer byte (the buffer is 4 to 1,024 bytes), then the
//! stream.

#![no_main]

use dinah_core::wire::{DecodeContext, HEADER_LEN, Header, Message, decode_frame};
use dinah_fuzz::{Chunks, split_context};
use dinah_tcp::fuzzing::{Item, read_stream};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((ctx, rest)) = split_context(data) else {
        return;
    };
    let Some((&[seed, buffer], stream)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let buffer = (usize::from(buffer) + 1) * 4;
    let mut chunks = Chunks::new(seed);
    let outcome = read_stream(ctx, stream, buffer, || chunks.next().unwrap_or(1));
    let (expected, valid) = model(ctx, stream);
    assert_eq!(outcome.items, expected);
    assert_eq!(outcome.end.is_ok(), valid, "{:?}", outcome.end);
    assert!(outcome.largest_frame <= ctx.limits().max_frame_bytes as usize);
});

/// What the reader must hand over, and whether the stream is valid to its
/// end: frame by frame with the whole-frame decoder, and the goodbye's
/// rules (its count is every frame before it; nothing follows it).
fn model(ctx: DecodeContext, stream: &[u8]) -> (Vec<Item>, bool) {
    let mut items = Vec::new();
    let mut frames = 0u64;
    let mut goodbye = false;
    let mut at = 0;
    while at < stream.len() {
        let rest = &stream[at..];
        let Some(head) = rest.get(..HEADER_LEN) else {
            return (items, false);
        };
        let Ok(header) = Header::decode(head, &ctx) else {
            return (items, false);
        };
        let Some(bytes) = rest.get(..header.frame_len()) else {
            return (items, false);
        };
        if decode_frame(bytes, &ctx).is_err() || goodbye {
            return (items, false);
        }
        match *header.message() {
            Message::Goodbye { frames_sent } => {
                if frames_sent != frames {
                    return (items, false);
                }
                goodbye = true;
                items.push(Item::Goodbye);
            }
            Message::Heartbeat => {
                frames += 1;
                items.push(Item::Heartbeat);
            }
            _ => {
                frames += 1;
                items.push(Item::Frame(bytes.to_vec()));
            }
        }
        at += bytes.len();
    }
    (items, true)
}
