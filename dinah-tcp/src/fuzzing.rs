//! The TCP reading path without a socket, for the fuzz targets (feature
//! `fuzzing`; not part of the crate's API).
//!
//! [`read_stream`] feeds a byte stream through the connection's frame
//! reader exactly the way `Connection::read` (`channel.rs`) reads its
//! socket: bytes come in chunks into a read buffer and are fed from there,
//! and once a frame's payload still to come is at least the buffer's size
//! it is read straight into the frame. What it returns is what the driver
//! would have seen: the frames, goodbye and heartbeats in order, then the
//! stream's error or its end.

use dinah_core::wire::DecodeContext;

use crate::error::TcpError;
use crate::frame::{FrameReader, ReadEvent};

/// One item the reader handed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A complete frame: its bytes, exactly as they came off the stream.
    Frame(Vec<u8>),
    /// The goodbye, after exactly the frames it announced.
    Goodbye,
    /// A heartbeat.
    Heartbeat,
}

/// What reading a whole stream gave.
#[derive(Debug)]
pub struct Outcome {
    /// Everything handed over, in order.
    pub items: Vec<Item>,
    /// How the stream ended: `Ok` at a frame boundary, else the first
    /// error (an invalid frame, a goodbye whose count is wrong, a frame
    /// after the goodbye, or a stream cut inside a frame).
    pub end: Result<(), TcpError>,
    /// The most bytes one frame's buffer held (never above the context's
    /// `max_frame_bytes`).
    pub largest_frame: usize,
}

/// Reads `stream` with a reader for `ctx`, a read buffer of `buffer`
/// bytes (at least 1), taking at most `chunk()` bytes per read as a
/// socket would.
pub fn read_stream(
    ctx: DecodeContext,
    stream: &[u8],
    buffer: usize,
    mut chunk: impl FnMut() -> usize,
) -> Outcome {
    let mut reader = FrameReader::new(dinah_core::wire::StreamDecoder::new(ctx));
    let mut items = Vec::new();
    let mut largest_frame = 0;
    let mut sink = |event: ReadEvent| {
        items.push(match event {
            ReadEvent::Frame(frame) => Item::Frame(frame.into_whole()),
            ReadEvent::Goodbye => Item::Goodbye,
            ReadEvent::Heartbeat => Item::Heartbeat,
        });
        true
    };
    let mut buf = vec![0; buffer.max(1)];
    let mut rest = stream;
    let end = loop {
        largest_frame = largest_frame.max(reader.assembling());
        let want = chunk().max(1).min(rest.len());
        if rest.is_empty() {
            break reader.finish();
        }
        if reader.payload_left() >= buf.len() {
            let taken = reader.read_payload_in_place(|room| Ok(room.put(&rest[..want])), &mut sink);
            match taken {
                Ok(Ok(n)) => rest = &rest[n..],
                Ok(Err(error)) => break Err(error),
                Err(_) => unreachable!("reading from memory does not fail"),
            }
            continue;
        }
        let n = want.min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        // The sink takes everything, so one feed uses the whole read.
        if let Err(error) = reader.feed(&buf[..n], &mut sink) {
            break Err(error);
        }
    };
    for item in &items {
        if let Item::Frame(bytes) = item {
            largest_frame = largest_frame.max(bytes.len());
        }
    }
    Outcome {
        items,
        end,
        largest_frame,
    }
}
