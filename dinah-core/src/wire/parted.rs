//! Frames with any of their segments held apart from the rest.
//!
//! A split frame ([`decode_split_frame`](super::decode_split_frame)) holds
//! its last segment apart. A sender may hold any large segment apart, and
//! a receiver may receive each large segment into a buffer of its own, so
//! that every one of them becomes a decoded value without a copy: the
//! frame is then a **head** (header, length table and the segments kept
//! in it, back to back) and **parts**, each one whole segment, each
//! inserted before the head's byte at its offset. The bytes on the wire
//! are the same as for a whole frame.
//!
//! [`decode_parted_frame`] checks such a frame as
//! [`decode_frame`](super::decode_frame) checks a whole one, then that
//! every part is exactly one segment where it says it goes.
//! [`PartedSegments`] reads its segments in order, given the parts' places
//! again. Error frames never have parts.

use super::error_text::check_utf8;
use super::frame::check_parts;
use super::{DecodeContext, HEADER_LEN, Header, LENGTH_ENTRY_LEN, MessageKind, ProtocolError};

/// Where a part held apart goes, and its length: it is inserted before
/// byte `at` of the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartPlace {
    /// The head's byte it goes before (the head's length for a part at
    /// the frame's end).
    pub at: usize,
    /// Its length (never zero).
    pub len: usize,
}

/// A decoded, fully validated frame held as a head and parts held apart,
/// borrowing the head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartedFrameRef<'a> {
    header: Header,
    /// The whole length table.
    table: &'a [u8],
    /// The segments kept in the head, back to back.
    payload: &'a [u8],
}

/// One segment of a [`PartedFrameRef`], read in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartedSegment<'a> {
    /// A segment in the head.
    Inline(&'a [u8]),
    /// The next part held apart (the one whose place was given).
    Apart,
}

/// Decodes a frame held as `head` and parts held apart at `places`, in
/// order (each [`PartPlace::at`] at least the one before).
///
/// Checks what [`decode_frame`](super::decode_frame) checks for the frame
/// of `head.len()` plus the parts' lengths, in the same order, then that
/// each part is exactly one segment, placed where that segment starts.
///
/// # Errors
///
/// Any error of [`decode_frame`](super::decode_frame) (an error frame's
/// text is checked as UTF-8 when it has no parts), then
/// [`ProtocolError::MisplacedSplit`] (`last` the length of the segment
/// found where a part goes, 0 if none; `tail` the part's length) for a
/// part that is empty, not one whole segment, out of order, or on an error
/// frame.
///
/// # Examples
///
/// ```
/// use dinah_core::wire::{decode_parted_frame, encode_frame, Call, Channel, DecodeContext, Header, Message, PartPlace, PartedSegment};
/// use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, WorldSize};
///
/// let world = WorldSize::new(2)?;
/// let limits = ProtocolLimits::DEFAULT;
/// let call = Call { request: RequestId::MIN, action: ActionId::new(7)?, domain: DomainId::MIN, trace: None };
/// let payload: [&[u8]; 3] = [b"large one", b"small", b"large two"];
/// let header = Header::new(Rank::ZERO, Message::Result { call }, &payload, &limits)?;
/// let mut bytes = vec![0; header.frame_len()];
/// encode_frame(&header, &payload, &mut bytes)?;
///
/// // The first and last segments travelled in buffers of their own.
/// let head_len = header.head_len();
/// let mut head = bytes[..head_len].to_vec();
/// head.extend_from_slice(b"small");
/// let places = [PartPlace { at: head_len, len: 9 }, PartPlace { at: head.len(), len: 9 }];
/// let ctx = DecodeContext::new(Channel::Action, Rank::ZERO, world, limits)?;
/// let frame = decode_parted_frame(&head, places, &ctx)?;
/// let mut segments = frame.segments();
/// assert_eq!(segments.next(Some(places[0])), Some(PartedSegment::Apart));
/// assert_eq!(segments.next(Some(places[1])), Some(PartedSegment::Inline(b"small")));
/// assert_eq!(segments.next(Some(places[1])), Some(PartedSegment::Apart));
/// assert_eq!(segments.next(None), None);
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
pub fn decode_parted_frame<'a, P>(
    head: &'a [u8],
    places: P,
    ctx: &DecodeContext,
) -> Result<PartedFrameRef<'a>, ProtocolError>
where
    P: IntoIterator<Item = PartPlace>,
    P::IntoIter: Clone,
{
    let places = places.into_iter();
    let apart = places
        .clone()
        .fold(0usize, |sum, place| sum.saturating_add(place.len));
    let (header, table, payload) = check_parts(head, apart, ctx)?;
    let frame = PartedFrameRef {
        header,
        table,
        payload,
    };
    let mut places = places.peekable();
    if header.kind() == MessageKind::Error {
        if let Some(place) = places.peek() {
            return Err(ProtocolError::MisplacedSplit {
                last: 0,
                tail: place.len,
            });
        }
        // No parts: the text is the whole payload, in the head.
        check_utf8(payload)?;
    }
    let mut segments = frame.segments();
    loop {
        let next = places.peek().copied();
        match segments.step(next)? {
            Some(PartedSegment::Apart) => {
                places.next();
            }
            Some(PartedSegment::Inline(_)) => {}
            None => break,
        }
    }
    // Every segment was read; a place left over was never reached.
    match places.next() {
        Some(place) => Err(ProtocolError::MisplacedSplit {
            last: 0,
            tail: place.len,
        }),
        None => Ok(frame),
    }
}

impl<'a> PartedFrameRef<'a> {
    /// The frame `head`, with parts held apart of `apart` bytes together,
    /// which [`decode_parted_frame`] already validated into `header`,
    /// viewed again without repeating the checks. Returns `None` if the
    /// lengths do not add up to `header`'s frame.
    pub fn from_decoded(header: Header, head: &'a [u8], apart: usize) -> Option<Self> {
        if head.len().checked_add(apart)? != header.frame_len() {
            return None;
        }
        let (fixed, payload) = head.split_at_checked(header.head_len())?;
        let table = fixed.get(HEADER_LEN..)?;
        Some(Self {
            header,
            table,
            payload,
        })
    }

    /// The frame's header (its counts include the parts held apart).
    pub const fn header(&self) -> &Header {
        &self.header
    }

    /// The length of the head: header, length table and the segments it
    /// holds (the place of a part at the frame's end).
    pub const fn head_len(&self) -> usize {
        HEADER_LEN + self.table.len() + self.payload.len()
    }

    /// Its segments, in order.
    pub const fn segments(&self) -> PartedSegments<'a> {
        PartedSegments {
            table: self.table,
            payload: self.payload,
            at: HEADER_LEN + self.table.len(),
        }
    }
}

/// Reads the segments of a [`PartedFrameRef`] in order: each call to
/// [`next`](Self::next) is given the place of the next part not read yet.
#[derive(Debug, Clone)]
pub struct PartedSegments<'a> {
    /// The length table's entries not read yet.
    table: &'a [u8],
    /// The head's segments not read yet.
    payload: &'a [u8],
    /// The head's offset of the next byte of `payload`.
    at: usize,
}

impl<'a> PartedSegments<'a> {
    /// The next segment, given `next_part`, the place of the next part
    /// held apart not read yet (`None` if every part was read). A part
    /// whose place is the next segment's start and whose length is that
    /// segment's is that segment; a segment of the frame this reader came
    /// from (validated with the same places) always reads as it was
    /// checked.
    pub fn next(&mut self, next_part: Option<PartPlace>) -> Option<PartedSegment<'a>> {
        self.step(next_part).ok().flatten()
    }

    /// The number of segments not read yet.
    pub const fn len(&self) -> usize {
        self.table.len() / LENGTH_ENTRY_LEN
    }

    /// Has every segment been read?
    pub const fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// [`next`](Self::next), reporting a part that does not fit.
    fn step(
        &mut self,
        next_part: Option<PartPlace>,
    ) -> Result<Option<PartedSegment<'a>>, ProtocolError> {
        let Some((entry, table)) = self.table.split_first_chunk::<LENGTH_ENTRY_LEN>() else {
            return Ok(None);
        };
        let len = u32::from_le_bytes(*entry) as usize;
        let misplaced = |part: PartPlace| ProtocolError::MisplacedSplit {
            last: len as u32,
            tail: part.len,
        };
        // A part goes before the head's byte `at`: where it is placed, it
        // comes first. Only an empty segment may come before it.
        let segment = match next_part {
            Some(part) if part.at < self.at || part.len == 0 => return Err(misplaced(part)),
            Some(part) if part.at == self.at && len != 0 => {
                if part.len != len {
                    return Err(misplaced(part));
                }
                PartedSegment::Apart
            }
            _ => {
                // The table was checked against the frame's length, so the
                // head holds this segment unless a part was misplaced.
                let Some((segment, payload)) = self.payload.split_at_checked(len) else {
                    return Err(next_part.map_or(
                        ProtocolError::MisplacedSplit {
                            last: len as u32,
                            tail: 0,
                        },
                        misplaced,
                    ));
                };
                if let Some(part) = next_part.filter(|part| part.at < self.at + len) {
                    // The part would land inside this segment.
                    return Err(misplaced(part));
                }
                self.payload = payload;
                self.at += len;
                PartedSegment::Inline(segment)
            }
        };
        self.table = table;
        Ok(Some(segment))
    }
}

#[cfg(test)]
mod tests;
