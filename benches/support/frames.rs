//! The raw frames the floors push by hand instead of the runtime's.

use dinah_core::wire::{Header, Message, encode_frame};
use dinah_core::{ProtocolLimits, Rank};

/// A valid frame of `message` from `origin` with one segment of `len`
/// bytes (8 matches a no-op's payload).
pub(crate) fn raw_frame(origin: Rank, message: Message, len: usize) -> Vec<u8> {
    let bytes = vec![7u8; len];
    let payload: [&[u8]; 1] = [&bytes];
    let header = Header::new(origin, message, &payload, &ProtocolLimits::default())
        .expect("a frame within the default limits");
    let mut frame = vec![0; header.frame_len()];
    encode_frame(&header, &payload, &mut frame).expect("the buffer is sized from the header");
    frame
}
