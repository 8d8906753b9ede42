//! Building the segments of an action's payload (reading them back is
//! `reader.rs`).

use std::fmt;

use super::{CodecError, packed};
use crate::transport::{Tail, TailNumber, TailWidth};

/// Collects the payload segments a [`WireValue`](super::WireValue) encodes
/// into: one contiguous buffer plus the segment boundaries, so a frame is
/// assembled with one copy.
///
/// # Detached segments
///
/// A large buffer the value owns can be handed over whole
/// ([`push_owned`](Self::push_owned)): it stays in its own allocation, a
/// segment held apart from the shared buffer, and travels to the
/// transport so, never copied next to the frame's head (the frame's tail
/// if it is the payload's last segment, a middle part otherwise, see
/// [`Frame`](crate::transport::Frame)). Segments pushed after it go into
/// the shared buffer as usual.
///
/// # Groups
///
/// A frame carries a bounded number of segments
/// ([`ProtocolLimits::max_segments`](dinah_core::ProtocolLimits)), so a
/// value made of many parts (a vector of structs, a map) writes them as one
/// **group** ([`push_group`](Self::push_group)): a single segment holding
/// the parts as records, each a little-endian `u32` length and its bytes.
/// Inside a group every `push` writes a record; groups nest.
#[derive(Default, Clone)]
pub struct SegmentWriter {
    /// The room reserved for a frame's head (`start` bytes), then the
    /// segments back to back.
    pub(super) data: Vec<u8>,
    /// Where each segment ends in `data`.
    pub(super) ends: Vec<usize>,
    /// How many groups are open: above zero, pushes write records.
    pub(super) depth: usize,
    /// Bytes at the front of `data` reserved for a frame's head (see
    /// [`reserve_head`](Self::reserve_head)); the first segment starts
    /// there.
    pub(super) start: usize,
    /// The detached segments (see [the type's docs](Self)), in order.
    pub(super) apart: Vec<Apart>,
}

/// A segment held apart from a [`SegmentWriter`]'s shared buffer.
#[derive(Clone)]
pub(super) struct Apart {
    /// Its index among all the payload's segments.
    segment: usize,
    /// Where it goes in the shared buffer: before the byte at this offset.
    at: usize,
    /// Its bytes.
    part: Tail,
}

impl SegmentWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one segment holding `bytes` (inside a group, one record).
    #[inline]
    pub fn push(&mut self, bytes: &[u8]) {
        if self.depth > 0 {
            self.data.extend_from_slice(&record_len(bytes.len()));
            self.data.extend_from_slice(bytes);
        } else {
            self.data.extend_from_slice(bytes);
            self.ends.push(self.data.len());
        }
    }

    /// Appends one segment written by `fill` into the shared buffer
    /// (everything `fill` appends becomes the segment; inside a group, one
    /// record).
    pub fn push_with(&mut self, fill: impl FnOnce(&mut Vec<u8>)) {
        if self.depth > 0 {
            let at = self.open_record();
            fill(&mut self.data);
            self.close_record(at);
        } else {
            fill(&mut self.data);
            self.ends.push(self.data.len());
        }
    }

    /// As [`push_with`](Self::push_with) for a `fill` that can fail: on an
    /// error nothing of the segment is kept.
    ///
    /// # Errors
    ///
    /// `fill`'s error.
    pub fn try_push_with(
        &mut self,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), CodecError>,
    ) -> Result<(), CodecError> {
        let start = self.data.len();
        let at = (self.depth > 0).then(|| self.open_record());
        if let Err(error) = fill(&mut self.data) {
            self.data.truncate(start);
            return Err(error);
        }
        match at {
            Some(at) => self.close_record(at),
            None => self.ends.push(self.data.len()),
        }
        Ok(())
    }

    /// Appends one segment (inside a group, one record) holding everything
    /// `encode` pushes, as records (see [Groups](#groups)). If `encode`
    /// fails, nothing of it is kept.
    ///
    /// # Errors
    ///
    /// `encode`'s error.
    pub fn push_group(
        &mut self,
        encode: impl FnOnce(&mut SegmentWriter) -> Result<(), CodecError>,
    ) -> Result<(), CodecError> {
        let start = self.data.len();
        let at = (self.depth > 0).then(|| self.open_record());
        self.depth += 1;
        let encoded = encode(self);
        self.depth -= 1;
        if let Err(error) = encoded {
            self.data.truncate(start);
            return Err(error);
        }
        match at {
            Some(at) => self.close_record(at),
            None => self.ends.push(self.data.len()),
        }
        Ok(())
    }

    /// Appends one segment holding `bytes`, taking the buffer instead of
    /// copying it where that saves a copy: a buffer of at least
    /// [`DETACH_FROM`] bytes, outside a group, becomes a detached segment
    /// (see [the type's docs](Self)). Anything else is copied as by
    /// [`push`](Self::push).
    pub fn push_owned(&mut self, bytes: Vec<u8>) {
        self.push_numbers(bytes);
    }

    /// [`push_owned`](Self::push_owned) for a vector of numbers, packed
    /// little-endian: kept in its own allocation as a detached segment (a
    /// [`Tail`] of its width) on a little-endian machine, copied
    /// otherwise.
    pub(crate) fn push_numbers<T: TailNumber>(&mut self, items: Vec<T>) {
        let len = size_of_val(items.as_slice());
        let converted = !packed::NATIVE_IS_WIRE && T::WIDTH != TailWidth::One;
        if self.depth > 0 || len < DETACH_FROM || converted {
            packed::encode_slice(&items, self);
            return;
        }
        self.apart.push(Apart {
            segment: self.len(),
            at: self.data.len(),
            part: Tail::from_numbers(items),
        });
    }

    /// Reserves a record's length prefix; returns where it is.
    fn open_record(&mut self) -> usize {
        let at = self.data.len();
        self.data.extend_from_slice(&[0; RECORD_PREFIX]);
        at
    }

    /// Writes the length of the record whose prefix is at `at`.
    fn close_record(&mut self, at: usize) {
        let len = self.data.len() - at - RECORD_PREFIX;
        self.data[at..at + RECORD_PREFIX].copy_from_slice(&record_len(len));
    }

    /// The number of segments so far.
    pub fn len(&self) -> usize {
        self.ends.len() + self.apart.len()
    }

    /// No segment yet?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total payload bytes so far.
    pub fn payload_len(&self) -> usize {
        self.data.len() - self.start + self.apart_len()
    }

    /// Is any segment detached?
    #[inline]
    pub(crate) fn has_apart(&self) -> bool {
        !self.apart.is_empty()
    }

    /// The bytes of the detached segments together (0 if there are none).
    pub(crate) fn apart_len(&self) -> usize {
        self.apart.iter().map(|apart| apart.part.len()).sum()
    }

    /// The width to tell receivers the large segments pack numbers of
    /// (the header's [`TailWidth`]): the width every detached segment is
    /// kept in if they share one, else the last segment's if it is
    /// detached, else bytes.
    pub(crate) fn parts_width(&self) -> TailWidth {
        let mut widths = self.apart.iter().map(|apart| apart.part.width());
        let Some(first) = widths.next() else {
            return TailWidth::One;
        };
        if widths.all(|width| width == first) {
            return first;
        }
        match self.apart.last() {
            Some(apart) if apart.segment + 1 == self.len() => apart.part.width(),
            _ => TailWidth::One,
        }
    }

    /// The segments in order.
    pub fn segments(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(move |i| self.segment(i))
    }

    /// Segment `i` (below [`len`](Self::len)).
    fn segment(&self, i: usize) -> &[u8] {
        // Detached segments before it, and whether it is one.
        let before = self.apart.partition_point(|apart| apart.segment < i);
        if let Some(apart) = self.apart.get(before).filter(|apart| apart.segment == i) {
            return apart.part.as_bytes();
        }
        let inline = i - before;
        let start = if inline == 0 {
            self.start
        } else {
            self.ends[inline - 1]
        };
        &self.data[start..self.ends[inline]]
    }

    /// The bytes of the segments in the shared buffer, back to back: all
    /// of them but the detached ones.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data[self.start..]
    }

    /// The segments' lengths in order, the detached ones' included.
    pub(crate) fn lens(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        (0..self.len()).map(|i| self.segment(i).len())
    }

    /// The lengths of the segments in the shared buffer, in order (all of
    /// them but the detached ones).
    #[inline]
    pub(crate) fn inline_lens(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        let mut start = self.start;
        self.ends.iter().map(move |&end| {
            let len = end - start;
            start = end;
            len
        })
    }

    /// Takes the detached segments, as a frame holds them: the ones
    /// before the last segment as middle parts, each with its offset in
    /// a head of `head_len` bytes followed by this writer's shared
    /// buffer's segments, and the last segment if it is detached (empty
    /// otherwise).
    pub(crate) fn take_apart(&mut self, head_len: usize) -> (Vec<(usize, Tail)>, Tail) {
        let last = self.len().checked_sub(1);
        let mut apart = std::mem::take(&mut self.apart);
        let tail = match apart.last() {
            Some(final_one) if Some(final_one.segment) == last => {
                apart.pop().map(|apart| apart.part).unwrap_or_default()
            }
            _ => Tail::new(),
        };
        let middle = apart
            .into_iter()
            .map(|apart| (head_len + apart.at - self.start, apart.part))
            .collect();
        (middle, tail)
    }

    /// Forgets the segments, keeping the shared buffer's capacity.
    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
        self.depth = 0;
        self.start = 0;
        self.apart.clear();
    }

    /// Reserves `len` bytes before the first segment (an empty writer
    /// only), for the head of the frame the payload will travel in: if the
    /// head turns out to be exactly `len` bytes, the frame is written
    /// around the payload instead of copying it (see
    /// [`frame_in_place`](Self::frame_in_place)).
    pub(crate) fn reserve_head(&mut self, len: usize) {
        debug_assert!(self.data.is_empty() && self.ends.is_empty());
        self.data.resize(len, 0);
        self.start = len;
    }

    /// The bytes reserved before the first segment.
    pub(crate) fn head_room(&self) -> usize {
        self.start
    }

    /// The buffer as a frame of `head` followed by the segments in it (a
    /// detached segments must have been taken first), if the
    /// room reserved before them is exactly `head`'s length: the head is
    /// written into that room and the buffer is handed over whole (the
    /// writer is left empty, writing next into the buffer `replacement`
    /// gives). `None`, changing nothing, otherwise.
    pub(crate) fn frame_in_place(
        &mut self,
        head: &[u8],
        replacement: impl FnOnce() -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        if head.len() != self.start || self.data.len() < self.start {
            return None;
        }
        debug_assert!(!self.has_apart(), "the detached segments were taken");
        self.data[..self.start].copy_from_slice(head);
        let frame = std::mem::replace(&mut self.data, replacement());
        self.clear();
        Some(frame)
    }
}

/// The smallest buffer [`SegmentWriter::push_owned`] keeps whole as a
/// detached segment (64 KiB), and the smallest segment a receiving
/// transport keeps apart. Below it, copying the bytes next to the frame's
/// head costs less than sending and receiving a second buffer.
pub const DETACH_FROM: usize = 64 << 10;

/// Bytes of a record's length prefix in a group.
pub(super) const RECORD_PREFIX: usize = 4;

/// A record's length prefix. A record longer than `u32::MAX` bytes is
/// written with the prefix `u32::MAX`: its group is then longer than any
/// segment the protocol accepts (segments are bounded by a `u32`), so the
/// frame is refused before it is sent rather than read wrongly.
fn record_len(len: usize) -> [u8; RECORD_PREFIX] {
    u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes()
}

impl fmt::Debug for SegmentWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentWriter")
            .field("segments", &self.len())
            .field("bytes", &self.payload_len())
            .finish()
    }
}

mod reader;

pub use reader::SegmentReader;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detached_segments_keep_their_place_among_the_others() {
        let mut writer = SegmentWriter::new();
        writer.reserve_head(10);
        writer.push_owned(vec![1; DETACH_FROM]);
        writer.push(b"ab");
        writer.push_owned(vec![2; DETACH_FROM + 1]);
        writer.push_owned(vec![3; 4]);
        writer.push_owned(vec![4; DETACH_FROM]);
        assert_eq!(writer.len(), 5);
        assert!(writer.has_apart());
        let lens: Vec<usize> = writer.lens().collect();
        assert_eq!(lens, [DETACH_FROM, 2, DETACH_FROM + 1, 4, DETACH_FROM]);
        assert_eq!(writer.inline_lens().collect::<Vec<_>>(), [2, 4]);
        assert_eq!(writer.bytes(), [b'a', b'b', 3, 3, 3, 3]);
        assert_eq!(writer.apart_len(), 3 * DETACH_FROM + 1);
        assert_eq!(writer.payload_len(), 3 * DETACH_FROM + 7);
        let read: Vec<&[u8]> = writer.segments().collect();
        assert_eq!(read[1], b"ab");
        assert_eq!(read[2].len(), DETACH_FROM + 1);
        assert_eq!(read[3], [3; 4]);
        let mut reader = SegmentReader::from_writer(&writer);
        assert_eq!(reader.next_vec().unwrap(), vec![1; DETACH_FROM]);
        assert_eq!(reader.next_segment().unwrap(), b"ab");
        // Behind a head of 7 bytes: the first goes before the inline
        // bytes, the second after "ab"; the last is the tail.
        let (middle, tail) = writer.take_apart(7);
        let places: Vec<(usize, usize)> =
            middle.iter().map(|(at, part)| (*at, part.len())).collect();
        assert_eq!(places, [(7, DETACH_FROM), (9, DETACH_FROM + 1)]);
        assert_eq!(tail.as_bytes(), vec![4; DETACH_FROM]);
        assert!(!writer.has_apart());
        assert_eq!(writer.parts_width(), TailWidth::One);
    }

    #[test]
    fn the_width_said_is_the_detached_segments_or_else_the_last() {
        let native = |width| {
            if packed::NATIVE_IS_WIRE {
                width
            } else {
                TailWidth::One
            }
        };
        let mut writer = SegmentWriter::new();
        writer.push_numbers(vec![1.5f64; DETACH_FROM / 8]);
        assert_eq!(writer.parts_width(), native(TailWidth::Eight));
        writer.push(b"x");
        assert_eq!(writer.parts_width(), native(TailWidth::Eight), "shared");
        writer.push_numbers(vec![2i64; DETACH_FROM / 8]);
        assert_eq!(writer.parts_width(), native(TailWidth::Eight), "shared");
        writer.push_numbers(vec![3u32; DETACH_FROM / 4]);
        assert_eq!(writer.parts_width(), native(TailWidth::Four), "the last's");
        writer.push(b"y");
        assert_eq!(
            writer.parts_width(),
            TailWidth::One,
            "mixed, the last inline"
        );
        writer.clear();
        assert!(writer.is_empty() && !writer.has_apart());
    }
}
