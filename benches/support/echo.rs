//! The echo actions the TCP and MPI payload rows call: each sends its
//! payload back, consumed when it is sent so that a large payload travels
//! in its own allocation both ways (a part of its frame held apart, see
//! `dinah_std::transport::Frame`); and the loop that times them.

use std::time::{Duration, Instant};

use dinah_core::Rank;
use dinah_std::{Action, CodecError, Runtime, SegmentReader, SegmentWriter, WireValue, schema_id};

/// An echo action: its answer makes the next call.
pub(crate) trait Echoed: Action + Sized {
    /// The call that sends back what this one's answer holds.
    fn again(output: Self::Output) -> Self;
    /// How many elements the payload holds (of its last vector): an echo
    /// returns as many as it was sent.
    fn len(&self) -> usize;
}

/// Echoes `first` off `peer` `n` times, one call at a time, each call
/// sending what the previous one brought back (as the raw ping-pong sends
/// the buffer it has just read into: an echo consumes its argument);
/// returns the time the calls took.
///
/// # Panics
///
/// If a call fails, or an answer is not as long as what was sent.
pub(crate) fn echo_loop<A: Echoed>(
    runtime: &mut Runtime,
    peer: Rank,
    first: A,
    n: u64,
) -> Duration {
    let client = runtime.client();
    let len = first.len();
    let mut value = first;
    let start = Instant::now();
    for _ in 0..n {
        let output = runtime.block_on(client.spawn_on(peer, value));
        value = A::again(output.expect("an echo"));
        assert_eq!(value.len(), len);
    }
    start.elapsed()
}

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

impl Echoed for Echo {
    fn again(output: Vec<u8>) -> Self {
        Self(output)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
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

impl Echoed for EchoF64 {
    fn again(output: Vec<f64>) -> Self {
        Self(output)
    }
    fn len(&self) -> usize {
        self.0.len()
    }
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

impl Echoed for EchoF64Pair {
    fn again((first, second): (Vec<f64>, Vec<f64>)) -> Self {
        Self(first, second)
    }
    fn len(&self) -> usize {
        self.1.len()
    }
}
