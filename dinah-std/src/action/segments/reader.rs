//! Reading a payload's segments back: from a whole frame, a split one
//! (its tail held apart) or a parted one (middle parts held apart too).

use std::fmt;

use dinah_core::wire::{
    PartPlace, PartedFrameRef, PartedSegment, PartedSegments, Segments, SplitFrameRef,
};

use super::super::{CodecError, packed};
use super::{RECORD_PREFIX, SegmentWriter};
use crate::transport::{Tail, TailNumber};

/// Reads a payload's segments in order during
/// [`WireValue::decode`](crate::action::WireValue::decode).
pub struct SegmentReader<'a> {
    source: Source<'a>,
    taken: usize,
    /// A received frame's detached last segment, read after the source's
    /// segments; its buffer can be taken ([`next_vec`](Self::next_vec),
    /// [`next_numbers`](Self::next_numbers)).
    tail: Option<&'a mut Tail>,
}

enum Source<'a> {
    Frame(Segments<'a>),
    /// A received frame with parts held apart (see [`Parted`]).
    Parted(Parted<'a>),
    Writer {
        writer: &'a SegmentWriter,
        next: usize,
    },
    /// The records of a group not read yet.
    Group(&'a [u8]),
}

/// The segments of a received frame held as a head and parts held apart:
/// the middle parts not read yet, then the tail.
struct Parted<'a> {
    segments: PartedSegments<'a>,
    middle: &'a mut [(usize, Tail)],
    tail: Option<&'a mut Tail>,
    /// The tail's place: the head's end.
    tail_at: usize,
}

impl<'a> Parted<'a> {
    /// The place of the next part not read yet.
    fn next_place(&self) -> Option<PartPlace> {
        match self.middle.first() {
            Some((at, part)) => Some(PartPlace {
                at: *at,
                len: part.len(),
            }),
            None => self.tail.as_ref().map(|tail| PartPlace {
                at: self.tail_at,
                len: tail.len(),
            }),
        }
    }

    /// The next part, lent for the reader's lifetime.
    fn take_part(&mut self) -> Option<&'a mut Tail> {
        match std::mem::take(&mut self.middle).split_first_mut() {
            Some(((_, part), rest)) => {
                self.middle = rest;
                Some(part)
            }
            None => self.tail.take(),
        }
    }

    /// The next segment: bytes in the head, or a part.
    fn next_segment(&mut self) -> Option<Segment<'a>> {
        match self.segments.next(self.next_place())? {
            PartedSegment::Inline(bytes) => Some(Segment::Inline(bytes)),
            PartedSegment::Apart => self.take_part().map(Segment::Apart),
        }
    }

    /// The next segment's part, taken, if the next segment is one.
    fn take_if_apart(&mut self) -> Option<Tail> {
        let mut probe = self.segments.clone();
        match probe.next(self.next_place())? {
            PartedSegment::Apart => {
                self.segments = probe;
                self.take_part().map(std::mem::take)
            }
            PartedSegment::Inline(_) => None,
        }
    }
}

/// A segment of a [`Parted`] frame.
enum Segment<'a> {
    Inline(&'a [u8]),
    Apart(&'a mut Tail),
}

impl<'a> Iterator for Source<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            Self::Frame(segments) => segments.next(),
            Self::Parted(parted) => match parted.next_segment()? {
                Segment::Inline(bytes) => Some(bytes),
                Segment::Apart(part) => {
                    let part: &'a Tail = part;
                    Some(part.as_bytes())
                }
            },
            Self::Writer { writer, next } => {
                let writer: &'a SegmentWriter = writer;
                if *next >= writer.len() {
                    return None;
                }
                *next += 1;
                Some(writer.segment(*next - 1))
            }
            Self::Group(rest) => {
                let (prefix, after) = rest.split_first_chunk::<RECORD_PREFIX>()?;
                let len = usize::try_from(u32::from_le_bytes(*prefix)).ok()?;
                let record = after.get(..len)?;
                *rest = &after[len..];
                Some(record)
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
            tail: None,
        }
    }

    /// A reader over a received frame held in two parts: the segments in
    /// its head, then `tail`, its detached last segment, whose buffer a
    /// vector read from it takes over ([`next_vec`](Self::next_vec),
    /// [`next_numbers`](Self::next_numbers)).
    pub(crate) fn from_split_frame(frame: SplitFrameRef<'a>, tail: &'a mut Tail) -> Self {
        debug_assert_eq!(frame.tail_len(), tail.len());
        Self {
            source: Source::Frame(frame.head_segments()),
            taken: 0,
            tail: Some(tail),
        }
    }

    /// A reader over a received frame held as a head and parts held apart
    /// (`middle`, then `tail`), whose buffers vectors read from them take
    /// over ([`next_vec`](Self::next_vec),
    /// [`next_numbers`](Self::next_numbers)).
    pub(crate) fn from_parted_frame(
        frame: PartedFrameRef<'a>,
        middle: &'a mut [(usize, Tail)],
        tail: Option<&'a mut Tail>,
    ) -> Self {
        Self {
            source: Source::Parted(Parted {
                segments: frame.segments(),
                middle,
                tail,
                tail_at: frame.head_len(),
            }),
            taken: 0,
            tail: None,
        }
    }

    /// A reader over the records of `group`, a segment written by
    /// [`SegmentWriter::push_group`] (the collectives carry values so).
    pub(crate) fn from_group(group: &'a [u8]) -> Self {
        Self {
            source: Source::Group(group),
            taken: 0,
            tail: None,
        }
    }

    /// A reader over what `writer` holds (local calls, tests).
    pub fn from_writer(writer: &'a SegmentWriter) -> Self {
        Self {
            source: Source::Writer { writer, next: 0 },
            taken: 0,
            tail: None,
        }
    }

    /// The next segment.
    ///
    /// # Errors
    ///
    /// [`CodecError::MissingSegment`] if there is none.
    #[inline]
    pub fn next_segment(&mut self) -> Result<&'a [u8], CodecError> {
        let next = match self.source.next() {
            Some(segment) => Some(segment),
            // The detached last segment, lent for the reader's lifetime.
            None => self.tail.take().map(|tail| -> &'a [u8] {
                let tail: &'a Tail = tail;
                tail.as_bytes()
            }),
        };
        match next {
            Some(segment) => {
                self.taken += 1;
                Ok(segment)
            }
            None => Err(CodecError::MissingSegment { index: self.taken }),
        }
    }

    /// The next segment as an owned buffer: a received frame's segment
    /// held apart as bytes is handed over without a copy (its buffer
    /// becomes the value), any other segment (or a part kept as wider
    /// numbers) is copied.
    ///
    /// # Errors
    ///
    /// [`CodecError::MissingSegment`] if there is none.
    pub fn next_vec(&mut self) -> Result<Vec<u8>, CodecError> {
        if let Some(tail) = self.take_tail() {
            return Ok(tail
                .into_bytes()
                .unwrap_or_else(|tail| tail.as_bytes().to_vec()));
        }
        self.next_segment().map(<[u8]>::to_vec)
    }

    /// The next segment as a vector of numbers packed little-endian: a
    /// received frame's segment held apart in `T`'s width (see [`Tail`])
    /// becomes the vector without a copy; anything else is copied in one
    /// pass.
    ///
    /// # Errors
    ///
    /// [`CodecError::MissingSegment`] if there is none;
    /// [`CodecError::SegmentLength`] if its length is not a whole number
    /// of `T`s.
    pub(crate) fn next_numbers<T: TailNumber>(&mut self) -> Result<Vec<T>, CodecError> {
        let index = self.position();
        if let Some(tail) = self.take_tail() {
            return tail
                .into_numbers()
                .or_else(|tail| packed::decode(tail.as_bytes(), index));
        }
        packed::decode(self.next_segment()?, index)
    }

    /// The next segment's buffer, taken, if it is held apart.
    fn take_tail(&mut self) -> Option<Tail> {
        let at_tail = match &mut self.source {
            Source::Frame(segments) => segments.len() == 0,
            Source::Parted(parted) => {
                let part = parted.take_if_apart()?;
                self.taken += 1;
                return Some(part);
            }
            Source::Writer { .. } | Source::Group(_) => false,
        };
        if !at_tail {
            return None;
        }
        let tail = self.tail.take()?;
        self.taken += 1;
        Some(std::mem::take(tail))
    }

    /// A reader over the records of the next segment, a group written by
    /// [`SegmentWriter::push_group`]. The records are checked as they are
    /// read: one that claims more bytes than the group holds reads as
    /// missing, and [`finish`](Self::finish) on the group's reader
    /// reports bytes left over. Errors of the group's reader count
    /// segments from the group's start.
    ///
    /// # Errors
    ///
    /// [`CodecError::MissingSegment`] if there is no next segment.
    pub fn next_group(&mut self) -> Result<SegmentReader<'a>, CodecError> {
        let group = self.next_segment()?;
        Ok(SegmentReader {
            source: Source::Group(group),
            taken: 0,
            tail: None,
        })
    }

    /// Bytes left in this reader's group (0 for a reader of a frame or a
    /// writer): a bound on how many more records it can hold.
    pub(crate) fn group_bytes_left(&self) -> usize {
        match &self.source {
            Source::Group(rest) => rest.len(),
            Source::Frame(_) | Source::Parted(_) | Source::Writer { .. } => 0,
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
        let extra = self.source.by_ref().count() + usize::from(self.tail.is_some());
        // A group's bytes that do not form a whole record count as one
        // more unread segment.
        let torn = usize::from(matches!(self.source, Source::Group(rest) if !rest.is_empty()));
        if extra + torn == 0 {
            Ok(())
        } else {
            Err(CodecError::TrailingSegments {
                extra: extra + torn,
            })
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
