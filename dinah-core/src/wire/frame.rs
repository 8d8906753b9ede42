//! Whole frames: encoding into a caller's buffer, and decoding one frame
//! that arrived as one message (MPI, tests, fuzzing).

use core::iter::FusedIterator;

use super::error_text::check_utf8;
use super::shape::check_segment_len;
use super::{DecodeContext, HEADER_LEN, Header, LENGTH_ENTRY_LEN, MessageKind, ProtocolError};
use crate::ProtocolLimits;

/// Writes `header` and the length table of `segments` (but not the
/// segments) into the front of `out`, for writers that send the segments
/// from their own buffers (vectored I/O).
///
/// Returns the bytes written, [`Header::head_len`].
///
/// # Errors
///
/// [`ProtocolError::SegmentCountMismatch`] or
/// [`ProtocolError::LengthMismatch`] if `segments` are not the ones the
/// header was built from (their count or total length differ);
/// [`ProtocolError::ErrorTextNotUtf8`] for an error frame whose text is not
/// UTF-8; [`ProtocolError::BufferTooSmall`] if `out` is shorter than the
/// head.
pub fn encode_head<S: AsRef<[u8]>>(
    header: &Header,
    segments: &[S],
    out: &mut [u8],
) -> Result<usize, ProtocolError> {
    check_segments(header, segments)?;
    let needed = header.head_len();
    let too_small = ProtocolError::BufferTooSmall {
        needed,
        available: out.len(),
    };
    let Some((fixed, rest)) = out.split_first_chunk_mut::<HEADER_LEN>() else {
        return Err(too_small);
    };
    let Some(table) = rest.get_mut(..needed - HEADER_LEN) else {
        return Err(too_small);
    };
    header.encode_into(fixed);
    for (entry, segment) in table.chunks_exact_mut(LENGTH_ENTRY_LEN).zip(segments) {
        // check_segments proved every length fits the u32 payload length.
        entry.copy_from_slice(&(segment.as_ref().len() as u32).to_le_bytes());
    }
    Ok(needed)
}

/// Writes the frame of `header` and `segments` into the front of `out`:
/// header, length table, segments. Never allocates.
///
/// `header` must have been built by [`Header::new`] from these segments
/// (which checked them against the limits); a different count or total
/// length is detected here, a different split of the same total is not.
///
/// Returns the bytes written, [`Header::frame_len`].
///
/// # Errors
///
/// As [`encode_head`], with `out` needing room for the whole frame.
pub fn encode_frame<S: AsRef<[u8]>>(
    header: &Header,
    segments: &[S],
    out: &mut [u8],
) -> Result<usize, ProtocolError> {
    let needed = header.frame_len();
    if out.len() < needed {
        return Err(ProtocolError::BufferTooSmall {
            needed,
            available: out.len(),
        });
    }
    let mut at = encode_head(header, segments, out)?;
    for segment in segments {
        let segment = segment.as_ref();
        out[at..at + segment.len()].copy_from_slice(segment);
        at += segment.len();
    }
    Ok(at)
}

fn check_segments<S: AsRef<[u8]>>(header: &Header, segments: &[S]) -> Result<(), ProtocolError> {
    if segments.len() != usize::from(header.segment_count()) {
        return Err(ProtocolError::SegmentCountMismatch {
            declared: header.segment_count(),
            actual: segments.len(),
        });
    }
    let sum: u64 = segments.iter().map(|s| s.as_ref().len() as u64).sum();
    if sum != u64::from(header.payload_len()) {
        return Err(ProtocolError::LengthMismatch {
            declared: header.payload_len(),
            sum,
        });
    }
    if let (MessageKind::Error, [text]) = (header.kind(), segments) {
        check_utf8(text.as_ref())?;
    }
    Ok(())
}

/// Decodes one frame that arrived as exactly `bytes` (one MPI message, one
/// test buffer), borrowing its segments.
///
/// Checks, in this order: the header ([`Header::decode`]); each length
/// table entry against the segment limit, and the running sum against the
/// declared payload length; that the sum reaches it; that `bytes` is
/// exactly one frame long; that an error text is UTF-8. This is the order
/// the [`StreamDecoder`](super::StreamDecoder) meets them in, so both
/// report the same error for the same complete frame.
///
/// # Errors
///
/// Any error of [`Header::decode`] (with [`ProtocolError::ShortHeader`] if
/// `bytes` is shorter than a header), then
/// [`ProtocolError::SegmentTooLarge`], [`ProtocolError::LengthMismatch`],
/// [`ProtocolError::Truncated`], [`ProtocolError::TrailingBytes`] or
/// [`ProtocolError::ErrorTextNotUtf8`].
pub fn decode_frame<'a>(
    bytes: &'a [u8],
    ctx: &DecodeContext,
) -> Result<FrameRef<'a>, ProtocolError> {
    let (header, table, payload) = check_parts(bytes, 0, ctx)?;
    if header.kind() == MessageKind::Error {
        check_utf8(payload)?;
    }
    Ok(FrameRef {
        header,
        table,
        payload,
    })
}

/// The checks of [`decode_frame`] for a frame held as `head` followed by
/// `tail` more bytes kept elsewhere (none for a whole frame), up to and
/// including the frame's length; the error text is left to the caller.
/// Returns the header, the length table and the payload bytes in `head`.
#[inline]
pub(crate) fn check_parts<'a>(
    head: &'a [u8],
    tail: usize,
    ctx: &DecodeContext,
) -> Result<(Header, &'a [u8], &'a [u8]), ProtocolError> {
    let actual = head.len().saturating_add(tail);
    let Some((fixed, rest)) = head.split_first_chunk::<HEADER_LEN>() else {
        return Err(ProtocolError::ShortHeader { len: head.len() });
    };
    let header = Header::decode_array(fixed, ctx)?;
    let truncated = ProtocolError::Truncated {
        expected: header.frame_len(),
        actual,
    };
    let table_len = header.head_len() - HEADER_LEN;
    let mut check = TableCheck::new(&header);
    let mut entries = rest.chunks_exact(LENGTH_ENTRY_LEN);
    for index in 0..header.segment_count() {
        let Some(entry) = entries.next() else {
            return Err(truncated);
        };
        let mut len = [0; LENGTH_ENTRY_LEN];
        len.copy_from_slice(entry);
        check.entry(index, u32::from_le_bytes(len), ctx.limits())?;
    }
    check.finish()?;
    if actual != header.frame_len() {
        return Err(if actual < header.frame_len() {
            truncated
        } else {
            ProtocolError::TrailingBytes {
                expected: header.frame_len(),
                actual,
            }
        });
    }
    let (table, payload) = rest.split_at(table_len);
    Ok((header, table, payload))
}

/// Checks a length table entry by entry (shared by both decoders so they
/// agree on every error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableCheck {
    declared: u32,
    sum: u64,
}

impl TableCheck {
    pub(crate) const fn new(header: &Header) -> Self {
        Self {
            declared: header.payload_len(),
            sum: 0,
        }
    }

    /// Entry `index` of length `len`.
    pub(crate) fn entry(
        &mut self,
        index: u16,
        len: u32,
        limits: &ProtocolLimits,
    ) -> Result<(), ProtocolError> {
        check_segment_len(index, len, limits)?;
        self.sum += u64::from(len);
        if self.sum > u64::from(self.declared) {
            return Err(self.mismatch());
        }
        Ok(())
    }

    /// After the last entry.
    pub(crate) fn finish(&self) -> Result<(), ProtocolError> {
        if self.sum == u64::from(self.declared) {
            Ok(())
        } else {
            Err(self.mismatch())
        }
    }

    fn mismatch(&self) -> ProtocolError {
        ProtocolError::LengthMismatch {
            declared: self.declared,
            sum: self.sum,
        }
    }
}

/// A decoded, fully validated frame borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRef<'a> {
    header: Header,
    table: &'a [u8],
    payload: &'a [u8],
}

impl<'a> FrameRef<'a> {
    /// Assembles a frame from parts that were already validated.
    pub(crate) const fn from_validated(header: Header, table: &'a [u8], payload: &'a [u8]) -> Self {
        Self {
            header,
            table,
            payload,
        }
    }

    /// The frame `bytes`, which [`decode_frame`] (or a stream decoder)
    /// already validated into `header`, viewed again without repeating the
    /// checks: for a frame whose owned bytes moved after decoding (to a
    /// worker, to the future waiting for it) along with its header.
    ///
    /// Returns `None` if `bytes` is not `header`'s frame length. Bytes
    /// other than those `header` was decoded from give meaningless
    /// segments, never a panic: segment iteration stops at the first entry
    /// that does not fit.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::wire::{decode_frame, encode_frame, Channel, DecodeContext, FrameRef, Header, Message};
    /// use dinah_core::{DomainId, ProtocolLimits, Rank, RequestId, WorldSize};
    /// # use dinah_core::ActionId;
    ///
    /// let world = WorldSize::new(2)?;
    /// let limits = ProtocolLimits::default();
    /// let call = dinah_core::wire::Call {
    ///     request: RequestId::MIN,
    ///     action: ActionId::new(7)?,
    ///     domain: DomainId::MIN,
    ///     trace: None,
    /// };
    /// let payload: [&[u8]; 1] = [b"out"];
    /// let header = Header::new(Rank::ZERO, Message::Result { call }, &payload, &limits)?;
    /// let mut bytes = vec![0; header.frame_len()];
    /// encode_frame(&header, &payload, &mut bytes)?;
    ///
    /// let ctx = DecodeContext::new(Channel::Action, Rank::ZERO, world, limits)?;
    /// let decoded = *decode_frame(&bytes, &ctx)?.header();
    /// let moved = bytes; // e.g. handed to another thread with its header
    /// let frame = FrameRef::from_decoded(decoded, &moved).expect("same frame");
    /// assert_eq!(frame.segment(0), Some(&b"out"[..]));
    /// # Ok::<(), Box<dyn core::error::Error>>(())
    /// ```
    pub fn from_decoded(header: Header, bytes: &'a [u8]) -> Option<Self> {
        if bytes.len() != header.frame_len() {
            return None;
        }
        let (head, payload) = bytes.split_at_checked(header.head_len())?;
        let table = head.get(HEADER_LEN..)?;
        Some(Self::from_validated(header, table, payload))
    }

    /// The frame's header.
    pub const fn header(&self) -> &Header {
        &self.header
    }

    /// The payload segments, in order.
    pub fn segments(&self) -> Segments<'a> {
        Segments {
            table: self.table,
            payload: self.payload,
        }
    }

    /// Segment `index`, or `None` past the last one. Walks the length
    /// table: use [`FrameRef::segments`] to visit them all.
    pub fn segment(&self, index: usize) -> Option<&'a [u8]> {
        self.segments().nth(index)
    }

    /// All segments back to back.
    pub const fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// An error frame's text (validated UTF-8), or `None` for other kinds.
    pub fn error_text(&self) -> Option<&'a str> {
        match self.header.kind() {
            MessageKind::Error => core::str::from_utf8(self.payload).ok(),
            _ => None,
        }
    }
}

/// The segments of a [`FrameRef`], borrowed from the frame's bytes.
#[derive(Debug, Clone)]
pub struct Segments<'a> {
    table: &'a [u8],
    payload: &'a [u8],
}

impl<'a> Segments<'a> {
    /// The segments of a checked `table` over `payload`.
    pub(crate) const fn new(table: &'a [u8], payload: &'a [u8]) -> Self {
        Self { table, payload }
    }
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (entry, table) = self.table.split_first_chunk::<LENGTH_ENTRY_LEN>()?;
        let len = u32::from_le_bytes(*entry) as usize;
        // The table was validated against the payload; a failure here is
        // impossible, and ends the iteration rather than panicking.
        let (segment, payload) = self.payload.split_at_checked(len)?;
        self.table = table;
        self.payload = payload;
        Some(segment)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.table.len() / LENGTH_ENTRY_LEN;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Segments<'_> {}

impl FusedIterator for Segments<'_> {}

#[cfg(test)]
mod tests;
