//! The owner-thread driver: every MPI call the transport makes after
//! bootstrap happens in here, on the thread that owns the runtime.

use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use dinah_core::wire::Channel;
use dinah_core::{ProtocolLimits, Rank, WorldSize};
use dinah_std::transport::{
    DownReason, DriverCounts, Liveness, Outgoing, PeerStatus, Refusals, TransportDriver,
    TransportError, TransportEvent, TransportHandle,
};
use mpi::traits::{Communicator, Source};

use crate::coalesce::{Batch, Coalescer};
use crate::comm::{self, PrivateComm};
use crate::config::MpiConfig;
use crate::farewell;
use crate::large;
use crate::peers::{Notice, Peers};
use crate::pool::BufferPool;
use crate::posted::{Posted, Taken};
use crate::receive::{Probe, Receives};
use crate::send::{SendKind, Sends};
use crate::tags::Stream;

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

/// How long requests in flight keep the idle wait busy (checking and
/// yielding instead of parking) without any of them completing. A large
/// message completes well within it; a send to a rank that stopped
/// receiving never does, and then the wait parks as usual.
const BUSY_WHILE_STALLED: Duration = Duration::from_millis(10);

/// How long closing waits, at least, for its cancelled receives to
/// complete: cancelling a receive no message matched completes at once,
/// so this only matters if MPI is slow to say so.
const CANCEL_GRACE: Duration = Duration::from_millis(100);

/// Posts the frames of `batch` to `to` as one message on `stream`; a
/// message too large for a posted receive goes on the lane's large tag,
/// announced on `stream` (see `large.rs`).
fn post_batch(
    sends: &mut Sends,
    comm: &PrivateComm,
    to: Rank,
    stream: Stream,
    channel: Channel,
    batch: Batch,
) {
    let stream = if large::is_large(&batch.bytes) {
        let announcement = large::announcement(batch.bytes.len());
        sends.post(comm.get(), to, stream, announcement, SendKind::Internal);
        stream.large()
    } else {
        stream
    };
    sends.post(
        comm.get(),
        to,
        stream,
        batch.bytes,
        SendKind::Frames {
            channel,
            frames: batch.frames,
            bytes: batch.frame_bytes,
        },
    );
}

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
/// queue holds; during a
/// shutdown, once the handle is empty, post the goodbyes; then receive:
/// on the control tag first, then the action tag, hand out completed
/// messages and match new ones (matched probe plus immediate receive)
/// until the event budget or the pending-receive bound is reached; close
/// markers only once both lanes had nothing left to match (and, while
/// running, only every 16th poll: they are rare and an empty probe costs a
/// round of MPI progress).
///
/// MPI makes progress only inside MPI calls, so the driver cannot wake its
/// owner: [`idle_wait`](TransportDriver::idle_wait) probes while it spins
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
    leaked: Leaked,
    idle_park: Duration,
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
            leaked: Leaked::default(),
            idle_park: FIRST_IDLE_PARK,
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

    /// Takes `channel`'s frames from the handle and posts them, while the
    /// lane's in-flight bound and the event budget allow.
    fn post_lane(&mut self, channel: Channel, out: &mut Out<'_>) -> bool {
        let config = self.handle.config();
        let limit = match channel {
            Channel::Control => config.control_queue,
            Channel::Action => config.action_queue,
        };
        let mut progress = false;
        let stream = Stream::of(channel);
        while !out.full() && self.sends.frames(channel) + self.coalescer.frames() < limit {
            let Some(Outgoing { to, frame }) = self.handle.pop_outgoing(channel) else {
                break;
            };
            progress = true;
            let error = if self.handle.peer_status(to) == PeerStatus::Down || self.peers.is_down(to)
            {
                let reason = self
                    .handle
                    .down_reason(to)
                    .unwrap_or(DownReason::LocalClose);
                Some(TransportError::PeerDown { peer: to, reason })
            } else if i32::try_from(frame.len()).is_err() {
                Some(TransportError::Mpi { code: ERR_COUNT })
            } else {
                None
            };
            if let Some(error) = error {
                self.handle.complete_send(frame.len(), false);
                out.push(TransportEvent::SendFailed {
                    to,
                    channel,
                    frame,
                    error,
                });
                continue;
            }
            self.peers.on_sent(to, channel);
            let Self {
                coalescer,
                sends,
                comm,
                buffers,
                ..
            } = self;
            coalescer.push(to, frame, buffers, |to, batch| {
                post_batch(sends, comm, to, stream, channel, batch);
            });
        }
        let Self {
            coalescer,
            sends,
            comm,
            ..
        } = self;
        coalescer.flush(|to, batch| post_batch(sends, comm, to, stream, channel, batch));
        progress
    }

    /// Posts the queued frames of both lanes, control first.
    fn post_lanes(&mut self, out: &mut Out<'_>) -> bool {
        let control = self.post_lane(Channel::Control, out);
        self.post_lane(Channel::Action, out) || control
    }

    /// Every peer not down.
    fn live_peers(&self) -> Vec<Rank> {
        self.peers
            .others()
            .filter(|&peer| !self.peers.is_down(peer))
            .collect()
    }

    /// Posts a goodbye on both lanes to every peer not down.
    fn post_goodbyes(&mut self) {
        for peer in self.live_peers() {
            for channel in Channel::ALL {
                let bytes = farewell::goodbye(self.me, self.peers.sent(peer, channel));
                self.sends.post(
                    self.comm.get(),
                    peer,
                    Stream::of(channel),
                    bytes,
                    SendKind::Internal,
                );
            }
        }
        self.phase = Phase::GoodbyeSent;
    }

    /// When a liveness check is due: reports the peers heard from for none
    /// of the timeout down, and posts a heartbeat on the control tag to
    /// every other peer (non-blocking sends; none after the goodbyes).
    /// Returns whether it posted or changed anything.
    fn keep_alive(&mut self, now: Instant) -> bool {
        if self.liveness.next_check().is_none_or(|due| now < due) {
            return false;
        }
        let mut silent = std::mem::take(&mut self.silent);
        let beat = self.liveness.check(now, &mut silent);
        let progress = beat || !silent.is_empty();
        for peer in silent.drain(..) {
            trace_event!(
                tracing::Level::WARN,
                rank = self.me.get(),
                peer = peer.get(),
                "dinah-mpi: liveness: nothing from the peer for the whole timeout"
            );
            self.peers.on_silence(peer);
        }
        self.silent = silent;
        if beat && self.phase != Phase::GoodbyeSent {
            for peer in self.live_peers() {
                // Counted like any frame: the goodbye announces them all.
                self.peers.on_sent(peer, Channel::Control);
                self.sends.post(
                    self.comm.get(),
                    peer,
                    Stream::of(Channel::Control),
                    farewell::heartbeat(self.me),
                    SendKind::Internal,
                );
            }
        }
        progress
    }

    /// Receives on both lanes (control first) and then the close markers;
    /// what arrives is heard at `now`.
    fn receive(&mut self, now: Instant, out: &mut Out<'_>) -> bool {
        let mut progress = false;
        let mut exhausted = true;
        for channel in Channel::ALL {
            let stream = Stream::of(channel);
            loop {
                progress |= self.take_frames(channel, now, out) > 0;
                if out.full() || self.receives.len_of(stream) >= self.config.max_pending_receives {
                    exhausted = false;
                    break;
                }
                if !self.take_posted(stream) {
                    break;
                }
                progress = true;
            }
        }
        self.polls = self.polls.wrapping_add(1);
        let close_due = self.phase != Phase::Running || self.polls % CLOSE_PROBE_INTERVAL == 0;
        if exhausted && close_due {
            progress |= self.receive_close_markers();
        }
        progress
    }

    /// Moves the earliest message that arrived in `stream`'s posted
    /// receives into the stream's queue, or starts receiving the large
    /// frame it announces. Returns whether there was one.
    ///
    /// An announced frame longer than the protocol allows (which no dinah
    /// sender makes) is not received: its sender is reported down for a
    /// protocol violation, and nothing is allocated for it.
    fn take_posted(&mut self, stream: Stream) -> bool {
        let Some((from, taken)) =
            self.posted
                .take(self.comm.get(), stream, self.world, &mut self.buffers)
        else {
            return false;
        };
        match taken {
            Taken::Message(bytes) => self.receives.push_received(stream, from, bytes),
            Taken::Announced(len) => match usize::try_from(len) {
                Ok(len) if len <= self.limits.max_frame_bytes as usize => {
                    self.receives.start_large(
                        self.comm.get(),
                        stream,
                        from,
                        len,
                        &mut self.buffers,
                    );
                }
                _ => self.peers.on_violation(from),
            },
        }
        true
    }

    /// Hands out `channel`'s completed messages: goodbyes are absorbed,
    /// frames become events. Returns how many events.
    fn take_frames(&mut self, channel: Channel, now: Instant, out: &mut Out<'_>) -> usize {
        let Self {
            receives,
            peers,
            world,
            limits,
            frames_received,
            bytes_received,
            buffers,
            liveness,
            ..
        } = self;
        let (world, limits) = (*world, *limits);
        let mut absorbed = false;
        let stream = Stream::of(channel);
        let counted = receives.take_ready(stream, true, out.left, buffers, |from, bytes| {
            // Anything received is a sign of life.
            liveness.heard(from, now);
            if farewell::is_heartbeat(&bytes, channel, from, world, limits) {
                peers.on_frame(from, channel);
                absorbed = true;
                return false;
            }
            if let Some(frames_sent) = farewell::parse_goodbye(&bytes, channel, from, world, limits)
            {
                peers.on_goodbye(from, channel, frames_sent);
                absorbed = true;
                return false;
            }
            peers.on_frame(from, channel);
            *frames_received += 1;
            *bytes_received += bytes.len() as u64;
            out.push(TransportEvent::Frame {
                from,
                channel,
                bytes,
            });
            true
        });
        counted + usize::from(absorbed)
    }

    /// Matches and applies the close markers waiting (at most one per peer
    /// and poll, so the work is bounded).
    fn receive_close_markers(&mut self) -> bool {
        let mut progress = false;
        for _ in 0..self.world.get() {
            match self
                .receives
                .probe(self.comm.get(), Stream::Close, &mut self.buffers)
            {
                Probe::Empty => break,
                Probe::Started { .. } => progress = true,
            }
        }
        let Self {
            receives,
            peers,
            sessions,
            buffers,
            ..
        } = self;
        receives.take_ready(Stream::Close, false, usize::MAX, buffers, |from, bytes| {
            // A marker from an earlier transport on a reused communicator
            // context carries another session number: ignored.
            if let Some((session, lost)) = farewell::parse_close_marker(&bytes) {
                if sessions.get(from.index()) == Some(&session) {
                    peers.on_close(from, lost > 0);
                }
            }
            true
        });
        progress
    }

    /// Is there anything for a poll to do? Tests the first posted receive
    /// of each lane, probes the close tag as often as a poll does (see
    /// [`CLOSE_PROBE_INTERVAL`]), and tests the requests in flight
    /// (completing sends is itself progress).
    fn mpi_ready(&mut self) -> bool {
        let comm = self.comm.get();
        self.idle_checks = self.idle_checks.wrapping_add(1);
        let close_due =
            self.phase != Phase::Running || self.idle_checks % CLOSE_PROBE_INTERVAL == 0;
        self.posted.any_ready()
            || (close_due
                && comm
                    .any_process()
                    .immediate_probe_with_tag(Stream::Close.tag())
                    .is_some())
            || self.receives.poll_ready()
            || self.sends.complete(&self.handle, &mut self.buffers) > 0
    }

    /// Gives up on everything MPI still holds (see [`TransportDriver::close`]):
    /// with MPI `live`, the posted receives are cancelled first (given
    /// until `deadline`, and at least [`CANCEL_GRACE`]).
    fn abandon(&mut self, live: bool, deadline: Instant) {
        let sends = self.sends.abandon(&self.handle);
        let (_, receive_bytes) = self.receives.abandon();
        let (_, posted_bytes) = if live {
            self.posted
                .cancel(deadline.max(Instant::now() + CANCEL_GRACE))
        } else {
            self.posted.abandon()
        };
        self.leaked.sends += sends.requests;
        self.leaked.bytes += sends.bytes + receive_bytes + posted_bytes;
    }

    /// Closes without a clean drain: goodbyes (if not sent yet), sends given
    /// until `deadline`, then a close marker to every live peer that still
    /// expects something from this rank.
    fn close_unclean(&mut self, deadline: Instant) {
        if self.phase != Phase::GoodbyeSent {
            self.post_goodbyes();
        }
        loop {
            let _ = self.sends.complete(&self.handle, &mut self.buffers);
            if self.sends.is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::yield_now();
        }
        let peers: Vec<Rank> = self
            .peers
            .others()
            .filter(|&peer| !self.peers.is_down(peer))
            .collect();
        for peer in peers {
            let lost = self.sends.pending_to(peer);
            if self.peers.is_drained(peer) && lost == 0 {
                // It said goodbye and will drain this rank from its goodbyes.
                continue;
            }
            let marker = farewell::close_marker(self.session, lost);
            self.sends.post(
                self.comm.get(),
                peer,
                Stream::Close,
                marker,
                SendKind::Internal,
            );
        }
        let _ = self.sends.complete(&self.handle, &mut self.buffers);
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
        progress |= self.post_lanes(&mut out);
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
    /// sending part of a poll does; receives nothing.
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
        Ok(self.post_lanes(&mut out))
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
    fn idle_wait(&mut self, spin: Duration, timeout: Duration) {
        if self.phase == Phase::Closed || !comm::is_live() {
            self.handle.wakeup().wait(spin, timeout);
            return;
        }
        let start = Instant::now();
        let in_flight = (!self.sends.is_empty() || self.receives.len() > 0)
            && self.last_progress.elapsed() < BUSY_WHILE_STALLED;
        let spin = if in_flight {
            timeout
        } else {
            spin.min(timeout)
        };
        loop {
            if self.handle.wakeup().take() || self.mpi_ready() {
                self.idle_park = FIRST_IDLE_PARK;
                self.last_progress = Instant::now();
                return;
            }
            if start.elapsed() >= spin {
                break;
            }
            // Yield rather than spin: the runtime's worker threads (and, when
            // ranks share cores, the other ranks) may need this CPU to
            // produce what is being waited for.
            std::thread::yield_now();
        }
        let park = self.idle_park.min(timeout.saturating_sub(start.elapsed()));
        self.idle_park = (self.idle_park * 2).min(self.config.max_idle_park.max(FIRST_IDLE_PARK));
        if !park.is_zero() {
            self.handle.wakeup().wait(Duration::ZERO, park);
        }
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
    /// transport's own messages in flight (goodbyes, close markers) plus
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
            .finish_non_exhaustive()
    }
}
