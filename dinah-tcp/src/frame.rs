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
/// A frame whose last segment is at least [`DETACH_FROM`] bytes is
/// received split ([`Frame::split`]): that segment goes into a buffer of
/// its own, allocated once the length table has been checked, which the
/// runtime hands to the decoded value instead of copying it out; a last
/// segment of numbers (the header's [`TailWidth`]) goes into a buffer of
/// numbers of that width, which a decoded vector of them takes over.
#[derive(Debug)]
pub(crate) struct FrameReader {
    decoder: StreamDecoder,
    /// The frame being assembled, or its head if it is received split
    /// (empty between frames).
    current: Vec<u8>,
    /// The current frame's detached last segment, if it is received split.
    tail: Detached,
    /// The width of the numbers in the current frame's last segment.
    tail_width: TailWidth,
    /// The length of the current frame (0 between frames).
    frame_len: usize,
    /// The length of its detached last segment (0: received whole).
    tail_len: usize,
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
            tail: Detached::default(),
            tail_width: TailWidth::One,
            frame_len: 0,
            tail_len: 0,
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
                        self.table_read(len as usize);
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
        let tail = if frame.len() > DETACH_FROM {
            detached_len(header.segment_count(), frame)
        } else {
            0
        };
        let (head, tail) = frame.split_at(frame.len() - tail);
        let mut bytes = frame_buffers::take(head.len());
        bytes.extend_from_slice(head);
        if tail.is_empty() {
            return Ok(ReadEvent::Frame(Frame::whole(bytes)));
        }
        let mut detached = Detached::new(header.tail_width(), tail.len());
        detached.append(tail);
        Ok(ReadEvent::Frame(Frame::split(bytes, detached.take())))
    }

    /// The whole length table of the current frame has been read and
    /// checked, the last entry being `last`: a large last segment is
    /// received into a buffer of its own, the rest of the frame into
    /// `current`, now sized for it.
    fn table_read(&mut self, last: usize) {
        if last >= DETACH_FROM {
            self.tail_len = last;
            self.tail = Detached::new(self.tail_width, last);
        }
        let head = self.frame_len - self.tail_len;
        self.current.reserve(head - self.current.len());
    }

    /// Appends payload bytes of the current frame: to its head until that
    /// is complete, then to its detached last segment.
    fn append(&mut self, bytes: &[u8]) {
        let head_left = self.frame_len - self.tail_len - self.current.len();
        let (head, tail) = bytes.split_at(head_left.min(bytes.len()));
        self.current.extend_from_slice(head);
        if !tail.is_empty() {
            self.tail.append(tail);
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
        self.tail_width = header.tail_width();
        self.head_len = HEADER_LEN + usize::from(header.segment_count()) * LENGTH_ENTRY_LEN;
        // A spare buffer of this thread when the frame is small (the
        // runtime gives decoded frames back on this thread). A large
        // frame's buffer is sized once its length table tells whether its
        // last segment goes into a buffer of its own (`table_read`).
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
            self.frame_len = 0;
            self.tail_len = 0;
            let head = std::mem::take(&mut self.current);
            let tail = self.tail.take();
            if tail.is_empty() {
                return ReadEvent::Frame(Frame::whole(head));
            }
            ReadEvent::Frame(Frame::split(head, tail))
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
        self.frame_len - self.current.len() - self.tail.written().len()
    }

    /// Reads more of the current frame's payload straight into the frame
    /// (no copy through a read buffer): `read` puts bytes into the
    /// [`Room`] it is given, the rest of the frame's head or once that is
    /// complete of its detached last segment (each buffer was sized when
    /// the length table was read), and returns how many it put (0: the
    /// stream ended). Then the decoder checks those bytes, and the frame
    /// goes to `sink` if they complete it. Returns the bytes read.
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
        let head = self.frame_len - self.tail_len;
        let into_tail = self.tail_len > 0 && self.current.len() == head;
        let (start, result) = if into_tail {
            self.tail.read(self.tail_len, read)
        } else {
            let start = self.current.len();
            let result = read(Room::Spare(&mut self.current, head - start));
            (start, result)
        };
        let read = if into_tail {
            self.tail.written().len()
        } else {
            self.current.len()
        } - start;
        let mut at = start;
        let mut complete = false;
        while !complete {
            // The bytes are already in the frame: the decoder only checks
            // them.
            let bytes = if into_tail {
                self.tail.written()
            } else {
                &self.current
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
        self.current.len() + self.tail.written().len()
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

/// The length of the last segment of `frame` (whole, checked, with
/// `segments` segments) if it is received into a buffer of its own (at
/// least [`DETACH_FROM`] bytes), else 0.
fn detached_len(segments: u16, frame: &[u8]) -> usize {
    let Some(last) = usize::from(segments).checked_sub(1) else {
        return 0;
    };
    let at = HEADER_LEN + last * LENGTH_ENTRY_LEN;
    let len = frame
        .get(at..at + LENGTH_ENTRY_LEN)
        .and_then(|entry| entry.try_into().ok())
        .map_or(0, |entry| u32::from_le_bytes(entry) as usize);
    if len >= DETACH_FROM { len } else { 0 }
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

/// A frame's detached last segment while it is received.
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
    /// Room for a last segment of `len` bytes whose sender packed numbers
    /// of `width` into it.
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
        // ...the rest straight into the frame.
        let mut events = Vec::new();
        let read = r
            .read_payload_in_place(from(&frame[head + 10..]), &mut |event| {
                events.push(event);
                true
            })
            .unwrap()
            .unwrap();
        assert_eq!(read, frame.len() - head - 10);
        assert_eq!(events, [ReadEvent::Frame(Frame::whole(frame.clone()))]);
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
