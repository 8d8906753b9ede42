//! Values that travel through serde: `#[derive(WireValue)]` with
//! `#[wire(serde, name = "...")]` encodes the whole value as one segment
//! in postcard's format (compact, and available without `std`), for types
//! that already implement `Serialize` and `Deserialize`.
//!
//! Without the `serde` feature [`SerdeValue`] has no implementations, so
//! the derive's expansion fails with a message that names the feature.

use super::{CodecError, SegmentReader, SegmentWriter};

/// A type `#[wire(serde)]` can encode: with the `serde` feature, every
/// `Serialize + DeserializeOwned` type.
#[diagnostic::on_unimplemented(
    message = "`#[wire(serde)]` needs `{Self}: Serialize + DeserializeOwned` and the `serde` feature of dinah-std",
    label = "encoded through serde here"
)]
pub trait SerdeValue: Sized {
    /// Appends this value as one segment.
    ///
    /// # Errors
    ///
    /// [`CodecError::Serde`] if serde refused the value.
    fn encode_serde(&self, out: &mut SegmentWriter) -> Result<(), CodecError>;

    /// Reads a value from the next segment, which it must fill exactly.
    ///
    /// # Errors
    ///
    /// [`CodecError::MissingSegment`], or [`CodecError::Serde`] if the
    /// bytes are not a value of this type or are followed by more.
    fn decode_serde(input: &mut SegmentReader<'_>) -> Result<Self, CodecError>;
}

#[cfg(feature = "serde")]
impl<T: serde::Serialize + serde::de::DeserializeOwned> SerdeValue for T {
    fn encode_serde(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        let index = out.len();
        out.try_push_with(|buffer| {
            postcard::to_extend(self, Append(buffer))
                .map(drop)
                .map_err(|_| CodecError::Serde { index })
        })
    }

    fn decode_serde(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let index = input.position();
        let segment = input.next_segment()?;
        match postcard::take_from_bytes(segment) {
            Ok((value, [])) => Ok(value),
            Ok(_) | Err(_) => Err(CodecError::Serde { index }),
        }
    }
}

/// Appends to a borrowed buffer, as postcard's `to_extend` needs an owned
/// `Extend` and the segment's buffer belongs to the writer.
#[cfg(feature = "serde")]
struct Append<'a>(&'a mut Vec<u8>);

#[cfg(feature = "serde")]
impl Extend<u8> for Append<'_> {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
        self.0.extend(bytes);
    }
}
