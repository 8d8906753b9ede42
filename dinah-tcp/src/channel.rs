//! One connection: one lane (control or action) to one peer, with the
//! frames being read from it, its place in the watcher's set and its
//! outbox.
//!
//! The owner thread reads the socket itself, without blocking, inside
//! `poll`: bytes go into the connection's read buffer, the core
//! `StreamDecoder` checks them (every length against the negotiated limits
//! before anything is allocated), and complete frames go straight to the
//! runtime, with no thread hand-off. A large payload is read straight
//! into its frame. What one poll's budget does not take stays in the read
//! buffer for the next poll, and nothing more is read meanwhile, so TCP
//! flow control slows a peer that sends faster than the runtime takes.

use std::cell::Cell;
use std::io;
use std::net::{Shutdown, TcpStream};

use dinah_core::Rank;
use dinah_core::wire::{Channel, DecodeContext, StreamDecoder};
use dinah_std::transport::{DownReason, IoOp, TransportError};

use crate::config::TcpConfig;
use crate::error::TcpError;
use crate::frame::{FrameReader, ReadEvent, Room};
use crate::inbound::{End, Inbound};
use crate::outbox::Outbox;
use crate::readiness::Interest;
use crate::socket;
use crate::watch::{Registration, Watcher};

/// How the owner learns that a full socket has room again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RoomWatch {
    /// The readiness set reports it (see [`Connection::set_blocked`]).
    Watched,
    /// The socket left the set (its stream ended): only a retry finds out.
    Unwatched,
}

/// What the owner's last idle look at a socket found that its next read
/// acts on (see [`Connection::look`]).
#[derive(Debug, Default)]
enum Looked {
    /// Nothing to act on: the next read asks the socket as usual.
    #[default]
    Nothing,
    /// The look read everything the socket held into the read buffer: the
    /// next read hands it over without another `recv`.
    Drained,
    /// The look found the socket empty: the next read does not ask again
    /// (what arrives meanwhile is read by the poll after it).
    Empty,
    /// The look received the connection's error, which the socket reports
    /// only once: the next read ends the stream with it.
    Failed(io::Error),
}

/// The owner's side of one connection.
#[derive(Debug)]
pub(crate) struct Connection {
    /// The lane.
    pub(crate) channel: Channel,
    /// The peer.
    peer: Rank,
    /// Checks and assembles the frames.
    reader: FrameReader,
    /// Bytes read off the socket; `buf[at..len]` are not fed yet.
    buf: Box<[u8]>,
    at: usize,
    len: usize,
    /// The socket, in the driver's watcher set (which wakes the parked
    /// owner when it becomes readable, or writable while `blocked`) until
    /// the stream ends.
    pub(crate) registration: Registration,
    /// Frames to write.
    pub(crate) outbox: Outbox,
    /// Frames queued on this connection since the start (what the goodbye
    /// announces).
    pub(crate) frames_queued: u64,
    /// The peer's goodbye arrived.
    pub(crate) goodbye_received: bool,
    /// The stream ended (or failed): nothing more is read.
    pub(crate) ended: bool,
    /// This side's goodbye is queued.
    pub(crate) goodbye_queued: bool,
    /// This side's goodbye is written and the write side shut down.
    pub(crate) write_closed: bool,
    /// The last write found the socket's buffer full (set through
    /// [`set_blocked`](Self::set_blocked)).
    blocked: bool,
    /// What the last idle look found, for the next read.
    looked: Looked,
}

impl Connection {
    /// Registers an established, handshaken connection to `peer` on
    /// `channel` with the driver's `watcher` and returns the owner's side.
    ///
    /// # Errors
    ///
    /// [`TcpError::Io`] if the socket cannot be configured or registered.
    pub(crate) fn start(
        stream: TcpStream,
        ctx: DecodeContext,
        config: &TcpConfig,
        watcher: &Watcher,
    ) -> Result<Self, TcpError> {
        let peer = ctx.source();
        let configure = |e| TcpError::io(Some(peer), IoOp::Configure, e);
        // Without timeouts: the owner never waits in a socket call (the
        // watcher waits for readiness). Where the owner's reads and writes
        // can pass `MSG_DONTWAIT` the socket stays in blocking mode;
        // elsewhere it is made non-blocking (see `socket.rs`).
        stream
            .set_nonblocking(!crate::socket::PER_CALL_NONBLOCKING)
            .map_err(configure)?;
        stream.set_read_timeout(None).map_err(configure)?;
        stream.set_write_timeout(None).map_err(configure)?;
        let registration = watcher.register(stream, peer)?;
        Ok(Self {
            channel: ctx.channel(),
            peer,
            reader: FrameReader::new(StreamDecoder::new(ctx)),
            buf: vec![0; config.read_buffer_bytes].into_boxed_slice(),
            at: 0,
            len: 0,
            registration,
            outbox: Outbox::default(),
            frames_queued: 0,
            goodbye_received: false,
            ended: false,
            goodbye_queued: false,
            write_closed: false,
            blocked: false,
            looked: Looked::Nothing,
        })
    }

    /// Reads what the socket holds, without blocking, and appends the
    /// frames and goodbye it completes to `items`: at most `max` of them
    /// (what is left stays buffered), then the end of the stream if it
    /// ended or failed. Returns whether anything was read or handed over.
    ///
    /// A read into the read buffer that does not fill it took all the
    /// socket held: the bytes are handed over and the read ends there,
    /// without another `recv` that would only report `WouldBlock` (bytes
    /// that arrive meanwhile are read by the next poll, and keep the
    /// socket ready for the idle wait until then).
    pub(crate) fn read(&mut self, max: usize, items: &mut Vec<Inbound>) -> bool {
        if self.ended || max == 0 {
            return false;
        }
        let mut drained = false;
        match std::mem::take(&mut self.looked) {
            Looked::Nothing => {}
            Looked::Drained => drained = true,
            Looked::Empty if self.at == self.len => return false,
            Looked::Empty => {}
            Looked::Failed(error) => return self.end(items, failed(self.peer, error)),
        }
        let taken = Cell::new(0);
        let mut progress = false;
        loop {
            let mut sink = |event: ReadEvent| {
                items.push(match event {
                    ReadEvent::Frame(bytes) => Inbound::Frame(bytes),
                    ReadEvent::Goodbye => Inbound::Goodbye,
                    ReadEvent::Heartbeat => Inbound::Heartbeat,
                });
                taken.set(taken.get() + 1);
                taken.get() < max
            };
            if self.at < self.len {
                match self.reader.feed(&self.buf[self.at..self.len], &mut sink) {
                    Ok(used) => {
                        self.at += used;
                        progress |= used > 0;
                    }
                    Err(error) => return self.end(items, violation(error)),
                }
            }
            if taken.get() >= max || drained {
                return progress;
            }
            self.at = 0;
            self.len = 0;
            let read = if self.reader.payload_left() >= self.buf.len() {
                // Large payloads go straight into their frame.
                let stream = self.registration.stream();
                match self.reader.read_payload_in_place(
                    |room| match room {
                        Room::Spare(frame, want) => socket::recv_onto(stream, frame, want),
                        Room::Slice(slice) => socket::recv_nonblocking(stream, slice),
                    },
                    &mut sink,
                ) {
                    Ok(Ok(read)) => Ok(read),
                    Ok(Err(error)) => return self.end(items, violation(error)),
                    Err(error) => Err(error),
                }
            } else {
                socket::recv_nonblocking(self.registration.stream(), &mut self.buf).inspect(
                    |&read| {
                        self.len = read;
                        drained = read < self.buf.len();
                    },
                )
            };
            match read {
                Ok(0) => {
                    let end = match self.reader.finish() {
                        Err(error) => violation(error),
                        Ok(()) if self.reader.said_goodbye() => End::Clean,
                        Ok(()) => End::Down {
                            reason: DownReason::EndOfStream,
                            error: TransportError::PeerDown {
                                peer: self.peer,
                                reason: DownReason::EndOfStream,
                            },
                        },
                    };
                    return self.end(items, end);
                }
                Ok(_) => progress = true,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return progress,
                Err(error) => return self.end(items, failed(self.peer, error)),
            }
        }
    }

    /// One look of the owner's idle spin: whether this connection has
    /// something for the next read (bytes, its end, or its error), asked
    /// of the socket itself without blocking.
    ///
    /// The look is a real `recv` into the empty read buffer, so an arrival
    /// it finds is not asked for again: the next [`read`](Self::read)
    /// hands it over. While a large payload is read straight into its
    /// frame, the look only peeks, leaving the bytes for that read. A look
    /// reads nothing while bytes read earlier wait in the buffer (it
    /// answers yes), so the buffer's bound holds.
    pub(crate) fn look(&mut self) -> bool {
        if self.ended {
            return false;
        }
        if self.at < self.len || matches!(self.looked, Looked::Failed(_)) {
            return true;
        }
        let stream = self.registration.stream();
        let found = if self.reader.payload_left() >= self.buf.len() {
            socket::peek_nonblocking(stream).map(|_| Looked::Nothing)
        } else {
            socket::recv_nonblocking(stream, &mut self.buf).map(|read| {
                self.at = 0;
                self.len = read;
                if read > 0 && read < self.buf.len() {
                    Looked::Drained
                } else {
                    // A full buffer may have left bytes in the socket, and
                    // the end of the stream is seen again by the read.
                    Looked::Nothing
                }
            })
        };
        self.looked = match found {
            Ok(looked) => looked,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                self.looked = Looked::Empty;
                return false;
            }
            Err(error) => Looked::Failed(error),
        };
        true
    }

    /// Forgets that the last look found the socket empty, so the next read
    /// asks it again: for an owner about to park, whose next poll follows
    /// a wake-up, not the look.
    pub(crate) fn forget_empty_look(&mut self) {
        if matches!(self.looked, Looked::Empty) {
            self.looked = Looked::Nothing;
        }
    }

    /// The stream ended: nothing more is read (the socket leaves the
    /// watcher's set, where its end would keep it readable), and `end` is
    /// handed over.
    fn end(&mut self, items: &mut Vec<Inbound>, end: End) -> bool {
        self.registration.cancel();
        self.ended = true;
        self.at = 0;
        self.len = 0;
        items.push(Inbound::End(end));
        true
    }

    /// Records whether the last write found the socket's buffer full.
    /// While it is, the socket is watched for room as well as for data, so
    /// the owner's wait ends once the peer has read enough to take more.
    ///
    /// # Errors
    ///
    /// The readiness set's error when the socket's watch cannot change.
    pub(crate) fn set_blocked(&mut self, blocked: bool) -> io::Result<()> {
        self.blocked = blocked;
        self.registration.watch(if blocked {
            Interest::ReadOrWrite
        } else {
            Interest::Read
        })
    }

    /// How the owner learns that the socket has room again, if the last
    /// write found its buffer full.
    pub(crate) fn blocked(&self) -> Option<RoomWatch> {
        self.blocked.then(|| {
            if self.registration.is_watched() {
                RoomWatch::Watched
            } else {
                RoomWatch::Unwatched
            }
        })
    }

    /// Are bytes read off the socket still waiting to be fed?
    pub(crate) fn buffered(&self) -> bool {
        !self.ended && self.at < self.len
    }

    /// Bytes held on the receiving side: read and not yet fed, and the
    /// frame being assembled.
    pub(crate) fn retained_bytes(&self) -> u64 {
        ((self.len - self.at) + self.reader.assembling()) as u64
    }

    /// Takes the socket out of the watcher's set and shuts it down in both
    /// directions, and drops what was read and not handed over. Errors are
    /// ignored: the socket may already be closed.
    pub(crate) fn abort(&mut self) {
        self.registration.cancel();
        let _ = self.registration.stream().shutdown(Shutdown::Both);
        self.write_closed = true;
        self.ended = true;
        self.at = 0;
        self.len = 0;
    }
}

impl Drop for Connection {
    /// Aborts the connection: its socket leaves the watcher's set before it
    /// closes, and the peer sees it shut down, also when the connection is
    /// dropped without [`abort`](Self::abort) (for instance when starting
    /// the other connections of a driver failed).
    fn drop(&mut self) {
        self.abort();
    }
}

/// The end of a stream whose socket failed with `error`.
fn failed(peer: Rank, error: io::Error) -> End {
    End::Down {
        reason: down_reason(&error),
        error: TransportError::io(Some(peer), IoOp::Read, error),
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

/// The end of a stream that broke the protocol: the peer is down, and its
/// waiters get the [`ProtocolError`](dinah_core::wire::ProtocolError) (or
/// the goodbye error) inside the transport error.
fn violation(error: TcpError) -> End {
    End::Down {
        reason: DownReason::ProtocolViolation,
        error: error.into(),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::time::{Duration, Instant};

    use dinah_core::wire::{Header, Message};
    use dinah_core::{ProtocolLimits, WorldSize};
    use dinah_std::transport::Wakeup;

    use super::*;

    /// A connection from rank 0 to rank 1 of a world of 2 on `channel`,
    /// registered with a watcher of its own, and the peer's end of its
    /// socket.
    fn connection(channel: Channel, config: &TcpConfig) -> (Connection, TcpStream, Watcher) {
        let world = WorldSize::new(2).unwrap();
        let wakeup = Wakeup::new();
        assert!(wakeup.bind_current());
        let watcher = Watcher::start(Rank::ZERO, wakeup).unwrap();
        let (client, server) = crate::socket::loopback_pair();
        let ctx = DecodeContext::new(
            channel,
            world.rank(1).unwrap(),
            world,
            ProtocolLimits::DEFAULT,
        )
        .unwrap();
        let conn = Connection::start(client, ctx, config, &watcher).unwrap();
        (conn, server, watcher)
    }

    /// A heartbeat from rank 1.
    fn heartbeat() -> [u8; dinah_core::wire::HEADER_LEN] {
        let peer = WorldSize::new(2).unwrap().rank(1).unwrap();
        Header::without_payload(peer, Message::Heartbeat)
            .unwrap()
            .encode()
    }

    /// Waits until the watcher's set reports a socket ready.
    fn wait_ready(watcher: &Watcher) {
        let begin = Instant::now();
        while !watcher.any_ready() {
            assert!(
                begin.elapsed() < Duration::from_secs(10),
                "the bytes never showed"
            );
        }
    }

    #[test]
    fn a_connection_leaves_the_watchers_set_when_it_ends_or_drops() {
        let world = WorldSize::new(3).unwrap();
        let wakeup = Wakeup::new();
        assert!(wakeup.bind_current());
        let watcher = Watcher::start(Rank::ZERO, wakeup.clone()).unwrap();
        let start = |n: u32| {
            let (client, server) = crate::socket::loopback_pair();
            let ctx = DecodeContext::new(
                Channel::Action,
                world.rank(n).unwrap(),
                world,
                ProtocolLimits::DEFAULT,
            )
            .unwrap();
            let conn = Connection::start(client, ctx, &TcpConfig::default(), &watcher).unwrap();
            (conn, server)
        };
        let (mut ended, ended_peer) = start(1);
        let (dropped, dropped_peer) = start(2);
        assert!(!watcher.any_ready());
        // The peer's end is readable until the owner reads it.
        ended_peer.shutdown(Shutdown::Both).unwrap();
        let begin = Instant::now();
        while !watcher.any_ready() {
            assert!(
                begin.elapsed() < Duration::from_secs(10),
                "the end never showed"
            );
        }
        let mut items = Vec::new();
        assert!(ended.read(16, &mut items));
        assert!(matches!(items.last(), Some(Inbound::End(_))));
        assert!(
            !watcher.any_ready(),
            "an ended stream keeps the set readable"
        );
        // A dropped connection leaves the set too, so its peer's later end
        // (or data) never wakes an owner.
        drop(dropped);
        drop(dropped_peer);
        watcher.arm();
        assert!(!wakeup.wait(Duration::ZERO, Duration::from_millis(50)));
        assert!(!watcher.any_ready());
    }

    #[test]
    fn a_short_read_ends_the_read_and_what_follows_is_read_next_time() {
        let (mut conn, mut server, watcher) = connection(Channel::Control, &TcpConfig::default());
        let heartbeat = heartbeat();
        let heartbeats = |items: &[Inbound]| {
            assert!(items.iter().all(|item| matches!(item, Inbound::Heartbeat)));
            items.len()
        };

        server.write_all(&heartbeat).unwrap();
        wait_ready(&watcher);
        let mut items = Vec::new();
        assert!(conn.read(16, &mut items));
        assert_eq!(heartbeats(&items), 1);
        // The short read took everything: nothing is ready or left.
        assert!(!watcher.any_ready());
        assert!(!conn.read(16, &mut items));

        // What arrives after a short read keeps the socket ready until
        // the next read takes all of it.
        server.write_all(&[heartbeat, heartbeat].concat()).unwrap();
        wait_ready(&watcher);
        items.clear();
        while heartbeats(&items) < 2 {
            wait_ready(&watcher);
            assert!(conn.read(16, &mut items));
        }
        assert_eq!(heartbeats(&items), 2);
        assert!(!watcher.any_ready());
        assert!(!conn.read(16, &mut items));
    }

    /// An idle look reads what arrived; the next read hands it over without
    /// asking the socket again, and after a look that found nothing the
    /// next read does not ask either. A look never reads while bytes wait
    /// in the buffer.
    #[test]
    fn a_look_reads_ahead_and_the_next_read_hands_it_over() {
        let (mut conn, mut server, watcher) = connection(Channel::Control, &TcpConfig::default());
        let heartbeat = heartbeat();

        let mut items = Vec::new();
        // A look that found nothing spares the next read its `recv`, even
        // when bytes arrived since; the read after it takes them.
        assert!(!conn.look(), "nothing was sent");
        assert!(matches!(conn.looked, Looked::Empty));
        server.write_all(&heartbeat).unwrap();
        wait_ready(&watcher);
        assert!(!conn.read(16, &mut items));
        assert!(items.is_empty());
        assert!(conn.read(16, &mut items));
        assert_eq!(items.len(), 1);
        // An owner about to park forgets such a look: its next read asks.
        items.clear();
        assert!(!conn.look());
        conn.forget_empty_look();
        server.write_all(&heartbeat).unwrap();
        wait_ready(&watcher);
        assert!(conn.read(16, &mut items));
        assert_eq!(items.len(), 1);
        items.clear();

        server.write_all(&[heartbeat, heartbeat].concat()).unwrap();
        let begin = Instant::now();
        while !conn.look() {
            assert!(
                begin.elapsed() < Duration::from_secs(10),
                "the bytes never showed"
            );
        }
        assert_eq!(conn.retained_bytes(), 2 * heartbeat.len() as u64);
        assert!(matches!(conn.looked, Looked::Drained));
        // More bytes now wait in the socket; the look does not take them
        // while the buffer holds the first ones.
        server.write_all(&heartbeat).unwrap();
        assert!(conn.look());
        assert_eq!(conn.retained_bytes(), 2 * heartbeat.len() as u64);
        // The read hands over what the look read, and stops there.
        assert!(conn.read(16, &mut items));
        assert_eq!(items.len(), 2);
        assert!(items.iter().all(|item| matches!(item, Inbound::Heartbeat)));
        // The next read asks the socket again and finds the third.
        let begin = Instant::now();
        while items.len() < 3 {
            assert!(begin.elapsed() < Duration::from_secs(10), "lost a frame");
            let _ = conn.read(16, &mut items);
        }
        assert!(matches!(items[2], Inbound::Heartbeat));
    }

    /// While a payload is read straight into its frame, a look only peeks:
    /// the bytes stay in the socket for that read, nothing goes through
    /// the read buffer, and the frame arrives whole.
    #[test]
    fn a_look_mid_payload_peeks_and_leaves_the_bytes_to_the_read() {
        let config = TcpConfig::default().with_read_buffer_bytes(64);
        let (mut conn, mut server, watcher) = connection(Channel::Action, &config);
        let payload: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        let frame = crate::frame::tests::request(3, &payload);

        let mut items = Vec::new();
        server.write_all(&frame[..100]).unwrap();
        wait_ready(&watcher);
        assert!(conn.read(16, &mut items));
        assert!(items.is_empty());
        assert!(conn.reader.payload_left() >= conn.buf.len());
        assert!(!conn.look(), "the first part is read, the rest not sent");
        server.write_all(&frame[100..]).unwrap();
        wait_ready(&watcher);
        let held = conn.retained_bytes();
        assert!(conn.look());
        assert!(matches!(conn.looked, Looked::Nothing));
        assert!(!conn.buffered(), "a peek puts nothing in the read buffer");
        assert_eq!(conn.retained_bytes(), held, "a peek takes nothing");
        let begin = Instant::now();
        while items.is_empty() {
            assert!(begin.elapsed() < Duration::from_secs(10), "lost the frame");
            let _ = conn.read(16, &mut items);
        }
        match items.as_slice() {
            [Inbound::Frame(got)] => assert_eq!(got.to_vec(), frame),
            other => panic!("{other:?}"),
        }
    }

    /// A connection error that a look receives is reported by the next
    /// read, although the socket reports it only once.
    #[test]
    fn an_error_a_look_receives_ends_the_stream_at_the_next_read() {
        let (mut conn, server, _watcher) = connection(Channel::Action, &TcpConfig::default());
        // Closing with a zero linger resets the connection.
        socket2::SockRef::from(&server)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(server);
        let begin = Instant::now();
        while !conn.look() {
            assert!(
                begin.elapsed() < Duration::from_secs(10),
                "the reset never showed"
            );
        }
        assert!(
            matches!(conn.looked, Looked::Failed(_)),
            "{:?}",
            conn.looked
        );
        assert!(conn.look(), "a failed look stays found until read");
        let mut items = Vec::new();
        assert!(conn.read(16, &mut items));
        match items.as_slice() {
            [Inbound::End(End::Down { reason, .. })] => assert_eq!(*reason, DownReason::Reset),
            other => panic!("{other:?}"),
        }
        assert!(conn.ended);
        assert!(!conn.look());
    }
}
