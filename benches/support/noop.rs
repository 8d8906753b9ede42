//! The no-op action the runtime and transport benchmarks call, and the
//! raw frames their floors push by hand instead.

use dinah_core::wire::{Header, Message, encode_frame};
use dinah_core::{ProtocolLimits, Rank};
use dinah_std::{Action, CodecError, SegmentReader, SegmentWriter, WireValue, schema_id};

/// A no-op carrying one `u64`, answered with it.
pub(crate) struct Noop(pub(crate) u64);

impl WireValue for Noop {
    const SCHEMA_ID: u64 = schema_id("bench.Noop/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        u64::decode(input).map(Noop)
    }
}

impl Action for Noop {
    const ID: u128 = 0xbe4c_0001;
    type Output = u64;
}

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
