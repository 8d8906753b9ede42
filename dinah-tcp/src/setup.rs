//! Connection set-up: every rank connects to every other one, twice (a
//! control and an action connection), under one deadline.
//!
//! Rank `i` dials every rank `j < i` and accepts from every `j > i`, so
//! each pair is connected exactly once per channel and the dial graph
//! has no cycle. Dialling runs on a helper thread (connect with a timeout,
//! then the hello exchange, both retried with exponential back-off until
//! the deadline when the connection fails or the listener drops it),
//! while the calling thread accepts: it reads the hellos of all accepted
//! connections without blocking, each with its own timeout, so a silent
//! or hostile connection is dropped on its own timer without delaying the
//! others. A stranger that fails the handshake is recorded and dropped;
//! the set-up goes on until every expected connection is up or the
//! deadline passes.
//!
//! **Floods.** Strangers cannot fill the accepting side: it accepts at
//! most [`ACCEPT_BATCH`] connections between two passes over the waiting
//! hellos, reads each new connection's hello at once (a genuine rank
//! sends it right after connecting), and while [`MAX_PENDING`]
//! connections wait, each new arrival drops the oldest waiting one. A
//! genuine rank's hello is therefore read before it could be dropped
//! unless more than `MAX_PENDING` connections arrive in the moment
//! between its connect and its hello; if that happens, its dialler sees
//! the connection close and dials again. A refused dialler whose hello
//! was readable gets this rank's hello back before the close, so it can
//! name what differs (its own check finds the same mismatch).
//!
//! Each peer's hellos also carry its admission capacity
//! ([`Hello::admission_capacity`]); the set-up keeps the one of its action
//! connection for the driver to record on the handle.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use dinah_core::Rank;
use dinah_core::wire::{Channel, HELLO_LEN, Hello, HelloField};
use dinah_std::transport::IoOp;

use crate::config::TcpConfig;
use crate::error::TcpError;
use crate::handshake::{self, Pending};
use crate::membership::Membership;
use crate::socket;

/// The most accepted connections whose hello is awaited at once; a new
/// arrival beyond it drops the oldest.
const MAX_PENDING: usize = 1024;

/// The most connections accepted between two passes over the waiting
/// hellos.
const ACCEPT_BATCH: usize = 64;

/// The most rejected connections whose errors are kept.
pub(crate) const MAX_REJECTIONS: usize = 64;

/// How long a set-up past its deadline waits for the dialler's last
/// report.
const FINAL_DIAL_REPORT: Duration = Duration::from_millis(100);

/// The longest the accept loop sleeps when nothing happened.
const MAX_IDLE: Duration = Duration::from_millis(1);

/// The connections of a finished set-up.
#[derive(Debug)]
pub(crate) struct Established {
    /// Per peer rank (`None` at this rank's own index), per channel.
    pub(crate) streams: Vec<Option<[TcpStream; 2]>>,
    /// Per peer rank, the admission capacity its action hello advertised
    /// (0 at this rank's own index, or if the peer advertised none).
    pub(crate) admissions: Vec<u32>,
    /// Errors of refused strangers (at most [`MAX_REJECTIONS`]).
    pub(crate) rejected: Vec<TcpError>,
    /// All refused strangers.
    pub(crate) rejected_total: u64,
}

/// One dial's outcome: the peer, the channel, the handshaken connection
/// and the peer's hello.
type Dialled = Result<(Rank, Channel, TcpStream, Hello), TcpError>;

/// Connects `membership`'s rank to every other rank on both channels.
///
/// # Errors
///
/// [`TcpError::SetupTimeout`] if connections are missing at the deadline;
/// any error of dialling a lower rank (it fails the set-up: that peer
/// cannot be reached); [`TcpError::Io`] if the listener cannot be bound.
pub(crate) fn establish(
    membership: &mut Membership,
    hellos: [Hello; 2],
    config: &TcpConfig,
) -> Result<Established, TcpError> {
    let (me, world) = (membership.rank(), membership.world());
    let deadline = Instant::now() + config.setup_timeout;
    let mut slots: Vec<[Option<TcpStream>; 2]> = world.ranks().map(|_| [None, None]).collect();
    let mut admissions = vec![0; world.get() as usize];
    let mut missing = 2 * (world.get() as usize - 1);
    let higher = world.get() - me.get() - 1;
    let listener = match (membership.take_listener(), higher) {
        (_, 0) => None,
        (Some(listener), _) => Some(listener),
        (None, _) => {
            let addr = membership.bind_addr();
            Some(socket::bind(addr).map_err(|e| TcpError::io(None, IoOp::Bind, e))?)
        }
    };
    if let Some(listener) = &listener {
        listener
            .set_nonblocking(true)
            .map_err(|e| TcpError::io(None, IoOp::Bind, e))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let dialler = spawn_dialler(membership, hellos, config, deadline, &stop)?;
    let dialled = dialler.as_ref().map(|d| &d.results);
    let mut accept = Accept {
        listener,
        pending: VecDeque::new(),
        rejected: Vec::new(),
        rejected_total: 0,
    };
    let mut idle = Duration::from_micros(20);
    let result = loop {
        let mut busy = false;
        // Dialled connections. A failed dial fails the set-up: that peer
        // cannot be reached (the dialler stops after it).
        if let Some(dialled) = dialled {
            while let Ok(outcome) = dialled.try_recv() {
                let (peer, channel, stream, remote) = outcome?;
                slots[peer.index()][channel.index()] = Some(stream);
                record_admission(&mut admissions, &remote);
                missing -= 1;
                busy = true;
            }
        }
        // Accepted connections.
        let now = Instant::now();
        busy |= accept.accept(now + config.hello_timeout, config.keepalive);
        busy |= accept.handshakes(now, &hellos, &mut slots, &mut admissions, &mut missing);
        if missing == 0 {
            break Ok(());
        }
        if now >= deadline {
            // The dialler's attempts end by the deadline too: its error
            // (which peer could not be reached, and why) says more than a
            // bare timeout.
            let late = dialled.and_then(|d| d.recv_timeout(FINAL_DIAL_REPORT).ok());
            break Err(match late {
                Some(Err(error)) => error,
                _ => TcpError::SetupTimeout {
                    missing: missing as u32,
                },
            });
        }
        if busy {
            idle = Duration::from_micros(20);
        } else {
            thread::sleep(idle.min(deadline - now));
            idle = (idle * 2).min(MAX_IDLE);
        }
    };
    stop.store(true, Ordering::Relaxed);
    if let Some(dialler) = dialler {
        // Every dial ended (its result arrived) unless the set-up failed;
        // then the dialler ends by the deadline on its own.
        if result.is_ok() {
            let _ = dialler.thread.join();
        }
    }
    result?;
    let streams = slots
        .into_iter()
        .map(|[control, action]| {
            control
                .zip(action)
                .map(|(control, action)| [control, action])
        })
        .collect();
    Ok(Established {
        streams,
        admissions,
        rejected: accept.rejected,
        rejected_total: accept.rejected_total,
    })
}

/// Keeps the admission capacity `remote` advertised, if it opened the
/// action channel (both of a peer's hellos come from the same runtime; the
/// action channel's is the one kept).
fn record_admission(admissions: &mut [u32], remote: &Hello) {
    if remote.channel == Channel::Action {
        admissions[remote.rank.index()] = remote.admission_capacity;
    }
}

/// The thread dialling the lower ranks, and its results in order.
struct Dialler {
    thread: JoinHandle<()>,
    results: Receiver<Dialled>,
}

/// Starts the thread dialling every lower rank, if there is one.
fn spawn_dialler(
    membership: &Membership,
    hellos: [Hello; 2],
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
    let (config, stop) = (*config, Arc::clone(stop));
    let thread = thread::Builder::new()
        .name(format!("dinah-tcp-dial-{}", me.get()))
        .spawn(move || {
            for (peer, addr) in targets {
                for channel in Channel::ALL {
                    let result = dial(
                        peer,
                        addr,
                        &hellos[channel.index()],
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
    config: &TcpConfig,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<(TcpStream, Hello), TcpError> {
    let mut backoff = config.backoff_min;
    let mut last_error: Option<TcpError> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stop.load(Ordering::Relaxed) {
            return Err(last_error.unwrap_or(TcpError::SetupTimeout { missing: 1 }));
        }
        let error = match TcpStream::connect_timeout(&addr, config.connect_timeout.min(left)) {
            Ok(stream) => match exchange(peer, addr, local, stream, config, deadline) {
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
/// answer.
fn exchange(
    peer: Rank,
    addr: SocketAddr,
    local: &Hello,
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
    (&stream)
        .write_all(&local.encode())
        .map_err(io(IoOp::Write))?;
    let answer = handshake::read_answer(&stream, peer, addr)?;
    let remote = handshake::check_dialled(local, &answer, peer, addr)?;
    Ok((stream, remote))
}

/// The accepting side of the set-up.
struct Accept {
    listener: Option<TcpListener>,
    /// Connections whose hello is awaited, oldest first.
    pending: VecDeque<Pending>,
    rejected: Vec<TcpError>,
    rejected_total: u64,
}

impl Accept {
    fn reject(&mut self, error: TcpError) {
        self.rejected_total += 1;
        if self.rejected.len() < MAX_REJECTIONS {
            self.rejected.push(error);
        }
    }

    /// Accepts up to [`ACCEPT_BATCH`] waiting connections; each new
    /// connection's hello is due by `until`. Returns whether any arrived.
    fn accept(&mut self, until: Instant, keepalive: Option<Duration>) -> bool {
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

    /// Reads the waiting hellos; accepts the good ones into `slots`, with
    /// the admission capacities they advertise into `admissions`.
    fn handshakes(
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
            match answer(&pending, outcome, hellos, slots) {
                Ok(remote) => {
                    slots[remote.rank.index()][remote.channel.index()] = Some(pending.stream);
                    record_admission(admissions, &remote);
                    *missing -= 1;
                }
                Err(error) => self.reject(error),
            }
        }
        busy
    }
}

/// `EMFILE` or `ENFILE`: the process or the system is out of file
/// descriptors.
fn is_out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Checks the hello `outcome` of an accepted connection and answers it
/// with this rank's hello for the channel.
///
/// A hello of this run refused for what it says (another registry, world
/// or limits) is answered too, before the connection closes, so that the
/// dialler can name the difference (its own check finds the same one). A
/// hello that does not decode, names another run, or claims a connection
/// it may not have is not answered: a stranger learns nothing about the
/// run from this rank.
fn answer(
    pending: &Pending,
    outcome: Result<[u8; HELLO_LEN], TcpError>,
    hellos: &[Hello; 2],
    slots: &[[Option<TcpStream>; 2]],
) -> Result<Hello, TcpError> {
    let bytes = outcome?;
    let checked = handshake::check_accepted(hellos, &bytes, pending.addr, |rank, channel| {
        slots[rank.index()][channel.index()].is_some()
    });
    let lane = match &checked {
        Ok(remote) => remote.channel,
        Err(TcpError::Mismatch { mismatch, .. }) if mismatch.field != HelloField::RunId => {
            match Hello::decode(&bytes) {
                Ok(remote) => remote.channel,
                Err(_) => return checked,
            }
        }
        Err(_) => return checked,
    };
    let written = (&pending.stream).write_all(&hellos[lane.index()].encode());
    match (checked, written) {
        (Ok(remote), Err(e)) => Err(TcpError::io(Some(remote.rank), IoOp::Write, e)),
        (checked, _) => checked,
    }
}
