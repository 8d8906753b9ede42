//! `WireValue` for primitives, strings, packed vectors, options and tuples.
//!
//! | type | segments |
//! | --- | --- |
//! | integers, floats | one, little-endian, exactly the type's size |
//! | `bool` | one byte, 0 or 1 |
//! | `char` | four bytes, a Unicode scalar value |
//! | `()` | none |
//! | `String` | one, UTF-8 |
//! | `Vec<N>` for a numeric `N` (incl. `Vec<u8>`) | one, the elements packed little-endian |
//! | `Option<T>` | a one-byte tag segment (0 none, 1 some), then `T`'s segments if some |
//! | tuples up to 8 | each element's segments in order |

use super::{
    CodecError, SegmentReader, SegmentWriter, WireValue, composite_schema, packed, schema_id,
};

// Every numeric vector is one packed segment (`packed.rs`): a slice is
// written with one copy, and a vector handed over whole travels in its own
// allocation as a part of its frame held apart, which on the receiving
// side becomes the decoded vector when it was received in the vector's
// width (see `transport/tail.rs`).
macro_rules! numeric {
    ($($ty:ty => $name:literal),* $(,)?) => {$(
        impl WireValue for $ty {
            const SCHEMA_ID: u64 = schema_id(concat!("dinah.", $name));

            #[inline]
            fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
                out.push(&self.to_le_bytes());
                Ok(())
            }

            #[inline]
            fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
                Ok(<$ty>::from_le_bytes(input.next_array()?))
            }

            const VEC_SCHEMA_ID: u64 = schema_id(concat!("dinah.vec.", $name));

            fn encode_slice(items: &[Self], out: &mut SegmentWriter) -> Result<(), CodecError> {
                packed::encode_slice(items, out);
                Ok(())
            }

            fn encode_vec(items: Vec<Self>, out: &mut SegmentWriter) -> Result<(), CodecError> {
                out.push_numbers(items);
                Ok(())
            }

            fn decode_vec(input: &mut SegmentReader<'_>) -> Result<Vec<Self>, CodecError> {
                input.next_numbers()
            }
        }
    )*};
}

numeric!(
    u8 => "u8", u16 => "u16", u32 => "u32", u64 => "u64", u128 => "u128",
    i8 => "i8", i16 => "i16", i32 => "i32", i64 => "i64", i128 => "i128",
    f32 => "f32", f64 => "f64",
);

impl WireValue for bool {
    const SCHEMA_ID: u64 = schema_id("dinah.bool");

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        out.push(&[u8::from(*self)]);
        Ok(())
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let index = input.position();
        match input.next_array::<1>()? {
            [0] => Ok(false),
            [1] => Ok(true),
            [value] => Err(CodecError::InvalidTag { index, value }),
        }
    }
}

impl WireValue for char {
    const SCHEMA_ID: u64 = schema_id("dinah.char");

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        out.push(&u32::from(*self).to_le_bytes());
        Ok(())
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let index = input.position();
        char::from_u32(u32::from_le_bytes(input.next_array()?))
            .ok_or(CodecError::InvalidChar { index })
    }
}

impl WireValue for () {
    const SCHEMA_ID: u64 = schema_id("dinah.unit");

    fn encode(&self, _out: &mut SegmentWriter) -> Result<(), CodecError> {
        Ok(())
    }

    fn decode(_input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        Ok(())
    }
}

impl WireValue for String {
    const SCHEMA_ID: u64 = schema_id("dinah.string");

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        out.push(self.as_bytes());
        Ok(())
    }

    /// The string's buffer, handed over as a `Vec<u8>` is.
    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        out.push_owned(self.into_bytes());
        Ok(())
    }

    /// A received frame's segment held apart becomes the string without
    /// a copy (checked as UTF-8 in place).
    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let index = input.position();
        String::from_utf8(input.next_vec()?).map_err(|_| CodecError::InvalidUtf8 { index })
    }
}

impl<T: WireValue> WireValue for Option<T> {
    const SCHEMA_ID: u64 = composite_schema("dinah.option", &[T::SCHEMA_ID]);

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        match self {
            None => {
                out.push(&[0]);
                Ok(())
            }
            Some(value) => {
                out.push(&[1]);
                value.encode(out)
            }
        }
    }

    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        match self {
            None => {
                out.push(&[0]);
                Ok(())
            }
            Some(value) => {
                out.push(&[1]);
                value.encode_owned(out)
            }
        }
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let index = input.position();
        match input.next_array::<1>()? {
            [0] => Ok(None),
            [1] => Ok(Some(T::decode(input)?)),
            [value] => Err(CodecError::InvalidTag { index, value }),
        }
    }
}

macro_rules! tuple {
    ($($name:ident),+) => {
        impl<$($name: WireValue),+> WireValue for ($($name,)+) {
            const SCHEMA_ID: u64 = composite_schema("dinah.tuple", &[$($name::SCHEMA_ID),+]);

            #[expect(non_snake_case, reason = "the bindings are named after the type parameters")]
            fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
                let ($($name,)+) = self;
                $($name.encode(out)?;)+
                Ok(())
            }

            #[expect(non_snake_case, reason = "the bindings are named after the type parameters")]
            fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
                let ($($name,)+) = self;
                $($name.encode_owned(out)?;)+
                Ok(())
            }

            fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
                Ok(($($name::decode(input)?,)+))
            }
        }
    };
}

tuple!(A);
tuple!(A, B);
tuple!(A, B, C);
tuple!(A, B, C, D);
tuple!(A, B, C, D, E);
tuple!(A, B, C, D, E, F);
tuple!(A, B, C, D, E, F, G);
tuple!(A, B, C, D, E, F, G, H);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: WireValue + PartialEq + std::fmt::Debug>(value: T) {
        let mut out = SegmentWriter::new();
        value.encode(&mut out).unwrap();
        let mut input = SegmentReader::from_writer(&out);
        let back = T::decode(&mut input).unwrap();
        input.finish().unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn primitives_round_trip() {
        round_trip(0u8);
        round_trip(u64::MAX);
        round_trip(-7i32);
        round_trip(i128::MIN);
        round_trip(1.5f64);
        round_trip(true);
        round_trip('é');
        round_trip(());
        round_trip(String::from("héllo"));
        round_trip(vec![1u8, 2, 3]);
        round_trip(vec![1.0f64, -2.5]);
        round_trip(Vec::<u64>::new());
        round_trip(Some((1u32, String::from("x"))));
        round_trip(None::<u64>);
        round_trip((1u8, 2u16, 3u32, 4u64, 5i8, 6i16, 7i32, 8i64));
    }

    #[test]
    fn numeric_vectors_are_packed_little_endian_after_earlier_segments() {
        let mut out = SegmentWriter::new();
        7u8.encode(&mut out).unwrap();
        vec![0x0102_u16, 0x0304].encode(&mut out).unwrap();
        vec![-2_i32].encode(&mut out).unwrap();
        vec![0xAB_u8; 3].encode(&mut out).unwrap();
        let segments: Vec<&[u8]> = out.segments().collect();
        assert_eq!(
            segments,
            [
                &[7][..],
                &[2, 1, 4, 3],
                &[0xFE, 0xFF, 0xFF, 0xFF],
                &[0xAB; 3]
            ]
        );
        let big: Vec<u8> = (0..=255).cycle().take(1 << 20).collect();
        round_trip(big);
    }

    #[test]
    fn schema_ids_differ_by_type_and_order() {
        assert_ne!(u64::SCHEMA_ID, i64::SCHEMA_ID);
        assert_ne!(<(u8, u64)>::SCHEMA_ID, <(u64, u8)>::SCHEMA_ID);
        assert_ne!(<Vec<u8>>::SCHEMA_ID, String::SCHEMA_ID);
        assert_ne!(<Option<u8>>::SCHEMA_ID, u8::SCHEMA_ID);
    }

    fn decode_from<T: WireValue>(segments: &[&[u8]]) -> Result<T, CodecError> {
        let mut writer = SegmentWriter::new();
        for segment in segments {
            writer.push(segment);
        }
        let mut input = SegmentReader::from_writer(&writer);
        let value = T::decode(&mut input)?;
        input.finish()?;
        Ok(value)
    }

    #[test]
    fn bad_segments_are_typed_errors() {
        assert_eq!(
            decode_from::<u64>(&[]),
            Err(CodecError::MissingSegment { index: 0 })
        );
        assert_eq!(
            decode_from::<u64>(&[&[1, 2, 3]]),
            Err(CodecError::SegmentLength {
                index: 0,
                expected: 8,
                actual: 3
            })
        );
        assert_eq!(
            decode_from::<u8>(&[&[1], &[2]]),
            Err(CodecError::TrailingSegments { extra: 1 })
        );
        assert_eq!(
            decode_from::<bool>(&[&[2]]),
            Err(CodecError::InvalidTag { index: 0, value: 2 })
        );
        assert_eq!(
            decode_from::<String>(&[&[0xff]]),
            Err(CodecError::InvalidUtf8 { index: 0 })
        );
        assert_eq!(
            decode_from::<char>(&[&0xd800u32.to_le_bytes()]),
            Err(CodecError::InvalidChar { index: 0 })
        );
        assert_eq!(
            decode_from::<Vec<u32>>(&[&[1, 2, 3, 4, 5]]),
            Err(CodecError::SegmentLength {
                index: 0,
                expected: 4,
                actual: 5
            })
        );
        assert_eq!(
            decode_from::<Option<u8>>(&[&[7]]),
            Err(CodecError::InvalidTag { index: 0, value: 7 })
        );
    }
}
