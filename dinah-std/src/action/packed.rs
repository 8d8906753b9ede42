//! Vectors of numbers as one packed segment: the elements back to back,
//! each little-endian.
//!
//! On a little-endian machine a number's memory is its wire bytes, so a
//! slice is written with one copy, a segment is read into a new vector
//! with one copy, and a vector handed over whole becomes a frame's tail
//! without any (see [`Tail`](crate::transport::Tail)). On a big-endian
//! machine each element is converted on the way in and out.

use super::{CodecError, SegmentWriter};
use crate::transport::TailNumber;

/// Are a number's bytes in memory its bytes on the wire?
pub(super) const NATIVE_IS_WIRE: bool = cfg!(target_endian = "little");

/// Appends `items` as one packed segment (inside a group, one record).
pub(super) fn encode_slice<T: TailNumber>(items: &[T], out: &mut SegmentWriter) {
    if NATIVE_IS_WIRE {
        out.push(bytemuck::cast_slice(items));
        return;
    }
    out.push_with(|buffer| {
        for item in items {
            let at = buffer.len();
            buffer.extend_from_slice(bytemuck::bytes_of(item));
            buffer[at..].reverse();
        }
    });
}

/// The numbers packed in `segment` (segment `index` of its reader), in
/// a new vector.
///
/// # Errors
///
/// [`CodecError::SegmentLength`] if `segment` is not a whole number of
/// `T`s.
pub(super) fn decode<T: TailNumber>(segment: &[u8], index: usize) -> Result<Vec<T>, CodecError> {
    let size = size_of::<T>();
    if segment.len() % size != 0 {
        return Err(CodecError::SegmentLength {
            index,
            expected: size,
            actual: segment.len(),
        });
    }
    if NATIVE_IS_WIRE {
        // One copy: straight from the segment where it is aligned for `T`
        // (always for bytes), else into a zeroed vector.
        return Ok(match bytemuck::try_cast_slice::<u8, T>(segment) {
            Ok(items) => items.to_vec(),
            Err(_) => bytemuck::allocation::pod_collect_to_vec(segment),
        });
    }
    let mut items: Vec<T> = bytemuck::allocation::pod_collect_to_vec(segment);
    for item in &mut items {
        bytemuck::bytes_of_mut(item).reverse();
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::SegmentReader;

    #[test]
    fn a_slice_is_one_segment_of_little_endian_elements() {
        let mut out = SegmentWriter::new();
        encode_slice(&[1u32, 0x0102_0304], &mut out);
        let segments: Vec<&[u8]> = out.segments().collect();
        assert_eq!(segments, [&[1, 0, 0, 0, 4, 3, 2, 1][..]]);
        let mut input = SegmentReader::from_writer(&out);
        let segment = input.next_segment().expect("one segment");
        assert_eq!(decode::<u32>(segment, 0), Ok(vec![1, 0x0102_0304]));
    }

    #[test]
    fn a_segment_reads_the_same_wherever_it_starts() {
        let bytes: Vec<u8> = (0..=40).collect();
        let expected = |start: usize| -> Vec<u64> {
            bytes[start..start + 32]
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                .collect()
        };
        // Every offset: some aligned for a `u64`, most not.
        for start in 0..8 {
            let segment = &bytes[start..start + 32];
            assert_eq!(decode::<u64>(segment, 0), Ok(expected(start)), "at {start}");
        }
        assert_eq!(decode::<u8>(&bytes[3..7], 0), Ok(vec![3, 4, 5, 6]));
    }

    #[test]
    fn a_partial_element_is_refused() {
        assert_eq!(
            decode::<f64>(&[0; 12], 3),
            Err(CodecError::SegmentLength {
                index: 3,
                expected: 8,
                actual: 12
            })
        );
        assert_eq!(decode::<u16>(&[], 0), Ok(vec![]));
    }
}
