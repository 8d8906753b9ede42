//! Whole frames out of a byte stream, into a caller-provided buffer.

use super::{
    DecodeContext, FrameRef, HEADER_LEN, Header, LENGTH_ENTRY_LEN, ProtocolError, StreamDecoder,
    StreamEvent,
};

/// Reassembles complete frames from a byte stream into one buffer the
/// caller provides (a static array on a microcontroller, a `Box<[u8]>` sized
/// once from the limits on std). Built on [`StreamDecoder`], so every check
/// happens before a byte is copied.
///
/// The buffer must hold the largest frame the limits allow; each frame
/// overwrites the previous one.
///
/// # Examples
///
/// ```
/// use dinah_core::{ProtocolLimits, WorldSize};
/// use dinah_core::wire::{
///     Channel, DecodeContext, FrameAssembler, Header, Message, encode_frame,
/// };
///
/// let world = WorldSize::new(2)?;
/// let peer = world.rank(1)?;
/// let mut limits = ProtocolLimits::DEFAULT;
/// limits.max_frame_bytes = 4096;
/// limits.max_segment_bytes = 4096;
/// limits.max_error_text_bytes = 1024;
///
/// let goodbye = Header::without_payload(peer, Message::Goodbye { frames_sent: 7 })?;
/// let mut wire = [0u8; 80];
/// encode_frame(&goodbye, &[] as &[&[u8]], &mut wire)?;
///
/// let ctx = DecodeContext::new(Channel::Action, peer, world, limits)?;
/// let mut assembler = FrameAssembler::new([0u8; 4096], ctx)?;
/// let (used, frame) = assembler.push(&wire[..50])?;
/// assert_eq!((used, frame), (50, None));
/// let (used, frame) = assembler.push(&wire[50..])?;
/// assert_eq!(used, 30);
/// assert_eq!(frame.map(|f| *f.header()), Some(goodbye));
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct FrameAssembler<B> {
    decoder: StreamDecoder,
    buffer: B,
    /// The header of the frame being assembled.
    header: Option<Header>,
    /// Bytes of it written to the buffer.
    at: usize,
}

impl<B: AsMut<[u8]>> FrameAssembler<B> {
    /// An assembler for frames described by `ctx`, built in `buffer`.
    ///
    /// # Errors
    ///
    /// [`ProtocolError::BufferTooSmall`] if `buffer` is shorter than
    /// `ctx.limits().max_frame_bytes`.
    pub fn new(mut buffer: B, ctx: DecodeContext) -> Result<Self, ProtocolError> {
        let needed = ctx.limits().max_frame_bytes as usize;
        let available = buffer.as_mut().len();
        if available < needed {
            return Err(ProtocolError::BufferTooSmall { needed, available });
        }
        Ok(Self {
            decoder: StreamDecoder::new(ctx),
            buffer,
            header: None,
            at: 0,
        })
    }

    /// Consumes bytes from `input` until a frame is complete or the input
    /// is used up.
    ///
    /// Returns the bytes consumed and the completed frame, if any; call
    /// again with the rest of the input for the next one. The frame borrows
    /// the assembler's buffer until the next call.
    ///
    /// # Errors
    ///
    /// The decoder's [`ProtocolError`] (see [`StreamDecoder::decode`]); the
    /// assembler then stays failed.
    pub fn push(
        &mut self,
        mut input: &[u8],
    ) -> Result<(usize, Option<FrameRef<'_>>), ProtocolError> {
        let mut consumed = 0;
        let buffer = self.buffer.as_mut();
        loop {
            let (used, event) = self.decoder.decode(input)?;
            input = &input[used..];
            consumed += used;
            // Every offset below is within the frame length the decoder
            // validated against `max_frame_bytes`, which the buffer holds.
            match event {
                None => return Ok((consumed, None)),
                Some(StreamEvent::FrameStart(header)) => {
                    buffer[..HEADER_LEN].copy_from_slice(&header.encode());
                    self.header = Some(header);
                    self.at = HEADER_LEN;
                }
                Some(StreamEvent::SegmentLength { len, .. }) => {
                    buffer[self.at..self.at + LENGTH_ENTRY_LEN].copy_from_slice(&len.to_le_bytes());
                    self.at += LENGTH_ENTRY_LEN;
                }
                Some(StreamEvent::Payload(bytes)) => {
                    buffer[self.at..self.at + bytes.len()].copy_from_slice(bytes);
                    self.at += bytes.len();
                }
                Some(StreamEvent::FrameEnd) => break,
            }
        }
        let Some(header) = self.header.take() else {
            // FrameEnd always follows a FrameStart.
            return Ok((consumed, None));
        };
        let frame = &buffer[HEADER_LEN..header.frame_len()];
        let (table, payload) = frame.split_at(header.head_len() - HEADER_LEN);
        Ok((
            consumed,
            Some(FrameRef::from_validated(header, table, payload)),
        ))
    }

    /// Checks that the stream may end here; see [`StreamDecoder::finish`].
    ///
    /// # Errors
    ///
    /// As [`StreamDecoder::finish`].
    pub fn finish(&self) -> Result<(), ProtocolError> {
        self.decoder.finish()
    }

    /// The underlying decoder (frame count, failure state).
    pub const fn decoder(&self) -> &StreamDecoder {
        &self.decoder
    }

    /// The buffer back.
    pub fn into_inner(self) -> B {
        self.buffer
    }
}
