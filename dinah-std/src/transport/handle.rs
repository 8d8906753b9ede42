//! The cloneable, thread-safe side of a transport.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;
use dinah_core::wire::Channel;
use dinah_core::{Rank, RuntimeLimits, WorldSize};

use super::Frame;
use super::error::{DownReason, SendErrorKind, TrySendError};
use super::wakeup::Wakeup;

/// What a runtime tells its transport about its side: the handle's sizes
/// and the admission capacity to advertise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandleConfig {
    /// Frames queued on the action lane (requests, results, errors).
    pub action_queue: usize,
    /// Frames queued on the control lane (cancellations, goodbyes). A
    /// separate reserve, so cancellations are never starved by action
    /// traffic.
    pub control_queue: usize,
    /// Bytes of frames accepted and not yet completed by the transport.
    pub retained_bytes: u64,
    /// The admission capacity this rank advertises to its peers in the
    /// hello (see [`Hello::admission_capacity`]): how many action jobs
    /// each of its worker domains admits at once, queued or running. 0
    /// advertises none.
    ///
    /// [`Hello::admission_capacity`]: dinah_core::wire::Hello::admission_capacity
    pub admission_capacity: u32,
}

impl HandleConfig {
    /// What a runtime with `limits` needs: `max_send_tickets` action
    /// frames, `max_cancellations` control frames, `max_retained_bytes`,
    /// and as the admission capacity the jobs each domain can take
    /// without a refusal: `max_action_queue`, and no more than the dedup
    /// table holds running requests for every domain at once
    /// (`max_dedup_entries / max_domains`, at least one). A domain admits
    /// `max_action_queue` jobs plus one per worker, so the queue alone is
    /// a lower bound whatever the worker count.
    pub fn from_limits(limits: &RuntimeLimits) -> Self {
        let per_domain = limits.max_dedup_entries / u32::from(limits.max_domains.max(1));
        Self {
            action_queue: limits.max_send_tickets as usize,
            control_queue: limits.max_cancellations as usize,
            retained_bytes: limits.max_retained_bytes,
            admission_capacity: limits.max_action_queue.min(per_domain).max(1),
        }
    }
}

impl Default for HandleConfig {
    fn default() -> Self {
        Self::from_limits(&RuntimeLimits::DEFAULT)
    }
}

/// A frame waiting to be sent.
#[derive(Debug)]
pub struct Outgoing {
    /// Where it goes.
    pub to: Rank,
    /// The encoded frame (header, segment table, segments).
    pub frame: Frame,
}

/// What the transport knows of a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PeerStatus {
    /// Not connected yet.
    Connecting,
    /// Connected and handshaken.
    Up,
    /// Said goodbye: sends nothing more, but may still be sent to until it
    /// closes.
    Leaving,
    /// Gone: everything waiting on it has failed.
    Down,
}

impl PeerStatus {
    const fn to_u8(self) -> u8 {
        match self {
            Self::Connecting => 0,
            Self::Up => 1,
            Self::Leaving => 2,
            Self::Down => 3,
        }
    }

    const fn from_u8(value: u8) -> Self {
        match value {
            0 => Self::Connecting,
            1 => Self::Up,
            2 => Self::Leaving,
            _ => Self::Down,
        }
    }
}

/// Counts of what a handle holds right now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandleCounts {
    /// Frames queued on the control lane.
    pub queued_control: usize,
    /// Frames queued on the action lane.
    pub queued_action: usize,
    /// Frames the driver took and has not completed (send tickets).
    pub in_flight: u64,
    /// Bytes of queued and in-flight frames.
    pub retained_bytes: u64,
    /// Frames completed since the start.
    pub frames_sent: u64,
    /// Bytes completed since the start.
    pub bytes_sent: u64,
}

/// The cloneable, `Send + Sync` side of a transport: bounded per-lane send
/// queues with byte budgets, peer status, what each peer advertised as its
/// admission capacity, and the owner's [`Wakeup`].
///
/// Runtime clients on any thread enqueue frames here with
/// [`try_send`](Self::try_send); the transport's driver (or its I/O
/// threads) takes them with [`pop_outgoing`](Self::pop_outgoing) and reports
/// each one finished with [`complete_send`](Self::complete_send). Nothing
/// grows: a full lane or an exhausted byte budget hands the frame back.
///
/// # Memory ordering
///
/// The byte budget and counters are statistics and admission bounds
/// updated with `AcqRel` compare-exchange loops (admission must not
/// overshoot) and read `Acquire`. Peer status and the closed flag are
/// written `Release` by the driver and read `Acquire`, so a client that
/// sees `Down` also sees everything the driver did before marking it.
/// Peer admission capacities are likewise stored `Release` and loaded
/// `Acquire`; a transport records one before it reports the peer `Up`, so
/// a client that sees `Up` also sees the capacity. Frames themselves are handed over through `ArrayQueue`, which
/// synchronises its contents.
#[derive(Clone)]
pub struct TransportHandle {
    shared: Arc<HandleState>,
}

/// What every clone of a handle shares.
struct HandleState {
    rank: Rank,
    world: WorldSize,
    config: HandleConfig,
    control: ArrayQueue<Outgoing>,
    action: ArrayQueue<Outgoing>,
    retained_bytes: AtomicU64,
    in_flight: AtomicU64,
    frames_sent: AtomicU64,
    bytes_sent: AtomicU64,
    peers: Box<[AtomicU8]>,
    down_reasons: Box<[AtomicU8]>,
    /// What each peer advertised as its admission capacity (0: not known).
    admissions: Box<[AtomicU32]>,
    closed: AtomicBool,
    wakeup: Wakeup,
}

impl TransportHandle {
    /// A handle for `rank` in `world`, every peer `Connecting` except
    /// `rank` itself, which is `Up`.
    ///
    /// # Panics
    ///
    /// If a queue size in `config` is zero (validated `RuntimeLimits`
    /// never produce one).
    pub fn new(rank: Rank, world: WorldSize, config: HandleConfig) -> Self {
        assert!(
            config.action_queue > 0 && config.control_queue > 0,
            "handle queues must be non-empty"
        );
        let peers = world
            .ranks()
            .map(|peer| {
                let status = if peer == rank {
                    PeerStatus::Up
                } else {
                    PeerStatus::Connecting
                };
                AtomicU8::new(status.to_u8())
            })
            .collect();
        Self {
            shared: Arc::new(HandleState {
                rank,
                world,
                config,
                control: ArrayQueue::new(config.control_queue),
                action: ArrayQueue::new(config.action_queue),
                retained_bytes: AtomicU64::new(0),
                in_flight: AtomicU64::new(0),
                frames_sent: AtomicU64::new(0),
                bytes_sent: AtomicU64::new(0),
                down_reasons: world.ranks().map(|_| AtomicU8::new(0)).collect(),
                admissions: world.ranks().map(|_| AtomicU32::new(0)).collect(),
                peers,
                closed: AtomicBool::new(false),
                wakeup: Wakeup::new(),
            }),
        }
    }

    /// This process's rank.
    pub fn rank(&self) -> Rank {
        self.shared.rank
    }

    /// The number of ranks.
    pub fn world(&self) -> WorldSize {
        self.shared.world
    }

    /// The sizes this handle was built with.
    pub fn config(&self) -> HandleConfig {
        self.shared.config
    }

    /// The owner thread's wakeup.
    pub fn wakeup(&self) -> &Wakeup {
        &self.shared.wakeup
    }

    /// Queues `frame` for `to` on `channel` and wakes the owner.
    ///
    /// # Errors
    ///
    /// The frame comes back in a [`TrySendError`] if the lane is full, the
    /// byte budget would be exceeded (action lane only: control frames are
    /// bounded by their own queue), `to` is not in the world or is down, or
    /// the handle is closed.
    pub fn try_send(
        &self,
        to: Rank,
        channel: Channel,
        frame: impl Into<Frame>,
    ) -> Result<(), TrySendError> {
        self.queue(to, channel, frame.into(), true)
    }

    /// As [`try_send`](Self::try_send), without waking the owner: for the
    /// owner thread itself (the runtime's responses and cancellations),
    /// which polls the driver before it next waits, and for a client that
    /// queues a request under a lock and wakes the owner once it let go.
    /// Waking itself would cost the owner a read-modify-write of a line
    /// that workers and other senders also write, and make its next wait
    /// return at once for nothing.
    pub(crate) fn try_send_quiet(
        &self,
        to: Rank,
        channel: Channel,
        frame: impl Into<Frame>,
    ) -> Result<(), TrySendError> {
        self.queue(to, channel, frame.into(), false)
    }

    fn queue(
        &self,
        to: Rank,
        channel: Channel,
        frame: Frame,
        wake: bool,
    ) -> Result<(), TrySendError> {
        let shared = &*self.shared;
        if shared.closed.load(Ordering::Acquire) {
            return Err(TrySendError::new(SendErrorKind::Closed, frame));
        }
        if !shared.world.contains(to) {
            return Err(TrySendError::new(SendErrorKind::NoSuchRank { to }, frame));
        }
        if self.peer_status(to) == PeerStatus::Down {
            return Err(TrySendError::new(SendErrorKind::PeerDown { to }, frame));
        }
        let bytes = frame.len() as u64;
        let budgeted = channel == Channel::Action;
        if budgeted && !self.reserve_bytes(bytes) {
            let budget = shared.config.retained_bytes;
            return Err(TrySendError::new(
                SendErrorKind::RetainedBytes { budget },
                frame,
            ));
        }
        if !budgeted {
            shared.retained_bytes.fetch_add(bytes, Ordering::AcqRel);
        }
        match self.lane(channel).push(Outgoing { to, frame }) {
            Ok(()) => {
                if wake {
                    shared.wakeup.wake();
                }
                Ok(())
            }
            Err(Outgoing { frame, .. }) => {
                shared.retained_bytes.fetch_sub(bytes, Ordering::AcqRel);
                Err(TrySendError::new(
                    SendErrorKind::QueueFull { channel },
                    frame,
                ))
            }
        }
    }

    fn reserve_bytes(&self, bytes: u64) -> bool {
        let shared = &*self.shared;
        let mut current = shared.retained_bytes.load(Ordering::Acquire);
        loop {
            let Some(next) = current.checked_add(bytes) else {
                return false;
            };
            if next > shared.config.retained_bytes && current != 0 {
                // An empty budget admits one frame of any size, so a frame
                // larger than the budget is not refused forever.
                return false;
            }
            match shared.retained_bytes.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    fn lane(&self, channel: Channel) -> &ArrayQueue<Outgoing> {
        match channel {
            Channel::Control => &self.shared.control,
            Channel::Action => &self.shared.action,
        }
    }

    /// Driver side: is any frame queued on either lane? (Outdated as soon
    /// as a sender queues one.)
    pub fn has_queued(&self) -> bool {
        !self.shared.control.is_empty() || !self.shared.action.is_empty()
    }

    /// Driver side: takes the oldest queued frame of `channel`. It stays
    /// counted (in flight, its bytes retained) until
    /// [`complete_send`](Self::complete_send).
    pub fn pop_outgoing(&self, channel: Channel) -> Option<Outgoing> {
        let lane = self.lane(channel);
        // A driver pops until a lane is empty, so most rounds end on an
        // empty lane: two loads see it, where `ArrayQueue::pop` would
        // also issue a full fence on that path.
        if lane.is_empty() {
            return None;
        }
        let outgoing = lane.pop()?;
        self.shared.in_flight.fetch_add(1, Ordering::AcqRel);
        Some(outgoing)
    }

    /// Driver side: a frame of `bytes` taken with `pop_outgoing` is
    /// finished (sent, or failed and reported). Releases its ticket and
    /// bytes; `sent` says whether it counts as sent.
    pub fn complete_send(&self, bytes: usize, sent: bool) {
        self.complete_sends(1, bytes, sent);
    }

    /// Driver side: `frames` frames taken with `pop_outgoing`, of `bytes`
    /// bytes together, are finished at once (a transport that sent them
    /// in one message). The same as that many
    /// [`complete_send`](Self::complete_send) calls.
    pub fn complete_sends(&self, frames: usize, bytes: usize, sent: bool) {
        let shared = &*self.shared;
        shared.in_flight.fetch_sub(frames as u64, Ordering::AcqRel);
        shared
            .retained_bytes
            .fetch_sub(bytes as u64, Ordering::AcqRel);
        if sent {
            shared
                .frames_sent
                .fetch_add(frames as u64, Ordering::Relaxed);
            shared.bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    /// What the transport knows of `peer` (`Down` for a rank outside the
    /// world).
    pub fn peer_status(&self, peer: Rank) -> PeerStatus {
        match self.shared.peers.get(peer.index()) {
            Some(status) => PeerStatus::from_u8(status.load(Ordering::Acquire)),
            None => PeerStatus::Down,
        }
    }

    /// Driver side: records `status` for `peer`. `Down` is final: later
    /// updates are ignored. Returns the previous status.
    pub fn set_peer_status(&self, peer: Rank, status: PeerStatus) -> PeerStatus {
        let Some(slot) = self.shared.peers.get(peer.index()) else {
            return PeerStatus::Down;
        };
        let mut current = slot.load(Ordering::Acquire);
        loop {
            if PeerStatus::from_u8(current) == PeerStatus::Down {
                return PeerStatus::Down;
            }
            match slot.compare_exchange_weak(
                current,
                status.to_u8(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(previous) => return PeerStatus::from_u8(previous),
                Err(actual) => current = actual,
            }
        }
    }

    /// Driver side: records the admission capacity `peer` advertised in
    /// its hello (0: none). A transport calls it before it reports the
    /// peer `Up` (with [`set_peer_status`](Self::set_peer_status)); a rank
    /// outside the world is ignored.
    pub fn set_peer_admission(&self, peer: Rank, capacity: u32) {
        if let Some(slot) = self.shared.admissions.get(peer.index()) {
            slot.store(capacity, Ordering::Release);
        }
    }

    /// The admission capacity `peer` advertised: how many action jobs each
    /// of its worker domains admits at once, queued or running. `None` if
    /// not known (no hello from it yet, it advertised none, or it is
    /// outside the world). For this rank itself, the capacity it
    /// advertises ([`HandleConfig::admission_capacity`]).
    pub fn peer_admission(&self, peer: Rank) -> Option<NonZeroU32> {
        if peer == self.shared.rank {
            return NonZeroU32::new(self.shared.config.admission_capacity);
        }
        let slot = self.shared.admissions.get(peer.index())?;
        NonZeroU32::new(slot.load(Ordering::Acquire))
    }

    /// Driver side: marks `peer` down for `reason` (final; the first
    /// reason recorded is kept). Returns whether this call marked it (it
    /// was not down before).
    pub fn mark_down(&self, peer: Rank, reason: DownReason) -> bool {
        let Some(slot) = self.shared.down_reasons.get(peer.index()) else {
            return false;
        };
        let _ = slot.compare_exchange(0, reason_code(reason), Ordering::AcqRel, Ordering::Acquire);
        self.set_peer_status(peer, PeerStatus::Down) != PeerStatus::Down
    }

    /// Why `peer` is down, if it is.
    pub fn down_reason(&self, peer: Rank) -> Option<DownReason> {
        if self.peer_status(peer) != PeerStatus::Down {
            return None;
        }
        let code = self
            .shared
            .down_reasons
            .get(peer.index())
            .map_or(0, |slot| slot.load(Ordering::Acquire));
        Some(reason_from_code(code))
    }

    /// Refuses all further sends. Queued frames stay for the driver to
    /// flush or discard.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.wakeup.wake();
    }

    /// Is the handle closed?
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Driver side: removes every queued frame of both lanes, releasing
    /// their bytes, and returns how many there were (for a shutdown that
    /// gave up on them).
    pub fn discard_queued(&self) -> usize {
        let mut count = 0;
        for channel in [Channel::Control, Channel::Action] {
            while let Some(outgoing) = self.lane(channel).pop() {
                self.shared
                    .retained_bytes
                    .fetch_sub(outgoing.frame.len() as u64, Ordering::AcqRel);
                count += 1;
            }
        }
        count
    }

    /// What the handle holds right now.
    pub fn counts(&self) -> HandleCounts {
        let shared = &*self.shared;
        HandleCounts {
            queued_control: shared.control.len(),
            queued_action: shared.action.len(),
            in_flight: shared.in_flight.load(Ordering::Acquire),
            retained_bytes: shared.retained_bytes.load(Ordering::Acquire),
            frames_sent: shared.frames_sent.load(Ordering::Relaxed),
            bytes_sent: shared.bytes_sent.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for TransportHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransportHandle")
            .field("rank", &self.shared.rank)
            .field("world", &self.shared.world)
            .field("closed", &self.is_closed())
            .field("counts", &self.counts())
            .finish()
    }
}

const DOWN_REASONS: [DownReason; 8] = [
    DownReason::EndOfStream,
    DownReason::Reset,
    DownReason::Timeout,
    DownReason::ProtocolViolation,
    DownReason::HandshakeFailed,
    DownReason::Disconnected,
    DownReason::LocalClose,
    DownReason::Silent,
];

fn reason_code(reason: DownReason) -> u8 {
    DOWN_REASONS
        .iter()
        .position(|r| *r == reason)
        .map_or(u8::MAX, |i| i as u8 + 1)
}

fn reason_from_code(code: u8) -> DownReason {
    // A peer marked down through `set_peer_status` has no recorded reason:
    // report it as a local close.
    code.checked_sub(1)
        .and_then(|i| DOWN_REASONS.get(usize::from(i)).copied())
        .unwrap_or(DownReason::LocalClose)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(world: u32, config: HandleConfig) -> TransportHandle {
        let world = WorldSize::new(world).unwrap();
        TransportHandle::new(Rank::ZERO, world, config)
    }

    fn small() -> HandleConfig {
        HandleConfig {
            action_queue: 2,
            control_queue: 1,
            retained_bytes: 100,
            admission_capacity: 5,
        }
    }

    #[test]
    fn a_full_lane_hands_the_frame_back() {
        let h = handle(2, small());
        let peer = Rank::new(1, h.world()).unwrap();
        h.try_send(peer, Channel::Action, vec![1]).unwrap();
        h.try_send(peer, Channel::Action, vec![2]).unwrap();
        let err = h.try_send(peer, Channel::Action, vec![3]).unwrap_err();
        assert_eq!(
            err.kind(),
            SendErrorKind::QueueFull {
                channel: Channel::Action
            }
        );
        assert_eq!(err.into_inner(), Frame::whole(vec![3]));
        // The control lane has its own reserve.
        h.try_send(peer, Channel::Control, vec![9]).unwrap();
        assert_eq!(h.counts().queued_action, 2);
        assert_eq!(h.counts().retained_bytes, 3);
    }

    #[test]
    fn the_byte_budget_bounds_action_frames_and_is_released() {
        let h = handle(2, small());
        let peer = Rank::new(1, h.world()).unwrap();
        h.try_send(peer, Channel::Action, vec![0; 60]).unwrap();
        let err = h.try_send(peer, Channel::Action, vec![0; 60]).unwrap_err();
        assert_eq!(err.kind(), SendErrorKind::RetainedBytes { budget: 100 });
        let out = h.pop_outgoing(Channel::Action).unwrap();
        assert_eq!(h.counts().in_flight, 1);
        h.complete_send(out.frame.len(), true);
        assert_eq!(
            h.counts(),
            HandleCounts {
                frames_sent: 1,
                bytes_sent: 60,
                ..HandleCounts::default()
            }
        );
        h.try_send(peer, Channel::Action, vec![0; 60]).unwrap();
    }

    #[test]
    fn frames_finished_together_release_what_they_took_one_by_one() {
        let h = handle(2, small());
        let peer = Rank::new(1, h.world()).unwrap();
        for len in [10, 20] {
            h.try_send(peer, Channel::Action, vec![0; len]).unwrap();
        }
        h.try_send(peer, Channel::Control, vec![0; 5]).unwrap();
        let taken = [
            h.pop_outgoing(Channel::Action).unwrap(),
            h.pop_outgoing(Channel::Action).unwrap(),
        ];
        assert_eq!(h.counts().in_flight, 2);
        h.complete_sends(2, taken.iter().map(|out| out.frame.len()).sum(), true);
        let out = h.pop_outgoing(Channel::Control).unwrap();
        h.complete_sends(1, out.frame.len(), false);
        assert_eq!(
            h.counts(),
            HandleCounts {
                frames_sent: 2,
                bytes_sent: 30,
                ..HandleCounts::default()
            }
        );
    }

    #[test]
    fn an_oversized_frame_passes_an_empty_budget() {
        let h = handle(2, small());
        let peer = Rank::new(1, h.world()).unwrap();
        h.try_send(peer, Channel::Action, vec![0; 500]).unwrap();
        assert!(h.try_send(peer, Channel::Action, vec![0; 1]).is_err());
    }

    #[test]
    fn down_peers_and_closed_handles_refuse() {
        let h = handle(2, small());
        let peer = Rank::new(1, h.world()).unwrap();
        assert_eq!(h.peer_status(peer), PeerStatus::Connecting);
        assert_eq!(h.peer_status(Rank::ZERO), PeerStatus::Up);
        assert_eq!(h.down_reason(peer), None);
        assert!(h.mark_down(peer, DownReason::Reset));
        assert!(!h.mark_down(peer, DownReason::Timeout));
        assert_eq!(h.down_reason(peer), Some(DownReason::Reset));
        assert_eq!(h.set_peer_status(peer, PeerStatus::Up), PeerStatus::Down);
        assert_eq!(
            h.try_send(peer, Channel::Action, vec![1])
                .unwrap_err()
                .kind(),
            SendErrorKind::PeerDown { to: peer }
        );
        let other_world = WorldSize::new(4).unwrap();
        let stranger = Rank::new(3, other_world).unwrap();
        assert_eq!(
            h.try_send(stranger, Channel::Action, vec![1])
                .unwrap_err()
                .kind(),
            SendErrorKind::NoSuchRank { to: stranger }
        );
        h.close();
        assert_eq!(
            h.try_send(Rank::ZERO, Channel::Control, vec![1])
                .unwrap_err()
                .kind(),
            SendErrorKind::Closed
        );
    }

    #[test]
    fn discarding_releases_everything() {
        let h = handle(2, small());
        let peer = Rank::new(1, h.world()).unwrap();
        h.try_send(peer, Channel::Action, vec![0; 10]).unwrap();
        h.try_send(peer, Channel::Control, vec![0; 5]).unwrap();
        assert_eq!(h.discard_queued(), 2);
        assert_eq!(h.counts(), HandleCounts::default());
    }

    #[test]
    fn peer_admissions_are_unknown_until_recorded() {
        let h = handle(3, small());
        let (one, two) = (
            Rank::new(1, h.world()).unwrap(),
            Rank::new(2, h.world()).unwrap(),
        );
        // This rank's own is what it advertises.
        assert_eq!(h.peer_admission(Rank::ZERO), NonZeroU32::new(5));
        assert_eq!(h.peer_admission(one), None);
        h.set_peer_admission(one, 7);
        h.set_peer_admission(two, 0);
        assert_eq!(h.peer_admission(one), NonZeroU32::new(7));
        assert_eq!(h.peer_admission(two), None);
        // The latest hello wins; every clone sees it.
        h.set_peer_admission(one, 9);
        assert_eq!(h.clone().peer_admission(one), NonZeroU32::new(9));
        // Recording this rank's own changes nothing it reports.
        h.set_peer_admission(Rank::ZERO, 1);
        assert_eq!(h.peer_admission(Rank::ZERO), NonZeroU32::new(5));
        // Outside the world: ignored, never known.
        let stranger = Rank::new(3, WorldSize::new(4).unwrap()).unwrap();
        h.set_peer_admission(stranger, 4);
        assert_eq!(h.peer_admission(stranger), None);
        // A handle that advertises nothing reports nothing for itself.
        let quiet = handle(
            2,
            HandleConfig {
                admission_capacity: 0,
                ..small()
            },
        );
        assert_eq!(quiet.peer_admission(Rank::ZERO), None);
    }

    #[test]
    fn the_config_from_limits_advertises_the_action_queue() {
        let mut limits = RuntimeLimits::DEFAULT;
        limits.max_action_queue = 17;
        let config = HandleConfig::from_limits(&limits);
        assert_eq!(config.admission_capacity, 17);
        assert_eq!(
            HandleConfig::default().admission_capacity,
            RuntimeLimits::DEFAULT.max_action_queue
        );
        let h = handle(2, config);
        assert_eq!(h.peer_admission(Rank::ZERO), NonZeroU32::new(17));
    }

    #[test]
    fn the_advertised_capacity_fits_the_dedup_table_for_every_domain() {
        let mut limits = RuntimeLimits::DEFAULT;
        limits.max_action_queue = 64;
        limits.max_dedup_entries = 40;
        limits.max_domains = 4;
        assert_eq!(HandleConfig::from_limits(&limits).admission_capacity, 10);
        limits.max_dedup_entries = 3;
        assert_eq!(HandleConfig::from_limits(&limits).admission_capacity, 1);
    }
}
