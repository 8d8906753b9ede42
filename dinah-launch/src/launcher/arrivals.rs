//! Control connections that have not delivered their report yet.
//!
//! The launcher reads every new control connection without blocking and
//! without a thread of its own: each waits in arrival order with its own
//! short deadline ([`REPORT_TIMEOUT`]), and its bytes go into a fixed
//! buffer the size of the largest report, so a stranger costs one socket
//! and a few dozen bytes whatever length it announces. At most
//! [`MAX_ARRIVALS`] wait at once; a new arrival beyond that drops the
//! oldest. A rank sends its report as soon as it is connected (with
//! challenges, as soon as the challenge reaches it, a round trip after the
//! accept), and every new connection is read as soon as it is accepted and
//! again on every pass. A flood of strangers can still push a rank's
//! connection out of the full queue before its report arrives; the rank
//! then sees the connection close and reports again, so a flood delays a
//! rank but does not keep it out.
//!
//! `dinah-run` and a coordinator rank (`env/coordinator.rs`) both read
//! their reports this way. A coordinator of a run with a key has every new
//! connection sent a challenge first, and keeps the challenge with the
//! connection for checking the proof that comes with the report.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::key::NONCE_LEN;
use crate::launcher::{ControlError, Message, ReadError};
use crate::listener::is_out_of_descriptors;

/// How long a new control connection may take to deliver its report.
pub(crate) const REPORT_TIMEOUT: Duration = Duration::from_secs(2);

/// The most control connections waiting for their report at once.
pub(crate) const MAX_ARRIVALS: usize = 1024;

/// The most connections accepted between two passes over the waiting
/// ones.
const ACCEPT_BATCH: usize = 64;

/// The largest report frame: the length prefix, the body header
/// (magic, version, kind, reserved), run ID, world, rank, an IPv6
/// address with its port and scope, and a proof (nonce and tag).
const MAX_REPORT_FRAME: usize = 4 + 8 + 8 + 4 + 4 + 23 + NONCE_LEN + crate::key::TAG_LEN;

/// A control connection and what was read from it.
pub(crate) struct Inbound {
    pub(crate) stream: TcpStream,
    pub(crate) peer: SocketAddr,
    /// The challenge this connection was sent, if it was sent one.
    pub(crate) challenge: Option<[u8; NONCE_LEN]>,
    pub(crate) result: Result<Message, ReadError>,
}

/// One connection whose report is being read.
struct Arrival {
    stream: TcpStream,
    peer: SocketAddr,
    challenge: Option<[u8; NONCE_LEN]>,
    buf: [u8; MAX_REPORT_FRAME],
    filled: usize,
    until: Instant,
}

/// What happened to the waiting connections in one pass.
pub(crate) enum Event {
    /// A connection delivered a message or failed: hand it to the
    /// rendezvous.
    Inbound(Inbound),
    /// The listener failed (not a connection: the launcher itself).
    ListenerFailed(io::Error),
}

/// The control connections waiting for their report, oldest first.
#[derive(Default)]
pub(crate) struct Arrivals {
    waiting: VecDeque<Arrival>,
    /// Whether every new connection is sent a challenge.
    challenges: bool,
}

impl Arrivals {
    /// No connections yet; with `challenges`, each new one is sent a
    /// [`Message::Challenge`] with a fresh nonce as soon as it is accepted.
    pub(crate) fn new(challenges: bool) -> Self {
        Self {
            waiting: VecDeque::new(),
            challenges,
        }
    }

    /// Connections waiting for their report.
    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Accepts up to a batch of new connections from `listener`, then
    /// reads every waiting one; pushes what finished onto `events`.
    /// Returns whether anything happened.
    pub(crate) fn pass(&mut self, listener: &TcpListener, events: &mut Vec<Event>) -> bool {
        let now = Instant::now();
        let mut busy = false;
        for _ in 0..ACCEPT_BATCH {
            match listener.accept() {
                Ok((stream, peer)) => {
                    busy = true;
                    self.arrive(stream, peer, now, events);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) if is_out_of_descriptors(&e) => {
                    // Out of file descriptors: the oldest waiting
                    // connection gives its own up, so that the next
                    // arrival (perhaps a rank) can be accepted.
                    match self.waiting.pop_front() {
                        Some(oldest) => {
                            events.push(Event::Inbound(oldest.finish(Err(ReadError::TimedOut))));
                        }
                        None => break,
                    }
                }
                Err(e) => {
                    events.push(Event::ListenerFailed(e));
                    return true;
                }
            }
        }
        for _ in 0..self.waiting.len() {
            let Some(mut arrival) = self.waiting.pop_front() else {
                break;
            };
            match arrival.read(now) {
                None => self.waiting.push_back(arrival),
                Some(result) => {
                    busy = true;
                    events.push(Event::Inbound(arrival.finish(result)));
                }
            }
        }
        busy
    }

    /// Takes a new connection: reads it at once (its report may be there
    /// already); if it is still waiting and the queue is full, the oldest
    /// waiting connection is dropped.
    fn arrive(
        &mut self,
        stream: TcpStream,
        peer: SocketAddr,
        now: Instant,
        events: &mut Vec<Event>,
    ) {
        let challenge = match self.challenge(&stream) {
            Ok(challenge) => challenge,
            Err(e) => {
                events.push(Event::Inbound(Inbound {
                    stream,
                    peer,
                    challenge: None,
                    result: Err(ReadError::Io(e)),
                }));
                return;
            }
        };
        let mut arrival = Arrival {
            stream,
            peer,
            challenge,
            buf: [0; MAX_REPORT_FRAME],
            filled: 0,
            until: now + REPORT_TIMEOUT,
        };
        if let Some(result) = arrival.read(now) {
            events.push(Event::Inbound(arrival.finish(result)));
            return;
        }
        if self.waiting.len() >= MAX_ARRIVALS {
            if let Some(oldest) = self.waiting.pop_front() {
                events.push(Event::Inbound(oldest.finish(Err(ReadError::TimedOut))));
            }
        }
        self.waiting.push_back(arrival);
    }

    /// Makes `stream` non-blocking and, if challenges are on, sends it one.
    /// A fresh connection's send buffer takes the few bytes of a challenge
    /// at once; one that does not is dropped like a failed read.
    fn challenge(&self, stream: &TcpStream) -> io::Result<Option<[u8; NONCE_LEN]>> {
        stream.set_nonblocking(true)?;
        if !self.challenges {
            return Ok(None);
        }
        let nonce = crate::key::nonce()?;
        let frame = Message::Challenge(nonce).encode();
        match (&*stream).write(&frame)? {
            n if n == frame.len() => Ok(Some(nonce)),
            _ => Err(io::ErrorKind::WriteZero.into()),
        }
    }
}

impl Arrival {
    /// Reads what has arrived. `None`: still waiting.
    fn read(&mut self, now: Instant) -> Option<Result<Message, ReadError>> {
        loop {
            let want = match self.wanted() {
                Ok(0) => {
                    return Some(
                        Message::decode(&self.buf[4..self.filled]).map_err(ReadError::Protocol),
                    );
                }
                Ok(want) => want,
                Err(error) => return Some(Err(error)),
            };
            match (&self.stream).read(&mut self.buf[self.filled..self.filled + want]) {
                Ok(0) => return Some(Err(ReadError::Closed)),
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return (now >= self.until).then_some(Err(ReadError::TimedOut));
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                    ) =>
                {
                    return Some(Err(ReadError::Closed));
                }
                Err(e) => return Some(Err(ReadError::Io(e))),
            }
        }
    }

    /// How many more bytes the frame needs (0: complete), or why it can
    /// never be a report.
    fn wanted(&self) -> Result<usize, ReadError> {
        if self.filled < 4 {
            return Ok(4 - self.filled);
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let fits = 4 + len as usize <= MAX_REPORT_FRAME;
        if fits {
            return Ok(4 + len as usize - self.filled);
        }
        // Longer than any report: read the body header to tell another
        // version of the protocol (answered with a refusal) from garbage.
        const HEADER_END: usize = 4 + 8;
        if self.filled < HEADER_END {
            return Ok(HEADER_END - self.filled);
        }
        Err(match Message::decode(&self.buf[4..HEADER_END]) {
            Err(version @ ControlError::UnsupportedVersion { .. }) => ReadError::Protocol(version),
            _ => ReadError::Protocol(ControlError::TooLong {
                len,
                max: (MAX_REPORT_FRAME - 4) as u32,
            }),
        })
    }

    /// The connection with its outcome, switched back to blocking mode
    /// for the answer (written with a timeout).
    fn finish(self, result: Result<Message, ReadError>) -> Inbound {
        let result = match self.stream.set_nonblocking(false) {
            Ok(()) => result,
            Err(e) => result.and(Err(ReadError::Io(e))),
        };
        Inbound {
            stream: self.stream,
            peer: self.peer,
            challenge: self.challenge,
            result,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::Ipv4Addr;
    use std::thread;

    use super::*;
    use crate::launcher::CONTROL_VERSION;
    use crate::launcher::control::{MAGIC, Report};

    fn listener() -> (TcpListener, SocketAddr) {
        let listener = crate::listener::bind((Ipv4Addr::LOCALHOST, 0).into()).unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        (listener, addr)
    }

    fn report(addr: SocketAddr) -> Message {
        Message::Report(Report {
            run_id: 9,
            world: 2,
            rank: 1,
            addr,
        })
    }

    /// Passes until `n` connections finished (or 10 s went by); returns
    /// them in order.
    fn finished(arrivals: &mut Arrivals, listener: &TcpListener, n: usize) -> Vec<Inbound> {
        let until = Instant::now() + Duration::from_secs(10);
        let mut all = Vec::new();
        while all.len() < n && Instant::now() < until {
            let mut events = Vec::new();
            arrivals.pass(listener, &mut events);
            all.extend(events.into_iter().map(|event| match event {
                Event::Inbound(inbound) => inbound,
                Event::ListenerFailed(e) => panic!("the listener failed: {e}"),
            }));
            thread::sleep(Duration::from_millis(1));
        }
        all
    }

    /// Passes until `n` connections wait.
    fn waiting(arrivals: &mut Arrivals, listener: &TcpListener, n: usize) {
        let until = Instant::now() + Duration::from_secs(10);
        while arrivals.len() < n && Instant::now() < until {
            let mut events = Vec::new();
            arrivals.pass(listener, &mut events);
            assert!(events.is_empty());
        }
        assert_eq!(arrivals.len(), n);
    }

    #[test]
    fn a_report_sent_in_pieces_is_read_without_blocking() {
        let (listener, addr) = listener();
        let mut arrivals = Arrivals::new(false);
        let mut rank = TcpStream::connect(addr).unwrap();
        let message = report(addr);
        let frame = message.encode();
        rank.write_all(&frame[..7]).unwrap();
        waiting(&mut arrivals, &listener, 1);
        rank.write_all(&frame[7..]).unwrap();
        let inbound = finished(&mut arrivals, &listener, 1)
            .pop()
            .expect("the report");
        assert_eq!(inbound.result.unwrap(), message);
        assert_eq!(arrivals.len(), 0);
    }

    #[test]
    fn a_long_announcement_is_refused_after_the_header_without_reading_it() {
        let (listener, addr) = listener();
        let mut arrivals = Arrivals::new(false);
        let mut newer = u32::MAX.to_le_bytes().to_vec();
        newer.extend_from_slice(&MAGIC);
        newer.extend_from_slice(&(CONTROL_VERSION + 1).to_le_bytes());
        newer.extend_from_slice(&[1, 0]);
        let mut garbage = 1000u32.to_le_bytes().to_vec();
        garbage.extend_from_slice(b"GET / HTTP/1.1");
        let mut clients = Vec::new();
        let mut errors = Vec::new();
        for bytes in [newer, garbage] {
            let mut client = TcpStream::connect(addr).unwrap();
            client.write_all(&bytes).unwrap();
            clients.push(client);
            match finished(&mut arrivals, &listener, 1)
                .pop()
                .map(|i| i.result)
            {
                Some(Err(ReadError::Protocol(error))) => errors.push(error),
                other => panic!("{other:?}"),
            }
        }
        assert!(
            matches!(errors[0], ControlError::UnsupportedVersion { found, .. } if found == CONTROL_VERSION + 1),
            "{errors:?}"
        );
        assert!(
            matches!(errors[1], ControlError::TooLong { len: 1000, .. }),
            "{errors:?}"
        );
    }

    #[test]
    fn beyond_the_limit_the_oldest_silent_connection_makes_room() {
        let (listener, addr) = listener();
        let mut arrivals = Arrivals::new(false);
        let crowd: Vec<TcpStream> = (0..MAX_ARRIVALS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        waiting(&mut arrivals, &listener, MAX_ARRIVALS);
        // A rank arrives: it is read at once, and the oldest stranger goes
        // only if the rank still has to wait.
        let mut rank = TcpStream::connect(addr).unwrap();
        let message = report(addr);
        rank.write_all(&message.encode()).unwrap();
        let late = TcpStream::connect(addr).unwrap();
        let mut done = finished(&mut arrivals, &listener, 2);
        while !done.iter().any(|i| i.result.is_ok()) {
            let more = finished(&mut arrivals, &listener, 1);
            assert!(!more.is_empty(), "the rank's report is read");
            done.extend(more);
        }
        let reported: Vec<_> = done.iter().filter(|i| i.result.is_ok()).collect();
        assert_eq!(reported.len(), 1, "the rank's report was read");
        let dropped: Vec<_> = done
            .iter()
            .filter(|i| matches!(i.result, Err(ReadError::TimedOut)))
            .collect();
        assert!(!dropped.is_empty());
        assert_eq!(
            dropped[0].peer,
            crowd[0].local_addr().unwrap(),
            "the oldest went first"
        );
        assert!(arrivals.len() <= MAX_ARRIVALS);
        drop((crowd, late));
    }
}
