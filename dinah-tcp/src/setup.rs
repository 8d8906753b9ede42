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
//! **Floods** (`setup/accept.rs`). Strangers cannot fill the accepting
//! side: it accepts at most [`ACCEPT_BATCH`](accept::ACCEPT_BATCH)
//! connections between two passes over the waiting hellos (a genuine
//! rank sends its hello right after connecting), and while
//! [`MAX_PENDING`](accept::MAX_PENDING) connections wait, each new arrival
//! drops the oldest waiting one. A genuine rank's hello is therefore read
//! before it could be dropped unless a thousand connections arrive in the
//! moment between its connect and its hello; if that happens, its dialler
//! sees the connection close and dials again. A refused dialler whose
//! hello was of this run gets this rank's hello back before the close, so
//! it can name what differs (its own check finds the same mismatch).
//!
//! **Authentication** (`auth.rs`). With a run key, each connection ends
//! with a challenge-response: a connection is counted as the rank it
//! claims only once it proved the key.
//!
//! Each peer's hellos also carry its admission capacity
//! ([`Hello::admission_capacity`]); the set-up keeps the one of its action
//! connection for the driver to record on the handle.

mod accept;
mod dial;

use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use dinah_core::Rank;
use dinah_core::wire::{Channel, Hello};
use dinah_std::transport::IoOp;

use crate::auth::RunKey;
use crate::config::TcpConfig;
use crate::error::TcpError;
use crate::membership::Membership;
use crate::socket;
use accept::Accept;
use dial::spawn_dialler;

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
    key: Option<&RunKey>,
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
    let dialler = spawn_dialler(membership, hellos, key, config, deadline, &stop)?;
    let dialled = dialler.as_ref().map(|d| &d.results);
    let mut accept = Accept::new(listener, key);
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
                    last_refused: accept.last_refused().map(Box::new),
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
    #[cfg(feature = "tracing")]
    match &result {
        Ok(()) => tracing::event!(
            tracing::Level::INFO,
            rank = me.get(),
            world = world.get(),
            refused = accept.rejected_total,
            "dinah-tcp: set-up complete"
        ),
        Err(error) => tracing::event!(
            tracing::Level::WARN,
            rank = me.get(),
            world = world.get(),
            refused = accept.rejected_total,
            error = %error,
            "dinah-tcp: set-up failed"
        ),
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
pub(super) fn record_admission(admissions: &mut [u32], remote: &Hello) {
    if remote.channel == Channel::Action {
        admissions[remote.rank.index()] = remote.admission_capacity;
    }
}
