//! The accepting side of the set-up: strangers and ranks alike connect
//! here, and only the connections that complete the handshake (and, in an
//! authenticated run, prove the run key) are counted as ranks.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use dinah_core::wire::{Hello, HelloField};
use dinah_launch::listener::is_out_of_descriptors;
use dinah_std::transport::IoOp;

use super::{MAX_REJECTIONS, record_admission};
use crate::auth::{self, Prove, Role, RunKey, Transcript};
use crate::error::TcpError;
use crate::handshake::{self, Opening, Pending};
use crate::socket;

/// The most accepted connections whose hello is awaited at once; a new
/// arrival beyond it drops the oldest.
pub(super) const MAX_PENDING: usize = 1024;

/// The most connections accepted between two passes over the waiting
/// hellos.
pub(super) const ACCEPT_BATCH: usize = 64;

/// A connection whose hello was of this run and was answered with a
/// proof, waiting for the dialler's tag.
struct Proving {
    pending: Pending,
    remote: Hello,
    transcript: Transcript,
}

/// What answering an opening led to.
enum Answered {
    /// The connection is the rank its hello names.
    Accepted(Hello),
    /// The connection must still prove the run key (boxed: the
    /// transcript is four times the size of the other variant).
    Proving(Hello, Box<Transcript>),
}

/// The accepting side of the set-up.
pub(super) struct Accept<'k> {
    listener: Option<TcpListener>,
    key: Option<&'k RunKey>,
    /// Connections whose hello is awaited, oldest first.
    pending: VecDeque<Pending>,
    /// Connections that must still prove the run key. They are never
    /// dropped to make room (their hello was of this run), only on their
    /// own timeout.
    proving: Vec<Proving>,
    /// Errors of refused connections (at most [`MAX_REJECTIONS`]).
    pub(super) rejected: Vec<TcpError>,
    /// All refused connections.
    pub(super) rejected_total: u64,
    /// The last refused connection's error.
    last_refused: Option<TcpError>,
}

impl<'k> Accept<'k> {
    /// Accepts on `listener` (none: this rank accepts nobody); `key`
    /// proves this rank's membership, if the run is authenticated.
    pub(super) fn new(listener: Option<TcpListener>, key: Option<&'k RunKey>) -> Self {
        Self {
            listener,
            key,
            pending: VecDeque::new(),
            proving: Vec::new(),
            rejected: Vec::new(),
            rejected_total: 0,
            last_refused: None,
        }
    }

    fn reject(&mut self, error: TcpError) {
        trace_event!(
            tracing::Level::DEBUG,
            refused = self.rejected_total + 1,
            error = %error,
            "dinah-tcp: refused a connection"
        );
        self.rejected_total += 1;
        if self.rejected.len() < MAX_REJECTIONS {
            self.rejected.push(error.clone());
        }
        self.last_refused = Some(error);
    }

    /// The last connection refused.
    pub(super) fn last_refused(&self) -> Option<TcpError> {
        self.last_refused.clone()
    }

    /// Accepts up to [`ACCEPT_BATCH`] waiting connections; each new
    /// connection's handshake is due by `until`. Returns whether any
    /// arrived.
    pub(super) fn accept(&mut self, until: Instant, keepalive: Option<Duration>) -> bool {
        // Taken for the loop (refusals below borrow `self`), put back after.
        let Some(listener) = self.listener.take() else {
            return false;
        };
        let mut arrived = Vec::new();
        while arrived.len() < ACCEPT_BATCH {
            match listener.accept() {
                Ok(accepted) => arrived.push(accepted),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) if is_out_of_descriptors(&error) => {
                    // Out of file descriptors: the oldest waiting
                    // connection gives its own up, so that the next
                    // arrival (perhaps a rank) can be accepted.
                    match self.pending.pop_front() {
                        Some(oldest) => self.reject(TcpError::Evicted { addr: oldest.addr }),
                        None => {
                            self.reject(TcpError::io(None, IoOp::Accept, error));
                            break;
                        }
                    }
                }
                Err(error) => {
                    // A connection that died in the backlog: record it and
                    // go on.
                    self.reject(TcpError::io(None, IoOp::Accept, error));
                    break;
                }
            }
        }
        self.listener = Some(listener);
        let busy = !arrived.is_empty();
        for (stream, addr) in arrived {
            if self.pending.len() >= MAX_PENDING {
                if let Some(oldest) = self.pending.pop_front() {
                    self.reject(TcpError::Evicted { addr: oldest.addr });
                }
            }
            let started = socket::configure(&stream, keepalive)
                .and_then(|()| Pending::new(stream, addr, until));
            match started {
                Ok(pending) => self.pending.push_back(pending),
                Err(error) => self.reject(TcpError::io(None, IoOp::Configure, error)),
            }
        }
        busy
    }

    /// Reads the waiting handshakes; accepts the good ones into `slots`,
    /// with the admission capacities they advertise into `admissions`.
    pub(super) fn handshakes(
        &mut self,
        now: Instant,
        hellos: &[Hello; 2],
        slots: &mut [[Option<TcpStream>; 2]],
        admissions: &mut [u32],
        missing: &mut usize,
    ) -> bool {
        let mut busy = false;
        // Every waiting connection once, in arrival order; those still
        // waiting go back in the same order.
        for _ in 0..self.pending.len() {
            let Some(mut pending) = self.pending.pop_front() else {
                break;
            };
            let Some(outcome) = pending.poll(now) else {
                self.pending.push_back(pending);
                continue;
            };
            busy = true;
            match self.answer(&pending, outcome, hellos, slots) {
                Ok(Answered::Accepted(remote)) => {
                    slots[remote.rank.index()][remote.channel.index()] = Some(pending.stream);
                    record_admission(admissions, &remote);
                    *missing -= 1;
                }
                Ok(Answered::Proving(remote, transcript)) => self.proving.push(Proving {
                    pending,
                    remote,
                    transcript: *transcript,
                }),
                Err(error) => self.reject(error),
            }
        }
        let mut i = 0;
        while i < self.proving.len() {
            let Some(tag) = self.proving[i].pending.poll_proof(now) else {
                i += 1;
                continue;
            };
            busy = true;
            let Proving {
                pending,
                remote,
                transcript,
            } = self.proving.swap_remove(i);
            let proven = tag.and_then(|tag| {
                let key = self.key.expect("only an authenticated run proves");
                key.check(
                    Role::Dialler,
                    &transcript,
                    &tag,
                    Some(remote.rank),
                    pending.addr,
                )
            });
            let slot = &mut slots[remote.rank.index()][remote.channel.index()];
            match proven {
                // Two connections may have claimed the same place while
                // proving: the first to prove it takes it.
                Ok(()) if slot.is_some() => self.reject(TcpError::Duplicate {
                    peer: remote.rank,
                    channel: remote.channel,
                    addr: pending.addr,
                }),
                Ok(()) => {
                    *slot = Some(pending.stream);
                    record_admission(admissions, &remote);
                    *missing -= 1;
                }
                Err(error) => self.reject(error),
            }
        }
        busy
    }

    /// Checks the `outcome` of an accepted connection's opening and
    /// answers it with this rank's hello for the channel, followed by this
    /// rank's nonce and tag when both sides prove their membership.
    ///
    /// A hello of this run refused for what it says (another registry,
    /// world, limits or authentication) is answered too, before the
    /// connection closes, so that the dialler can name the difference
    /// (its own check finds the same one). A hello that does not decode,
    /// names another run, or claims a connection it may not have is not
    /// answered: a stranger learns nothing about the run from this rank.
    fn answer(
        &self,
        pending: &Pending,
        outcome: Result<Opening, TcpError>,
        hellos: &[Hello; 2],
        slots: &[[Option<TcpStream>; 2]],
    ) -> Result<Answered, TcpError> {
        let opening = outcome?;
        let checked =
            handshake::check_accepted(hellos, &opening.hello, pending.addr, |rank, channel| {
                slots[rank.index()][channel.index()].is_some()
            });
        let channel = match &checked {
            Ok(remote) => remote.channel,
            Err(TcpError::Mismatch { mismatch, .. }) if mismatch.field != HelloField::RunId => {
                match Hello::decode(&opening.hello) {
                    Ok(remote) => remote.channel,
                    Err(_) => return checked.map(Answered::Accepted),
                }
            }
            Err(_) => return checked.map(Answered::Accepted),
        };
        let local = hellos[channel.index()].encode();
        let proof = match (self.key, opening.nonce) {
            (Some(key), Some(dialler_nonce)) => {
                let nonce = auth::nonce().map_err(|e| TcpError::io(None, IoOp::Configure, e))?;
                let transcript = Transcript {
                    dialler_hello: opening.hello,
                    dialler_nonce,
                    listener_hello: local,
                    listener_nonce: nonce,
                };
                Some((transcript, key.tag(Role::Listener, &transcript)))
            }
            _ => None,
        };
        let mut answer = local.to_vec();
        if let Some((transcript, tag)) = &proof {
            answer.extend_from_slice(&transcript.listener_nonce);
            answer.extend_from_slice(tag);
        }
        let written = (&pending.stream).write_all(&answer);
        let remote = checked?;
        written.map_err(|e| TcpError::io(Some(remote.rank), IoOp::Write, e))?;
        Ok(match proof {
            Some((transcript, _)) => Answered::Proving(remote, Box::new(transcript)),
            None => Answered::Accepted(remote),
        })
    }
}
