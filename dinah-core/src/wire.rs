//! The wire protocol: frame header, frames, the stream decoder and the
//! hello handshake record.
//!
//! Everything a rank sends another after the handshake is a **frame**: a
//! fixed [`HEADER_LEN`]-byte [`Header`], a table of `u32` segment lengths,
//! then the segments. The same bytes travel over TCP (read incrementally
//! with [`StreamDecoder`] or [`FrameAssembler`]) and MPI (one frame per
//! message, read with [`decode_frame`]); the header's payload length makes
//! the frame self-delimiting, so no outer length prefix is needed.
//!
//! Before any frame, each side of each channel sends one [`Hello`] record
//! (its own fixed [`HELLO_LEN`]-byte layout, sharing the header's first
//! seven bytes) and checks the peer's with [`check_compatible`].
//!
//! All integers are little-endian. Decoders validate every byte before
//! returning anything (nothing is partially trusted), reject with a typed
//! [`ProtocolError`], and check lengths against the negotiated
//! [`ProtocolLimits`](crate::ProtocolLimits) before the caller allocates.
//! Nothing here allocates.
//!
//! # Header layout
//!
//! | bytes | field | type | meaning |
//! | --- | --- | --- | --- |
//! | 0..4 | magic | `[u8; 4]` | [`MAGIC`], `"DNAH"` |
//! | 4..6 | version | `u16` | [`PROTOCOL_VERSION`] |
//! | 6 | kind | `u8` | [`MessageKind::code`] |
//! | 7 | tail width | `u8` | requests and results: [`TailWidth::log2`] of the numbers packed in the large segments (0 for bytes); else 0 |
//! | 8..12 | origin | `u32` | the sending rank |
//! | 12..16 | payload length | `u32` | sum of the segment lengths |
//! | 16..18 | segment count | `u16` | entries in the length table |
//! | 18..20 | error code | `u16` | error frames: [`ErrorCode::to_wire`]; else 0 |
//! | 20..22 | error detail | `u16` | error frames: the code's detail; else 0 |
//! | 22..24 | reserved | `u16` | 0 |
//! | 24..32 | request | `u64` | [`RequestId`](crate::RequestId), or 0 for goodbye |
//! | 32..48 | action | `u128` | [`ActionId`](crate::ActionId), or 0 for goodbye |
//! | 48..56 | domain | `u64` | [`DomainId`](crate::DomainId), or 0 for goodbye |
//! | 56..64 | deadline | `u64` | requests: relative deadline in ns (non-zero); else 0 |
//! | 64..72 | trace | `u64` | [`TraceId`], 0 for none (always 0 for goodbye) |
//! | 72..80 | frames sent | `u64` | goodbye: frames sent before it on the channel; else 0 |
//!
//! A frame is then `segment count` little-endian `u32` lengths followed by
//! the segments back to back, `payload length` bytes in all.
//!
//! # Examples
//!
//! A result frame encoded and decoded whole, as an MPI transport does:
//!
//! ```
//! use dinah_core::{ActionId, DomainId, ProtocolLimits, RequestId, WorldSize};
//! use dinah_core::wire::{Call, Channel, DecodeContext, Header, Message, decode_frame, encode_frame};
//!
//! let world = WorldSize::new(2)?;
//! let (me, peer) = (world.rank(0)?, world.rank(1)?);
//! let limits = ProtocolLimits::DEFAULT;
//! let call = Call {
//!     request: RequestId::new(1)?,
//!     action: ActionId::new(0xadd)?,
//!     domain: DomainId::new(1)?,
//!     trace: None,
//! };
//! let output: [&[u8]; 1] = [&42u64.to_le_bytes()];
//! let header = Header::new(me, Message::Result { call }, &output, &limits)?;
//! let mut buffer = [0u8; 128];
//! let len = encode_frame(&header, &output, &mut buffer)?;
//!
//! // On the peer, which received these bytes from rank 0 on the action channel:
//! let ctx = DecodeContext::new(Channel::Action, me, world, limits)?;
//! let frame = decode_frame(&buffer[..len], &ctx)?;
//! assert_eq!(frame.header().message(), &Message::Result { call });
//! assert_eq!(frame.segments().next(), Some(&42u64.to_le_bytes()[..]));
//! # let _ = peer;
//! # Ok::<(), Box<dyn core::error::Error>>(())
//! ```

mod assembler;
mod context;
mod error;
mod error_code;
mod error_text;
mod frame;
mod header;
mod hello;
mod kind;
mod message;
mod parted;
mod shape;
mod split;
mod stream;
mod tail_width;
#[cfg(test)]
mod test_support;

pub use assembler::FrameAssembler;
pub use context::{ContextError, DecodeContext};
pub use error::{HeaderField, ProtocolError};
pub use error_code::{ErrorCode, limit_field_code, limit_field_from_code};
pub use error_text::truncate_error_text;
pub use frame::{FrameRef, Segments, decode_frame, encode_frame, encode_head};
pub use header::{Header, stamp_request_id};
pub use hello::{
    HELLO_LEN, Hello, HelloAuth, HelloError, HelloField, HelloMismatch, check_compatible,
};
pub use kind::{Channel, MessageKind};
pub use message::{Call, Message, RelativeDeadline, TraceId};
pub use parted::{PartPlace, PartedFrameRef, PartedSegment, PartedSegments, decode_parted_frame};
pub use split::{SplitFrameRef, decode_split_frame};
pub use stream::{StreamDecoder, StreamEvent};
pub use tail_width::TailWidth;

/// The first four bytes of every header and hello record: `"DNAH"`.
pub const MAGIC: [u8; 4] = *b"DNAH";

/// The protocol version this build speaks. Peers must speak the same one.
///
/// Any change to a byte layout, a code table, the validation rules, the
/// meaning of a field or the registry fingerprint algorithm is a version
/// bump. Version 2: an origin numbers its request IDs per target in send
/// order ([`RequestId::in_sequence`](crate::RequestId::in_sequence)), and
/// a receiver relies on it to deduplicate. Version 3: the [`Hello`] record
/// is [`HELLO_LEN`] = 72 bytes and carries the sender's admission capacity
/// ([`Hello::admission_capacity`]). Version 4: byte 68 of the hello
/// says how the sender proves its membership ([`HelloAuth`]), and the
/// heartbeat kind exists ([`MessageKind::Heartbeat`]). Version 5: byte 7
/// of the header, reserved before, is the last segment's [`TailWidth`].
/// Version 6: that width is the one the frame's large segments pack,
/// wherever they are, so a receiver keeps each of them in it.
pub const PROTOCOL_VERSION: u16 = 6;

/// The length of a frame header, in bytes.
pub const HEADER_LEN: usize = 80;

/// The length of one entry of a frame's segment length table (a
/// little-endian `u32`).
pub const LENGTH_ENTRY_LEN: usize = 4;

// Lengths are `u32` on the wire and handled as `usize`: never on a 16-bit
// target.
const _: () = assert!(usize::BITS >= 32);

/// `N` bytes of `bytes` from `at`. Offsets are constants, so the bounds
/// checks fold away.
fn get<const N: usize, const L: usize>(bytes: &[u8; L], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

/// Writes `value` into `bytes` at `at`.
fn put<const N: usize, const L: usize>(bytes: &mut [u8; L], at: usize, value: [u8; N]) {
    bytes[at..at + N].copy_from_slice(&value);
}
