//! Shared fixtures for the wire unit tests.

extern crate std;

use std::vec::Vec;

use super::{
    Call, Channel, DecodeContext, ErrorCode, Header, Message, RelativeDeadline, TraceId,
    encode_frame,
};
use crate::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, WorldSize};

pub(crate) const WORLD: u32 = 4;

pub(crate) fn world() -> WorldSize {
    WorldSize::new(WORLD).unwrap()
}

pub(crate) fn rank(index: u32) -> Rank {
    world().rank(index).unwrap()
}

/// Frames from rank 1 on `channel`, default limits.
pub(crate) fn ctx(channel: Channel) -> DecodeContext {
    DecodeContext::new(channel, rank(1), world(), ProtocolLimits::DEFAULT).unwrap()
}

/// A context whose limits are small enough to exceed in a test.
pub(crate) fn small_ctx(channel: Channel) -> DecodeContext {
    DecodeContext::new(channel, rank(1), world(), small_limits()).unwrap()
}

/// Default limits but frames of at most 4 KiB (small enough to buffer
/// cheaply, large enough for every fixture frame).
pub(crate) fn kib_ctx(channel: Channel) -> DecodeContext {
    let mut limits = ProtocolLimits::DEFAULT;
    limits.max_frame_bytes = 4096;
    limits.max_segment_bytes = 4096;
    limits.max_error_text_bytes = 1024;
    DecodeContext::new(channel, rank(1), world(), limits).unwrap()
}

pub(crate) fn small_limits() -> ProtocolLimits {
    let mut limits = ProtocolLimits::DEFAULT;
    limits.max_frame_bytes = 256;
    limits.max_segment_bytes = 64;
    limits.max_segments = 4;
    limits.max_error_text_bytes = 32;
    limits
}

pub(crate) fn call() -> Call {
    Call {
        request: RequestId::new(0x1122_3344_5566_7788).unwrap(),
        action: ActionId::new(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10).unwrap(),
        domain: DomainId::new(3).unwrap(),
        trace: TraceId::new(0xfeed),
    }
}

pub(crate) fn request() -> Message {
    Message::Request {
        call: call(),
        deadline: RelativeDeadline::from_nanos(1_000_000_000).unwrap(),
    }
}

/// One message of every kind, with the channel it travels on.
pub(crate) fn every_message() -> [(Message, Channel); 6] {
    [
        (request(), Channel::Action),
        (Message::Result { call: call() }, Channel::Action),
        (
            Message::Error {
                call: call(),
                code: ErrorCode::UserFailure,
            },
            Channel::Action,
        ),
        (Message::Cancel { call: call() }, Channel::Control),
        (Message::Goodbye { frames_sent: 41 }, Channel::Control),
        (Message::Heartbeat, Channel::Control),
    ]
}

/// The payload a valid frame of `message` carries in these tests.
pub(crate) fn payload_of(message: &Message) -> Vec<&'static [u8]> {
    match message {
        Message::Request { .. } => std::vec![b"left".as_slice(), b"", b"right"],
        Message::Result { .. } => std::vec![b"42".as_slice()],
        Message::Error { .. } => std::vec!["caf\u{e9} failed".as_bytes()],
        _ => Vec::new(),
    }
}

/// A header from rank 1.
pub(crate) fn header_of(message: Message) -> Header {
    Header::new(
        rank(1),
        message,
        &payload_of(&message),
        &ProtocolLimits::DEFAULT,
    )
    .unwrap()
}

/// The whole frame of `message` from rank 1.
pub(crate) fn frame_of(message: Message) -> Vec<u8> {
    let header = header_of(message);
    let mut out = std::vec![0; header.frame_len()];
    let len = encode_frame(&header, &payload_of(&message), &mut out).unwrap();
    assert_eq!(len, out.len());
    out
}

/// Frame bytes with a little-endian value written at `at`.
pub(crate) fn patched(mut bytes: Vec<u8>, at: usize, value: &[u8]) -> Vec<u8> {
    bytes[at..at + value.len()].copy_from_slice(value);
    bytes
}
