//! The owner-thread driver: every MPI call the transport makes after
//! bootstrap happens in here, on the thread that owns the runtime.

use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use dinah_core::{ProtocolLimits, Rank, WorldSize};
use dinah_std::transport::{
    DownReason, DriverCounts, Liveness, PeerStatus, Refusals, TransportDriver, TransportError,
    TransportEvent, TransportHandle,
};

use crate::coalesce::Coalescer;
use crate::comm::{self, PrivateComm};
use crate::config::MpiConfig;
use crate::peers::{Notice, Peers};
use crate::pool::BufferPool;
use crate::posted::Posted;
use crate::receive::Receives;
use crate::send::Sends;

mod closing;
mod receiving;
mod sending;
#[cfg(feature = "testing")]
mod testing;

/// The error reported for a frame too long for an MPI count
/// (`MPI_ERR_COUNT`; the protocol caps frames far below, so only a frame
/// queued on the handle by hand can hit it).
const ERR_COUNT: i32 = mpi::ffi::MPI_ERR_COUNT as i32;

/// The shortest idle park; each idle wait without news doubles it up to
/// [`MpiConfig::max_idle_park`].
const FIRST_IDLE_PARK: Duration = Duration::from_micros(20);

/// Close markers are rare: while running, their tag is probed only on
/// every this many polls, and every this many idle checks (each empty
/// probe costs a round of MPI progress).
const CLOSE_PROBE_INTERVAL: u64 = 16;

/// While it spins without yielding, the idle wait reads the clock on every
/// this many checks.
const CHECKS_PER_CLOCK_READING: u32 = 8;

/// How long requests in flight keep the idle wait busy (checking and
/// yielding instead of parking) without any of them completing. A large
/// message completes well within it; a send to a rank that stopped
/// receiving never does, and then the wait parks as usual.
const BUSY_WHILE_STALLED: Duration = Duration::from_millis(10);

/// The owner-thread side of the MPI transport, polled by the runtime.
///
/// Built by [`MpiTransport::connect`](crate::MpiTransport::connect) on the
/// thread that calls MPI, and **not `Send`**: it holds MPI requests and a
/// communicator, which must stay on that thread (under OpenMPI they are
/// raw pointers; the driver is `!Send` whatever the MPI implementation).
///
/// # What a poll does
///
/// In order, each step bounded: report queued peer notices; test every
/// send in flight (one `MPI_Testsome`) and release the completed ones on
/// the handle; take frames from
/// the handle (control lane first) and post them as immediate sends, the
/// small frames to each peer batched into one message (see
/// `docs/mpi.md`), at most as many frames in flight per lane as the handle's
/// queue holds, and post again the receive slot the last poll took first
/// from each lane (after the sends, so an answer is not held up by it);
/// during a
/// shutdown, once the handle is empty, post the goodbyes; then receive:
/// on the control tag first, then the action tag, hand out completed
/// messages and take new ones from the lane's posted receives (starting
/// the receive of an announced large frame) until the event budget or the
/// pending-receive bound is reached; close markers, found with a matched
/// probe, only once both lanes had nothing left to take (and, while
/// running, only every 16th poll: they are rare and an empty probe costs a
/// round of MPI progress).
///
/// MPI makes progress only inside MPI calls, so the driver cannot wake its
/// owner: [`idle_wait`](TransportDriver::idle_wait) tests while it spins
/// and then parks only briefly (see [`MpiConfig::max_idle_park`]).
///
/// # Dropping
///
/// Dropping the driver closes it as
/// [`close`](TransportDriver::close) does, with no time to finish sends
/// beyond one test: nothing ever blocks on a peer.
pub struct MpiDriver {
    comm: PrivateComm,
    handle: TransportHandle,
    me: Rank,
    world: WorldSize,
    limits: ProtocolLimits,
    config: MpiConfig,
    session: u64,
    /// Each peer's session number, from its hello.
    sessions: Vec<u64>,
    sends: Sends,
    /// Small frames staged per peer during one poll (see `coalesce.rs`).
    coalescer: Coalescer,
    /// Batch and frame buffers kept for reuse (see `pool.rs`).
    buffers: BufferPool,
    /// The receives kept posted on both lanes' tags.
    posted: Posted,
    receives: Receives,
    peers: Peers,
    phase: Phase,
    frames_received: u64,
    bytes_received: u64,
    /// Messages taken from peers that broke the protocol and dropped
    /// unread.
    dropped_from_violators: u64,
    leaked: Leaked,
    idle_park: Duration,
    /// Whether the runtime's workers had jobs at the last idle wait (see
    /// `set_workers_running`): the wait then yields from its first check.
    workers_running: bool,
    /// When a poll last found work.
    last_progress: Instant,
    /// Polls so far.
    polls: u64,
    /// Idle checks so far.
    idle_checks: u64,
    /// Heartbeats sent and heard ([`MpiConfig::liveness_timeout`]).
    liveness: Liveness,
    /// Scratch for the peers a liveness check found silent.
    silent: Vec<Rank>,
    /// The driver never leaves its thread, whatever the MPI implementation.
    _owner_thread: PhantomData<*const ()>,
}

/// Where the driver is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Sending and receiving.
    Running,
    /// Shutdown begun: the handle is closed, its frames are still sent.
    Flushing,
    /// The goodbyes are posted: only receiving and completing.
    GoodbyeSent,
    /// Closed: nothing more happens.
    Closed,
}

/// What a close left to MPI (forgotten requests, leaked buffers).
#[derive(Debug, Clone, Copy, Default)]
struct Leaked {
    sends: u64,
    bytes: u64,
}

/// The events of one poll and the budget left.
struct Out<'a> {
    events: &'a mut Vec<TransportEvent>,
    left: usize,
}

impl Out<'_> {
    fn full(&self) -> bool {
        self.left == 0
    }

    fn push(&mut self, event: TransportEvent) {
        self.events.push(event);
        self.left = self.left.saturating_sub(1);
    }
}

/// What [`MpiTransport::connect`](crate::MpiTransport::connect) hands the
/// driver.
pub(crate) struct Parts {
    pub(crate) comm: PrivateComm,
    pub(crate) handle: TransportHandle,
    pub(crate) limits: ProtocolLimits,
    pub(crate) config: MpiConfig,
    pub(crate) session: u64,
    pub(crate) sessions: Vec<u64>,
    pub(crate) sends: Sends,
}

impl MpiDriver {
    pub(crate) fn new(parts: Parts) -> Self {
        let Parts {
            comm,
            handle,
            limits,
            config,
            session,
            sessions,
            sends,
        } = parts;
        let (me, world) = (handle.rank(), handle.world());
        let posted = Posted::new(comm.get(), config.posted_receives);
        Self {
            posted,
            comm,
            me,
            world,
            limits,
            config,
            session,
            sessions,
            sends,
            coalescer: Coalescer::new(world),
            buffers: BufferPool::new(),
            receives: Receives::new(world),
            peers: Peers::new(me, world),
            phase: Phase::Running,
            frames_received: 0,
            bytes_received: 0,
            dropped_from_violators: 0,
            leaked: Leaked::default(),
            idle_park: FIRST_IDLE_PARK,
            workers_running: false,
            last_progress: Instant::now(),
            polls: 0,
            idle_checks: 0,
            liveness: Liveness::new(config.liveness_timeout, world, me, Instant::now()),
            silent: Vec::new(),
            handle,
            _owner_thread: PhantomData,
        }
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.me
    }

    /// The number of ranks.
    pub fn world(&self) -> WorldSize {
        self.world
    }

    /// The options it runs with.
    pub fn config(&self) -> &MpiConfig {
        &self.config
    }

    /// Reports queued notices while the budget lasts (and applies the ones
    /// that need no event regardless).
    fn emit_notices(&mut self, out: &mut Out<'_>) -> bool {
        let mut progress = false;
        while let Some(notice) = self.peers.next_notice() {
            let event = match notice {
                Notice::Leaving(peer) => {
                    // Still watched for silence until every frame it
                    // announced arrived: a peer stopped before its last
                    // sends completed is reported down, not waited for.
                    if matches!(
                        self.handle.peer_status(peer),
                        PeerStatus::Up | PeerStatus::Connecting
                    ) {
                        self.handle.set_peer_status(peer, PeerStatus::Leaving);
                    }
                    None
                }
                Notice::Closed(peer) => {
                    // Drained and closed: later sends fail at once, quietly.
                    self.liveness.forget(peer);
                    self.handle.mark_down(peer, DownReason::LocalClose);
                    None
                }
                Notice::Up(_) | Notice::Drained(_) | Notice::Down(..) if out.full() => {
                    self.peers.defer_notice(notice);
                    break;
                }
                Notice::Up(peer) => {
                    if self.handle.peer_status(peer) == PeerStatus::Connecting {
                        self.handle.set_peer_status(peer, PeerStatus::Up);
                    }
                    Some(TransportEvent::PeerUp { peer })
                }
                Notice::Drained(peer) => {
                    // It sends nothing more: no longer watched for silence.
                    self.liveness.forget(peer);
                    Some(TransportEvent::PeerDrained { peer })
                }
                Notice::Down(peer, reason) => {
                    trace_event!(
                        tracing::Level::WARN,
                        rank = self.me.get(),
                        peer = peer.get(),
                        reason = %reason,
                        "dinah-mpi: peer down"
                    );
                    self.liveness.forget(peer);
                    self.handle.mark_down(peer, reason);
                    Some(TransportEvent::PeerDown {
                        peer,
                        error: TransportError::PeerDown { peer, reason },
                    })
                }
            };
            progress = true;
            if let Some(event) = event {
                out.push(event);
            }
        }
        progress
    }
}

impl TransportDriver for MpiDriver {
    /// One bounded round of MPI work (see the [type documentation](MpiDriver)
    /// for the steps). Appends at most `budget` events.
    ///
    /// # Errors
    ///
    /// [`TransportError::Closed`] once the driver is closed.
    fn poll(
        &mut self,
        budget: usize,
        events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError> {
        if self.phase == Phase::Closed {
            return Err(TransportError::Closed);
        }
        let mut out = Out {
            events,
            left: budget,
        };
        let mut progress = self.emit_notices(&mut out);
        progress |= self.sends.complete(&self.handle, &mut self.buffers) > 0;
        if self.handle.has_queued() {
            progress |= self.post_lanes(&mut out);
        }
        // After the sends: what the last poll took is answered first.
        self.posted.repost(self.comm.get());
        if self.phase == Phase::Flushing {
            let queued = self.handle.counts();
            if queued.queued_control + queued.queued_action == 0 {
                self.post_goodbyes();
                progress = true;
            }
        }
        // One clock reading per poll: what arrives in it is heard at this
        // time, the liveness check runs at it, and progress is dated by it.
        let now = Instant::now();
        progress |= self.receive(now, &mut out);
        // After the receives, so that what just arrived counts.
        progress |= self.keep_alive(now);
        progress |= self.emit_notices(&mut out);
        if progress {
            self.idle_park = FIRST_IDLE_PARK;
            self.last_progress = now;
        }
        Ok(progress)
    }

    /// Posts the handle's queued frames (control lane first), as the
    /// sending part of a poll does, then posts again the receive slots the
    /// last poll took (see `posted.rs`); receives nothing.
    fn flush(
        &mut self,
        budget: usize,
        events: &mut Vec<TransportEvent>,
    ) -> Result<bool, TransportError> {
        if self.phase == Phase::Closed {
            return Err(TransportError::Closed);
        }
        if !self.handle.has_queued() {
            return Ok(false);
        }
        let mut out = Out {
            events,
            left: budget,
        };
        let posted = self.post_lanes(&mut out);
        self.posted.repost(self.comm.get());
        Ok(posted)
    }

    /// Returns as soon as there may be work: a wake-up on the handle (a
    /// client queued a frame), a message waiting on one of the transport's
    /// tags, a receive or send that completed.
    ///
    /// While requests are in flight, MPI moves their data only inside MPI
    /// calls (a large message crosses in many fragments), so the driver
    /// keeps checking, yielding the CPU between checks, until one of the
    /// above or `timeout` (unless nothing completed for 10 ms: a send to a
    /// rank that stopped receiving must not keep the owner busy forever).
    /// Otherwise it checks for up to `spin`, then parks (woken by the
    /// handle only) for a doubling interval, from 20 µs up to
    /// [`MpiConfig::max_idle_park`], never beyond `timeout`; any poll that
    /// finds work resets the interval.
    ///
    /// For the first [`MpiConfig::busy_spin`] of the wait it checks without
    /// yielding its core between checks, unless the runtime said its
    /// workers are running jobs (see
    /// [`set_workers_running`](TransportDriver::set_workers_running)); after
    /// that, or with workers running, it yields between checks.
    fn idle_wait(&mut self, spin: Duration, timeout: Duration) {
        if self.phase == Phase::Closed || !comm::is_live() {
            self.handle.wakeup().wait(spin, timeout);
            return;
        }
        // Every slot taken is posted again before the owner waits.
        self.posted.repost(self.comm.get());
        let start = Instant::now();
        let in_flight = (!self.sends.is_empty() || self.receives.len() > 0)
            && self.last_progress.elapsed() < BUSY_WHILE_STALLED;
        let spin = if in_flight {
            timeout
        } else {
            spin.min(timeout)
        };
        // While the wait spins, the clock is read on every few checks only:
        // a check is short, and a reading would be a good part of it. Once
        // it yields (a system call each time, and maybe a wait for the
        // core), on every check, so that it ends on time.
        let mut waited = Duration::ZERO;
        let mut checks: u32 = 0;
        loop {
            if self.handle.wakeup().take() || self.mpi_ready() {
                self.idle_park = FIRST_IDLE_PARK;
                // Within a few checks of now: progress is dated loosely.
                self.last_progress = start + waited;
                return;
            }
            checks = checks.wrapping_add(1);
            let yielding = self.workers_running || waited >= self.config.busy_spin;
            if yielding || checks % CHECKS_PER_CLOCK_READING == 0 {
                waited = start.elapsed();
            }
            if waited >= spin {
                break;
            }
            // A short wait is answered sooner without yielding (a yield is a
            // system call, and the look after it comes later), and without
            // a pause instruction between checks: each would add to the
            // time from a message's arrival to the check that finds it,
            // and the spin is short (`busy_spin`). Past that,
            // or while a worker of this runtime has a job, yield rather than
            // spin: the runtime's worker threads (and, when ranks share
            // cores, the other ranks) may need this CPU to produce what is
            // being waited for.
            if self.workers_running || waited >= self.config.busy_spin {
                std::thread::yield_now();
            }
        }
        // What the spin's looks found is stale once the owner parks.
        self.posted.forget_looks();
        let park = self.idle_park.min(timeout.saturating_sub(start.elapsed()));
        self.idle_park = (self.idle_park * 2).min(self.config.max_idle_park.max(FIRST_IDLE_PARK));
        if !park.is_zero() {
            self.handle.wakeup().wait(Duration::ZERO, park);
        }
    }

    fn set_workers_running(&mut self, running: bool) {
        self.workers_running = running;
    }

    fn handle(&self) -> &TransportHandle {
        &self.handle
    }

    /// Closes the handle to new frames; the frames already queued are still
    /// sent, then the next poll that finds the handle empty posts a goodbye
    /// on each lane to every peer not down, announcing the frames posted to
    /// it on that lane. Receiving goes on. Idempotent.
    fn begin_shutdown(&mut self) {
        self.handle.close();
        if self.phase == Phase::Running {
            self.phase = Phase::Flushing;
        }
    }

    /// True once the goodbyes are posted, every send completed, nothing is
    /// being received, every peer drained (or is down) and that was
    /// reported, and the handle holds nothing.
    fn is_drained(&self) -> bool {
        let handle = self.handle.counts();
        self.phase == Phase::GoodbyeSent
            && self.sends.is_empty()
            && self.receives.len() == 0
            && !self.peers.has_notices()
            && self.peers.undrained() == 0
            && handle.queued_control == 0
            && handle.queued_action == 0
            && handle.in_flight == 0
    }

    /// Counts beyond the handle's (a frame taken from the handle stays
    /// counted there until its send completes): `in_flight_frames` are the
    /// transport's own messages in flight (goodbyes, heartbeats,
    /// announcements of large frames, close markers) plus
    /// the sends abandoned by [`close`](Self::close); `retained_bytes` are
    /// theirs plus the pending receive buffers (leaked ones included).
    fn counts(&self) -> DriverCounts {
        let (internal, internal_bytes) = self.sends.internal();
        DriverCounts {
            in_flight_frames: internal as u64 + self.leaked.sends,
            retained_bytes: internal_bytes + self.receives.bytes() + self.leaked.bytes,
            undrained_peers: self.peers.undrained(),
            frames_received: self.frames_received,
            bytes_received: self.bytes_received,
            // Only the ranks of the job can reach its communicator.
            refusals: Refusals::default(),
        }
    }

    /// Closes the transport without waiting on any peer beyond `deadline`.
    ///
    /// After a clean drain nothing is outstanding and nothing else is
    /// sent; the private communicator is freed if every peer drained (a
    /// peer declared down may still send on it, and MPI would hand that to
    /// the next communicator reusing the context), else leaked. Otherwise the driver
    /// posts its goodbyes (if it had not), gives its sends until `deadline`
    /// to complete, and sends a close marker to every live peer that still
    /// expects something from it (so later calls to this rank fail there at
    /// once); then it forgets every incomplete request and leaks its
    /// buffer (MPI may still use it), releases each abandoned frame's
    /// ticket on the handle, and leaks the communicator (something may
    /// still arrive on it). The frames still queued on the handle are
    /// discarded. If MPI is already finalised, no MPI call is made at all.
    /// Returns what is left; later polls fail with
    /// [`TransportError::Closed`].
    fn close(&mut self, deadline: Instant) -> DriverCounts {
        if self.phase == Phase::Closed {
            return self.counts();
        }
        let clean = self.is_drained();
        self.handle.close();
        let _ = self.handle.discard_queued();
        let live = comm::is_live();
        if live && !clean {
            self.close_unclean(deadline);
        }
        self.abandon(live, deadline);
        // A peer that went down without draining may send again (a stopped
        // rank that wakes up): freeing would let MPI hand its messages to
        // a later communicator that reuses the context.
        let _ = self.comm.release(live && clean && self.peers.all_drained());
        self.phase = Phase::Closed;
        self.counts()
    }
}

impl Drop for MpiDriver {
    fn drop(&mut self) {
        let _ = self.close(Instant::now());
    }
}

impl fmt::Debug for MpiDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MpiDriver")
            .field("rank", &self.me)
            .field("world", &self.world)
            .field("phase", &self.phase)
            .field("session", &self.session)
            .field("pending_receives", &self.receives.len())
            .field("pooled_buffers", &self.buffers.kept())
            .field("counts", &self.counts())
            .field("dropped_from_violators", &self.dropped_from_violators)
            .finish_non_exhaustive()
    }
}
