//! The echo actions the TCP and MPI payload rows call: each sends its
//! payload back, consumed when it is sent so that a large payload travels
//! in its own allocation both ways (a part of its frame held apart, see
//! `dinah_std::transport::Frame`).

use dinah_std::{Action, CodecError, SegmentReader, SegmentWriter, WireValue, schema_id};

/// Sends its bytes back.
pub(crate) struct Echo(pub(crate) Vec<u8>);

impl WireValue for Echo {
    const SCHEMA_ID: u64 = schema_id("bench.Echo/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode_owned(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Vec::<u8>::decode(input).map(Echo)
    }
}

impl Action for Echo {
    const ID: u128 = 0xbe4c_0002;
    type Output = Vec<u8>;
}

/// Sends its numbers back: [`Echo`]'s bytes as the `f64`s an HPC code
/// sends.
pub(crate) struct EchoF64(pub(crate) Vec<f64>);

impl WireValue for EchoF64 {
    const SCHEMA_ID: u64 = schema_id("bench.EchoF64/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)
    }
    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode_owned(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Vec::<f64>::decode(input).map(EchoF64)
    }
}

impl Action for EchoF64 {
    const ID: u128 = 0xbe4c_0005;
    type Output = Vec<f64>;
}

/// Sends two vectors of numbers back: an HPC call with two arrays, whose
/// first travels as a middle part of its frame and whose second as the
/// frame's tail (see `dinah_std::transport::Frame`).
pub(crate) struct EchoF64Pair(pub(crate) Vec<f64>, pub(crate) Vec<f64>);

impl WireValue for EchoF64Pair {
    const SCHEMA_ID: u64 = schema_id("bench.EchoF64Pair/1");
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode(out)?;
        self.1.encode(out)
    }
    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.0.encode_owned(out)?;
        self.1.encode_owned(out)
    }
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let first = Vec::<f64>::decode(input)?;
        Vec::<f64>::decode(input).map(|second| EchoF64Pair(first, second))
    }
}

impl Action for EchoF64Pair {
    const ID: u128 = 0xbe4c_0006;
    type Output = (Vec<f64>, Vec<f64>);
}
