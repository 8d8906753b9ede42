//! Incremental frame decoding for byte streams (TCP).

use super::error_text::Utf8Stream;
use super::frame::TableCheck;
use super::{DecodeContext, HEADER_LEN, Header, LENGTH_ENTRY_LEN, MessageKind, ProtocolError};

/// What the [`StreamDecoder`] found in the bytes it was given.
///
/// Every frame produces, in order: one [`FrameStart`](Self::FrameStart),
/// one [`SegmentLength`](Self::SegmentLength) per segment, zero or more
/// [`Payload`](Self::Payload) chunks (the segments back to back, cut
/// wherever the input was cut), and one [`FrameEnd`](Self::FrameEnd).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEvent<'a> {
    /// A validated header: its kind, IDs, origin and payload shape passed
    /// every check of [`Header::decode`], so [`Header::frame_len`] is within
    /// the negotiated limit and the caller may allocate that much.
    FrameStart(Header),
    /// The length of segment `index`, checked against the segment limit
    /// and, with the lengths before it, against the declared payload
    /// length. All lengths are reported (and the table fully validated)
    /// before the first payload byte.
    SegmentLength {
        /// The segment's index.
        index: u16,
        /// Its length in bytes.
        len: u32,
    },
    /// Payload bytes, borrowed from the input without copying. The frame is
    /// valid only once [`FrameEnd`](Self::FrameEnd) arrives (an error
    /// text's UTF-8 is checked as it streams, and its last check happens at
    /// the end).
    Payload(&'a [u8]),
    /// The frame is complete and valid.
    FrameEnd,
}

/// Where the decoder is inside the current frame. Kept small: the frame's
/// shape lives in [`Frame`], not in every state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a header; `filled` bytes of it are buffered.
    Header,
    /// Reading length table entry `index`; `filled` bytes of it are
    /// buffered.
    Table { index: u16, check: TableCheck },
    /// Passing payload through; `remaining` bytes to go.
    Payload { remaining: u32 },
    /// The frame is complete; `FrameEnd` is due.
    End,
    /// A frame was invalid; the stream cannot be trusted any more.
    Failed(ProtocolError),
}

/// The shape of the frame being decoded, from its validated header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Frame {
    segments: u16,
    payload_len: u32,
    frame_len: usize,
    /// The error text's validator, for error frames.
    text: Option<Utf8Stream>,
}

/// Decodes frames from a byte stream delivered in arbitrary chunks, down to
/// one byte at a time, without allocating and without buffering payload.
///
/// The decoder keeps only a header's worth of bytes (for a header split
/// across reads) and a few counters. It validates the header and every
/// length before reporting them, so a peer announcing a huge frame is
/// rejected before the caller allocates or copies anything, and no payload
/// byte is consumed before the whole length table has been checked.
///
/// [`StreamDecoder::decode`] consumes some input and returns at most one
/// event; call it until it returns `None` (which means "give me more
/// input"), even after the input is used up, since a frame can end without
/// consuming a byte. After an error the decoder stays failed and returns
/// the same error forever: a stream with a bad frame cannot be
/// resynchronised.
///
/// # Examples
///
/// ```
/// use dinah_core::{ProtocolLimits, WorldSize};
/// use dinah_core::wire::{
///     Channel, DecodeContext, Header, Message, StreamDecoder, StreamEvent, encode_frame,
/// };
///
/// let world = WorldSize::new(2)?;
/// let peer = world.rank(1)?;
/// let goodbye = Header::without_payload(peer, Message::Goodbye { frames_sent: 0 })?;
/// let mut wire = [0u8; 80];
/// encode_frame(&goodbye, &[] as &[&[u8]], &mut wire)?;
///
/// let ctx = DecodeContext::new(Channel::Control, peer, world, ProtocolLimits::DEFAULT)?;
/// let mut decoder = StreamDecoder::new(ctx);
/// let mut events = 0;
/// // Feed the frame three bytes at a time.
/// for chunk in wire.chunks(3) {
///     let mut input = chunk;
///     loop {
///         let (used, event) = decoder.decode(input)?;
///         input = &input[used..];
///         match event {
///             None => break,
///             Some(StreamEvent::FrameStart(header)) => assert_eq!(header, goodbye),
///             Some(_) => {}
///         }
///         events += 1;
///     }
/// }
/// assert_eq!(events, 2); // FrameStart, FrameEnd
/// assert_eq!(decoder.frames(), 1);
/// decoder.finish()?;
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct StreamDecoder {
    ctx: DecodeContext,
    state: State,
    frame: Frame,
    /// A header, or a length entry, split across inputs.
    buf: [u8; HEADER_LEN],
    filled: usize,
    /// Bytes of the current frame consumed so far.
    seen: usize,
    frames: u64,
}

impl StreamDecoder {
    /// A decoder for the frames of one channel from one peer, described by
    /// `ctx`.
    pub const fn new(ctx: DecodeContext) -> Self {
        Self {
            ctx,
            state: State::Header,
            frame: Frame {
                segments: 0,
                payload_len: 0,
                frame_len: 0,
                text: None,
            },
            buf: [0; HEADER_LEN],
            filled: 0,
            seen: 0,
            frames: 0,
        }
    }

    /// Consumes a prefix of `input` and reports what it completed.
    ///
    /// Returns the number of bytes consumed and the event, if any. `None`
    /// means all of `input` was consumed (possibly zero bytes of an empty
    /// input) and more is needed.
    ///
    /// # Errors
    ///
    /// The first [`ProtocolError`] of the stream, in the order
    /// [`decode_frame`](super::decode_frame) would report it for the same
    /// frame: any error of [`Header::decode`], then
    /// [`ProtocolError::SegmentTooLarge`], [`ProtocolError::LengthMismatch`]
    /// or [`ProtocolError::ErrorTextNotUtf8`]. Once failed, every call
    /// returns the same error.
    pub fn decode<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(usize, Option<StreamEvent<'a>>), ProtocolError> {
        let result = match self.state {
            State::Failed(error) => return Err(error),
            State::End => {
                self.state = State::Header;
                self.seen = 0;
                self.frames += 1;
                return Ok((0, Some(StreamEvent::FrameEnd)));
            }
            State::Header => self.header(input),
            State::Table { index, check } => self.table(input, index, check),
            State::Payload { remaining } => self.payload(input, remaining),
        };
        match result {
            Ok((used, event)) => {
                self.seen += used;
                Ok((used, event))
            }
            Err(error) => {
                self.state = State::Failed(error);
                Err(error)
            }
        }
    }

    /// Decodes a whole frame in one step when `input` starts with one: the
    /// decoder is between frames and every byte of the next frame is in
    /// `input`. Checks exactly what [`decode`](Self::decode) checks for the
    /// same bytes, reports the same first error (and stays failed after
    /// it), and counts the frame as its [`FrameEnd`](StreamEvent::FrameEnd)
    /// would. Returns the frame's length and its header: the frame is
    /// `input[..len]`, byte for byte, since decoding is canonical.
    ///
    /// `Ok(None)` consumes nothing and changes nothing: the decoder is
    /// inside a frame, or `input` ends before the frame does; go on with
    /// [`decode`](Self::decode), which takes partial frames.
    /// A transport reading many small frames per system call saves the
    /// per-event steps and copies this way.
    ///
    /// # Errors
    ///
    /// As [`decode`](Self::decode): the frame's first [`ProtocolError`];
    /// once failed, every call returns the same error.
    #[inline]
    pub fn decode_whole(&mut self, input: &[u8]) -> Result<Option<(usize, Header)>, ProtocolError> {
        if let State::Failed(error) = self.state {
            return Err(error);
        }
        if !self.at_frame_boundary() {
            return Ok(None);
        }
        let Some((head, _)) = input.split_first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        match self.check_whole(head, input) {
            Ok(Some(whole)) => {
                self.frames += 1;
                Ok(Some(whole))
            }
            Ok(None) => Ok(None),
            Err(error) => {
                self.state = State::Failed(error);
                Err(error)
            }
        }
    }

    /// The checks of [`decode_whole`](Self::decode_whole), in the order the
    /// event-wise decoder makes them.
    #[inline]
    fn check_whole(
        &self,
        head: &[u8; HEADER_LEN],
        input: &[u8],
    ) -> Result<Option<(usize, Header)>, ProtocolError> {
        let header = Header::decode_array(head, &self.ctx)?;
        let len = header.frame_len();
        if input.len() < len {
            return Ok(None);
        }
        let segments = usize::from(header.segment_count());
        if segments == 0 {
            // The header checked that a frame without segments carries no
            // payload.
            return Ok(Some((len, header)));
        }
        let table_end = HEADER_LEN + segments * LENGTH_ENTRY_LEN;
        let mut check = TableCheck::new(&header);
        for (index, entry) in input[HEADER_LEN..table_end]
            .chunks_exact(LENGTH_ENTRY_LEN)
            .enumerate()
        {
            let mut bytes = [0; LENGTH_ENTRY_LEN];
            bytes.copy_from_slice(entry);
            // At most `u16::MAX` segments.
            check.entry(index as u16, u32::from_le_bytes(bytes), self.ctx.limits())?;
        }
        check.finish()?;
        if header.kind() == MessageKind::Error {
            let mut text = Utf8Stream::default();
            text.feed(&input[table_end..len])?;
            text.finish()?;
        }
        Ok(Some((len, header)))
    }

    /// Collects up to `N` bytes into the buffer; the full array once there
    /// are `N`, read straight from `input` when nothing is buffered.
    fn fill<const N: usize>(&mut self, input: &[u8]) -> (usize, Option<[u8; N]>) {
        if self.filled == 0 {
            if let Some((whole, _)) = input.split_first_chunk::<N>() {
                return (N, Some(*whole));
            }
        }
        let take = (N - self.filled).min(input.len());
        self.buf[self.filled..self.filled + take].copy_from_slice(&input[..take]);
        self.filled += take;
        if self.filled < N {
            return (take, None);
        }
        self.filled = 0;
        let mut whole = [0; N];
        whole.copy_from_slice(&self.buf[..N]);
        (take, Some(whole))
    }

    fn header<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(usize, Option<StreamEvent<'a>>), ProtocolError> {
        let (used, bytes) = self.fill::<HEADER_LEN>(input);
        let Some(bytes) = bytes else {
            return Ok((used, None));
        };
        let header = Header::decode_array(&bytes, &self.ctx)?;
        self.frame = Frame {
            segments: header.segment_count(),
            payload_len: header.payload_len(),
            frame_len: header.frame_len(),
            text: (header.kind() == MessageKind::Error).then(Utf8Stream::default),
        };
        self.state = if header.segment_count() == 0 {
            State::End
        } else {
            State::Table {
                index: 0,
                check: TableCheck::new(&header),
            }
        };
        Ok((used, Some(StreamEvent::FrameStart(header))))
    }

    fn table<'a>(
        &mut self,
        input: &'a [u8],
        index: u16,
        mut check: TableCheck,
    ) -> Result<(usize, Option<StreamEvent<'a>>), ProtocolError> {
        let (used, entry) = self.fill::<LENGTH_ENTRY_LEN>(input);
        let Some(entry) = entry else {
            return Ok((used, None));
        };
        let len = u32::from_le_bytes(entry);
        check.entry(index, len, self.ctx.limits())?;
        let next = index + 1;
        self.state = if next < self.frame.segments {
            State::Table { index: next, check }
        } else {
            check.finish()?;
            if self.frame.payload_len == 0 {
                if let Some(text) = &self.frame.text {
                    text.finish()?;
                }
                State::End
            } else {
                State::Payload {
                    remaining: self.frame.payload_len,
                }
            }
        };
        Ok((used, Some(StreamEvent::SegmentLength { index, len })))
    }

    fn payload<'a>(
        &mut self,
        input: &'a [u8],
        remaining: u32,
    ) -> Result<(usize, Option<StreamEvent<'a>>), ProtocolError> {
        if input.is_empty() {
            return Ok((0, None));
        }
        let take = input.len().min(remaining as usize);
        let chunk = &input[..take];
        if let Some(text) = &mut self.frame.text {
            text.feed(chunk)?;
        }
        // `take` is at most `remaining`, a u32.
        let remaining = remaining - take as u32;
        self.state = if remaining == 0 {
            if let Some(text) = &self.frame.text {
                text.finish()?;
            }
            State::End
        } else {
            State::Payload { remaining }
        };
        Ok((take, Some(StreamEvent::Payload(chunk))))
    }

    /// Checks that the stream may end here (the peer closed it).
    ///
    /// # Errors
    ///
    /// [`ProtocolError::Truncated`] if the stream ends inside a frame (with
    /// the header's length as `expected` while the header is incomplete),
    /// or the error the decoder failed with.
    pub fn finish(&self) -> Result<(), ProtocolError> {
        let expected = match self.state {
            State::Failed(error) => return Err(error),
            State::End => return Ok(()),
            State::Header if self.seen == 0 => return Ok(()),
            State::Header => HEADER_LEN,
            State::Table { .. } | State::Payload { .. } => self.frame.frame_len,
        };
        Err(ProtocolError::Truncated {
            expected,
            actual: self.seen,
        })
    }

    /// Frames completed so far (`FrameEnd` events returned). A transport
    /// compares it with a goodbye's frames-sent count.
    pub const fn frames(&self) -> u64 {
        self.frames
    }

    /// Is the decoder between frames (nothing of a next frame read yet, no
    /// `FrameEnd` pending)?
    pub const fn at_frame_boundary(&self) -> bool {
        matches!(self.state, State::Header) && self.seen == 0
    }

    /// The error the decoder failed with, if it has.
    pub const fn error(&self) -> Option<ProtocolError> {
        match self.state {
            State::Failed(error) => Some(error),
            _ => None,
        }
    }

    /// The context frames are checked against.
    pub const fn context(&self) -> &DecodeContext {
        &self.ctx
    }
}

#[cfg(test)]
mod tests;
