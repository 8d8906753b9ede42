//! Connection set-up: every rank connects to every other one, twice (a
//! control and an action connection), under one deadline.
//!
//! Rank `i` dials every rank `j < i` and accepts from every `j > i`, so
//! each pair is connected exactly once per channel and the dial graph
//! has no cycle. Dialling runs on a helper thread (connect with a timeout,
//! retried with exponential back-off, then the hello exchange), while the
//! calling thread accepts: it reads the hellos of all accepted
//! connections without blocking, each with its own timeout, so a silent
//! or hostile connection is dropped on its own timer without delaying the
//! others. A stranger that fails the handshake is recorded and dropped;
//! the set-up goes on until every expected connection is up or the
//! deadline passes.
//!
//! Each peer's hellos also carry its admission capacity
//! ([`Hello::admission_capacity`]); the set-up keeps the one of its action
//! connection for the driver to record on the handle.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use dinah_core::Rank;
use dinah_core::wire::{Channel, Hello};
use dinah_std::transport::IoOp;

use crate::config::TcpConfig;
use crate::error::TcpError;
use crate::handshake::{self, Pending};
use crate::membership::Membership;
use crate::socket;

/// The most accepted connections whose hello is awaited at once; more
/// are dropped on arrival.
const MAX_PENDING: usize = 64;

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
        pending: Vec::new(),
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
fn dial(
    peer: Rank,
    addr: SocketAddr,
    local: &Hello,
    config: &TcpConfig,
    deadline: Instant,
    stop: &AtomicBool,
) -> Result<(TcpStream, Hello), TcpError> {
    let mut backoff = config.backoff_min;
    let mut last_error = None;
    let stream = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stop.load(Ordering::Relaxed) {
            return Err(match last_error {
                Some(error) => TcpError::Connect {
                    peer,
                    addr,
                    source: Arc::new(error),
                },
                None => TcpError::SetupTimeout { missing: 1 },
            });
        }
        match TcpStream::connect_timeout(&addr, config.connect_timeout.min(left)) {
            Ok(stream) => break stream,
            Err(error) => {
                last_error = Some(error);
                thread::sleep(backoff.min(left));
                backoff = (backoff * 2).min(config.backoff_max);
            }
        }
    };
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
    pending: Vec<Pending>,
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

    /// Accepts what is waiting; each new connection's hello is due by
    /// `until`.
    fn accept(&mut self, until: Instant, keepalive: Option<Duration>) -> bool {
        let mut busy = false;
        while let Some(listener) = &self.listener {
            let (stream, addr) = match listener.accept() {
                Ok(accepted) => accepted,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    // A connection that died in the backlog, or no file
                    // descriptors left: record it and retry later.
                    self.reject(TcpError::io(None, IoOp::Accept, error));
                    break;
                }
            };
            busy = true;
            if self.pending.len() >= MAX_PENDING {
                self.reject(TcpError::TooManyPending { addr });
                continue;
            }
            let started = socket::configure(&stream, keepalive)
                .and_then(|()| Pending::new(stream, addr, until));
            match started {
                Ok(pending) => self.pending.push(pending),
                Err(error) => self.reject(TcpError::io(None, IoOp::Configure, error)),
            }
        }
        busy
    }

    /// Reads the pending hellos; accepts the good ones into `slots`, with
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
        let mut i = 0;
        while i < self.pending.len() {
            let Some(outcome) = self.pending[i].poll(now) else {
                i += 1;
                continue;
            };
            busy = true;
            let pending = self.pending.swap_remove(i);
            let checked = outcome.and_then(|bytes| {
                handshake::check_accepted(hellos, &bytes, pending.addr, |rank, channel| {
                    slots[rank.index()][channel.index()].is_some()
                })
            });
            let answered = checked.and_then(|remote| {
                let lane = remote.channel;
                (&pending.stream)
                    .write_all(&hellos[lane.index()].encode())
                    .map(|()| remote)
                    .map_err(|e| TcpError::io(Some(remote.rank), IoOp::Write, e))
            });
            match answered {
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
