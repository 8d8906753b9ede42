//! The control protocol between `dinah-run` and its ranks.
//!
//! Each rank binds its transport listener on port 0, opens one TCP
//! connection to the launcher (`DINAH_LAUNCHER`) and sends a **report**
//! (its run ID, world size, rank and bound address). When every rank has
//! reported, the launcher answers each with the **members** message: the
//! address of every rank, in rank order. If the launch cannot complete, it
//! answers with a **refusal** instead. The connection then stays open for
//! the rest of the run as the rank's lifeline: when it closes, the launcher
//! is gone.
//!
//! Every message is one frame, all integers little-endian:
//!
//! ```text
//! frame   = length: u32 (bytes that follow, at most MAX_MESSAGE_BYTES)
//!           magic: "DNRL" | version: u16 | kind: u8 | reserved: u8 (= 0)
//!           payload
//! report  (kind 1) = run_id: u64 | world: u32 | rank: u32 | addr
//! members (kind 2) = run_id: u64 | world: u32 | addr * world
//! refusal (kind 3) = code: u8 | reserved: [u8; 3] (= 0) | arg: u32
//! challenge (kind 4)      = nonce: [u8; 32]
//! proven report (kind 5)  = report's payload | nonce: [u8; 32] | tag: [u8; 32]
//! proven members (kind 6) = members' payload | tag: [u8; 32]
//! addr    = 4: u8 | ipv4: [u8; 4] | port: u16
//!         | 6: u8 | ipv6: [u8; 16] | port: u16 | scope_id: u32
//! ```
//!
//! `dinah-run` speaks kinds 1 to 3 on loopback. A rank that serves as the
//! coordinator of a run started by another launcher (see `env/coordinator.rs`)
//! speaks the proven kinds when the run has a key: it sends a challenge as
//! soon as it accepts a connection, the rank proves the key over its report
//! and both nonces, and the coordinator proves it over the address list.
//!
//! The decoder checks the length against [`MAX_MESSAGE_BYTES`] before
//! reading the body, then magic, version, kind, reserved bytes, address
//! families, the world size against [`MAX_RANKS`], and that nothing is left
//! over; every failure is a typed [`ControlError`].

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, TcpStream};
use std::time::Instant;

use crate::key::{NONCE_LEN, TAG_LEN};

/// The first four bytes of every control message body.
pub(crate) const MAGIC: [u8; 4] = *b"DNRL";

/// The version of the control protocol this crate speaks.
pub const CONTROL_VERSION: u16 = 1;

/// The most ranks one launch may start (and one members message may list).
pub const MAX_RANKS: u32 = 4096;

/// The largest control message body: a members message of [`MAX_RANKS`]
/// IPv6 addresses fits.
pub const MAX_MESSAGE_BYTES: u32 = 128 * 1024;

mod error;

pub use error::{ControlError, Refusal};

/// Magic, version, kind and reserved byte.
const BODY_HEADER: usize = 8;

const KIND_REPORT: u8 = 1;
const KIND_MEMBERS: u8 = 2;
const KIND_REFUSAL: u8 = 3;
const KIND_CHALLENGE: u8 = 4;
const KIND_PROVEN_REPORT: u8 = 5;
const KIND_PROVEN_MEMBERS: u8 = 6;

/// A rank's proof that it holds the run key: its nonce and its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proof {
    pub(crate) nonce: [u8; NONCE_LEN],
    pub(crate) tag: [u8; TAG_LEN],
}

/// A rank's report: who it is and where it listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) run_id: u64,
    pub(crate) world: u32,
    pub(crate) rank: u32,
    pub(crate) addr: SocketAddr,
}

/// One control message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// Rank to launcher.
    Report(Report),
    /// Launcher to rank: every rank's address in rank order.
    Members { run_id: u64, addrs: Vec<SocketAddr> },
    /// Launcher to rank: the rendezvous will not complete.
    Refusal(Refusal),
    /// Coordinator to rank, first: the nonce the rank's proof covers.
    Challenge([u8; NONCE_LEN]),
    /// Rank to coordinator: a report with the proof of the run key.
    ProvenReport(Report, Proof),
    /// Coordinator to rank: the address list with the coordinator's tag.
    ProvenMembers {
        run_id: u64,
        addrs: Vec<SocketAddr>,
        tag: [u8; TAG_LEN],
    },
}

impl Message {
    /// The whole frame: length prefix and body.
    ///
    /// # Panics
    ///
    /// If a members list is longer than [`MAX_RANKS`] (the launcher never
    /// builds one).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(64);
        body.extend_from_slice(&MAGIC);
        body.extend_from_slice(&CONTROL_VERSION.to_le_bytes());
        body.extend_from_slice(&[self.kind(), 0]);
        match self {
            Self::Report(report) => encode_report(&mut body, report),
            Self::ProvenReport(report, proof) => {
                encode_report(&mut body, report);
                body.extend_from_slice(&proof.nonce);
                body.extend_from_slice(&proof.tag);
            }
            Self::Members { run_id, addrs } => encode_members(&mut body, *run_id, addrs),
            Self::ProvenMembers { run_id, addrs, tag } => {
                encode_members(&mut body, *run_id, addrs);
                body.extend_from_slice(tag);
            }
            Self::Refusal(refusal) => {
                let (code, arg) = refusal.to_wire();
                body.extend_from_slice(&[code, 0, 0, 0]);
                body.extend_from_slice(&arg.to_le_bytes());
            }
            Self::Challenge(nonce) => body.extend_from_slice(nonce),
        }
        let len = u32::try_from(body.len()).expect("control messages are far below 4 GiB");
        let mut frame = Vec::with_capacity(4 + body.len());
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&body);
        frame
    }

    /// Decodes one body (the bytes after the length prefix).
    ///
    /// # Errors
    ///
    /// The first [`ControlError`] found, in the order the module docs list.
    pub(crate) fn decode(body: &[u8]) -> Result<Self, ControlError> {
        let mut input = Input(body);
        let magic = input.array::<4>()?;
        if magic != MAGIC {
            return Err(ControlError::BadMagic(magic));
        }
        let version = u16::from_le_bytes(input.array()?);
        if version != CONTROL_VERSION {
            return Err(ControlError::UnsupportedVersion {
                found: version,
                supported: CONTROL_VERSION,
            });
        }
        let [kind, reserved] = input.array()?;
        if !(KIND_REPORT..=KIND_PROVEN_MEMBERS).contains(&kind) {
            return Err(ControlError::UnknownKind(kind));
        }
        if reserved != 0 {
            return Err(ControlError::ReservedNotZero);
        }
        let message = match kind {
            KIND_REPORT => Self::Report(input.report()?),
            KIND_PROVEN_REPORT => {
                let report = input.report()?;
                let nonce = input.array()?;
                let tag = input.array()?;
                Self::ProvenReport(report, Proof { nonce, tag })
            }
            KIND_MEMBERS => {
                let (run_id, addrs) = input.members()?;
                Self::Members { run_id, addrs }
            }
            KIND_PROVEN_MEMBERS => {
                let (run_id, addrs) = input.members()?;
                let tag = input.array()?;
                Self::ProvenMembers { run_id, addrs, tag }
            }
            KIND_CHALLENGE => Self::Challenge(input.array()?),
            _ => {
                let [code, r0, r1, r2] = input.array()?;
                if [r0, r1, r2] != [0; 3] {
                    return Err(ControlError::ReservedNotZero);
                }
                Self::Refusal(Refusal::from_wire(code, input.u32()?)?)
            }
        };
        if !input.0.is_empty() {
            let extra = u32::try_from(input.0.len()).unwrap_or(u32::MAX);
            return Err(ControlError::TrailingBytes(extra));
        }
        Ok(message)
    }

    /// The kind byte, for [`ControlError::Unexpected`].
    pub(crate) fn kind(&self) -> u8 {
        match self {
            Self::Report(_) => KIND_REPORT,
            Self::Members { .. } => KIND_MEMBERS,
            Self::Refusal(_) => KIND_REFUSAL,
            Self::Challenge(_) => KIND_CHALLENGE,
            Self::ProvenReport(..) => KIND_PROVEN_REPORT,
            Self::ProvenMembers { .. } => KIND_PROVEN_MEMBERS,
        }
    }
}

fn encode_report(out: &mut Vec<u8>, report: &Report) {
    out.extend_from_slice(&report.run_id.to_le_bytes());
    out.extend_from_slice(&report.world.to_le_bytes());
    out.extend_from_slice(&report.rank.to_le_bytes());
    encode_addr(out, report.addr);
}

/// # Panics
///
/// If `addrs` is longer than [`MAX_RANKS`] (no list ever is).
fn encode_members(out: &mut Vec<u8>, run_id: u64, addrs: &[SocketAddr]) {
    let world = u32::try_from(addrs.len()).ok().filter(|&n| n <= MAX_RANKS);
    let world = world.expect("a members list holds at most MAX_RANKS addresses");
    out.extend_from_slice(&run_id.to_le_bytes());
    out.extend_from_slice(&world.to_le_bytes());
    for &addr in addrs {
        encode_addr(out, addr);
    }
}

fn encode_addr(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr {
        SocketAddr::V4(v4) => {
            out.push(4);
            out.extend_from_slice(&v4.ip().octets());
            out.extend_from_slice(&v4.port().to_le_bytes());
        }
        SocketAddr::V6(v6) => {
            out.push(6);
            out.extend_from_slice(&v6.ip().octets());
            out.extend_from_slice(&v6.port().to_le_bytes());
            out.extend_from_slice(&v6.scope_id().to_le_bytes());
        }
    }
}

/// The unread rest of a body.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ControlError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or(ControlError::Truncated)?;
        self.0 = rest;
        Ok(*head)
    }

    fn u32(&mut self) -> Result<u32, ControlError> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, ControlError> {
        self.array().map(u64::from_le_bytes)
    }

    fn report(&mut self) -> Result<Report, ControlError> {
        Ok(Report {
            run_id: self.u64()?,
            world: self.u32()?,
            rank: self.u32()?,
            addr: self.addr()?,
        })
    }

    fn members(&mut self) -> Result<(u64, Vec<SocketAddr>), ControlError> {
        let run_id = self.u64()?;
        let world = self.u32()?;
        if world == 0 || world > MAX_RANKS {
            return Err(ControlError::BadWorldSize(world));
        }
        let addrs = (0..world).map(|_| self.addr()).collect::<Result<_, _>>()?;
        Ok((run_id, addrs))
    }

    fn addr(&mut self) -> Result<SocketAddr, ControlError> {
        let [family] = self.array()?;
        match family {
            4 => {
                let ip = Ipv4Addr::from(self.array::<4>()?);
                let port = u16::from_le_bytes(self.array()?);
                Ok(SocketAddr::V4(SocketAddrV4::new(ip, port)))
            }
            6 => {
                let ip = Ipv6Addr::from(self.array::<16>()?);
                let port = u16::from_le_bytes(self.array()?);
                let scope_id = self.u32()?;
                Ok(SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope_id)))
            }
            other => Err(ControlError::UnknownFamily(other)),
        }
    }
}

/// Why reading a message failed.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed the connection before a whole message arrived.
    Closed,
    /// The deadline passed first.
    TimedOut,
    /// The socket failed.
    Io(io::Error),
    /// The bytes are not a valid message.
    Protocol(ControlError),
}

/// Reads one message, giving up at `deadline`.
///
/// # Errors
///
/// [`ReadError`]: closed, timed out, an I/O error or a malformed message.
pub(crate) fn read_message(
    stream: &mut TcpStream,
    deadline: Instant,
) -> Result<Message, ReadError> {
    let mut prefix = [0; 4];
    read_exact_by(stream, &mut prefix, deadline)?;
    let len = u32::from_le_bytes(prefix);
    if len > MAX_MESSAGE_BYTES {
        return Err(ReadError::Protocol(ControlError::TooLong {
            len,
            max: MAX_MESSAGE_BYTES,
        }));
    }
    if (len as usize) < BODY_HEADER {
        return Err(ReadError::Protocol(ControlError::Truncated));
    }
    let mut body = vec![0; len as usize];
    read_exact_by(stream, &mut body, deadline)?;
    Message::decode(&body).map_err(ReadError::Protocol)
}

/// Writes one message, giving up at `deadline`.
///
/// # Errors
///
/// The socket's error; [`io::ErrorKind::TimedOut`] if the deadline passed.
pub(crate) fn write_message(
    stream: &mut TcpStream,
    message: &Message,
    deadline: Instant,
) -> io::Result<()> {
    let frame = message.encode();
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    stream.set_write_timeout(Some(left))?;
    stream.write_all(&frame)?;
    stream.flush()
}

fn read_exact_by(
    stream: &mut TcpStream,
    mut buf: &mut [u8],
    deadline: Instant,
) -> Result<(), ReadError> {
    while !buf.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::TimedOut);
        }
        stream.set_read_timeout(Some(left)).map_err(ReadError::Io)?;
        match stream.read(buf) {
            Ok(0) => return Err(ReadError::Closed),
            Ok(n) => buf = &mut buf[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
                ) =>
            {
                return Err(ReadError::Closed);
            }
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::time::Duration;

    use super::*;

    fn v4(port: u16) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, port))
    }

    fn body(message: &Message) -> Vec<u8> {
        let frame = message.encode();
        let len = u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4, "the prefix counts the body");
        frame[4..].to_vec()
    }

    fn samples() -> Vec<Message> {
        let v6 = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 4242, 0, 7));
        let mut messages = vec![
            Message::Report(Report {
                run_id: 0xdead_beef_0123,
                world: 4,
                rank: 3,
                addr: v4(40_000),
            }),
            Message::Report(Report {
                run_id: u64::MAX,
                world: 1,
                rank: 0,
                addr: v6,
            }),
            Message::Members {
                run_id: 9,
                addrs: vec![v4(1), v6, v4(65_535)],
            },
            Message::Members {
                run_id: 0,
                addrs: (0..MAX_RANKS).map(|i| v4(i as u16)).collect(),
            },
        ];
        let refusals = [
            Refusal::RunMismatch,
            Refusal::WorldMismatch { expected: 4 },
            Refusal::RankOutOfRange { world: 2 },
            Refusal::DuplicateRank,
            Refusal::UnsupportedVersion {
                supported: CONTROL_VERSION,
            },
            Refusal::RankExited { rank: 1 },
            Refusal::RankFailed { rank: 2 },
            Refusal::StartupTimeout,
            Refusal::Aborted,
        ];
        messages.extend(refusals.into_iter().map(Message::Refusal));
        messages
    }

    #[test]
    fn every_message_round_trips() {
        for message in samples() {
            assert_eq!(
                Message::decode(&body(&message)),
                Ok(message.clone()),
                "{message:?}"
            );
        }
    }

    #[test]
    fn the_largest_members_list_fits_the_limit() {
        let v6 = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 1, 0, 0));
        let message = Message::Members {
            run_id: 1,
            addrs: vec![v6; MAX_RANKS as usize],
        };
        assert!(body(&message).len() <= MAX_MESSAGE_BYTES as usize);
    }

    #[test]
    fn every_strict_prefix_is_truncated() {
        for message in samples().into_iter().take(3) {
            let body = body(&message);
            for cut in 0..body.len() {
                assert_eq!(
                    Message::decode(&body[..cut]),
                    Err(ControlError::Truncated),
                    "{message:?} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn garbage_is_rejected_with_the_first_problem() {
        let good = body(&Message::Report(Report {
            run_id: 1,
            world: 2,
            rank: 1,
            addr: v4(5),
        }));
        let with = |at: usize, byte: u8| {
            let mut bytes = good.clone();
            bytes[at] = byte;
            Message::decode(&bytes)
        };
        assert_eq!(with(0, b'X'), Err(ControlError::BadMagic(*b"XNRL")));
        assert_eq!(
            with(4, 2),
            Err(ControlError::UnsupportedVersion {
                found: 2,
                supported: CONTROL_VERSION
            })
        );
        assert_eq!(with(6, 9), Err(ControlError::UnknownKind(9)));
        assert_eq!(with(7, 1), Err(ControlError::ReservedNotZero));
        assert_eq!(with(24, 5), Err(ControlError::UnknownFamily(5)));
        let mut long = good.clone();
        long.push(0);
        assert_eq!(Message::decode(&long), Err(ControlError::TrailingBytes(1)));

        let refusal = body(&Message::Refusal(Refusal::DuplicateRank));
        let mut bad_code = refusal.clone();
        bad_code[8] = 200;
        assert_eq!(
            Message::decode(&bad_code),
            Err(ControlError::UnknownRefusal(200))
        );
        let mut bad_reserved = refusal;
        bad_reserved[10] = 1;
        assert_eq!(
            Message::decode(&bad_reserved),
            Err(ControlError::ReservedNotZero)
        );

        for world in [0, MAX_RANKS + 1] {
            let mut members = body(&Message::Members {
                run_id: 1,
                addrs: vec![v4(1)],
            });
            members[16..20].copy_from_slice(&world.to_le_bytes());
            assert_eq!(
                Message::decode(&members),
                Err(ControlError::BadWorldSize(world))
            );
        }
    }

    /// A connected loopback pair.
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind(v4(0)).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn messages_cross_a_socket_in_order() {
        let (mut a, mut b) = pair();
        for message in samples() {
            write_message(&mut a, &message, soon()).unwrap();
        }
        for message in samples() {
            assert_eq!(read_message(&mut b, soon()).unwrap(), message);
        }
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading_the_body() {
        let (mut a, mut b) = pair();
        a.write_all(&(MAX_MESSAGE_BYTES + 1).to_le_bytes()).unwrap();
        match read_message(&mut b, soon()) {
            Err(ReadError::Protocol(ControlError::TooLong { len, max })) => {
                assert_eq!((len, max), (MAX_MESSAGE_BYTES + 1, MAX_MESSAGE_BYTES));
            }
            other => panic!("expected TooLong, got {other:?}"),
        }
    }

    #[test]
    fn a_closed_peer_and_a_silent_peer_are_told_apart() {
        let (a, mut b) = pair();
        // Silent: the deadline ends the wait (already passed: no sleeping).
        assert!(matches!(
            read_message(&mut b, Instant::now()),
            Err(ReadError::TimedOut)
        ));
        // Half a message, then the peer goes away.
        let mut a = a;
        a.write_all(&20u32.to_le_bytes()).unwrap();
        a.write_all(&MAGIC).unwrap();
        drop(a);
        assert!(matches!(
            read_message(&mut b, soon()),
            Err(ReadError::Closed)
        ));
    }

    #[test]
    fn a_short_length_is_truncated() {
        let (mut a, mut b) = pair();
        a.write_all(&3u32.to_le_bytes()).unwrap();
        assert!(matches!(
            read_message(&mut b, soon()),
            Err(ReadError::Protocol(ControlError::Truncated))
        ));
    }

    #[test]
    fn refusals_display_what_happened() {
        assert_eq!(
            Refusal::RankExited { rank: 2 }.to_string(),
            "rank 2 exited before reporting its address"
        );
        assert_eq!(
            ControlError::UnsupportedVersion {
                found: 9,
                supported: 1
            }
            .to_string(),
            "control protocol version 9 is not supported (this side speaks 1)"
        );
    }
}
