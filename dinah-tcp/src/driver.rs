//! The owner-thread side of the TCP transport.

use std::collections::VecDeque;
use std::fmt;
use std::thread;
use std::time::{Duration, Instant};

use dinah_core::wire::{Channel, DecodeContext};
use dinah_core::{ProtocolLimits, Rank};
use dinah_std::transport::{
    DriverCounts, Frame, Liveness, Outgoing, PeerStatus, Refusals, TransportDriver, TransportError,
    TransportEvent, TransportHandle,
};

use crate::channel::{Connection, RoomWatch};
use crate::config::TcpConfig;
use crate::error::TcpError;
use crate::inbound::Inbound;
use crate::setup::Established;
use crate::watch::Watcher;

mod io;

use io::Out;

/// How long dropping a driver that was not closed waits for its watcher
/// thread.
const DROP_JOIN: Duration = Duration::from_millis(50);

/// Where a peer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerState {
    /// Connected.
    Up,
    /// Both its goodbyes arrived, each after exactly the frames it
    /// announced.
    Drained,
    /// Gone (or this side gave up on it).
    Down,
}

/// One peer: a connection per channel.
#[derive(Debug)]
struct Peer {
    rank: Rank,
    state: PeerState,
    lanes: [Connection; 2],
}

/// Where the driver's own shutdown stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Serving.
    Running,
    /// `begin_shutdown` was called: flushing the handle's frames.
    Flushing,
    /// Goodbyes are queued behind every frame.
    GoodbyeQueued,
}

/// The driver of a TCP transport, polled by the runtime's owner thread.
///
/// Reading and writing are both done here, on the owner thread, without
/// blocking: each [`poll`](TransportDriver::poll) takes the handle's
/// frames (control lane first), queues them per connection, writes as many
/// as the sockets take (gathering up to 64 frames per `sendmsg`), then
/// reads the sockets and hands over the frames they complete. While the
/// owner is idle, one watcher thread waits on a readiness set of every
/// connection's socket and wakes it when one becomes readable (or, while
/// a write waits for room in a socket's buffer, writable). See the
/// [crate documentation](crate) for the design and its measurements.
///
/// Dropping the driver closes it as [`close`](TransportDriver::close) does,
/// waiting at most 50 ms for its watcher thread.
pub struct TcpDriver {
    handle: TransportHandle,
    me: Rank,
    config: TcpConfig,
    peers: Vec<Peer>,
    /// Wakes the parked owner when a connection becomes ready.
    watcher: Watcher,
    /// Events owed to the runtime (peer changes, failed sends), reported
    /// before anything else as the budget allows.
    owed: VecDeque<TransportEvent>,
    /// Per lane: a frame taken from the handle that waits for room.
    stash: [Option<Outgoing>; 2],
    /// Per lane: frames this rank sent itself.
    loopback: [VecDeque<Frame>; 2],
    /// Per lane: the peer to read from first in the next poll (an index
    /// below the number of peers).
    cursor: [usize; 2],
    /// Scratch for the items one connection's read yields (kept to reuse
    /// its allocation).
    items: Vec<Inbound>,
    stage: Stage,
    frames_received: u64,
    bytes_received: u64,
    rejected: Vec<TcpError>,
    rejected_total: u64,
    /// What was left when the driver was closed.
    closed: Option<DriverCounts>,
    /// The refused connections as the runtime's statistics report them.
    refusals: Refusals,
    /// Heartbeats sent and heard ([`TcpConfig::liveness_timeout`]).
    liveness: Liveness,
    /// Scratch for the peers a liveness check found silent.
    silent: Vec<Rank>,
}

/// The refusals of a set-up as statistics: the first ones kept, all
/// counted.
fn refusals_of(rejected: &[TcpError], total: u64) -> Refusals {
    let mut refusals = Refusals::default();
    for error in rejected {
        refusals.record(error.refusal());
    }
    refusals.count(total.saturating_sub(rejected.len() as u64));
    refusals
}

/// The longest park while a socket that matters is outside the readiness
/// set, so that nothing would report it: a full socket whose stream ended
/// (its room), or one that could not rejoin the set (its arrivals). The
/// owner then looks again after this long.
const UNWATCHED_RETRY: Duration = Duration::from_micros(20);

impl TcpDriver {
    /// Starts the watcher thread and registers `established`'s
    /// connections with it; records on `handle` each peer's admission
    /// capacity, then reports it up.
    pub(crate) fn start(
        handle: TransportHandle,
        established: Established,
        limits: ProtocolLimits,
        config: TcpConfig,
    ) -> Result<Self, TcpError> {
        let (me, world) = (handle.rank(), handle.world());
        let mut peers = Vec::new();
        let mut owed = VecDeque::new();
        let watcher = Watcher::start(me, handle.wakeup().clone())?;
        let admissions = established.admissions;
        for (index, streams) in established.streams.into_iter().enumerate() {
            let Some([control, action]) = streams else {
                continue;
            };
            let rank = world
                .rank(index as u32)
                .expect("set-up connects ranks of the world");
            let ctx = DecodeContext::new(Channel::Control, rank, world, limits)
                .expect("limits were validated");
            let start = |stream, channel| {
                Connection::start(stream, ctx.with_channel(channel), &config, &watcher)
            };
            // On failure the connections started so far are dropped (their
            // sockets leave the set and close) and so is the watcher, which
            // stops its thread.
            let lanes = [
                start(control, Channel::Control)?,
                start(action, Channel::Action)?,
            ];
            peers.push(Peer {
                rank,
                state: PeerState::Up,
                lanes,
            });
            // Before `Up`: a client that sees the peer up sees what it
            // advertised.
            handle.set_peer_admission(rank, admissions[index]);
            handle.set_peer_status(rank, PeerStatus::Up);
            owed.push_back(TransportEvent::PeerUp { peer: rank });
        }
        let refusals = refusals_of(&established.rejected, established.rejected_total);
        Ok(Self {
            handle,
            me,
            config,
            peers,
            watcher,
            owed,
            stash: [None, None],
            loopback: [VecDeque::new(), VecDeque::new()],
            cursor: [0, 0],
            items: Vec::new(),
            stage: Stage::Running,
            frames_received: 0,
            bytes_received: 0,
            rejected: established.rejected,
            rejected_total: established.rejected_total,
            closed: None,
            refusals,
            liveness: Liveness::new(config.liveness_timeout, world, me, Instant::now()),
            silent: Vec::new(),
        })
    }

    /// The rank this driver serves.
    pub fn rank(&self) -> Rank {
        self.me
    }

    /// The connections refused during set-up (strangers with garbage, a
    /// wrong or duplicate hello, silence...), each with its typed error;
    /// the first 64 are kept.
    pub fn rejected(&self) -> &[TcpError] {
        &self.rejected
    }

    /// How many connections were refused during set-up in all.
    pub fn rejected_total(&self) -> u64 {
        self.rejected_total
    }

    fn peer_index(&self, rank: Rank) -> Option<usize> {
        // Peers are in rank order without this rank.
        let index = if rank < self.me {
            rank.index()
        } else {
            rank.index().checked_sub(1)?
        };
        (rank != self.me && index < self.peers.len()).then_some(index)
    }

    fn live_counts(&self) -> DriverCounts {
        let mut counts = DriverCounts {
            frames_received: self.frames_received,
            bytes_received: self.bytes_received,
            refusals: self.refusals,
            ..DriverCounts::default()
        };
        // A down peer's connections dropped what they had read.
        for peer in self
            .peers
            .iter()
            .filter(|peer| peer.state != PeerState::Down)
        {
            if peer.state == PeerState::Up {
                counts.undrained_peers += 1;
            }
            for conn in &peer.lanes {
                let (frames, bytes) = conn.outbox.own();
                counts.in_flight_frames += frames;
                counts.retained_bytes += bytes + conn.retained_bytes();
            }
        }
        counts.retained_bytes += self
            .loopback
            .iter()
            .flatten()
            .map(|f| f.len() as u64)
            .sum::<u64>();
        counts
    }

    /// Stops the watcher thread and joins it, waiting at most until
    /// `deadline`; if it is still running then, it is left to end on its
    /// own (it is stopped, and its wait ends on the stop signal).
    fn join_watcher(&mut self, deadline: Instant) {
        self.watcher.stop();
        let thread = self.watcher.thread();
        loop {
            match thread.take() {
                Some(watcher) if watcher.is_finished() => {
                    let _ = watcher.join();
                    return;
                }
                Some(watcher) => *thread = Some(watcher),
                None => return,
            }
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            thread::sleep((deadline - now).min(Duration::from_millis(1)));
        }
    }
}

/// One look of the idle spin at every live connection's socket (each
/// peer's control lane before its action lane) until one has something
/// for the next poll (see
/// [`Connection::look`]).
fn look_at_sockets(peers: &mut [Peer]) -> bool {
    live_lanes(peers).any(Connection::look)
}

/// Every connection of every peer not down.
fn live_lanes(peers: &mut [Peer]) -> impl Iterator<Item = &mut Connection> {
    peers
        .iter_mut()
        .filter(|peer| peer.state != PeerState::Down)
        .flat_map(|peer| &mut peer.lanes)
}

/// Puts every live connection's socket (not cancelled) into the watcher's
/// set; false if one could not join.
fn join_set(peers: &mut [Peer]) -> bool {
    // Every socket tries, whether or not one before it failed.
    let failed = live_lanes(peers)
        .map(|conn| conn.registration.join())
        .filter(Result::is_err)
        .count();
    failed == 0
}

/// Drops every live connection's mark of a look that found its socket
/// empty (see [`Connection::forget_empty_look`]).
fn forget_empty_looks(peers: &mut [Peer]) {
    for conn in peers.iter_mut().flat_map(|peer| &mut peer.lanes) {
        conn.forget_empty_look();
    }
}

impl TransportDriver for TcpDriver {
    /// One round, in this order: report owed events (`PeerUp` after
    /// set-up, `PeerDown`, `PeerDrained`, `SendFailed`); take the handle's
    /// frames, control lane first (a frame for a down peer becomes
    /// `SendFailed`); after [`begin_shutdown`](Self::begin_shutdown), once
    /// the handle is empty, queue the goodbyes; write what the sockets take;
    /// then read the sockets and hand over the frames they complete,
    /// control lane before action lane, the peers taking turns. At most
    /// `budget` events are appended; what does not fit waits for the next
    /// poll (frames already read stay in their connection's buffer).
    ///
    /// # Errors
    ///
    /// [`TransportError::Closed`] once the driver is closed.
    fn poll(
        &mut self,
        budget: usize,
        events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError> {
        if self.closed.is_some() {
            return Err(TransportError::Closed);
        }
        let mut out = Out {
            events,
            left: budget,
        };
        let mut progress = self.emit_owed(&mut out);
        progress |= self.take_frames();
        progress |= self.queue_goodbyes();
        progress |= self.write();
        let now = Instant::now();
        progress |= self.receive(&mut out, now);
        // After the reads, so that what just arrived counts.
        if self.keep_alive(now) {
            self.write();
            progress = true;
        }
        progress |= self.emit_owed(&mut out);
        Ok(progress)
    }

    /// Moves the handle's queued frames to their connections and writes
    /// what the sockets take; receives nothing. A connection that fails
    /// here is reported by the next poll.
    fn flush(
        &mut self,
        _budget: usize,
        _events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError> {
        if self.closed.is_some() {
            return Err(TransportError::Closed);
        }
        if !self.handle.has_queued() {
            return Ok(false);
        }
        let taken = self.take_frames();
        Ok(self.write() || taken)
    }

    /// Waits until something may be there to poll, for at most `timeout`.
    ///
    /// First, for up to `spin`, the owner looks at the sockets itself,
    /// yielding its core between looks, and at the handle's wakeup, which
    /// every `try_send` and worker completion triggers; an arrival caught
    /// here costs no thread wake-up at all. With at most
    /// [`spin_read_connections`](TcpConfig::spin_read_connections) live
    /// connections (and no write waiting for room), a look reads each
    /// socket without blocking, into its read buffer, and the next poll
    /// hands over what it found; with more, a look is one non-blocking
    /// question to the readiness set of every live connection. Then it arms the
    /// watcher and parks on the wakeup until the watcher, a sender or the
    /// timeout ends the wait. Sockets the spin reads itself are out of the
    /// set while it spins (in it, each arrival would cost its sender the
    /// set's wake-up callback) and join it just before the owner parks; one
    /// that cannot join limits the park to 20 µs. Bytes already read and
    /// not yet handed over end the wait at once.
    ///
    /// A socket whose buffer was full at the last write counts as ready
    /// once it has room again (the spin and the watcher see it like an
    /// arrival); while one is full, the park lasts at most
    /// [`blocked_write_retry`](TcpConfig::blocked_write_retry), or 20 µs
    /// for a full socket whose stream has ended (it left the set, so
    /// nothing reports its room).
    fn idle_wait(&mut self, spin: Duration, timeout: Duration) {
        let live = || {
            self.peers
                .iter()
                .filter(|peer| peer.state != PeerState::Down)
                .flat_map(|peer| &peer.lanes)
        };
        if live().any(Connection::buffered) {
            return;
        }
        // A socket whose write waits for room is watched for room too (see
        // `Connection::set_blocked`): its draining ends the spin or the
        // watcher's wait below like an arrival. The park is still bounded,
        // in case a platform reports the room late; a full socket that left
        // the set (its stream ended) is retried on a short interval.
        let timeout = live()
            .filter_map(Connection::blocked)
            .map(|watch| match watch {
                RoomWatch::Watched => self.config.blocked_write_retry,
                RoomWatch::Unwatched => UNWATCHED_RETRY,
            })
            .fold(timeout, Duration::min);
        // With few connections the spin reads each socket itself, so the
        // look that finds an arrival has read it already; asking the
        // readiness set is one call however many connections there are,
        // but adds a call after each arrival (see
        // `TcpConfig::spin_read_connections`). Only the set reports room
        // for a write that waits.
        let connections = live().filter(|conn| !conn.ended).count();
        let read_sockets = self.config.spin_read_connections > 0
            && connections <= self.config.spin_read_connections
            && !live().any(|conn| conn.blocked().is_some());
        // A socket in the set costs whoever writes to it: each arrival runs
        // the set's wake-up callback inside the sender's system call. So
        // sockets the spin reads itself stay out of the set until the owner
        // parks; when the spin asks the set, every socket is in it.
        let mut in_set = if read_sockets {
            live_lanes(&mut self.peers).for_each(|conn| conn.registration.leave());
            true
        } else {
            join_set(&mut self.peers)
        };
        let wakeup = self.handle.wakeup();
        let start = Instant::now();
        let spin = spin.min(timeout);
        loop {
            if wakeup.take() {
                return;
            }
            let found = if read_sockets {
                look_at_sockets(&mut self.peers)
            } else {
                self.watcher.any_ready()
            };
            if found {
                return;
            }
            if start.elapsed() >= spin {
                break;
            }
            // Yield rather than spin on the core: a worker running a
            // handler, or the peer's owner, may need it.
            thread::yield_now();
        }
        // What the spin's looks found empty is stale once the owner parks:
        // the poll after a wake-up reads every socket again.
        forget_empty_looks(&mut self.peers);
        if read_sockets {
            in_set = join_set(&mut self.peers);
        }
        // A socket that could not join the set is looked at again soon:
        // nothing would report its arrivals.
        let timeout = if in_set {
            timeout
        } else {
            timeout.min(UNWATCHED_RETRY)
        };
        // An arrival after the last look is not missed: the set is
        // level-triggered, so an armed watcher's wait ends at once when a
        // socket is readable already (or joins the set readable).
        self.watcher.arm();
        wakeup.wait(Duration::ZERO, timeout.saturating_sub(start.elapsed()));
    }

    fn handle(&self) -> &TransportHandle {
        &self.handle
    }

    /// Closes the handle (later `try_send`s fail with
    /// [`SendErrorKind::Closed`](dinah_std::transport::SendErrorKind::Closed));
    /// the frames already queued are still written, then each connection
    /// of each live peer gets a goodbye announcing the frames written on
    /// it before, and its write side is shut down. Reading goes on until
    /// each peer's goodbyes and end of stream.
    fn begin_shutdown(&mut self) {
        if self.stage == Stage::Running {
            self.stage = Stage::Flushing;
        }
        self.handle.close();
    }

    /// True once the goodbyes are written, every frame taken from the
    /// handle is completed, every event is reported, and every peer has
    /// drained (both its goodbyes arrived, with every frame it announced
    /// handed over) or is down.
    fn is_drained(&self) -> bool {
        let handle = self.handle.counts();
        self.stage == Stage::GoodbyeQueued
            && handle.queued_control + handle.queued_action == 0
            && handle.in_flight == 0
            && self.owed.is_empty()
            && self.stash.iter().all(Option::is_none)
            && self.loopback.iter().all(VecDeque::is_empty)
            && self.peers.iter().all(|peer| match peer.state {
                PeerState::Down => true,
                PeerState::Up => false,
                PeerState::Drained => peer
                    .lanes
                    .iter()
                    .all(|conn| conn.write_closed && conn.retained_bytes() == 0),
            })
    }

    /// What the driver holds beyond the handle's own counts (a frame taken
    /// from the handle stays counted by the handle until written or
    /// failed): `in_flight_frames` are the unwritten goodbyes;
    /// `retained_bytes` are theirs plus the frames received and not yet
    /// handed over (and the one each reader is assembling). After
    /// [`close`](Self::close), what the close discarded.
    fn counts(&self) -> DriverCounts {
        match self.closed {
            Some(left) => left,
            None => self.live_counts(),
        }
    }

    /// Closes the transport without waiting on peers: closes the handle
    /// and discards its queued frames, fails the unwritten ones on the
    /// handle, shuts every socket down, and stops and joins the watcher
    /// thread until `deadline` at the latest. Later
    /// polls fail with [`TransportError::Closed`].
    ///
    /// Returns (and [`counts`](Self::counts) reports from now on) what was
    /// discarded: frames never written (`in_flight_frames`) and the bytes
    /// of those and of frames received but never handed over
    /// (`retained_bytes`), plus the peers that had not drained. After a
    /// clean shutdown everything is zero.
    fn close(&mut self, deadline: Instant) -> DriverCounts {
        if let Some(left) = self.closed {
            return left;
        }
        self.handle.close();
        let mut left = self.live_counts();
        let before = self.handle.counts();
        left.in_flight_frames += self.handle.discard_queued() as u64;
        left.retained_bytes += before.retained_bytes
            - before
                .retained_bytes
                .min(self.handle.counts().retained_bytes);
        for outgoing in self.stash.iter_mut().filter_map(Option::take) {
            self.handle.complete_send(outgoing.frame.len(), false);
            left.in_flight_frames += 1;
            left.retained_bytes += outgoing.frame.len() as u64;
        }
        for conn in self.peers.iter_mut().flat_map(|peer| peer.lanes.iter_mut()) {
            conn.abort();
            for pending in conn.outbox.take_all() {
                if pending.from_handle {
                    self.handle.complete_send(pending.frame.len(), false);
                    left.in_flight_frames += 1;
                    left.retained_bytes += pending.frame.len() as u64;
                }
            }
        }
        self.loopback.iter_mut().for_each(VecDeque::clear);
        self.owed.clear();
        self.closed = Some(left);
        self.join_watcher(deadline);
        left
    }
}

impl Drop for TcpDriver {
    fn drop(&mut self) {
        self.close(Instant::now() + DROP_JOIN);
    }
}

impl fmt::Debug for TcpDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpDriver")
            .field("rank", &self.me)
            .field("peers", &self.peers.len())
            .field("stage", &self.stage)
            .field("closed", &self.closed.is_some())
            .field("counts", &self.counts())
            .field("rejected", &self.rejected_total)
            .finish()
    }
}
