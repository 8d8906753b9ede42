//! Reading frames from a byte stream: the core [`StreamDecoder`] checks
//! every byte; this assembles the validated bytes into owned frames and
//! recognises the peer's goodbye and heartbeats.

use std::io;

use dinah_core::wire::{
    HEADER_LEN, Header, LENGTH_ENTRY_LEN, Message, ProtocolError, StreamDecoder, StreamEvent,
    TailWidth,
};

use dinah_std::DETACH_FROM;
use dinah_std::transport::{Frame, Tail, frame_buffers};

use crate::error::TcpError;

/// What the reader found in the stream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadEvent {
    /// A complete, validated frame.
    Frame(Frame),
    /// The goodbye, with exactly the announced frames before it.
    Goodbye,
    /// A heartbeat: the peer is alive (not delivered to the runtime).
    Heartbeat,
}

/// Assembles one connection's frames from the bytes read off its socket.
///
/// Memory use is bounded by the protocol limits: a frame's buffer is
/// allocated only after its header passed every check (so its length is
/// within `max_frame_bytes`), and at most one frame is assembled at a time.
/// The bytes of a frame are exactly the bytes that came off the wire: a
/// frame that is whole in the input is checked in one step and copied as
/// it is ([`StreamDecoder::decode_whole`]); one that arrives in pieces is
/// rebuilt from its decoded header (decoding is canonical), length table
/// and payload.
///
/// Every segment of at least [`DETACH_FROM`] bytes is received apart
/// ([`Frame::with_middle`]; the last segment as the frame's tail): it
/// goes into a buffer of its own, allocated once the length table has
/// been checked, which the runtime hands to the decoded value instead of
/// copying it out. When the header says the large segments pack numbers
/// (its [`TailWidth`]), each goes into a buffer of numbers of that width
/// (if it is a whole number of them), which a decoded vector of them
/// takes over.
#[derive(Debug)]
pub(crate) struct FrameReader {
    decoder: StreamDecoder,
    /// The frame being assembled, or its head if segments of it are
    /// received apart (empty between frames).
    current: Vec<u8>,
    /// The current frame's segments received apart, in order.
    parts: Vec<Part>,
    /// The first of `parts` not received whole yet.
    filling: usize,
    /// The width of the numbers the current frame's large segments pack.
    width: TailWidth,
    /// The length of the current frame (0 between frames).
    frame_len: usize,
    /// The bytes of its segments received apart (0: received whole).
    apart: usize,
    /// The segments of the current frame.
    segments: u16,
    /// The length of the current frame's header and length table.
    head_len: usize,
    /// Inside a goodbye frame (it has no payload and is not delivered).
    in_goodbye: bool,
    /// Inside a heartbeat frame (likewise).
    in_heartbeat: bool,
    /// The goodbye arrived: nothing may follow it.
    said_goodbye: bool,
}

impl FrameReader {
    /// A reader checking frames with `decoder`.
    pub(crate) fn new(decoder: StreamDecoder) -> Self {
        Self {
            decoder,
            current: Vec::new(),
            parts: Vec::new(),
            filling: 0,
            width: TailWidth::One,
            frame_len: 0,
            apart: 0,
            segments: 0,
            head_len: 0,
            in_goodbye: false,
            in_heartbeat: false,
            said_goodbye: false,
        }
    }

    /// Feeds `input`, calling `sink` with each complete frame or goodbye in
    /// order, and returns how many bytes of `input` it used: all of them,
    /// unless `sink` returned `false` (then it stops right after that
    /// frame, and the rest is for the next call).
    ///
    /// # Errors
    ///
    /// The stream's first invalid frame, a goodbye whose count does not
    /// match, or a frame after the goodbye. The stream cannot be used
    /// after an error.
    pub(crate) fn feed(
        &mut self,
        input: &[u8],
        sink: &mut impl FnMut(ReadEvent) -> bool,
    ) -> Result<usize, TcpError> {
        let mut rest = input;
        loop {
            // Most reads hold many small frames whole: each is checked and
            // copied in one step.
            if let Some((len, header)) = self
                .decoder
                .decode_whole(rest)
                .map_err(|error| self.protocol(error))?
            {
                let (frame, tail) = rest.split_at(len);
                rest = tail;
                if !sink(self.whole(&header, frame)?) {
                    return Ok(input.len() - rest.len());
                }
                continue;
            }
            let (used, event) = self
                .decoder
                .decode(rest)
                .map_err(|error| self.protocol(error))?;
            rest = &rest[used..];
            let Some(event) = event else {
                return Ok(input.len() - rest.len());
            };
            match event {
                StreamEvent::FrameStart(header) => self.start(&header)?,
                StreamEvent::SegmentLength { index, len } => {
                    self.current.extend_from_slice(&len.to_le_bytes());
                    if index + 1 == self.segments {
                        self.table_read();
                    }
                }
                StreamEvent::Payload(bytes) => self.append(bytes),
                StreamEvent::FrameEnd => {
                    if !sink(self.end()) {
                        return Ok(input.len() - rest.len());
                    }
                }
            }
        }
    }

    /// A frame the decoder checked whole (and counted): its bytes are
    /// `frame`.
    fn whole(&mut self, header: &Header, frame: &[u8]) -> Result<ReadEvent, TcpError> {
        // The decoder has counted this frame already.
        if self.follows(header, self.decoder.frames() - 1)? {
            self.said_goodbye = true;
            return Ok(ReadEvent::Goodbye);
        }
        if *header.message() == Message::Heartbeat {
            return Ok(ReadEvent::Heartbeat);
        }
        if frame.len() <= DETACH_FROM {
            let mut bytes = frame_buffers::take(frame.len());
            bytes.extend_from_slice(frame);
            return Ok(ReadEvent::Frame(Frame::whole(bytes)));
        }
        let head_len = header.head_len();
        let parts = plan(header.tail_width(), &frame[HEADER_LEN..head_len], head_len);
        let apart: usize = parts.iter().map(|part| part.len).sum();
        let mut bytes = frame_buffers::take(frame.len() - apart);
        bytes.extend_from_slice(&frame[..head_len]);
        let mut rest = &frame[head_len..];
        let mut received = Vec::with_capacity(parts.len());
        for mut part in parts {
            let (inline, after) = rest.split_at(part.at - bytes.len());
            bytes.extend_from_slice(inline);
            let (segment, after) = after.split_at(part.len);
            part.buffer.append(segment);
            received.push(part);
            rest = after;
        }
        bytes.extend_from_slice(rest);
        Ok(ReadEvent::Frame(assemble(bytes, received, frame.len())))
    }

    /// The whole length table of the current frame has been read and
    /// checked: its large segments are received into buffers of their
    /// own, the rest of the frame into `current`, now sized for it.
    fn table_read(&mut self) {
        if self.frame_len >= DETACH_FROM {
            let head_len = self.current.len();
            self.parts = plan(self.width, &self.current[HEADER_LEN..], head_len);
            self.apart = self.parts.iter().map(|part| part.len).sum();
        }
        let head = self.frame_len - self.apart;
        self.current.reserve(head - self.current.len());
    }

    /// Where the current frame's next byte goes: a part (its index), or
    /// the head, with room for this many bytes before the next part.
    fn next_room(&self) -> Result<usize, usize> {
        match self.parts.get(self.filling) {
            Some(part) if part.at == self.current.len() => Ok(self.filling),
            Some(part) => Err(part.at - self.current.len()),
            None => Err(self.frame_len - self.apart - self.current.len()),
        }
    }

    /// Appends payload bytes of the current frame, each to the head or
    /// the part it belongs to.
    fn append(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = match self.next_room() {
                Ok(index) => {
                    let part = &mut self.parts[index];
                    let n = (part.len - part.buffer.written().len()).min(bytes.len());
                    part.buffer.append(&bytes[..n]);
                    if part.buffer.written().len() == part.len {
                        self.filling += 1;
                    }
                    n
                }
                Err(room) => {
                    let n = room.min(bytes.len());
                    self.current.extend_from_slice(&bytes[..n]);
                    n
                }
            };
            bytes = &bytes[n..];
        }
    }

    fn start(&mut self, header: &Header) -> Result<(), TcpError> {
        // Frames completed before this one: its FrameEnd has not been
        // counted yet.
        if self.follows(header, self.decoder.frames())? {
            self.in_goodbye = true;
            return Ok(());
        }
        if *header.message() == Message::Heartbeat {
            self.in_heartbeat = true;
            return Ok(());
        }
        self.frame_len = header.frame_len();
        self.segments = header.segment_count();
        self.width = header.tail_width();
        self.head_len = HEADER_LEN + usize::from(header.segment_count()) * LENGTH_ENTRY_LEN;
        // A spare buffer of this thread when the frame is small (the
        // runtime gives decoded frames back on this thread). A large
        // frame's buffer is sized once its length table tells which of its
        // segments go into buffers of their own (`table_read`).
        let first = if self.frame_len < DETACH_FROM {
            self.frame_len
        } else {
            self.head_len
        };
        let mut frame = frame_buffers::take(first);
        frame.extend_from_slice(&header.encode());
        self.current = frame;
        Ok(())
    }

    /// Checks that a frame with `header` may follow the `received` frames
    /// before it: nothing follows the goodbye, and a goodbye's count must
    /// match. Returns whether it is the goodbye.
    fn follows(&self, header: &Header, received: u64) -> Result<bool, TcpError> {
        let ctx = self.decoder.context();
        if self.said_goodbye {
            return Err(TcpError::FrameAfterGoodbye {
                peer: ctx.source(),
                channel: ctx.channel(),
            });
        }
        let Message::Goodbye { frames_sent } = *header.message() else {
            return Ok(false);
        };
        if frames_sent != received {
            return Err(TcpError::Goodbye {
                peer: ctx.source(),
                channel: ctx.channel(),
                announced: frames_sent,
                received,
            });
        }
        Ok(true)
    }

    fn end(&mut self) -> ReadEvent {
        if self.in_goodbye {
            self.in_goodbye = false;
            self.said_goodbye = true;
            ReadEvent::Goodbye
        } else if self.in_heartbeat {
            self.in_heartbeat = false;
            ReadEvent::Heartbeat
        } else {
            let frame_len = std::mem::take(&mut self.frame_len);
            self.apart = 0;
            self.filling = 0;
            let head = std::mem::take(&mut self.current);
            let parts = std::mem::take(&mut self.parts);
            ReadEvent::Frame(assemble(head, parts, frame_len))
        }
    }

    fn protocol(&self, error: ProtocolError) -> TcpError {
        let ctx = self.decoder.context();
        TcpError::Protocol {
            peer: ctx.source(),
            channel: ctx.channel(),
            error,
        }
    }

    /// Payload bytes of the current frame still to come, once its whole
    /// length table has been read (0 otherwise).
    pub(crate) fn payload_left(&self) -> usize {
        if self.frame_len == 0 || self.current.len() < self.head_len {
            return 0;
        }
        self.frame_len - self.assembling()
    }

    /// Reads more of the current frame's payload straight into the frame
    /// (no copy through a read buffer): `read` puts bytes into the
    /// [`Room`] it is given, the head up to the next segment received
    /// apart or that segment (each buffer was sized when the length table
    /// was read), and returns how many it put (0: the stream ended). Then
    /// the decoder checks those bytes, and the frame goes to `sink` if
    /// they complete it. Returns the bytes read.
    ///
    /// # Errors
    ///
    /// The outer error is `read`'s I/O error (bytes it appended before
    /// failing are kept and checked); the inner one a frame error.
    pub(crate) fn read_payload_in_place(
        &mut self,
        read: impl FnOnce(Room<'_>) -> io::Result<usize>,
        sink: &mut impl FnMut(ReadEvent) -> bool,
    ) -> io::Result<Result<usize, TcpError>> {
        let room = self.next_room();
        let (start, result) = match room {
            Ok(index) => {
                let part = &mut self.parts[index];
                part.buffer.read(part.len, read)
            }
            Err(room) => {
                let start = self.current.len();
                (start, read(Room::Spare(&mut self.current, room)))
            }
        };
        let written = |reader: &Self| match room {
            Ok(index) => reader.parts[index].buffer.written().len(),
            Err(_) => reader.current.len(),
        };
        let read = written(self) - start;
        if let Ok(index) = room {
            if self.parts[index].buffer.written().len() == self.parts[index].len {
                self.filling += 1;
            }
        }
        let mut at = start;
        let mut complete = false;
        while !complete {
            // The bytes are already in the frame: the decoder only checks
            // them.
            let bytes = match room {
                Ok(index) => self.parts[index].buffer.written(),
                Err(_) => &self.current,
            };
            let (used, event) = match self.decoder.decode(&bytes[at..]) {
                Ok(step) => step,
                Err(error) => return Ok(Err(self.protocol(error))),
            };
            at += used;
            match event {
                None => break,
                Some(StreamEvent::FrameEnd) => complete = true,
                Some(_) => {}
            }
        }
        if complete {
            sink(self.end());
        }
        result.map(|_| Ok(read))
    }

    /// The bytes of the frame being assembled.
    pub(crate) fn assembling(&self) -> usize {
        let apart: usize = self.parts[..self.filling.min(self.parts.len())]
            .iter()
            .map(|part| part.len)
            .sum();
        let filling = self
            .parts
            .get(self.filling)
            .map_or(0, |part| part.buffer.written().len());
        self.current.len() + apart + filling
    }

    /// Checks that the stream may end here, as it just did.
    ///
    /// # Errors
    ///
    /// [`TcpError::Protocol`] with
    /// [`ProtocolError::Truncated`](dinah_core::wire::ProtocolError::Truncated)
    /// if it ended inside a frame.
    pub(crate) fn finish(&self) -> Result<(), TcpError> {
        self.decoder.finish().map_err(|error| self.protocol(error))
    }

    /// Has the goodbye arrived?
    pub(crate) fn said_goodbye(&self) -> bool {
        self.said_goodbye
    }
}

/// A segment of the current frame received into a buffer of its own.
#[derive(Debug)]
struct Part {
    /// The head's byte it goes before.
    at: usize,
    /// Its length.
    len: usize,
    /// Is it the frame's last segment?
    last: bool,
    /// Its buffer.
    buffer: Detached,
}

/// The segments of a frame received apart (every one of at least
/// [`DETACH_FROM`] bytes), from its checked length `table`, behind a
/// header and table of `head_len` bytes, each with a buffer for numbers of
/// `width`.
fn plan(width: TailWidth, table: &[u8], head_len: usize) -> Vec<Part> {
    let count = table.len() / LENGTH_ENTRY_LEN;
    let mut at = head_len;
    let mut parts = Vec::new();
    for (i, entry) in table.chunks_exact(LENGTH_ENTRY_LEN).enumerate() {
        let mut len = [0; LENGTH_ENTRY_LEN];
        len.copy_from_slice(entry);
        let len = u32::from_le_bytes(len) as usize;
        if len >= DETACH_FROM {
            parts.push(Part {
                at,
                len,
                last: i + 1 == count,
                buffer: Detached::new(width, len),
            });
        } else {
            at += len;
        }
    }
    parts
}

/// The frame of `head` and the received `parts` (`len` bytes in all).
fn assemble(head: Vec<u8>, parts: Vec<Part>, len: usize) -> Frame {
    let mut tail = Tail::new();
    let mut middle = Vec::with_capacity(parts.len());
    for mut part in parts {
        if part.last {
            tail = part.buffer.take();
        } else {
            middle.push((part.at, part.buffer.take()));
        }
    }
    let frame = Frame::with_middle(head, middle, tail);
    debug_assert_eq!(frame.len(), len);
    frame
}

/// Where [`FrameReader::read_payload_in_place`] lets its reader put bytes.
#[derive(Debug)]
pub(crate) enum Room<'a> {
    /// Appended to the vector, at most this many (its capacity holds
    /// them).
    Spare(&'a mut Vec<u8>, usize),
    /// Written from the start of the slice, at most its length.
    Slice(&'a mut [u8]),
}

impl Room<'_> {
    /// Puts the first bytes of `source` that fit; returns how many.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn put(self, source: &[u8]) -> usize {
        match self {
            Self::Spare(buffer, max) => {
                let n = max.min(source.len());
                buffer.extend_from_slice(&source[..n]);
                n
            }
            Self::Slice(slice) => {
                let n = slice.len().min(source.len());
                slice[..n].copy_from_slice(&source[..n]);
                n
            }
        }
    }
}

/// A segment of a frame received apart, while it is received.
#[derive(Debug)]
enum Detached {
    /// Bytes, appended to a buffer with room for all of them.
    Bytes(Vec<u8>),
    /// Numbers, written over a buffer of their width (a spare one's old
    /// numbers, or zeros).
    Numbers {
        /// The buffer, its final length already.
        tail: Tail,
        /// The bytes written so far.
        filled: usize,
    },
}

impl Default for Detached {
    fn default() -> Self {
        Self::Bytes(Vec::new())
    }
}

impl Detached {
    /// Room for a segment of `len` bytes whose sender said its large
    /// segments pack numbers of `width`.
    fn new(width: TailWidth, len: usize) -> Self {
        match width.for_len(len) {
            TailWidth::One => Self::Bytes(frame_buffers::take(len)),
            width => Self::Numbers {
                tail: frame_buffers::take_numbers(width, len),
                filled: 0,
            },
        }
    }

    /// Appends the segment's next `bytes` (never more than it has left:
    /// the decoder delivers exactly the frame's payload).
    fn append(&mut self, bytes: &[u8]) {
        match self {
            Self::Bytes(buffer) => buffer.extend_from_slice(bytes),
            Self::Numbers { tail, filled } => {
                let end = *filled + bytes.len();
                tail.as_bytes_mut()[*filled..end].copy_from_slice(bytes);
                *filled = end;
            }
        }
    }

    /// The bytes received so far.
    fn written(&self) -> &[u8] {
        match self {
            Self::Bytes(buffer) => buffer,
            Self::Numbers { tail, filled } => &tail.as_bytes()[..*filled],
        }
    }

    /// Lets `read` put more of a segment of `len` bytes; returns how many
    /// bytes were there before, and `read`'s result.
    fn read(
        &mut self,
        len: usize,
        read: impl FnOnce(Room<'_>) -> io::Result<usize>,
    ) -> (usize, io::Result<usize>) {
        match self {
            Self::Bytes(buffer) => {
                let start = buffer.len();
                (start, read(Room::Spare(buffer, len - start)))
            }
            Self::Numbers { tail, filled } => {
                let start = *filled;
                let result = read(Room::Slice(&mut tail.as_bytes_mut()[start..]));
                if let Ok(n) = result {
                    *filled += n;
                }
                (start, result)
            }
        }
    }

    /// The segment, leaving room for none.
    fn take(&mut self) -> Tail {
        match std::mem::take(self) {
            Self::Bytes(bytes) => bytes.into(),
            Self::Numbers { tail, .. } => tail,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use dinah_core::wire::{Call, Channel, DecodeContext, RelativeDeadline, encode_frame};
    use dinah_core::{ActionId, DomainId, ProtocolLimits, Rank, RequestId, WorldSize};

    use super::*;

    fn world() -> WorldSize {
        WorldSize::new(2).unwrap()
    }

    fn peer() -> Rank {
        world().rank(1).unwrap()
    }

    fn reader() -> FrameReader {
        let ctx =
            DecodeContext::new(Channel::Action, peer(), world(), ProtocolLimits::DEFAULT).unwrap();
        FrameReader::new(StreamDecoder::new(ctx))
    }

    /// A request frame from rank 1 of a world of 2: `payload`, then a
    /// two-byte segment.
    pub(crate) fn request(id: u64, payload: &[u8]) -> Vec<u8> {
        let call = Call {
            request: RequestId::new(id).unwrap(),
            action: ActionId::new(7).unwrap(),
            domain: DomainId::MIN,
            trace: None,
        };
        let deadline = RelativeDeadline::from_duration(Duration::from_secs(1)).unwrap();
        let segments = [payload, b"xy".as_slice()];
        let header = Header::new(
            peer(),
            Message::Request { call, deadline },
            &segments,
            &ProtocolLimits::DEFAULT,
        )
        .unwrap();
        let mut frame = vec![0; header.frame_len()];
        encode_frame(&header, &segments, &mut frame).unwrap();
        frame
    }

    fn goodbye(frames_sent: u64) -> Vec<u8> {
        let header = Header::without_payload(peer(), Message::Goodbye { frames_sent }).unwrap();
        header.encode().to_vec()
    }

    /// A read that appends up to what it is asked for from `source`.
    fn from(source: &[u8]) -> impl FnOnce(Room<'_>) -> io::Result<usize> + '_ {
        move |room| Ok(room.put(source))
    }

    fn feed_all(
        reader: &mut FrameReader,
        bytes: &[u8],
        chunk: usize,
    ) -> Result<Vec<ReadEvent>, TcpError> {
        let mut events = Vec::new();
        for piece in bytes.chunks(chunk) {
            reader.feed(piece, &mut |event| {
                events.push(event);
                true
            })?;
        }
        Ok(events)
    }

    #[test]
    fn frames_come_out_byte_for_byte_whatever_the_chunking() {
        let (a, b) = (request(1, b"hello"), request(2, &[9; 300]));
        let mut wire = [a.clone(), b.clone(), goodbye(2)].concat();
        for chunk in [1, 3, 80, 81, 4096] {
            let mut r = reader();
            let events = feed_all(&mut r, &wire, chunk).unwrap();
            assert_eq!(
                events,
                [
                    ReadEvent::Frame(Frame::whole(a.clone())),
                    ReadEvent::Frame(Frame::whole(b.clone())),
                    ReadEvent::Goodbye
                ]
            );
            assert!(r.said_goodbye());
            r.finish().unwrap();
            assert_eq!(r.assembling(), 0);
        }
        // Anything after the goodbye is refused.
        wire.extend_from_slice(&request(3, b""));
        let error = feed_all(&mut reader(), &wire, 4096).unwrap_err();
        assert!(
            matches!(
                error,
                TcpError::FrameAfterGoodbye {
                    channel: Channel::Action,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn a_sink_that_stops_leaves_the_rest_for_the_next_call() {
        let (a, b) = (request(1, b"one"), request(2, b"two"));
        let wire = [a.clone(), b.clone()].concat();
        let mut r = reader();
        let mut events = Vec::new();
        let used = r
            .feed(&wire, &mut |event| {
                events.push(event);
                false
            })
            .unwrap();
        assert_eq!(used, a.len());
        assert_eq!(events, [ReadEvent::Frame(Frame::whole(a.clone()))]);
        let rest = r
            .feed(&wire[used..], &mut |event| {
                events.push(event);
                true
            })
            .unwrap();
        assert_eq!(rest, b.len());
        assert_eq!(
            events,
            [
                ReadEvent::Frame(Frame::whole(a)),
                ReadEvent::Frame(Frame::whole(b))
            ]
        );
    }

    #[test]
    fn a_goodbye_with_the_wrong_count_is_refused() {
        let wire = [request(1, b"a"), goodbye(2)].concat();
        // Frame by frame, and whole frames at once (the decoder's one-step
        // path, which counts the goodbye before the reader checks it).
        for chunk in [7, 4096] {
            let error = feed_all(&mut reader(), &wire, chunk).unwrap_err();
            assert!(
                matches!(
                    error,
                    TcpError::Goodbye {
                        announced: 2,
                        received: 1,
                        ..
                    }
                ),
                "{chunk}: {error}"
            );
        }
    }

    #[test]
    fn a_bad_frame_after_good_ones_is_refused_whole_or_in_pieces() {
        let good = request(1, b"fine");
        let mut bad = request(2, b"abcd");
        // The first length entry no longer adds up to the payload length.
        bad[HEADER_LEN..HEADER_LEN + LENGTH_ENTRY_LEN].copy_from_slice(&9u32.to_le_bytes());
        let wire = [good.clone(), bad].concat();
        for chunk in [1, 81, 4096] {
            let mut r = reader();
            let mut frames = Vec::new();
            let mut error = None;
            for piece in wire.chunks(chunk) {
                if let Err(e) = r.feed(piece, &mut |event| {
                    frames.push(event);
                    true
                }) {
                    error = Some(e);
                    break;
                }
            }
            assert_eq!(
                frames,
                [ReadEvent::Frame(Frame::whole(good.clone()))],
                "{chunk}"
            );
            assert!(
                matches!(
                    error,
                    Some(TcpError::Protocol {
                        error: ProtocolError::SegmentTooLarge { .. }
                            | ProtocolError::LengthMismatch { .. },
                        ..
                    })
                ),
                "{chunk}: {error:?}"
            );
        }
    }

    #[test]
    fn an_oversized_header_is_refused_before_any_allocation() {
        let mut frame = request(1, b"a");
        // Declare a 2 GiB payload in the header's payload-length field.
        frame[12..16].copy_from_slice(&(1u32 << 31).to_le_bytes());
        let mut r = reader();
        let error = feed_all(&mut r, &frame[..HEADER_LEN], 80).unwrap_err();
        assert!(
            matches!(
                error,
                TcpError::Protocol {
                    error: ProtocolError::FrameTooLarge { .. },
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(r.current.capacity(), 0, "nothing was allocated");
    }

    #[test]
    fn a_stream_cut_inside_a_frame_is_truncated() {
        let frame = request(1, b"abc");
        let mut r = reader();
        assert!(
            feed_all(&mut r, &frame[..frame.len() - 1], 5)
                .unwrap()
                .is_empty()
        );
        let error = r.finish().unwrap_err();
        assert!(
            matches!(
                error,
                TcpError::Protocol {
                    error: ProtocolError::Truncated { .. },
                    ..
                }
            ),
            "{error}"
        );
    }

    /// A request whose last segment packs `numbers` eight-byte numbers,
    /// as its header says.
    fn numbers_request(numbers: usize) -> Vec<u8> {
        let call = Call {
            request: RequestId::new(3).unwrap(),
            action: ActionId::new(7).unwrap(),
            domain: DomainId::MIN,
            trace: None,
        };
        let deadline = RelativeDeadline::from_duration(Duration::from_secs(1)).unwrap();
        let packed: Vec<u8> = (0..numbers as u64).flat_map(u64::to_le_bytes).collect();
        let segments = [b"xy".as_slice(), &packed];
        let header = Header::new(
            peer(),
            Message::Request { call, deadline },
            &segments,
            &ProtocolLimits::DEFAULT,
        )
        .and_then(|header| header.with_tail_width(TailWidth::Eight))
        .unwrap();
        let mut frame = vec![0; header.frame_len()];
        encode_frame(&header, &segments, &mut frame).unwrap();
        frame
    }

    /// The one frame of `events`, checked to be `frame`'s bytes with a
    /// tail of numbers.
    fn check_numbers_frame(events: &[ReadEvent], frame: &[u8]) {
        let [ReadEvent::Frame(received)] = events else {
            panic!("one frame: {events:?}");
        };
        assert!(received.bytes_eq(frame));
        assert!(received.is_split());
        let width = TailWidth::Eight.for_len(received.tail().len());
        assert_eq!(received.tail_width(), width, "received as numbers");
    }

    #[test]
    fn a_last_segment_of_numbers_is_received_in_their_width() {
        let frame = numbers_request(DETACH_FROM / 8 + 5);
        // Whole in one read, and in pieces through the stream decoder.
        for chunk in [frame.len(), 4096, 1000] {
            let mut r = reader();
            let events = feed_all(&mut r, &frame, chunk).unwrap();
            check_numbers_frame(&events, &frame);
        }
        // Read in place, into the numbers' buffer.
        let head = HEADER_LEN + 2 * LENGTH_ENTRY_LEN + 2;
        let mut r = reader();
        assert!(feed_all(&mut r, &frame[..head + 8], 64).unwrap().is_empty());
        let mut events = Vec::new();
        let mut rest = &frame[head + 8..];
        while !rest.is_empty() {
            let piece = &rest[..rest.len().min(10_000)];
            let read = r
                .read_payload_in_place(from(piece), &mut |event| {
                    events.push(event);
                    true
                })
                .unwrap()
                .unwrap();
            assert_eq!(read, piece.len());
            rest = &rest[read..];
        }
        check_numbers_frame(&events, &frame);
        r.finish().unwrap();
    }

    /// A request with segments "a", 70,000 numbers, "bc", 9,000 numbers,
    /// 66,001 bytes, "d" (the header saying eight-byte numbers), and the
    /// places its large segments go in its head.
    fn scattered_request() -> (Vec<u8>, [usize; 3]) {
        let numbers = |n: u64| -> Vec<u8> { (0..n).flat_map(u64::to_le_bytes).collect() };
        let (first, second, bytes) = (numbers(70_000), numbers(9_000), vec![3u8; 66_001]);
        let segments: [&[u8]; 6] = [b"a", &first, b"bc", &second, &bytes, b"d"];
        let call = Call {
            request: RequestId::new(4).unwrap(),
            action: ActionId::new(7).unwrap(),
            domain: DomainId::MIN,
            trace: None,
        };
        let deadline = RelativeDeadline::from_duration(Duration::from_secs(1)).unwrap();
        let message = Message::Request { call, deadline };
        let header = Header::new(peer(), message, &segments, &ProtocolLimits::DEFAULT)
            .and_then(|header| header.with_tail_width(TailWidth::Eight))
            .unwrap();
        let mut frame = vec![0; header.frame_len()];
        encode_frame(&header, &segments, &mut frame).unwrap();
        let head = header.head_len();
        (frame, [head + 1, head + 3, head + 3])
    }

    /// The one frame of `events`: `frame`'s bytes, its large segments held
    /// apart at `places`, the numbers in their width.
    fn check_scattered(events: &[ReadEvent], frame: &[u8], places: [usize; 3]) {
        let [ReadEvent::Frame(received)] = events else {
            panic!("one frame: {events:?}");
        };
        assert!(received.bytes_eq(frame));
        assert!(received.has_middle() && received.tail().is_empty());
        let found: Vec<usize> = received.part_places().map(|place| place.at).collect();
        assert_eq!(found, places);
        let mut received = received.clone();
        let (_, middle, _) = received.parts_apart_mut();
        let widths: Vec<TailWidth> = middle.iter().map(|(_, part)| part.width()).collect();
        let eight = TailWidth::Eight.for_len(8);
        // 66,001 bytes are no whole number of eight-byte numbers.
        assert_eq!(widths, [eight, eight, TailWidth::One]);
    }

    #[test]
    fn every_large_segment_is_received_apart() {
        let (frame, places) = scattered_request();
        for chunk in [frame.len(), 4096, 999, 81] {
            let mut r = reader();
            let events = feed_all(&mut r, &frame, chunk).unwrap();
            check_scattered(&events, &frame, places);
            r.finish().unwrap();
        }
        // Straight into the frame's buffers, a piece at a time.
        let head = HEADER_LEN + 6 * LENGTH_ENTRY_LEN;
        for piece in [usize::MAX, 5000, 7] {
            let mut r = reader();
            assert!(feed_all(&mut r, &frame[..head], 80).unwrap().is_empty());
            let mut events = Vec::new();
            let mut rest = &frame[head..];
            while !rest.is_empty() {
                let want = piece.min(rest.len());
                let read = if r.payload_left() > 0 {
                    r.read_payload_in_place(from(&rest[..want]), &mut |event| {
                        events.push(event);
                        true
                    })
                    .unwrap()
                    .unwrap()
                } else {
                    want
                };
                assert!(read > 0);
                rest = &rest[read..];
            }
            check_scattered(&events, &frame, places);
            assert_eq!(r.assembling(), 0, "nothing left over");
            r.finish().unwrap();
        }
    }

    #[test]
    fn a_large_payload_is_read_in_place() {
        let payload = vec![5u8; 100_000];
        let frame = request(1, &payload);
        let head = HEADER_LEN + 2 * LENGTH_ENTRY_LEN;
        let mut r = reader();
        // Header, table and the first payload bytes through the buffer...
        assert!(
            feed_all(&mut r, &frame[..head + 10], 64)
                .unwrap()
                .is_empty()
        );
        assert_eq!(r.payload_left(), frame.len() - head - 10);
        // ...the rest straight into the frame: the large first segment's
        // own buffer, then the head.
        let mut events = Vec::new();
        let mut rest = &frame[head + 10..];
        let mut reads = Vec::new();
        while !rest.is_empty() {
            let read = r
                .read_payload_in_place(from(rest), &mut |event| {
                    events.push(event);
                    true
                })
                .unwrap()
                .unwrap();
            reads.push(read);
            rest = &rest[read..];
        }
        assert_eq!(reads, [payload.len() - 10, 2]);
        let [ReadEvent::Frame(received)] = &events[..] else {
            panic!("one frame: {events:?}");
        };
        assert!(received.has_middle(), "the large segment kept apart");
        assert!(received.bytes_eq(&frame));
        assert_eq!(r.payload_left(), 0);
        r.finish().unwrap();
    }

    #[test]
    fn an_in_place_read_cut_short_keeps_what_arrived() {
        let frame = request(1, &[1u8; 50_000]);
        let head = HEADER_LEN + 2 * LENGTH_ENTRY_LEN;
        let mut r = reader();
        feed_all(&mut r, &frame[..head], 64).unwrap();
        let read = r
            .read_payload_in_place(from(&frame[head..head + 1000]), &mut |_| true)
            .unwrap()
            .unwrap();
        assert_eq!(read, 1000);
        assert_eq!(r.assembling(), head + 1000);
        assert!(r.finish().is_err());
    }
}
