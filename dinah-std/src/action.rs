//! Typed actions and their wire codec.
//!
//! An [`Action`] is a value sent to another rank to be run there; its
//! [`Action::Output`] comes back. Both are [`WireValue`]s: they encode into
//! and decode from a sequence of byte **segments** (the frame's payload).
//! dinah ships codecs for the primitive types, `String`, `Option`, tuples
//! up to eight elements, `Result`, `Box`, sequences of any `WireValue`
//! (`Vec<T>`, `Box<[T]>`, `[T; N]`; packed into one segment for numeric
//! `T`, otherwise one group of records, see [`SegmentWriter::push_group`])
//! and maps (`BTreeMap`, `HashMap`). With the `derive` feature (on by
//! default) a struct or enum of such fields gets both traits from derives:
//!
//! ```
//! # #[cfg(feature = "derive")] {
//! use dinah_std::{Action, SegmentReader, SegmentWriter, WireValue};
//!
//! /// Adds two numbers on the target rank.
//! #[derive(WireValue, Action)]
//! #[wire(name = "example.Add/1")]
//! #[action(name = "example.Add/1", output = u64)]
//! struct Add {
//!     left: u64,
//!     right: u64,
//! }
//!
//! // What a transport carries: two segments of eight bytes.
//! let mut out = SegmentWriter::new();
//! Add { left: 2, right: 3 }.encode(&mut out)?;
//! assert_eq!(out.len(), 2);
//! let back = Add::decode(&mut SegmentReader::from_writer(&out))?;
//! assert_eq!(back.left + back.right, 5);
//! assert_eq!(Add::ID, dinah_std::action_id("example.Add/1"));
//! # }
//! # Ok::<(), dinah_std::CodecError>(())
//! ```
//!
//! A struct encodes as its fields in declaration order; an enum as a
//! one-byte tag (the variant's position) followed by that variant's fields.
//! The derived `SCHEMA_ID` digests the name and the field layout, so any
//! change to either gives a new ID. `docs/actions.md` states the rules.
//!
//! The same by hand, for a type that needs its own encoding:
//!
//! ```
//! use dinah_std::{
//!     Action, CodecError, SegmentReader, SegmentWriter, WireValue, action_id, schema_id,
//! };
//!
//! /// Adds two numbers on the target rank.
//! struct Add {
//!     left: u64,
//!     right: u64,
//! }
//!
//! impl WireValue for Add {
//!     const SCHEMA_ID: u64 = schema_id("example.Add/1");
//!     fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
//!         (self.left, self.right).encode(out)
//!     }
//!     fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
//!         let (left, right) = <(u64, u64)>::decode(input)?;
//!         Ok(Add { left, right })
//!     }
//! }
//!
//! impl Action for Add {
//!     const ID: u128 = action_id("example.Add/1");
//!     type Output = u64;
//! }
//!
//! let mut out = SegmentWriter::new();
//! Add { left: 2, right: 3 }.encode(&mut out)?;
//! let back = Add::decode(&mut SegmentReader::from_writer(&out))?;
//! assert_eq!(back.left + back.right, 5);
//! # Ok::<(), CodecError>(())
//! ```
//!
//! `SCHEMA_ID`s name the encoding: two ranks agree on an action only if its
//! ID, input schema and output schema agree (the registry fingerprint
//! checks this during the handshake). A hand-written codec must change its
//! schema ID whenever its encoding changes; a derived one does so itself.

#[doc(hidden)]
pub mod __derive;
mod collections;
mod error;
mod packed;
mod primitives;
mod scratch;
mod segments;
mod serde_codec;

pub use error::{ACTION_ERROR_TEXT_CAP, ActionError, CodecError};
pub(crate) use scratch::{FrameKind, IN_PLACE_FROM, with_frame_writer};
pub use segments::{DETACH_FROM, SegmentReader, SegmentWriter};

/// A value that travels between ranks as payload segments.
///
/// `encode` appends one or more segments; `decode` reads exactly the
/// segments `encode` wrote, in order, and must reject anything else with a
/// [`CodecError`] (never panic: the bytes come from the network).
pub trait WireValue: Sized + Send + 'static {
    /// Names this type's encoding; non-zero, stable across builds. Use
    /// [`schema_id`] on a versioned name.
    const SCHEMA_ID: u64;

    /// Appends this value's segments to `out`.
    ///
    /// # Errors
    ///
    /// A [`CodecError`] if the value cannot be encoded (for example a
    /// length that does not fit the wire format).
    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError>;

    /// Appends this value's segments to `out`, consuming the value, which
    /// lets a large buffer it owns travel without a copy (a `Vec<u8>` of
    /// at least [`DETACH_FROM`] bytes, see
    /// [`SegmentWriter::push_owned`]). The bytes written are exactly
    /// [`encode`](Self::encode)'s: the runtime calls this for the
    /// arguments and outputs of actions. The default calls `encode`; the
    /// standard containers and derived codecs pass it on to their parts.
    ///
    /// # Errors
    ///
    /// As [`encode`](Self::encode).
    #[inline]
    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        self.encode(out)
    }

    /// Reads a value from the next segments of `input`.
    ///
    /// # Errors
    ///
    /// A [`CodecError`] if the segments are missing, have the wrong length
    /// or hold an invalid value.
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError>;

    /// Names the encoding of `Vec<Self>` (and of the other sequences of
    /// `Self`: `Box<[Self]>`, `[Self; N]`). Override it together with
    /// [`encode_slice`](Self::encode_slice) and
    /// [`decode_vec`](Self::decode_vec), as the numeric types do.
    const VEC_SCHEMA_ID: u64 = composite_schema("dinah.vec", &[Self::SCHEMA_ID]);

    /// Appends the segments of a sequence of values. The default writes one
    /// group ([`SegmentWriter::push_group`]): the element count as a `u64`,
    /// then each element's segments, so a sequence of any length takes one
    /// segment of the frame. The numeric types override it with one packed
    /// segment.
    ///
    /// # Errors
    ///
    /// An element's [`CodecError`]; [`CodecError::SequenceTooLong`] if the
    /// elements encode to no bytes at all and there are more of them than
    /// their group has bytes (the decoder's bound, see
    /// [`decode_vec`](Self::decode_vec)).
    fn encode_slice(items: &[Self], out: &mut SegmentWriter) -> Result<(), CodecError> {
        collections::encode_group(items, out)
    }

    /// [`encode_owned`](Self::encode_owned) for a sequence of values: the
    /// same bytes as [`encode_slice`](Self::encode_slice), which the
    /// default calls. Every primitive integer and float overrides it to
    /// hand the vector's buffer over as a frame's detached tail (see
    /// [`Tail`](crate::transport::Tail); bytes through
    /// [`SegmentWriter::push_owned`]).
    ///
    /// # Errors
    ///
    /// As [`encode_slice`](Self::encode_slice).
    #[inline]
    fn encode_vec(items: Vec<Self>, out: &mut SegmentWriter) -> Result<(), CodecError> {
        Self::encode_slice(&items, out)
    }

    /// Reads a sequence written by [`encode_slice`](Self::encode_slice).
    /// The default refuses a count larger than the group's bytes, so a
    /// hostile count cannot make it loop or reserve memory beyond what the
    /// frame holds.
    ///
    /// # Errors
    ///
    /// [`CodecError::SequenceTooLong`] for such a count, an element's
    /// [`CodecError`], or [`CodecError::TrailingSegments`] if the group
    /// holds more than the elements.
    fn decode_vec(input: &mut SegmentReader<'_>) -> Result<Vec<Self>, CodecError> {
        collections::decode_group(input)
    }
}

/// A typed remote action.
pub trait Action: WireValue {
    /// The action's stable, non-zero identity (a
    /// [`dinah_core::ActionId`] once registered). 128 bits, so IDs chosen
    /// independently (for example a hash of a name) do not collide.
    const ID: u128;

    /// What running the action returns.
    type Output: WireValue;
}

/// A stable non-zero schema ID for `name`: 64-bit FNV-1a of the UTF-8
/// bytes, with zero mapped to one. Usable in `const` items.
///
/// ```
/// const ID: u64 = dinah_std::schema_id("example.Point/1");
/// assert_ne!(ID, 0);
/// assert_eq!(ID, dinah_std::schema_id("example.Point/1"));
/// ```
pub const fn schema_id(name: &str) -> u64 {
    combine_schema(FNV_OFFSET, name.as_bytes())
}

/// A stable non-zero action ID for `name`: 128-bit FNV-1a of the UTF-8
/// bytes, with zero mapped to one. Usable in `const` items; it is what
/// `#[derive(Action)]` puts in [`Action::ID`].
///
/// ```
/// const ID: u128 = dinah_std::action_id("app.CountHits/1");
/// assert_eq!(ID, 0xed93_de89_1fc3_42e7_9351_82ea_f092_c0d7);
/// ```
pub const fn action_id(name: &str) -> u128 {
    let bytes = name.as_bytes();
    let mut state = FNV128_OFFSET;
    let mut i = 0;
    while i < bytes.len() {
        state ^= bytes[i] as u128;
        state = state.wrapping_mul(FNV128_PRIME);
        i += 1;
    }
    if state == 0 { 1 } else { state }
}

const FNV128_OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
const FNV128_PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// Continues an FNV-1a digest `state` with `bytes`, never returning zero.
pub(crate) const fn combine_schema(mut state: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        state ^= bytes[i] as u64;
        state = state.wrapping_mul(FNV_PRIME);
        i += 1;
    }
    if state == 0 { 1 } else { state }
}

/// The schema ID of a composite type named `kind` over the element
/// schemas `parts` (tuples, options, vectors).
pub(crate) const fn composite_schema(kind: &str, parts: &[u64]) -> u64 {
    let mut state = combine_schema(FNV_OFFSET, kind.as_bytes());
    let mut i = 0;
    while i < parts.len() {
        state = combine_schema(state, &parts[i].to_le_bytes());
        i += 1;
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_ids_are_stable_and_distinct() {
        // Golden values: changing them changes every fingerprint.
        assert_eq!(schema_id(""), FNV_OFFSET);
        assert_eq!(schema_id("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(schema_id("x/1"), schema_id("x/2"));
        assert_ne!(
            composite_schema("tuple", &[1, 2]),
            composite_schema("tuple", &[2, 1])
        );
    }

    #[test]
    fn action_ids_have_golden_values() {
        // The published FNV-1a 128 test vectors, and a typical name.
        assert_eq!(action_id(""), FNV128_OFFSET);
        assert_eq!(action_id("a"), 0xd228_cb69_6f1a_8caf_7891_2b70_4e4a_8964);
        assert_eq!(
            action_id("foobar"),
            0x343e_1662_793c_64bf_6f0d_3597_ba44_6f18
        );
        assert_eq!(
            action_id("app.CountHits/1"),
            0xed93_de89_1fc3_42e7_9351_82ea_f092_c0d7
        );
        assert_ne!(action_id("app.X/1"), action_id("app.X/2"));
    }
}
