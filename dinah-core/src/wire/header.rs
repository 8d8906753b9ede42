//! The fixed-length frame header: its layout, its constructors and its
//! encoding (decoding, with every check a receiver makes, is in
//! `decode.rs`).
//!
//! See the [module documentation](super) for the byte layout.

use super::error_text::check_utf8;
use super::shape::{check_segment_len, check_shape, frame_len_u64};
use super::{
    Call, HEADER_LEN, LENGTH_ENTRY_LEN, MAGIC, Message, MessageKind, PROTOCOL_VERSION,
    ProtocolError, TailWidth, put,
};
use crate::{ProtocolLimits, Rank, RequestId};

/// Byte offsets of the header fields (see the table in the module docs).
mod at {
    pub(super) const MAGIC: usize = 0;
    pub(super) const VERSION: usize = 4;
    pub(super) const KIND: usize = 6;
    pub(super) const TAIL_WIDTH: usize = 7;
    pub(super) const ORIGIN: usize = 8;
    pub(super) const PAYLOAD_LEN: usize = 12;
    pub(super) const SEGMENTS: usize = 16;
    pub(super) const ERROR_CODE: usize = 18;
    pub(super) const ERROR_DETAIL: usize = 20;
    pub(super) const RESERVED_B: usize = 22;
    pub(super) const REQUEST: usize = 24;
    pub(super) const ACTION: usize = 32;
    pub(super) const DOMAIN: usize = 48;
    pub(super) const DEADLINE: usize = 56;
    pub(super) const TRACE: usize = 64;
    pub(super) const FRAMES_SENT: usize = 72;
}

// The layout is contiguous, naturally aligned and exactly HEADER_LEN long.
const _: () = {
    assert!(at::VERSION == at::MAGIC + 4);
    assert!(at::KIND == at::VERSION + 2);
    assert!(at::TAIL_WIDTH == at::KIND + 1);
    assert!(at::ORIGIN == at::TAIL_WIDTH + 1);
    assert!(at::PAYLOAD_LEN == at::ORIGIN + 4);
    assert!(at::SEGMENTS == at::PAYLOAD_LEN + 4);
    assert!(at::ERROR_CODE == at::SEGMENTS + 2);
    assert!(at::ERROR_DETAIL == at::ERROR_CODE + 2);
    assert!(at::RESERVED_B == at::ERROR_DETAIL + 2);
    assert!(at::REQUEST == at::RESERVED_B + 2);
    assert!(at::ACTION == at::REQUEST + 8);
    assert!(at::DOMAIN == at::ACTION + 16);
    assert!(at::DEADLINE == at::DOMAIN + 8);
    assert!(at::TRACE == at::DEADLINE + 8);
    assert!(at::FRAMES_SENT == at::TRACE + 8);
    assert!(at::FRAMES_SENT + 8 == HEADER_LEN);
};

/// Writes `request` into the request field of an encoded request frame.
///
/// For a sender that numbers its requests in send order (see
/// [`RequestSequencer`](crate::RequestSequencer)): it encodes the frame
/// once, outside the lock it sends under, and writes only the ID under it.
/// The frame stays valid: a request ID is any non-zero value.
///
/// # Errors
///
/// [`ProtocolError::ShortHeader`] if `frame` is shorter than a header;
/// [`ProtocolError::NotARequest`] if its kind byte is not a request's.
/// Nothing is written then.
#[inline]
pub fn stamp_request_id(frame: &mut [u8], request: RequestId) -> Result<(), ProtocolError> {
    let Some(head) = frame.get_mut(..HEADER_LEN) else {
        return Err(ProtocolError::ShortHeader { len: frame.len() });
    };
    let code = head[at::KIND];
    if code != MessageKind::Request.code() {
        return Err(ProtocolError::NotARequest { code });
    }
    head[at::REQUEST..at::REQUEST + 8].copy_from_slice(&request.get().to_le_bytes());
    Ok(())
}

/// A validated frame header: who sent it, what it says, and the shape of
/// the payload that follows.
///
/// Every `Header` value satisfies the per-kind rules of [`Message`] and
/// the payload rules (no payload for cancel and goodbye, exactly one
/// segment for error), and its frame fits the absolute caps
/// ([`SEGMENTS_CAP`](crate::SEGMENTS_CAP),
/// [`FRAME_BYTES_CAP`](crate::FRAME_BYTES_CAP)). So [`Header::encode`]
/// cannot fail, and decoding its output (in a matching context) gives the
/// same header back.
///
/// # Examples
///
/// ```
/// use dinah_core::{ActionId, DomainId, ProtocolLimits, RequestId, WorldSize};
/// use dinah_core::wire::{
///     Call, Channel, DecodeContext, HEADER_LEN, Header, Message, RelativeDeadline,
/// };
///
/// let world = WorldSize::new(2)?;
/// let origin = world.rank(1)?;
/// let call = Call {
///     request: RequestId::new(7)?,
///     action: ActionId::new(0xadd)?,
///     domain: DomainId::new(1)?,
///     trace: None,
/// };
/// let deadline = RelativeDeadline::from_nanos(5_000_000).ok_or("zero deadline")?;
/// let limits = ProtocolLimits::DEFAULT;
/// let input: [&[u8]; 2] = [b"left", b"right"];
/// let header = Header::new(origin, Message::Request { call, deadline }, &input, &limits)?;
/// assert_eq!(header.frame_len(), HEADER_LEN + 2 * 4 + 9);
///
/// let bytes = header.encode();
/// let ctx = DecodeContext::new(Channel::Action, origin, world, limits)?;
/// assert_eq!(Header::decode(&bytes, &ctx)?, header);
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    origin: Rank,
    message: Message,
    segment_count: u16,
    payload_len: u32,
    tail_width: TailWidth,
}

impl Header {
    /// The header of a frame from `origin` saying `message` with payload
    /// `segments`, checked against `limits` exactly as a receiver with the
    /// same limits will check it.
    ///
    /// # Errors
    ///
    /// - [`ProtocolError::UnexpectedPayload`] if the kind carries no payload
    ///   and `segments` is not empty;
    /// - [`ProtocolError::ErrorSegmentCount`] if an error message does not
    ///   have exactly one segment;
    /// - [`ProtocolError::TooManySegments`] (count saturated at `u16::MAX`),
    ///   [`ProtocolError::ErrorTextTooLong`],
    ///   [`ProtocolError::FrameTooLarge`] or
    ///   [`ProtocolError::SegmentTooLarge`] if a limit is exceeded;
    /// - [`ProtocolError::ErrorTextNotUtf8`] if an error text is not UTF-8.
    pub fn new<S: AsRef<[u8]>>(
        origin: Rank,
        message: Message,
        segments: &[S],
        limits: &ProtocolLimits,
    ) -> Result<Self, ProtocolError> {
        let count = u16::try_from(segments.len()).unwrap_or(u16::MAX);
        let total: u64 = segments
            .iter()
            .map(|segment| segment.as_ref().len() as u64)
            .sum();
        let kind = message.kind();
        let payload_len = shaped_payload_len(kind, count, total, limits)?;
        for (index, segment) in (0..count).zip(segments) {
            // Each fits: the total fitted a u32.
            check_segment_len(index, segment.as_ref().len() as u32, limits)?;
        }
        if let (MessageKind::Error, [text]) = (kind, segments) {
            check_utf8(text.as_ref())?;
        }
        Ok(Self {
            origin,
            message,
            segment_count: count,
            payload_len,
            tail_width: TailWidth::One,
        })
    }

    /// [`Header::new`] for a payload kept in one buffer: `payload` holds
    /// the segments back to back and `lens` gives their lengths in order.
    /// Checks exactly what [`Header::new`] checks, and that the lengths
    /// add up to `payload`'s length; for writers that collect a value's
    /// segments in one buffer (no slice per segment to build).
    ///
    /// # Errors
    ///
    /// As [`Header::new`], and [`ProtocolError::LengthMismatch`] if the
    /// lengths do not add up to `payload.len()`.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId};
    /// use dinah_core::wire::{Call, Header, Message};
    ///
    /// let call = Call {
    ///     request: RequestId::MIN,
    ///     action: ActionId::MIN,
    ///     domain: DomainId::MIN,
    ///     trace: None,
    /// };
    /// let limits = ProtocolLimits::DEFAULT;
    /// let message = Message::Result { call };
    /// let packed = Header::packed(Rank::ZERO, message, [4, 5], b"leftright", &limits)?;
    /// let split: [&[u8]; 2] = [b"left", b"right"];
    /// assert_eq!(packed, Header::new(Rank::ZERO, message, &split, &limits)?);
    /// # Ok::<(), dinah_core::wire::ProtocolError>(())
    /// ```
    #[inline]
    pub fn packed<L>(
        origin: Rank,
        message: Message,
        lens: L,
        payload: &[u8],
        limits: &ProtocolLimits,
    ) -> Result<Self, ProtocolError>
    where
        L: IntoIterator<Item = usize>,
        L::IntoIter: ExactSizeIterator,
    {
        Self::packed_with_tail(origin, message, lens, payload, 0, limits)
    }

    /// [`Header::packed`] for a payload whose last segment, of `tail`
    /// bytes, is held apart from `payload` (the other segments back to
    /// back), as a [split frame](super::decode_split_frame) carries it.
    /// `lens` gives every segment's length, the last one's included. A
    /// `tail` of 0 is [`Header::packed`].
    ///
    /// # Errors
    ///
    /// As [`Header::packed`] for the payload of `payload.len() + tail`
    /// bytes, and [`ProtocolError::MisplacedSplit`] if a non-zero `tail`
    /// is not the last segment's length or the message is an error.
    #[inline]
    pub fn packed_with_tail<L>(
        origin: Rank,
        message: Message,
        lens: L,
        payload: &[u8],
        tail: usize,
        limits: &ProtocolLimits,
    ) -> Result<Self, ProtocolError>
    where
        L: IntoIterator<Item = usize>,
        L::IntoIter: ExactSizeIterator,
    {
        Self::packed_apart(origin, message, lens, payload, tail, true, limits)
    }

    /// [`Header::packed`] for a payload some of whose segments, `detached`
    /// bytes together, are held apart from `payload` (the other segments
    /// back to back), anywhere in the payload: a sender that writes the
    /// frame from several buffers (a vectored write) need not copy them
    /// next to its head. `lens` gives every segment's length in order,
    /// the detached ones' included. The header is the one of the whole
    /// payload; which segments were held apart is not part of it.
    ///
    /// # Errors
    ///
    /// As [`Header::packed`] for the payload of `payload.len() + detached`
    /// bytes, and [`ProtocolError::MisplacedSplit`] if a non-zero
    /// `detached` belongs to an error message (its text is never held
    /// apart).
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::wire::{Call, Header, Message};
    /// use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId};
    ///
    /// let limits = ProtocolLimits::DEFAULT;
    /// let call = Call {
    ///     request: RequestId::MIN,
    ///     action: ActionId::MIN,
    ///     domain: DomainId::MIN,
    ///     trace: None,
    /// };
    /// let message = Message::Result { call };
    /// // The first segment ("big") is held apart, "tail" is inline.
    /// let apart = Header::packed_with_detached(Rank::ZERO, message, [3, 4], b"tail", 3, &limits)?;
    /// let whole: [&[u8]; 2] = [b"big", b"tail"];
    /// assert_eq!(apart, Header::new(Rank::ZERO, message, &whole, &limits)?);
    /// # Ok::<(), dinah_core::wire::ProtocolError>(())
    /// ```
    #[inline]
    pub fn packed_with_detached<L>(
        origin: Rank,
        message: Message,
        lens: L,
        payload: &[u8],
        detached: usize,
        limits: &ProtocolLimits,
    ) -> Result<Self, ProtocolError>
    where
        L: IntoIterator<Item = usize>,
        L::IntoIter: ExactSizeIterator,
    {
        Self::packed_apart(origin, message, lens, payload, detached, false, limits)
    }

    /// [`Header::packed`] for `payload` and `apart` more bytes held apart:
    /// the last segment (`last_only`) or any segments.
    #[inline]
    fn packed_apart<L>(
        origin: Rank,
        message: Message,
        lens: L,
        payload: &[u8],
        tail: usize,
        last_only: bool,
        limits: &ProtocolLimits,
    ) -> Result<Self, ProtocolError>
    where
        L: IntoIterator<Item = usize>,
        L::IntoIter: ExactSizeIterator,
    {
        let lens = lens.into_iter();
        let count = u16::try_from(lens.len()).unwrap_or(u16::MAX);
        let total = payload.len() as u64 + tail as u64;
        let kind = message.kind();
        let payload_len = shaped_payload_len(kind, count, total, limits)?;
        let mut sum: u64 = 0;
        let mut last = 0;
        for (index, len) in (0..count).zip(lens) {
            let len = u32::try_from(len).unwrap_or(u32::MAX);
            check_segment_len(index, len, limits)?;
            sum += u64::from(len);
            last = len;
        }
        if sum != total {
            return Err(ProtocolError::LengthMismatch {
                declared: payload_len,
                sum,
            });
        }
        if tail > 0 && ((last_only && last as usize != tail) || kind == MessageKind::Error) {
            return Err(ProtocolError::MisplacedSplit { last, tail });
        }
        if kind == MessageKind::Error {
            // One segment (checked by the shape): the whole payload.
            check_utf8(payload)?;
        }
        Ok(Self {
            origin,
            message,
            segment_count: count,
            payload_len,
            tail_width: TailWidth::One,
        })
    }

    /// The header of a frame without payload (every cancel and goodbye;
    /// a request or result with no segments).
    ///
    /// # Errors
    ///
    /// [`ProtocolError::ErrorSegmentCount`] for an error message, which
    /// always carries its text segment (use [`Header::new`]).
    pub const fn without_payload(origin: Rank, message: Message) -> Result<Self, ProtocolError> {
        if let Message::Error { .. } = message {
            return Err(ProtocolError::ErrorSegmentCount { count: 0 });
        }
        Ok(Self {
            origin,
            message,
            segment_count: 0,
            payload_len: 0,
            tail_width: TailWidth::One,
        })
    }

    /// The header saying that the large segments pack numbers of `width`
    /// (see [`TailWidth`]); every constructor says [`TailWidth::One`].
    ///
    /// # Errors
    ///
    /// [`ProtocolError::InvalidTailWidth`] for a width other than one byte
    /// on a frame that is not a request or result with at least one
    /// segment.
    pub const fn with_tail_width(self, width: TailWidth) -> Result<Self, ProtocolError> {
        if !tail_width_allowed(self.message.kind(), self.segment_count, width) {
            return Err(ProtocolError::InvalidTailWidth { code: width.log2() });
        }
        Ok(Self {
            tail_width: width,
            ..self
        })
    }

    /// How wide the numbers packed in the large segments are (see
    /// [`TailWidth`]).
    pub const fn tail_width(&self) -> TailWidth {
        self.tail_width
    }

    /// The rank that sent the frame.
    pub const fn origin(&self) -> Rank {
        self.origin
    }

    /// What the frame says.
    pub const fn message(&self) -> &Message {
        &self.message
    }

    /// The frame's kind.
    pub const fn kind(&self) -> MessageKind {
        self.message.kind()
    }

    /// The number of payload segments.
    pub const fn segment_count(&self) -> u16 {
        self.segment_count
    }

    /// The payload length: the sum of all segment lengths.
    pub const fn payload_len(&self) -> u32 {
        self.payload_len
    }

    /// The length of the header plus the segment length table: where the
    /// payload starts.
    pub const fn head_len(&self) -> usize {
        HEADER_LEN + LENGTH_ENTRY_LEN * self.segment_count as usize
    }

    /// The whole frame's length: header, length table and payload. At most
    /// the limit it was checked against, so at most
    /// [`FRAME_BYTES_CAP`](crate::FRAME_BYTES_CAP).
    pub const fn frame_len(&self) -> usize {
        self.head_len() + self.payload_len as usize
    }

    /// Writes the header's [`HEADER_LEN`] bytes into `out`.
    #[inline]
    pub fn encode_into(&self, out: &mut [u8; HEADER_LEN]) {
        *out = [0; HEADER_LEN];
        put(out, at::MAGIC, MAGIC);
        put(out, at::VERSION, PROTOCOL_VERSION.to_le_bytes());
        out[at::KIND] = self.kind().code();
        out[at::TAIL_WIDTH] = self.tail_width.log2();
        put(out, at::ORIGIN, self.origin.get().to_le_bytes());
        put(out, at::PAYLOAD_LEN, self.payload_len.to_le_bytes());
        put(out, at::SEGMENTS, self.segment_count.to_le_bytes());
        match self.message {
            Message::Request { call, deadline } => {
                put_call(out, &call);
                put(out, at::DEADLINE, deadline.as_nanos().to_le_bytes());
            }
            Message::Result { call } | Message::Cancel { call } => put_call(out, &call),
            Message::Error { call, code } => {
                put_call(out, &call);
                let (code, detail) = code.to_wire();
                put(out, at::ERROR_CODE, code.to_le_bytes());
                put(out, at::ERROR_DETAIL, detail.to_le_bytes());
            }
            Message::Goodbye { frames_sent } => {
                put(out, at::FRAMES_SENT, frames_sent.to_le_bytes());
            }
            Message::Heartbeat => {}
        }
    }

    /// The header's [`HEADER_LEN`] bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0; HEADER_LEN];
        self.encode_into(&mut out);
        out
    }
}

/// May a frame of `kind` with `segments` say `width`? Bytes always; a
/// wider width only on a request or result with a last segment.
const fn tail_width_allowed(kind: MessageKind, segments: u16, width: TailWidth) -> bool {
    matches!(width, TailWidth::One)
        || (segments > 0 && matches!(kind, MessageKind::Request | MessageKind::Result))
}

/// The payload length of `count` segments of `total` bytes for a frame of
/// `kind`, checked against the shape rules and `limits` (shared by both
/// header constructors).
#[inline]
fn shaped_payload_len(
    kind: MessageKind,
    count: u16,
    total: u64,
    limits: &ProtocolLimits,
) -> Result<u32, ProtocolError> {
    let Ok(payload_len) = u32::try_from(total) else {
        return Err(ProtocolError::FrameTooLarge {
            len: frame_len_u64(count, total),
            max: limits.max_frame_bytes,
        });
    };
    check_shape(kind, count, payload_len, limits)?;
    Ok(payload_len)
}

fn put_call(out: &mut [u8; HEADER_LEN], call: &Call) {
    put(out, at::REQUEST, call.request.get().to_le_bytes());
    put(out, at::ACTION, call.action.get().to_le_bytes());
    put(out, at::DOMAIN, call.domain.get().to_le_bytes());
    let trace = match call.trace {
        Some(trace) => trace.get(),
        None => 0,
    };
    put(out, at::TRACE, trace.to_le_bytes());
}

mod decode;
#[cfg(test)]
mod tests;
