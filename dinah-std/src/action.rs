//! Typed actions and their wire codec.
//!
//! An [`Action`] is a value sent to another rank to be run there; its
//! [`Action::Output`] comes back. Both are [`WireValue`]s: they encode into
//! and decode from a sequence of byte **segments** (the frame's payload).
//! dinah ships codecs for the primitive types, `String`, packed numeric
//! vectors (`Vec<u8>`, `Vec<u64>`, `Vec<f64>`, ...), `Option` and tuples up
//! to eight elements, so most actions are plain structs whose codec is a
//! few lines:
//!
//! ```
//! use dinah_std::{Action, CodecError, SegmentReader, SegmentWriter, WireValue, schema_id};
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
//!     const ID: u128 = 0x00ad_d000_0000_0000_0000_0000_0000_0001;
//!     type Output = u64;
//! }
//!
//! // What a transport carries: two segments of eight bytes.
//! let mut out = SegmentWriter::new();
//! Add { left: 2, right: 3 }.encode(&mut out)?;
//! assert_eq!(out.len(), 2);
//! let back = Add::decode(&mut SegmentReader::from_writer(&out))?;
//! assert_eq!(back.left + back.right, 5);
//! # Ok::<(), CodecError>(())
//! ```
//!
//! `SCHEMA_ID`s name the encoding: two ranks agree on an action only if its
//! ID, input schema and output schema agree (the registry fingerprint
//! checks this during the handshake). Change the schema ID whenever the
//! encoding changes.

mod error;
mod primitives;
mod segments;

pub use error::{ACTION_ERROR_TEXT_CAP, ActionError, CodecError};
pub(crate) use segments::with_scratch_writer;
pub use segments::{SegmentReader, SegmentWriter};

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

    /// Reads a value from the next segments of `input`.
    ///
    /// # Errors
    ///
    /// A [`CodecError`] if the segments are missing, have the wrong length
    /// or hold an invalid value.
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError>;
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
}
