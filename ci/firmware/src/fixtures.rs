//! What the wire checks share: a world of four ranks, rank 1 as the peer
//! whose bytes are decoded, and a request from it.

use dinah_core::wire::{Call, Channel, DecodeContext, Header, Message, RelativeDeadline};
use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, WorldSize};

pub fn world() -> WorldSize {
    WorldSize::new(4).expect("four ranks")
}

/// The peer every frame comes from.
pub fn origin() -> Rank {
    world().rank(1).expect("in the world")
}

/// Decoding frames from [`origin`] on `channel` with the default limits.
pub fn ctx(channel: Channel) -> DecodeContext {
    ctx_with(channel, ProtocolLimits::DEFAULT)
}

/// The same with `limits`.
pub fn ctx_with(channel: Channel, limits: ProtocolLimits) -> DecodeContext {
    DecodeContext::new(channel, origin(), world(), limits).expect("valid")
}

pub fn call() -> Call {
    Call {
        request: RequestId::new(7).expect("non-zero"),
        action: ActionId::new(0xadd).expect("non-zero"),
        domain: DomainId::new(1).expect("non-zero"),
        trace: None,
    }
}

/// A request from [`origin`] with `segments` as its input.
pub fn request(segments: &[&[u8]]) -> Header {
    let deadline = RelativeDeadline::from_nanos(5_000_000).expect("non-zero");
    Header::new(
        origin(),
        Message::Request {
            call: call(),
            deadline,
        },
        segments,
        &ProtocolLimits::DEFAULT,
    )
    .expect("a valid request")
}
