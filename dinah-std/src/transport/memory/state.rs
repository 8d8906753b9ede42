//! The network's shared state: links, per-rank bookkeeping, the tick, and
//! the operations every driver and the test share (sending with faults,
//! stepping, disconnecting, closing).

use std::collections::VecDeque;

use dinah_core::wire::Channel;
use dinah_core::{Rank, WorldSize};

use super::fault::{Delay, Disconnect, FaultPlan, PartitionMode};
use super::link::{Links, Packet, PacketKind};
use super::mode::SimMode;
use super::rng::SimRng;
use crate::transport::{DownReason, Frame, Outgoing, PeerStatus, TransportHandle};

/// Network-wide statistics of a [`SimNetwork`](super::SimNetwork): what
/// the fault plan did, and what is in transit now. Counts only, never
/// payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimCounts {
    /// The network's tick.
    pub tick: u64,
    /// Frames drivers took from their handles and handed to the network
    /// (not counting goodbyes).
    pub sent: u64,
    /// Goodbye frames handed to the network.
    pub goodbyes: u64,
    /// Frames handed to receivers as `Frame` events (duplicates included).
    pub delivered: u64,
    /// Frames lost to the drop probability.
    pub dropped: u64,
    /// Extra copies injected by the duplicate probability.
    pub duplicated: u64,
    /// Frames that overtook at least one earlier frame.
    pub reordered: u64,
    /// Frames lost crossing a [`PartitionMode::Drop`] partition.
    pub partition_dropped: u64,
    /// Frames held back by a [`PartitionMode::Hold`] partition.
    pub partition_held: u64,
    /// Frames lost when their link was disconnected.
    pub disconnect_dropped: u64,
    /// Frames addressed to a closed endpoint, discarded.
    pub closed_discarded: u64,
    /// Frames in transit or arrived and not yet polled.
    pub in_transit_frames: u64,
    /// Bytes of those frames.
    pub in_transit_bytes: u64,
}

/// What one rank knows of one peer.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PeerState {
    /// Originals sent to the peer, per lane (announced in goodbyes).
    pub(super) sent: [u64; 2],
    /// Originals received from the peer, per lane.
    pub(super) received: [u64; 2],
    /// The peer's goodbye per lane, once it arrived.
    pub(super) goodbye: [Option<u64>; 2],
    /// The peer's end marker per lane, once it arrived.
    pub(super) ended: [bool; 2],
    /// Every announced frame arrived ([`PeerDrained`] queued).
    ///
    /// [`PeerDrained`]: crate::transport::TransportEvent::PeerDrained
    pub(super) drained: bool,
    /// Why the peer is down, once it is.
    pub(super) down: Option<DownReason>,
}

/// Something a driver reports outside the frame flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Notice {
    Up(Rank),
    Down(Rank, DownReason),
    Drained(Rank),
}

/// Where a rank's driver is in its shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shutdown {
    Running,
    Flushing,
    GoodbyeSent,
}

/// One rank's state, owned by the network so that sends, disconnects and
/// closes can update it wherever they happen.
#[derive(Debug)]
pub(super) struct RankState {
    pub(super) handle: Option<TransportHandle>,
    pub(super) rng: SimRng,
    pub(super) notices: VecDeque<Notice>,
    pub(super) peers: Vec<PeerState>,
    /// A frame taken from the handle that could not go yet (its
    /// destination's inbox was full, or no event budget was left to fail
    /// it), per lane. It is sent before anything else of its lane.
    pub(super) stash: [Option<Outgoing>; 2],
    pub(super) shutdown: Shutdown,
    pub(super) closed: bool,
    /// Round-robin start among sources, per lane.
    pub(super) cursor: [usize; 2],
    pub(super) frames_received: u64,
    pub(super) bytes_received: u64,
}

/// The state behind a [`SimNetwork`](super::SimNetwork)'s mutex.
#[derive(Debug)]
pub(super) struct NetState {
    pub(super) world: WorldSize,
    pub(super) mode: SimMode,
    pub(super) plan: FaultPlan,
    pub(super) tick: u64,
    pub(super) links: Links,
    pub(super) ranks: Vec<RankState>,
    /// Disconnects sorted by tick; those before `next_disconnect` happened.
    disconnects: Vec<Disconnect>,
    next_disconnect: usize,
    pub(super) counts: SimCounts,
}

impl NetState {
    /// A network as the validated `plan` starts it (disconnects at tick 0
    /// already applied).
    pub(super) fn new(world: WorldSize, seed: u64, plan: FaultPlan, mode: SimMode) -> Self {
        let n = world.get() as usize;
        let ranks = world
            .ranks()
            .map(|rank| RankState {
                handle: None,
                rng: SimRng::for_stream(seed, rank.get()),
                notices: VecDeque::new(),
                peers: vec![PeerState::default(); n],
                stash: [None, None],
                shutdown: Shutdown::Running,
                closed: false,
                cursor: [0; 2],
                frames_received: 0,
                bytes_received: 0,
            })
            .collect();
        let mut disconnects = plan.disconnects().to_vec();
        // Stable: disconnects at one tick apply in the plan's order.
        disconnects.sort_by_key(Disconnect::at_tick);
        let mut state = Self {
            world,
            mode,
            plan,
            tick: 0,
            links: Links::new(n),
            ranks,
            disconnects,
            next_disconnect: 0,
            counts: SimCounts::default(),
        };
        state.apply_disconnects();
        state
    }

    /// Moves to the next tick: applies the disconnects due and wakes every
    /// rank with a frame now due. Returns the new tick.
    pub(super) fn advance(&mut self) -> u64 {
        self.tick += 1;
        self.apply_disconnects();
        for (dst, rank) in self.ranks.iter().enumerate() {
            if let Some(handle) = &rank.handle {
                if self.links.has_due_for(dst, self.tick) {
                    handle.wakeup().wake();
                }
            }
        }
        self.tick
    }

    /// Applies every disconnect scheduled at or before the current tick.
    pub(super) fn apply_disconnects(&mut self) {
        while let Some(&disconnect) = self.disconnects.get(self.next_disconnect) {
            if disconnect.at_tick() > self.tick {
                break;
            }
            self.next_disconnect += 1;
            match disconnect {
                Disconnect::Rank { rank, .. } => {
                    for peer in self.world.ranks() {
                        self.sever(rank, peer);
                    }
                }
                Disconnect::Pair { a, b, .. } => self.sever(a, b),
            }
        }
    }

    /// Cuts `a` and `b` apart: drops everything between them, marks each
    /// down for the other, and queues the `PeerDown` notices.
    fn sever(&mut self, a: Rank, b: Rank) {
        if a == b || self.ranks[a.index()].peers[b.index()].down == Some(DownReason::Disconnected) {
            return;
        }
        let purged =
            self.links.purge(a.index(), b.index()) + self.links.purge(b.index(), a.index());
        self.counts.disconnect_dropped += purged;
        for (me, peer) in [(a, b), (b, a)] {
            let rank = &mut self.ranks[me.index()];
            let state = &mut rank.peers[peer.index()];
            let already_down = state.down.is_some();
            state.down = Some(DownReason::Disconnected);
            if already_down || rank.closed {
                continue;
            }
            rank.notices
                .push_back(Notice::Down(peer, DownReason::Disconnected));
            if let Some(handle) = &rank.handle {
                handle.set_peer_status(peer, PeerStatus::Down);
                handle.wakeup().wake();
            }
        }
    }

    /// Hands `me`'s endpoint its handle: queues `PeerUp` for every peer not
    /// already down and marks the down ones on the handle.
    ///
    /// There is no hello exchange; the admission capacities are exchanged
    /// here instead: the new handle learns every already-claimed peer's
    /// (before its driver reports any `PeerUp`), and every already-claimed
    /// peer's handle learns `me`'s. A peer claimed later exchanges them
    /// when it is, so until then this handle does not know its capacity
    /// even though its driver reports it up.
    pub(super) fn claim(&mut self, me: Rank, handle: &TransportHandle) {
        let capacity = handle.config().admission_capacity;
        for (peer, other) in self.world.ranks().zip(&self.ranks) {
            if let Some(theirs) = other.handle.as_ref().filter(|_| peer != me) {
                handle.set_peer_admission(peer, theirs.config().admission_capacity);
                theirs.set_peer_admission(me, capacity);
            }
        }
        let rank = &mut self.ranks[me.index()];
        for peer in self.world.ranks().filter(|&peer| peer != me) {
            if rank.peers[peer.index()].down.is_some() {
                handle.set_peer_status(peer, PeerStatus::Down);
            } else {
                rank.notices.push_back(Notice::Up(peer));
            }
        }
        rank.handle = Some(handle.clone());
    }

    /// Has `me`'s endpoint been handed out (it may be closed since)?
    pub(super) fn is_claimed(&self, me: Rank) -> bool {
        self.ranks[me.index()].handle.is_some()
    }

    /// Hands one frame from `src` to the network for `dst` on `lane`,
    /// applying the plan. The caller checked that `dst` is not down for
    /// `src`.
    ///
    /// The generator of `src` is drawn from in a fixed order: drop, then
    /// duplicate, then per copy its delay and reordering (each only when
    /// that fault is on), so a run replays from its seed.
    pub(super) fn send(
        &mut self,
        src: Rank,
        dst: Rank,
        lane: Channel,
        frame: Frame,
        goodbye: Option<u64>,
    ) {
        let (s, d) = (src.index(), dst.index());
        if goodbye.is_some() {
            self.counts.goodbyes += 1;
        } else {
            self.counts.sent += 1;
        }
        if self.ranks[d].closed {
            self.counts.closed_discarded += 1;
            return;
        }
        let mut hold_until = 0;
        for partition in self.plan.partitions() {
            if partition.blocks(src, dst, self.tick) {
                match partition.mode() {
                    PartitionMode::Drop => {
                        self.counts.partition_dropped += 1;
                        return;
                    }
                    PartitionMode::Hold => hold_until = hold_until.max(partition.ticks().end),
                }
            }
        }
        let faults = *self.plan.lane(lane);
        let rng = &mut self.ranks[s].rng;
        if rng.chance(faults.drop_probability) {
            self.counts.dropped += 1;
            return;
        }
        if hold_until > 0 {
            self.counts.partition_held += 1;
        }
        let copies = if rng.chance(faults.duplicate_probability) {
            2
        } else {
            1
        };
        let mut frame = Some(frame);
        for copy in 0..copies {
            let rng = &mut self.ranks[s].rng;
            let delay = match faults.delay {
                Delay::None => 0,
                Delay::Fixed(ticks) => ticks,
                Delay::Uniform { min, max } => rng.in_range(min, max),
            };
            let window = u64::from(faults.reorder_window);
            let overtake = usize::try_from(rng.in_range(0, window)).unwrap_or(usize::MAX);
            let kind = match (goodbye, copy) {
                (Some(frames_sent), _) => PacketKind::Goodbye { frames_sent },
                (None, 0) => PacketKind::Original,
                (None, _) => PacketKind::Duplicate,
            };
            let copied = if copy + 1 == copies {
                frame.take()
            } else {
                frame.clone()
            };
            let due = self.tick.saturating_add(delay).max(hold_until);
            let packet = Packet {
                due,
                frame: copied.unwrap_or_default(),
                kind,
            };
            if self.links.push(s, d, lane, packet, overtake) > 0 {
                self.counts.reordered += 1;
            }
            if copy > 0 {
                self.counts.duplicated += 1;
            }
            if due <= self.tick {
                self.wake(dst);
            }
        }
    }

    /// Wakes `rank`'s owner, if its endpoint is claimed.
    pub(super) fn wake(&self, rank: Rank) {
        if let Some(handle) = &self.ranks[rank.index()].handle {
            handle.wakeup().wake();
        }
    }

    /// Is the next frame for `dst` on `lane` over its inbox capacity?
    pub(super) fn saturated(&self, dst: Rank, lane: Channel) -> bool {
        self.plan.lane(lane).inbox_capacity.is_some_and(|capacity| {
            self.links.to(dst.index()).frames[lane.index()] >= capacity as u64
        })
    }

    /// Closes `me`'s endpoint: refuses and discards what its handle holds,
    /// discards the frames addressed to it, and queues an end marker on
    /// each lane to every peer still connected (after the frames already
    /// in transit, which are still delivered).
    pub(super) fn close(&mut self, me: Rank) {
        let rank = &mut self.ranks[me.index()];
        if rank.closed {
            return;
        }
        rank.closed = true;
        if let Some(handle) = &rank.handle {
            handle.close();
            handle.discard_queued();
            for outgoing in rank.stash.iter_mut().filter_map(Option::take) {
                handle.complete_send(outgoing.frame.len(), false);
            }
        }
        for src in 0..self.ranks.len() {
            self.counts.closed_discarded += self.links.purge(src, me.index());
        }
        for peer in self.world.ranks().filter(|&peer| peer != me) {
            if self.ranks[me.index()].peers[peer.index()].down.is_some()
                || self.ranks[peer.index()].closed
            {
                continue;
            }
            for lane in Channel::ALL {
                let end = Packet {
                    due: self.tick,
                    frame: Frame::default(),
                    kind: PacketKind::End,
                };
                self.links.push(me.index(), peer.index(), lane, end, 0);
            }
            self.wake(peer);
        }
    }

    /// The network-wide statistics now.
    pub(super) fn counts(&self) -> SimCounts {
        let (frames, bytes) = self.links.total();
        SimCounts {
            tick: self.tick,
            in_transit_frames: frames,
            in_transit_bytes: bytes,
            ..self.counts
        }
    }
}
