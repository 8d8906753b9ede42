//! Const helpers for the code `#[derive(WireValue)]` generates; not a
//! public API (hidden from the docs, may change with the derive).
//!
//! A derived type's `SCHEMA_ID` is a 64-bit FNV-1a digest (the same one
//! [`schema_id`](super::schema_id) uses) over a self-delimiting
//! description of its layout:
//!
//! - a struct: the text `dinah.struct`, its name, then its field list;
//! - an enum: the text `dinah.enum`, its name, the number of variants, then
//!   for each variant in declaration order its name and its field list;
//! - a field list: the number of fields, then for each field in
//!   declaration order its name (`0`, `1`, ... for tuple fields) and its
//!   type's `SCHEMA_ID` as eight little-endian bytes;
//! - a name: its UTF-8 length as eight little-endian bytes, then the bytes.
//!
//! Lengths and counts go in first so that no two layouts digest the same
//! byte sequence (fields `ab`, `c` differ from `a`, `bc`).

pub use super::serde_codec::SerdeValue;
use super::{CodecError, FNV_OFFSET, SegmentReader, SegmentWriter, combine_schema};

/// The schema ID of a type named `name` encoded through serde
/// (`#[wire(serde)]`): the text `dinah.serde`, then the name. serde gives
/// no layout to digest at compile time, so the name alone identifies the
/// encoding; change it when the type changes.
pub const fn serde_schema(name: &str) -> u64 {
    text(combine_schema(FNV_OFFSET, b"dinah.serde"), name)
}

/// `value` through serde, for the derive.
///
/// # Errors
///
/// As [`SerdeValue::encode_serde`].
#[inline]
pub fn serde_encode<T: SerdeValue>(value: &T, out: &mut SegmentWriter) -> Result<(), CodecError> {
    value.encode_serde(out)
}

/// A value through serde, for the derive.
///
/// # Errors
///
/// As [`SerdeValue::decode_serde`].
#[inline]
pub fn serde_decode<T: SerdeValue>(input: &mut SegmentReader<'_>) -> Result<T, CodecError> {
    T::decode_serde(input)
}

/// The schema ID of a struct named `name` with `fields` (name, schema ID)
/// in declaration order.
pub const fn struct_schema(name: &str, fields: &[(&str, u64)]) -> u64 {
    let state = combine_schema(FNV_OFFSET, b"dinah.struct");
    field_list(text(state, name), fields)
}

/// The schema ID of an enum named `name` with `variants` (name, fields) in
/// declaration order, each variant's fields as in [`struct_schema`].
pub const fn enum_schema(name: &str, variants: &[(&str, &[(&str, u64)])]) -> u64 {
    let mut state = text(combine_schema(FNV_OFFSET, b"dinah.enum"), name);
    state = count(state, variants.len());
    let mut i = 0;
    while i < variants.len() {
        let (variant, fields) = variants[i];
        state = field_list(text(state, variant), fields);
        i += 1;
    }
    state
}

/// Continues `state` with a count of fields or variants.
const fn count(state: u64, n: usize) -> u64 {
    combine_schema(state, &(n as u64).to_le_bytes())
}

/// Continues `state` with a length-prefixed name.
const fn text(state: u64, name: &str) -> u64 {
    combine_schema(count(state, name.len()), name.as_bytes())
}

/// Continues `state` with a counted list of (field name, schema ID).
const fn field_list(mut state: u64, fields: &[(&str, u64)]) -> u64 {
    state = count(state, fields.len());
    let mut i = 0;
    while i < fields.len() {
        let (name, schema) = fields[i];
        state = combine_schema(text(state, name), &schema.to_le_bytes());
        i += 1;
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema_id;

    #[test]
    fn layout_schemas_have_golden_values() {
        // Golden values: changing them changes the fingerprint of every
        // derived type.
        let (u8_id, u64_id) = (schema_id("dinah.u8"), schema_id("dinah.u64"));
        assert_eq!(struct_schema("Unit", &[]), 0x9121_ef78_ab65_f7c2);
        assert_eq!(
            struct_schema("app.Point/1", &[("x", u64_id), ("y", u64_id)]),
            0x6475_59e7_2c52_19f5
        );
        assert_eq!(
            enum_schema(
                "Shape",
                &[
                    ("Empty", &[]),
                    ("Circle", &[("0", u64_id)]),
                    ("Rect", &[("w", u8_id), ("h", u8_id)]),
                ]
            ),
            0xb9d0_1d9f_dec2_0bd4
        );
        assert_eq!(enum_schema("E", &[]), 0x3df2_00d0_c027_a5b4);
    }

    #[cfg(feature = "derive")]
    #[test]
    fn the_derive_works_inside_this_crate() {
        use crate::{CodecError, SegmentReader, SegmentWriter, WireValue};

        #[derive(crate::WireValue, Debug, PartialEq)]
        enum Probe {
            Off,
            On { level: u8 },
        }

        assert_eq!(
            Probe::SCHEMA_ID,
            enum_schema(
                "Probe",
                &[("Off", &[]), ("On", &[("level", u8::SCHEMA_ID)])]
            )
        );
        let mut out = SegmentWriter::new();
        Probe::On { level: 3 }.encode(&mut out).unwrap();
        let back = Probe::decode(&mut SegmentReader::from_writer(&out));
        assert_eq!(back, Ok(Probe::On { level: 3 }));
        let mut bad = SegmentWriter::new();
        bad.push(&[2]);
        let error = Probe::decode(&mut SegmentReader::from_writer(&bad));
        assert_eq!(error, Err(CodecError::InvalidTag { index: 0, value: 2 }));
        assert_ne!(Probe::Off, Probe::On { level: 0 });
    }

    #[test]
    fn names_and_fields_are_delimited() {
        let id = schema_id("dinah.u8");
        assert_ne!(
            struct_schema("A", &[("ab", id), ("c", id)]),
            struct_schema("A", &[("a", id), ("bc", id)])
        );
        assert_ne!(
            struct_schema("Ab", &[("c", id)]),
            struct_schema("A", &[("bc", id)])
        );
        assert_ne!(struct_schema("A", &[]), enum_schema("A", &[]));
        // A field moved from one variant to the next.
        assert_ne!(
            enum_schema("E", &[("A", &[("0", id)]), ("B", &[])]),
            enum_schema("E", &[("A", &[]), ("B", &[("0", id)])])
        );
    }
}
