//! `WireValue` for sequences, maps, `Result` and boxes.
//!
//! | type | segments |
//! | --- | --- |
//! | `Vec<T>`, `Box<[T]>`, `[T; N]` | `T::encode_slice`: one group (the count as a `u64`, then each element), or one packed segment for numeric `T` |
//! | `BTreeMap<K, V>`, `HashMap<K, V>` | one group: the count as a `u64`, then each key and its value (a `BTreeMap` in key order) |
//! | `Result<T, E>` | a one-byte tag segment (0 `Ok`, 1 `Err`), then the value |
//! | `Box<T>` | `T`'s segments |
//!
//! Both maps have one schema, so a map sent as one kind can be received as
//! the other. A key that arrives twice is refused, never silently dropped.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash};

use super::{CodecError, SegmentReader, SegmentWriter, WireValue, composite_schema};

/// Bytes of a group's element count.
const COUNT_BYTES: usize = 8;

/// `items` as one group: the count, then each element's segments.
pub(super) fn encode_group<T: WireValue>(
    items: &[T],
    out: &mut SegmentWriter,
) -> Result<(), CodecError> {
    let count = items.len() as u64;
    out.push_group(|group| {
        group.push(&count.to_le_bytes());
        let start = group.payload_len();
        for item in items {
            item.encode(group)?;
        }
        // Elements that wrote nothing are bounded as the decoder bounds
        // them: no more than the group's bytes.
        if group.payload_len() == start
            && items.len() > COUNT_BYTES + super::segments::RECORD_PREFIX
        {
            return Err(CodecError::SequenceTooLong { count });
        }
        Ok(())
    })
}

/// Reads a group's count; refuses one larger than the bytes left in the
/// group, which bounds both the loop and the memory reserved for it.
fn group_count(group: &mut SegmentReader<'_>) -> Result<usize, CodecError> {
    let count = u64::from_le_bytes(group.next_array()?);
    let bound = group.group_bytes_left() + COUNT_BYTES + super::segments::RECORD_PREFIX;
    match usize::try_from(count) {
        Ok(count) if count <= bound => Ok(count),
        _ => Err(CodecError::SequenceTooLong { count }),
    }
}

/// Reads a group written by [`encode_group`].
pub(super) fn decode_group<T: WireValue>(
    input: &mut SegmentReader<'_>,
) -> Result<Vec<T>, CodecError> {
    let mut group = input.next_group()?;
    let count = group_count(&mut group)?;
    let mut items = Vec::with_capacity(count);
    for _ in 0..count {
        items.push(T::decode(&mut group)?);
    }
    group.finish()?;
    Ok(items)
}

impl<T: WireValue> WireValue for Vec<T> {
    const SCHEMA_ID: u64 = T::VEC_SCHEMA_ID;

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        T::encode_slice(self, out)
    }

    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        T::encode_vec(self, out)
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        T::decode_vec(input)
    }
}

impl<T: WireValue> WireValue for Box<[T]> {
    const SCHEMA_ID: u64 = T::VEC_SCHEMA_ID;

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        T::encode_slice(self, out)
    }

    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        T::encode_vec(self.into_vec(), out)
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        T::decode_vec(input).map(Vec::into_boxed_slice)
    }
}

impl<T: WireValue, const N: usize> WireValue for [T; N] {
    const SCHEMA_ID: u64 = T::VEC_SCHEMA_ID;

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        T::encode_slice(self, out)
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let items = T::decode_vec(input)?;
        let actual = items.len();
        items.try_into().map_err(|_| CodecError::ArrayLength {
            expected: N,
            actual,
        })
    }
}

impl<T: WireValue> WireValue for Box<T> {
    const SCHEMA_ID: u64 = T::SCHEMA_ID;

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        T::encode(self, out)
    }

    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        T::encode_owned(*self, out)
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        T::decode(input).map(Box::new)
    }
}

impl<T: WireValue, E: WireValue> WireValue for Result<T, E> {
    const SCHEMA_ID: u64 = composite_schema("dinah.result", &[T::SCHEMA_ID, E::SCHEMA_ID]);

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        match self {
            Ok(value) => {
                out.push(&[0]);
                value.encode(out)
            }
            Err(error) => {
                out.push(&[1]);
                error.encode(out)
            }
        }
    }

    fn encode_owned(self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        match self {
            Ok(value) => {
                out.push(&[0]);
                value.encode_owned(out)
            }
            Err(error) => {
                out.push(&[1]);
                error.encode_owned(out)
            }
        }
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let index = input.position();
        match input.next_array::<1>()? {
            [0] => T::decode(input).map(Ok),
            [1] => E::decode(input).map(Err),
            [value] => Err(CodecError::InvalidTag { index, value }),
        }
    }
}

/// A map's entries as one group.
fn encode_map<'a, K, V>(
    len: usize,
    entries: impl Iterator<Item = (&'a K, &'a V)>,
    out: &mut SegmentWriter,
) -> Result<(), CodecError>
where
    K: WireValue + 'a,
    V: WireValue + 'a,
{
    out.push_group(|group| {
        group.push(&(len as u64).to_le_bytes());
        for (key, value) in entries {
            key.encode(group)?;
            value.encode(group)?;
        }
        Ok(())
    })
}

/// Reads a map's group, handing each entry to `insert`, which says whether
/// the key was new.
fn decode_map<K: WireValue, V: WireValue>(
    input: &mut SegmentReader<'_>,
    mut insert: impl FnMut(K, V) -> bool,
) -> Result<(), CodecError> {
    let mut group = input.next_group()?;
    let count = group_count(&mut group)?;
    for entry in 0..count {
        let key = K::decode(&mut group)?;
        let value = V::decode(&mut group)?;
        if !insert(key, value) {
            return Err(CodecError::DuplicateKey { entry });
        }
    }
    group.finish()
}

impl<K: WireValue + Ord, V: WireValue> WireValue for BTreeMap<K, V> {
    const SCHEMA_ID: u64 = composite_schema("dinah.map", &[K::SCHEMA_ID, V::SCHEMA_ID]);

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        encode_map(self.len(), self.iter(), out)
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let mut map = BTreeMap::new();
        decode_map(input, |key, value| map.insert(key, value).is_none())?;
        Ok(map)
    }
}

impl<K, V, S> WireValue for HashMap<K, V, S>
where
    K: WireValue + Eq + Hash,
    V: WireValue,
    S: BuildHasher + Default + Send + 'static,
{
    const SCHEMA_ID: u64 = composite_schema("dinah.map", &[K::SCHEMA_ID, V::SCHEMA_ID]);

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        encode_map(self.len(), self.iter(), out)
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let mut map = HashMap::default();
        decode_map(input, |key, value| map.insert(key, value).is_none())?;
        Ok(map)
    }
}
