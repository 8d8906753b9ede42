//! Building and reading the segments of an action's payload.

use std::cell::RefCell;
use std::fmt;

use dinah_core::wire::Segments;

use super::CodecError;

/// Collects the payload segments a [`WireValue`](super::WireValue) encodes
/// into: one contiguous buffer plus the segment boundaries, so a frame is
/// assembled with one copy.
#[derive(Default, Clone)]
pub struct SegmentWriter {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl SegmentWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one segment holding `bytes`.
    #[inline]
    pub fn push(&mut self, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
        self.ends.push(self.data.len());
    }

    /// Appends one segment written by `fill` into the shared buffer
    /// (everything `fill` appends becomes the segment).
    pub fn push_with(&mut self, fill: impl FnOnce(&mut Vec<u8>)) {
        fill(&mut self.data);
        self.ends.push(self.data.len());
    }

    /// The number of segments so far.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// No segment yet?
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Total payload bytes so far.
    pub fn payload_len(&self) -> usize {
        self.data.len()
    }

    /// The segments in order.
    pub fn segments(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.ends.iter().enumerate().map(move |(i, &end)| {
            let start = if i == 0 { 0 } else { self.ends[i - 1] };
            &self.data[start..end]
        })
    }

    /// The segments' bytes, back to back.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The segments' lengths in order.
    pub(crate) fn lens(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let len = end - start;
            start = end;
            len
        })
    }

    /// Forgets the segments, keeping the buffers' capacity.
    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }
}

/// The most buffer capacity a thread keeps in its scratch writer between
/// uses; a larger payload's buffer is released after it is encoded.
///
/// Payloads up to about a megabyte reuse the buffer: allocating a fresh
/// megabyte per call costs page faults that, on small VMs, took longer
/// than the copy into it. Each thread that encodes (owner threads and
/// domain workers) keeps at most this much.
const SCRATCH_KEEP_BYTES: usize = (1 << 20) + (64 << 10);

thread_local! {
    static SCRATCH: RefCell<SegmentWriter> = const {
        RefCell::new(SegmentWriter {
            data: Vec::new(),
            ends: Vec::new(),
        })
    };
}

/// Runs `f` with this thread's empty scratch writer, so encoding a value
/// on a hot path reuses one buffer instead of allocating two per value.
/// The writer is borrowed where it lives (nothing moves in or out of the
/// thread-local); nested use (an encoder calling this again) finds it
/// borrowed and gets a fresh writer.
pub(crate) fn with_scratch_writer<R>(f: impl FnOnce(&mut SegmentWriter) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut writer) => {
            // Cleared before use, so a panic in an earlier `f` leaves
            // nothing behind.
            writer.clear();
            let result = f(&mut writer);
            if writer.data.capacity() > SCRATCH_KEEP_BYTES {
                *writer = SegmentWriter::default();
            }
            result
        }
        Err(_) => f(&mut SegmentWriter::default()),
    })
}

impl fmt::Debug for SegmentWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentWriter")
            .field("segments", &self.ends.len())
            .field("bytes", &self.data.len())
            .finish()
    }
}

/// Reads a payload's segments in order during
/// [`WireValue::decode`](super::WireValue::decode).
pub struct SegmentReader<'a> {
    source: Source<'a>,
    taken: usize,
}

enum Source<'a> {
    Frame(Segments<'a>),
    Writer {
        writer: &'a SegmentWriter,
        next: usize,
    },
}

impl<'a> Iterator for Source<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Self::Frame(segments) => segments.next(),
            Self::Writer { writer, next } => {
                let end = *writer.ends.get(*next)?;
                let start = if *next == 0 {
                    0
                } else {
                    writer.ends[*next - 1]
                };
                *next += 1;
                Some(&writer.data[start..end])
            }
        }
    }
}

impl<'a> SegmentReader<'a> {
    /// A reader over the segments of a received frame.
    #[inline]
    pub fn from_frame(segments: Segments<'a>) -> Self {
        Self {
            source: Source::Frame(segments),
            taken: 0,
        }
    }

    /// A reader over what `writer` holds (local calls, tests).
    pub fn from_writer(writer: &'a SegmentWriter) -> Self {
        Self {
            source: Source::Writer { writer, next: 0 },
            taken: 0,
        }
    }

    /// The next segment.
    ///
    /// # Errors
    ///
    /// [`CodecError::MissingSegment`] if there is none.
    #[inline]
    pub fn next_segment(&mut self) -> Result<&'a [u8], CodecError> {
        match self.source.next() {
            Some(segment) => {
                self.taken += 1;
                Ok(segment)
            }
            None => Err(CodecError::MissingSegment { index: self.taken }),
        }
    }

    /// The next segment, which must be exactly `N` bytes.
    ///
    /// # Errors
    ///
    /// [`CodecError::MissingSegment`] or [`CodecError::SegmentLength`].
    #[inline]
    pub fn next_array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let index = self.taken;
        let segment = self.next_segment()?;
        segment.try_into().map_err(|_| CodecError::SegmentLength {
            index,
            expected: N,
            actual: segment.len(),
        })
    }

    /// Segments read so far.
    pub fn position(&self) -> usize {
        self.taken
    }

    /// Checks that every segment was read.
    ///
    /// # Errors
    ///
    /// [`CodecError::TrailingSegments`] if some are left.
    #[inline]
    pub fn finish(mut self) -> Result<(), CodecError> {
        let extra = self.source.by_ref().count();
        if extra == 0 {
            Ok(())
        } else {
            Err(CodecError::TrailingSegments { extra })
        }
    }
}

impl fmt::Debug for SegmentReader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentReader")
            .field("position", &self.taken)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_writer_starts_empty_and_keeps_small_buffers() {
        let first = with_scratch_writer(|writer| {
            assert!(writer.is_empty());
            writer.push(b"abc");
            writer.data.as_ptr()
        });
        let second = with_scratch_writer(|writer| {
            assert!(writer.is_empty(), "cleared between uses");
            writer.push(b"de");
            writer.data.as_ptr()
        });
        assert_eq!(first, second, "the buffer is reused");
    }

    #[test]
    fn nested_use_gets_its_own_writer() {
        with_scratch_writer(|outer| {
            outer.push(b"outer");
            with_scratch_writer(|inner| {
                assert!(inner.is_empty());
                inner.push(b"inner");
            });
            assert_eq!(outer.segments().collect::<Vec<_>>(), [b"outer".as_slice()]);
        });
    }

    #[test]
    fn a_panic_while_encoding_leaves_the_writer_usable_and_empty() {
        let panicked = std::panic::catch_unwind(|| {
            with_scratch_writer(|writer| {
                writer.push(b"half");
                panic!("an encoder failed");
            })
        });
        assert!(panicked.is_err());
        with_scratch_writer(|writer| assert!(writer.is_empty()));
    }

    #[test]
    fn a_large_buffer_is_released_after_use() {
        with_scratch_writer(|writer| writer.push(&vec![0; SCRATCH_KEEP_BYTES + 1]));
        with_scratch_writer(|writer| {
            assert!(writer.data.capacity() <= SCRATCH_KEEP_BYTES);
        });
    }
}
