//! The hello handshake of one connection, and the checks only the TCP
//! transport can make (who dialled whom, duplicates).
//!
//! Both sides send one [`Hello`] per connection. The dialling side sends
//! first (with a nonce after it when its hello announces a proof of
//! membership, see `auth.rs`); the listening side reads it without
//! blocking, checks it, and answers with its own hello (and, when both
//! prove their membership, its nonce and tag), so a refused dialler sees
//! the connection close instead of a hello. The dialler then checks the
//! answer: the tag, then same run, same registry and limits, the rank it
//! dialled, the channel it asked for; and sends its own tag, which the
//! listener checks before it counts the connection.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use dinah_core::Rank;
use dinah_core::wire::{Channel, HELLO_LEN, Hello, HelloAuth, check_compatible};
use dinah_std::transport::IoOp;

use crate::auth::{NONCE_LEN, TAG_LEN};
use crate::error::TcpError;

/// Checks the hello of the rank this side dialled as `expected` on the
/// channel of `local`.
///
/// # Errors
///
/// [`TcpError::BadHello`] if `bytes` do not decode;
/// [`TcpError::Mismatch`] if [`check_compatible`] refuses (including
/// another channel); [`TcpError::UnexpectedPeer`] if another rank
/// answered.
pub(crate) fn check_dialled(
    local: &Hello,
    bytes: &[u8; HELLO_LEN],
    expected: Rank,
    addr: SocketAddr,
) -> Result<Hello, TcpError> {
    let remote = Hello::decode(bytes).map_err(|error| TcpError::BadHello { addr, error })?;
    check_compatible(local, &remote).map_err(|mismatch| TcpError::Mismatch {
        peer: remote.rank,
        addr,
        mismatch,
    })?;
    if remote.rank != expected {
        return Err(TcpError::UnexpectedPeer {
            expected,
            found: remote.rank,
            addr,
        });
    }
    Ok(remote)
}

/// Checks the hello of a connection this side accepted. `locals` holds
/// this side's hello per channel; `taken(rank, channel)` says whether that
/// connection already exists.
///
/// # Errors
///
/// [`TcpError::BadHello`] if `bytes` do not decode;
/// [`TcpError::Mismatch`] if [`check_compatible`] refuses (another run,
/// world size, limits or registry, or this rank's own rank);
/// [`TcpError::WrongDirection`] if a lower rank dialled;
/// [`TcpError::Duplicate`] if the (rank, channel) is already connected.
pub(crate) fn check_accepted(
    locals: &[Hello; 2],
    bytes: &[u8; HELLO_LEN],
    addr: SocketAddr,
    taken: impl Fn(Rank, Channel) -> bool,
) -> Result<Hello, TcpError> {
    let remote = Hello::decode(bytes).map_err(|error| TcpError::BadHello { addr, error })?;
    let local = &locals[remote.channel.index()];
    check_compatible(local, &remote).map_err(|mismatch| TcpError::Mismatch {
        peer: remote.rank,
        addr,
        mismatch,
    })?;
    if remote.rank < local.rank {
        return Err(TcpError::WrongDirection {
            peer: remote.rank,
            addr,
        });
    }
    if taken(remote.rank, remote.channel) {
        return Err(TcpError::Duplicate {
            peer: remote.rank,
            channel: remote.channel,
            addr,
        });
    }
    Ok(remote)
}

/// The most bytes an accepted connection sends before its tag: its hello
/// and its nonce.
const OPENING_MAX: usize = HELLO_LEN + NONCE_LEN;

/// An accepted connection whose handshake is read without blocking.
///
/// It reads the dialler's hello, then, if the hello announces
/// [`HelloAuth::HmacSha256`], the dialler's nonce
/// ([`Opening`]); after the answer, the dialler's tag (`proof`).
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) stream: TcpStream,
    pub(crate) addr: SocketAddr,
    buf: [u8; OPENING_MAX],
    filled: usize,
    want: usize,
    until: Instant,
}

/// What an accepted connection sent before the answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opening {
    pub(crate) hello: [u8; HELLO_LEN],
    /// The dialler's nonce, if its hello announced a proof.
    pub(crate) nonce: Option<[u8; NONCE_LEN]>,
}

impl Pending {
    /// Starts reading the hello of `stream` (switched to non-blocking),
    /// giving up at `until`.
    ///
    /// # Errors
    ///
    /// The error of switching the socket to non-blocking mode.
    pub(crate) fn new(stream: TcpStream, addr: SocketAddr, until: Instant) -> io::Result<Self> {
        stream.set_nonblocking(true)?;
        Ok(Self {
            stream,
            addr,
            buf: [0; OPENING_MAX],
            filled: 0,
            want: HELLO_LEN,
            until,
        })
    }

    /// Reads what has arrived of the opening. `None`: still waiting;
    /// otherwise the opening, or why the connection failed (including a
    /// hello that does not decode).
    pub(crate) fn poll(&mut self, now: Instant) -> Option<Result<Opening, TcpError>> {
        if let Err(error) = self.fill(now)? {
            return Some(Err(error));
        }
        if self.want == HELLO_LEN {
            let hello = match Hello::decode(&self.buf[..HELLO_LEN]) {
                Ok(hello) => hello,
                Err(error) => {
                    return Some(Err(TcpError::BadHello {
                        addr: self.addr,
                        error,
                    }));
                }
            };
            if hello.auth == HelloAuth::HmacSha256 {
                self.want = OPENING_MAX;
                return self.poll(now);
            }
        }
        let mut hello = [0; HELLO_LEN];
        hello.copy_from_slice(&self.buf[..HELLO_LEN]);
        let nonce = (self.want == OPENING_MAX).then(|| {
            let mut nonce = [0; NONCE_LEN];
            nonce.copy_from_slice(&self.buf[HELLO_LEN..OPENING_MAX]);
            nonce
        });
        Some(Ok(Opening { hello, nonce }))
    }

    /// Reads what has arrived of the dialler's tag, once its opening was
    /// answered. `None`: still waiting.
    pub(crate) fn poll_proof(&mut self, now: Instant) -> Option<Result<[u8; TAG_LEN], TcpError>> {
        if self.want != TAG_LEN {
            self.want = TAG_LEN;
            self.filled = 0;
        }
        if let Err(error) = self.fill(now)? {
            return Some(Err(error));
        }
        let mut tag = [0; TAG_LEN];
        tag.copy_from_slice(&self.buf[..TAG_LEN]);
        Some(Ok(tag))
    }

    /// Reads until `want` bytes are in. `None`: still waiting; `Some(Ok)`:
    /// they are.
    fn fill(&mut self, now: Instant) -> Option<Result<(), TcpError>> {
        while self.filled < self.want {
            // Exactly what is wanted: bytes behind it (frames) stay in the
            // socket for the reader.
            match (&self.stream).read(&mut self.buf[self.filled..self.want]) {
                Ok(0) => {
                    return Some(Err(TcpError::HandshakeClosed {
                        peer: None,
                        addr: self.addr,
                    }));
                }
                Ok(read) => self.filled += read,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    return (now >= self.until).then_some(Err(TcpError::HelloTimeout {
                        peer: None,
                        addr: self.addr,
                    }));
                }
                Err(error) => return Some(Err(TcpError::io(None, IoOp::Read, error))),
            }
        }
        Some(Ok(()))
    }
}

/// Reads the hello answering this side's dial, blocking until the
/// stream's read timeout.
///
/// # Errors
///
/// As [`read_exact_answer`].
pub(crate) fn read_answer(
    stream: &TcpStream,
    peer: Rank,
    addr: SocketAddr,
) -> Result<[u8; HELLO_LEN], TcpError> {
    read_exact_answer(stream, peer, addr)
}

/// Reads `N` bytes of the listener's answer, blocking until the stream's
/// read timeout.
///
/// # Errors
///
/// [`TcpError::HandshakeClosed`] if the listener closed the connection (it
/// refused this rank), [`TcpError::HelloTimeout`] on the timeout, else
/// [`TcpError::Io`].
pub(crate) fn read_exact_answer<const N: usize>(
    stream: &TcpStream,
    peer: Rank,
    addr: SocketAddr,
) -> Result<[u8; N], TcpError> {
    let mut buf = [0; N];
    match (&*stream).read_exact(&mut buf) {
        Ok(()) => Ok(buf),
        Err(error) => Err(match error.kind() {
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
                TcpError::HandshakeClosed {
                    peer: Some(peer),
                    addr,
                }
            }
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => TcpError::HelloTimeout {
                peer: Some(peer),
                addr,
            },
            _ => TcpError::io(Some(peer), IoOp::Read, error),
        }),
    }
}

#[cfg(test)]
mod tests {
    use dinah_core::wire::HelloField;
    use dinah_core::{Fingerprint, ProtocolLimits, WorldSize};

    use super::*;

    fn hello(rank: u32, channel: Channel) -> Hello {
        let world = WorldSize::new(3).unwrap();
        let fingerprint = Fingerprint::of(&mut []).unwrap();
        Hello::new(
            7,
            world.rank(rank).unwrap(),
            world,
            ProtocolLimits::DEFAULT,
            fingerprint,
            channel,
        )
        .unwrap()
    }

    fn addr() -> SocketAddr {
        "127.0.0.1:1".parse().unwrap()
    }

    #[test]
    fn a_dialled_peer_must_be_the_rank_and_channel_dialled() {
        let local = hello(2, Channel::Action);
        let rank1 = hello(1, Channel::Action).rank;
        assert!(check_dialled(&local, &hello(1, Channel::Action).encode(), rank1, addr()).is_ok());
        let other =
            check_dialled(&local, &hello(0, Channel::Action).encode(), rank1, addr()).unwrap_err();
        assert!(matches!(other, TcpError::UnexpectedPeer { .. }), "{other}");
        let lane =
            check_dialled(&local, &hello(1, Channel::Control).encode(), rank1, addr()).unwrap_err();
        assert!(
            matches!(lane, TcpError::Mismatch { mismatch, .. } if mismatch.field == HelloField::Channel),
            "{lane}"
        );
        let advertised = hello(1, Channel::Action).with_admission_capacity(9);
        let remote = check_dialled(&local, &advertised.encode(), rank1, addr()).unwrap();
        assert_eq!(remote.admission_capacity, 9);
        let garbage = check_dialled(&local, &[0xab; HELLO_LEN], rank1, addr()).unwrap_err();
        assert!(matches!(garbage, TcpError::BadHello { .. }), "{garbage}");
    }

    #[test]
    fn an_accepted_peer_must_be_higher_and_new() {
        let locals = [hello(1, Channel::Control), hello(1, Channel::Action)];
        let free = |_, _| false;
        let two = hello(2, Channel::Control);
        assert_eq!(
            check_accepted(&locals, &two.encode(), addr(), free).unwrap(),
            two
        );
        // Capacities are the peer's own: kept, not compared.
        let advertised = two.with_admission_capacity(7);
        assert_eq!(
            check_accepted(&locals, &advertised.encode(), addr(), free)
                .unwrap()
                .admission_capacity,
            7
        );
        let lower =
            check_accepted(&locals, &hello(0, Channel::Action).encode(), addr(), free).unwrap_err();
        assert!(matches!(lower, TcpError::WrongDirection { .. }), "{lower}");
        let me =
            check_accepted(&locals, &hello(1, Channel::Action).encode(), addr(), free).unwrap_err();
        assert!(
            matches!(me, TcpError::Mismatch { mismatch, .. } if mismatch.field == HelloField::DuplicateRank),
            "{me}"
        );
        let taken = |rank: Rank, channel| rank.get() == 2 && channel == Channel::Control;
        let dup = check_accepted(&locals, &two.encode(), addr(), taken).unwrap_err();
        assert!(
            matches!(
                dup,
                TcpError::Duplicate {
                    channel: Channel::Control,
                    ..
                }
            ),
            "{dup}"
        );
        assert!(
            check_accepted(&locals, &hello(2, Channel::Action).encode(), addr(), taken).is_ok()
        );
    }
}
