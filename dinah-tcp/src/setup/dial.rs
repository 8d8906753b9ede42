//! The dialling side of the set-up: a helper thread dials every lower
//! rank on both channels, in order, and reports each outcome.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use dinah_core::Rank;
use dinah_core::wire::{Channel, Hello, HelloAuth};
use dinah_std::transport::IoOp;

use super::Dialled;
use crate::auth::{self, Prove, Role, RunKey, Transcript};
use crate::config::TcpConfig;
use crate::error::TcpError;
use crate::handshake;
use crate::membership::Membership;
use crate::socket;

/// The thread dialling the lower ranks, and its results in order.
pub(super) struct Dialler {
    pub(super) thread: JoinHandle<()>,
    pub(super) results: Receiver<Dialled>,
}

/// Starts the thread dialling every lower rank, if there is one.
pub(super) fn spawn_dialler(
    membership: &Membership,
    hellos: [Hello; 2],
    key: Option<&RunKey>,
    config: &TcpConfig,
    deadline: Instant,
    stop: &Arc<AtomicBool>,
) -> Result<Option<Dialler>, TcpError> {
    let me = membership.rank();
    if me == Rank::ZERO {
        return Ok(None);
    }
    let world = membership.world();
    let targets: Vec<(Rank, SocketAddr)> = world
        .ranks()
        .take(me.index())
        .map(|rank| (rank, membership.addr(rank)))
        .collect();
    let (tx, rx) = mpsc::channel();
    let (config, stop, key) = (*config, Arc::clone(stop), key.cloned());
    let thread = thread::Builder::new()
        .name(format!("dinah-tcp-dial-{}", me.get()))
        .spawn(move || {
            for (peer, addr) in targets {
                for channel in Channel::ALL {
                    let result = dial(
                        peer,
                        addr,
                        &hellos[channel.index()],
                        key.as_ref(),
                        &config,
                        deadline,
                        &stop,
                    )
                    .map(|(stream, remote)| (peer, channel, stream, remote));
                    let failed = result.is_err();
                    if tx.send(result).is_err() || failed {
                        return;
                    }
                }
            }
        })
        .map_err(|e| TcpError::io(None, IoOp::Spawn, e))?;
    Ok(Some(Dialler {
        thread,
        results: rx,
    }))
}

/// Dials `peer` at `addr` for `local`'s channel and exchanges hellos;
/// returns the connection and the peer's hello.
///
/// A connection that cannot be made, or that the listener drops before
/// answering (a flood of strangers can push it out of the listener's
/// waiting connections), is tried again after a pause that doubles from
/// `backoff_min` to `backoff_max`, until the deadline. An answer that
/// refuses this rank (another registry, world or rank) ends the dial.
fn dial(
    peer: Rank,
    addr: SocketAddr,
    local: &Hello,
    key: Option<&RunKey>,
    config: &TcpConfig,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<(TcpStream, Hello), TcpError> {
    let mut backoff = config.backoff_min;
    let mut last_error: Option<TcpError> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stop.load(Ordering::Relaxed) {
            return Err(last_error.unwrap_or(TcpError::SetupTimeout {
                missing: 1,
                last_refused: None,
            }));
        }
        let error = match TcpStream::connect_timeout(&addr, config.connect_timeout.min(left)) {
            Ok(stream) => match exchange(peer, addr, local, key, stream, config, deadline) {
                Ok(done) => return Ok(done),
                Err(error) if retried(&error) => error,
                Err(error) => return Err(error),
            },
            Err(error) => TcpError::Connect {
                peer,
                addr,
                source: Arc::new(error),
            },
        };
        last_error = Some(error);
        thread::sleep(backoff.min(deadline.saturating_duration_since(Instant::now())));
        backoff = (backoff * 2).min(config.backoff_max);
    }
}

/// Whether a failed hello exchange is worth another dial: the listener
/// closed or reset the connection without answering (it may have dropped
/// it to make room), or the connection broke.
fn retried(error: &TcpError) -> bool {
    match error {
        TcpError::HandshakeClosed { .. } => true,
        TcpError::Io { source, .. } => matches!(
            source.kind(),
            io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    }
}

/// Sends `local` on the new connection `stream` to `peer` and checks the
/// answer; with `key`, proves this rank's membership and checks the
/// listener's proof (see `auth.rs`).
fn exchange(
    peer: Rank,
    addr: SocketAddr,
    local: &Hello,
    key: Option<&RunKey>,
    stream: TcpStream,
    config: &TcpConfig,
    deadline: Instant,
) -> Result<(TcpStream, Hello), TcpError> {
    let io = |op| move |e| TcpError::io(Some(peer), op, e);
    socket::configure(&stream, config.keepalive).map_err(io(IoOp::Configure))?;
    // The answer may take as long as the set-up has left: the listener
    // answers when its own set-up loop gets to it.
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    stream
        .set_write_timeout(Some(left))
        .map_err(io(IoOp::Configure))?;
    stream
        .set_read_timeout(Some(left))
        .map_err(io(IoOp::Configure))?;
    let hello = local.encode();
    let nonce = key
        .map(|_| auth::nonce())
        .transpose()
        .map_err(io(IoOp::Configure))?;
    let mut opening = hello.to_vec();
    opening.extend_from_slice(nonce.as_ref().map_or(&[][..], |n| &n[..]));
    (&stream).write_all(&opening).map_err(io(IoOp::Write))?;
    let answer = handshake::read_answer(&stream, peer, addr)?;
    let proven = Hello::decode(&answer).is_ok_and(|h| h.auth == HelloAuth::HmacSha256);
    let (Some(key), Some(nonce), true) = (key, nonce, proven) else {
        // No proof on one side at least: the hellos say which, and the
        // check names it.
        let remote = handshake::check_dialled(local, &answer, peer, addr)?;
        return Ok((stream, remote));
    };
    let proof: [u8; auth::ANSWER_PROOF_LEN] = handshake::read_exact_answer(&stream, peer, addr)?;
    let (listener_nonce, tag) = proof.split_at(auth::NONCE_LEN);
    let transcript = Transcript {
        dialler_hello: hello,
        dialler_nonce: nonce,
        listener_hello: answer,
        listener_nonce: listener_nonce.try_into().expect("a nonce's length"),
    };
    if let Err(failed) = key.check(Role::Listener, &transcript, tag, Some(peer), addr) {
        // A tag of zeros never verifies: the listener names the failure
        // on its side too, and gets no proof from this rank.
        let _ = (&stream).write_all(&[0; auth::TAG_LEN]);
        return Err(failed);
    }
    let remote = handshake::check_dialled(local, &answer, peer, addr)?;
    (&stream)
        .write_all(&key.tag(Role::Dialler, &transcript))
        .map_err(io(IoOp::Write))?;
    Ok((stream, remote))
}
