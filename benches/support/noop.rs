//! The no-op action the runtime and transport benchmarks call (the raw
//! frames their floors push instead are in `frames.rs`).

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
