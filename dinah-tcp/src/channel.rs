//! One connection: one lane (control or action) to one peer, with its
//! reader thread, its inbox and its outbox.

use std::cell::Cell;
use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use dinah_core::wire::{Channel, DecodeContext, StreamDecoder};
use dinah_std::transport::{DownReason, IoOp, TransportError, Wakeup};

use crate::config::TcpConfig;
use crate::error::TcpError;
use crate::frame::{FrameReader, ReadEvent};
use crate::inbox::{End, Inbound, Inbox};
use crate::outbox::Outbox;

/// Stack size of a reader thread: it keeps its buffers on the heap.
const READER_STACK: usize = 256 << 10;

/// The owner's side of one connection.
#[derive(Debug)]
pub(crate) struct Connection {
    /// The lane.
    pub(crate) channel: Channel,
    /// The socket, shared with the reader thread (which only reads).
    pub(crate) stream: Arc<TcpStream>,
    /// Frames from the reader.
    pub(crate) inbox: Arc<Inbox>,
    /// Frames to write.
    pub(crate) outbox: Outbox,
    /// The reader thread, until joined.
    pub(crate) reader: Option<JoinHandle<()>>,
    /// Frames queued on this connection since the start (what the goodbye
    /// announces).
    pub(crate) frames_queued: u64,
    /// The peer's goodbye arrived.
    pub(crate) goodbye_received: bool,
    /// The reader reported the end of the stream.
    pub(crate) ended: bool,
    /// This side's goodbye is queued.
    pub(crate) goodbye_queued: bool,
    /// This side's goodbye is written and the write side shut down.
    pub(crate) write_closed: bool,
    /// The last write found the socket's buffer full.
    pub(crate) blocked: bool,
}

impl Connection {
    /// Starts the reader thread of an established, handshaken connection
    /// to `peer` on `channel` and returns the owner's side.
    ///
    /// # Errors
    ///
    /// [`TcpError::Io`] if the socket cannot be switched back to blocking
    /// mode or the thread cannot be spawned.
    pub(crate) fn start(
        stream: TcpStream,
        ctx: DecodeContext,
        config: &TcpConfig,
        wakeup: Wakeup,
    ) -> Result<Self, TcpError> {
        let peer = ctx.source();
        let configure = |e| TcpError::io(Some(peer), IoOp::Configure, e);
        stream.set_nonblocking(false).map_err(configure)?;
        stream.set_read_timeout(None).map_err(configure)?;
        stream.set_write_timeout(None).map_err(configure)?;
        let stream = Arc::new(stream);
        let inbox = Arc::new(Inbox::new(config.inbox_frames, config.inbox_bytes, wakeup));
        let reader = {
            let (stream, inbox) = (Arc::clone(&stream), Arc::clone(&inbox));
            let buffer = config.read_buffer_bytes;
            thread::Builder::new()
                .name(format!("dinah-tcp-{}-{}", peer.get(), ctx.channel()))
                .stack_size(READER_STACK)
                .spawn(move || read_loop(&stream, &inbox, ctx, buffer))
                .map_err(|e| TcpError::io(Some(peer), IoOp::Spawn, e))?
        };
        Ok(Self {
            channel: ctx.channel(),
            stream,
            inbox,
            outbox: Outbox::default(),
            reader: Some(reader),
            frames_queued: 0,
            goodbye_received: false,
            ended: false,
            goodbye_queued: false,
            write_closed: false,
            blocked: false,
        })
    }

    /// Shuts the socket down in both directions (ending the reader's
    /// blocking read) and closes the inbox (releasing a reader waiting for
    /// room). Errors are ignored: the socket may already be closed.
    pub(crate) fn abort(&mut self) {
        self.inbox.close();
        let _ = self.stream.shutdown(Shutdown::Both);
        self.write_closed = true;
    }
}

/// What a failed read means for the peer.
pub(crate) fn down_reason(error: &io::Error) -> DownReason {
    match error.kind() {
        io::ErrorKind::TimedOut => DownReason::Timeout,
        io::ErrorKind::UnexpectedEof => DownReason::EndOfStream,
        _ => DownReason::Reset,
    }
}

/// The reader thread: runs [`read_stream`] and reports how the stream
/// ended. A panic (a bug) is reported as the peer going down rather than
/// leaving the owner waiting for a reader that is gone.
fn read_loop(stream: &TcpStream, inbox: &Inbox, ctx: DecodeContext, buffer: usize) {
    inbox.bind_reader();
    let peer = ctx.source();
    let ended = panic::catch_unwind(AssertUnwindSafe(|| read_stream(stream, inbox, ctx, buffer)));
    inbox.set_assembling(0);
    let end = match ended {
        Ok(Some(end)) => end,
        // The owner closed the inbox: it no longer listens.
        Ok(None) => return,
        Err(_) => End::Down {
            reason: DownReason::LocalClose,
            error: TransportError::io(
                Some(peer),
                IoOp::Read,
                io::Error::other("the reader thread panicked"),
            ),
        },
    };
    inbox.push(Inbound::End(end));
    inbox.wakeup().wake();
}

/// Reads the socket, assembles and checks frames, and hands them to the
/// owner through the inbox (waking it once per read), until the stream
/// ends or fails (`Some`: how), or the owner closes the inbox (`None`).
fn read_stream(
    stream: &TcpStream,
    inbox: &Inbox,
    ctx: DecodeContext,
    buffer: usize,
) -> Option<End> {
    let peer = ctx.source();
    let mut reader = FrameReader::new(StreamDecoder::new(ctx));
    let mut buf = vec![0u8; buffer];
    let open = Cell::new(true);
    // Whether something was handed over since the owner was last woken.
    let fresh = Cell::new(false);
    let mut sink = |event: ReadEvent| {
        let pushed = inbox.push(match event {
            ReadEvent::Frame(bytes) => Inbound::Frame(bytes),
            ReadEvent::Goodbye => Inbound::Goodbye,
        });
        open.set(open.get() && pushed);
        fresh.set(true);
        pushed
    };
    loop {
        // Large payloads go straight into their frame.
        let read = if reader.payload_left() >= buffer {
            match reader.read_payload_in_place(stream, &mut sink) {
                Ok(Ok(read)) => Ok(read),
                Ok(Err(error)) => return Some(violation(error)),
                Err(error) => Err(error),
            }
        } else {
            match (&*stream).read(&mut buf) {
                Ok(read) => match reader.feed(&buf[..read], &mut sink) {
                    Ok(()) => Ok(read),
                    Err(error) => return Some(violation(error)),
                },
                Err(error) => Err(error),
            }
        };
        if !open.get() {
            return None;
        }
        inbox.set_assembling(reader.assembling() as u64);
        // One wake per read that completed something, not per read: a
        // large frame arriving in many reads wakes the owner once.
        if fresh.replace(false) {
            inbox.wakeup().wake();
        }
        match read {
            Ok(0) => {
                return Some(match reader.finish() {
                    Err(error) => violation(error),
                    Ok(()) if reader.said_goodbye() => End::Clean,
                    Ok(()) => End::Down {
                        reason: DownReason::EndOfStream,
                        error: TransportError::PeerDown {
                            peer,
                            reason: DownReason::EndOfStream,
                        },
                    },
                });
            }
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => {
                let reason = down_reason(&error);
                return Some(End::Down {
                    reason,
                    error: TransportError::io(Some(peer), IoOp::Read, error),
                });
            }
        }
    }
}

/// The end of a stream that broke the protocol: the peer is down, and its
/// waiters get the [`ProtocolError`](dinah_core::wire::ProtocolError) (or
/// the goodbye error) inside the transport error.
fn violation(error: TcpError) -> End {
    End::Down {
        reason: DownReason::ProtocolViolation,
        error: error.into(),
    }
}
