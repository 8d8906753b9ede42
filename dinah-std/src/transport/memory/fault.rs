//! The fault plan: what the simulated network does to frames.

use std::fmt;
use std::ops::Range;

use dinah_core::wire::Channel;
use dinah_core::{Rank, WorldSize};

use super::error::{FaultKind, SimError};
use super::mode::SimMode;

/// How long a lane holds each frame, in network ticks, before its
/// receiver may see it.
///
/// A frame handed to the network at tick `t` with delay `d` is delivered by
/// the receiver's first poll at or after tick `t + d`. Without reordering,
/// a lane stays FIFO: a frame is never delivered before the frames sent
/// before it on its lane, so with a random delay a short one may wait for
/// a long one ahead of it (as on a TCP connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delay {
    /// Delivered at the tick it was sent.
    #[default]
    None,
    /// Every frame is held exactly this many ticks.
    Fixed(u64),
    /// Each frame is held a number of ticks drawn uniformly from
    /// `min..=max`.
    Uniform {
        /// The shortest delay.
        min: u64,
        /// The longest delay.
        max: u64,
    },
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::Fixed(ticks) => write!(f, "{ticks} ticks"),
            Self::Uniform { min, max } => write!(f, "{min}..={max} ticks"),
        }
    }
}

/// The faults of one lane (all off by default). Built through
/// [`FaultPlan`]'s methods; read with [`FaultPlan::lane`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct LaneFaults {
    /// Probability that a frame is lost. A lost frame still counts as sent
    /// (its sender cannot know).
    pub drop_probability: f64,
    /// Probability that a frame that was not lost is delivered twice. The
    /// copy gets its own delay and reordering draw.
    pub duplicate_probability: f64,
    /// How long frames are held.
    pub delay: Delay,
    /// How many earlier frames, not yet taken by the receiver, a frame may
    /// overtake on its lane (drawn uniformly from `0..=window`). An
    /// overtaking frame is delivered no later than the first frame it
    /// overtook, so reordering never delays the overtaken frames. Zero
    /// keeps the lane FIFO.
    pub reorder_window: u32,
    /// The most frames addressed to one rank on this lane that the network
    /// holds (in transit, or arrived and not yet polled). A sender whose
    /// next frame would exceed it keeps that frame and every later frame
    /// of the lane in its handle, so its queue fills and `try_send` reports
    /// back-pressure; nothing is lost. A duplicate may exceed it by one.
    /// `None` is unbounded.
    pub inbox_capacity: Option<usize>,
}

/// A rank or a pair of ranks cut off at a tick.
///
/// At that tick every frame in transit between the cut-off ranks (both
/// directions, both lanes, including frames arrived and not yet polled) is
/// lost; each side's driver reports
/// [`TransportEvent::PeerDown`](crate::transport::TransportEvent::PeerDown)
/// with [`DownReason::Disconnected`](crate::transport::DownReason::Disconnected)
/// for the other; the handles mark each other down, so later `try_send`s
/// fail and frames already queued come back as `SendFailed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disconnect {
    /// `rank` loses every other rank.
    Rank {
        /// The rank cut off.
        rank: Rank,
        /// When.
        at_tick: u64,
    },
    /// `a` and `b` lose each other; both still reach everyone else.
    Pair {
        /// One side.
        a: Rank,
        /// The other side.
        b: Rank,
        /// When.
        at_tick: u64,
    },
}

impl Disconnect {
    /// The tick it happens at.
    pub const fn at_tick(&self) -> u64 {
        match self {
            Self::Rank { at_tick, .. } | Self::Pair { at_tick, .. } => *at_tick,
        }
    }
}

impl fmt::Display for Disconnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rank { rank, at_tick } => write!(f, "disconnect {rank} at tick {at_tick}"),
            Self::Pair { a, b, at_tick } => {
                write!(f, "disconnect {a} from {b} at tick {at_tick}")
            }
        }
    }
}

/// What a partition does to the frames sent across it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionMode {
    /// Frames sent across it are lost (they count as sent).
    Drop,
    /// Frames sent across it are held until the partition ends, then
    /// delivered in order.
    Hold,
}

/// Two sets of ranks that cannot reach each other for a range of ticks.
///
/// It applies to frames **sent** (taken from a handle by its driver) at a
/// tick in `ticks` from one side to the other; frames already in transit
/// when it starts are unaffected, and no peer is reported down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    side_a: Vec<Rank>,
    side_b: Vec<Rank>,
    ticks: Range<u64>,
    mode: PartitionMode,
}

impl Partition {
    /// A partition between `side_a` and `side_b` during `ticks`.
    pub fn new(
        side_a: impl IntoIterator<Item = Rank>,
        side_b: impl IntoIterator<Item = Rank>,
        ticks: Range<u64>,
        mode: PartitionMode,
    ) -> Self {
        Self {
            side_a: side_a.into_iter().collect(),
            side_b: side_b.into_iter().collect(),
            ticks,
            mode,
        }
    }

    /// One side.
    pub fn side_a(&self) -> &[Rank] {
        &self.side_a
    }

    /// The other side.
    pub fn side_b(&self) -> &[Rank] {
        &self.side_b
    }

    /// When it holds: frames sent at these ticks are affected.
    pub fn ticks(&self) -> Range<u64> {
        self.ticks.clone()
    }

    /// What it does to crossing frames.
    pub fn mode(&self) -> PartitionMode {
        self.mode
    }

    /// Does a frame from `from` to `to` sent at `tick` cross it?
    pub fn blocks(&self, from: Rank, to: Rank, tick: u64) -> bool {
        if !self.ticks.contains(&tick) {
            return false;
        }
        let (a_from, b_from) = (self.side_a.contains(&from), self.side_b.contains(&from));
        let (a_to, b_to) = (self.side_a.contains(&to), self.side_b.contains(&to));
        (a_from && b_to) || (b_from && a_to)
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |f: &mut fmt::Formatter<'_>, ranks: &[Rank]| {
            f.write_str("{")?;
            for (index, rank) in ranks.iter().enumerate() {
                if index > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{}", rank.get())?;
            }
            f.write_str("}")
        };
        f.write_str("partition ")?;
        side(f, &self.side_a)?;
        f.write_str("|")?;
        side(f, &self.side_b)?;
        let mode = match self.mode {
            PartitionMode::Drop => "drop",
            PartitionMode::Hold => "hold",
        };
        write!(f, " ticks {}..{} {mode}", self.ticks.start, self.ticks.end)
    }
}

/// What the simulated network does to frames: per-lane drop, duplication,
/// delay, reordering and inbox capacity, plus disconnects and partitions.
/// Everything is off by default; each method turns one fault on.
///
/// A plan is checked against the world and mode when the network is
/// created ([`validate`](Self::validate)). Its [`Display`](fmt::Display)
/// lists every fault, so a failing test can print its network (which shows
/// the seed and plan) and be replayed.
///
/// Goodbyes (the driver's own frames during shutdown) suffer the lane's
/// faults like any frame, except the inbox capacity.
///
/// # Examples
///
/// ```
/// use dinah_core::WorldSize;
/// use dinah_std::transport::Channel;
/// use dinah_std::transport::memory::{Delay, FaultPlan, PartitionMode, Partition};
///
/// let world = WorldSize::new(4)?;
/// let plan = FaultPlan::new()
///     .drop_probability(Channel::Action, 0.01)
///     .delay(Channel::Action, Delay::Uniform { min: 1, max: 5 })
///     .reorder(Channel::Action, 3)
///     .disconnect_rank(world.rank(3)?, 100)
///     .partition(Partition::new([world.rank(0)?], [world.rank(1)?], 10..20, PartitionMode::Hold));
/// assert_eq!(
///     plan.to_string(),
///     "action: drop 0.01, delay 1..=5 ticks, reorder window 3; \
///      disconnect rank 3 at tick 100; partition {0}|{1} ticks 10..20 hold"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultPlan {
    lanes: [LaneFaults; 2],
    disconnects: Vec<Disconnect>,
    partitions: Vec<Partition>,
}

impl FaultPlan {
    /// A plan without faults: every frame is delivered once, in order, at
    /// the tick it is sent.
    pub fn new() -> Self {
        Self::default()
    }

    fn lane_mut(&mut self, channel: Channel) -> &mut LaneFaults {
        &mut self.lanes[channel.index()]
    }

    /// Loses each frame of `channel` with probability `p`.
    pub fn drop_probability(mut self, channel: Channel, p: f64) -> Self {
        self.lane_mut(channel).drop_probability = p;
        self
    }

    /// Delivers each frame of `channel` twice with probability `p`.
    pub fn duplicate_probability(mut self, channel: Channel, p: f64) -> Self {
        self.lane_mut(channel).duplicate_probability = p;
        self
    }

    /// Holds each frame of `channel` for `delay`.
    pub fn delay(mut self, channel: Channel, delay: Delay) -> Self {
        self.lane_mut(channel).delay = delay;
        self
    }

    /// Lets each frame of `channel` overtake up to `window` earlier ones.
    pub fn reorder(mut self, channel: Channel, window: u32) -> Self {
        self.lane_mut(channel).reorder_window = window;
        self
    }

    /// Holds at most `frames` frames per destination on `channel`.
    pub fn inbox_capacity(mut self, channel: Channel, frames: usize) -> Self {
        self.lane_mut(channel).inbox_capacity = Some(frames);
        self
    }

    /// Cuts `rank` off from every other rank at `at_tick`.
    pub fn disconnect_rank(mut self, rank: Rank, at_tick: u64) -> Self {
        self.disconnects.push(Disconnect::Rank { rank, at_tick });
        self
    }

    /// Cuts `a` and `b` off from each other at `at_tick`.
    pub fn disconnect_pair(mut self, a: Rank, b: Rank, at_tick: u64) -> Self {
        self.disconnects.push(Disconnect::Pair { a, b, at_tick });
        self
    }

    /// Adds a partition.
    pub fn partition(mut self, partition: Partition) -> Self {
        self.partitions.push(partition);
        self
    }

    /// The faults of `channel`.
    pub fn lane(&self, channel: Channel) -> &LaneFaults {
        &self.lanes[channel.index()]
    }

    /// The disconnects, in the order they were added.
    pub fn disconnects(&self) -> &[Disconnect] {
        &self.disconnects
    }

    /// The partitions, in the order they were added.
    pub fn partitions(&self) -> &[Partition] {
        &self.partitions
    }

    /// Checks the plan against `world` and `mode`.
    ///
    /// # Errors
    ///
    /// [`SimError::Probability`] for a probability outside `[0, 1]`,
    /// [`SimError::DelayRange`], [`SimError::ZeroInboxCapacity`],
    /// [`SimError::RankOutOfWorld`], [`SimError::SelfDisconnect`],
    /// [`SimError::EmptyPartition`], [`SimError::PartitionOverlap`], or
    /// [`SimError::UnsupportedInThreadedMode`] for a delay or partition in
    /// threaded mode.
    pub fn validate(&self, world: WorldSize, mode: SimMode) -> Result<(), SimError> {
        for channel in Channel::ALL {
            let lane = self.lane(channel);
            for (p, fault) in [
                (lane.drop_probability, FaultKind::Drop),
                (lane.duplicate_probability, FaultKind::Duplicate),
            ] {
                if !(0.0..=1.0).contains(&p) {
                    return Err(SimError::Probability { channel, fault });
                }
            }
            match lane.delay {
                Delay::Uniform { min, max } if min > max => {
                    return Err(SimError::DelayRange { channel, min, max });
                }
                Delay::None | Delay::Fixed(0) | Delay::Uniform { max: 0, .. } => {}
                Delay::Fixed(_) | Delay::Uniform { .. } if mode.is_threaded() => {
                    return Err(SimError::UnsupportedInThreadedMode {
                        fault: FaultKind::Delay,
                    });
                }
                Delay::Fixed(_) | Delay::Uniform { .. } => {}
            }
            if lane.inbox_capacity == Some(0) {
                return Err(SimError::ZeroInboxCapacity { channel });
            }
        }
        let check = |rank: Rank| {
            if world.contains(rank) {
                Ok(())
            } else {
                Err(SimError::RankOutOfWorld {
                    rank: rank.get(),
                    world: world.get(),
                })
            }
        };
        for disconnect in &self.disconnects {
            match *disconnect {
                Disconnect::Rank { rank, .. } => check(rank)?,
                Disconnect::Pair { a, b, .. } => {
                    check(a)?;
                    check(b)?;
                    if a == b {
                        return Err(SimError::SelfDisconnect { rank: a });
                    }
                }
            }
        }
        if !self.partitions.is_empty() && mode.is_threaded() {
            return Err(SimError::UnsupportedInThreadedMode {
                fault: FaultKind::Partition,
            });
        }
        for (index, partition) in self.partitions.iter().enumerate() {
            if partition.side_a.is_empty()
                || partition.side_b.is_empty()
                || partition.ticks.is_empty()
            {
                return Err(SimError::EmptyPartition { index });
            }
            for &rank in partition.side_a.iter().chain(&partition.side_b) {
                check(rank)?;
            }
            if let Some(&rank) = partition
                .side_a
                .iter()
                .find(|rank| partition.side_b.contains(rank))
            {
                return Err(SimError::PartitionOverlap { index, rank });
            }
        }
        Ok(())
    }

    /// Does this plan inject no fault at all?
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

impl fmt::Display for LaneFaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.drop_probability != 0.0 {
            parts.push(format!("drop {}", self.drop_probability));
        }
        if self.duplicate_probability != 0.0 {
            parts.push(format!("duplicate {}", self.duplicate_probability));
        }
        if self.delay != Delay::None {
            parts.push(format!("delay {}", self.delay));
        }
        if self.reorder_window != 0 {
            parts.push(format!("reorder window {}", self.reorder_window));
        }
        if let Some(frames) = self.inbox_capacity {
            parts.push(format!("inbox {frames} frames"));
        }
        if parts.is_empty() {
            f.write_str("no faults")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for channel in Channel::ALL {
            let lane = self.lane(channel);
            if *lane != LaneFaults::default() {
                parts.push(format!("{channel}: {lane}"));
            }
        }
        parts.extend(self.disconnects.iter().map(ToString::to_string));
        parts.extend(self.partitions.iter().map(ToString::to_string));
        if parts.is_empty() {
            f.write_str("no faults")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(n: u32) -> WorldSize {
        WorldSize::new(n).unwrap()
    }

    fn rank(r: u32) -> Rank {
        Rank::new(r, world(8)).unwrap()
    }

    #[test]
    fn an_empty_plan_is_valid_everywhere_and_says_so() {
        let plan = FaultPlan::new();
        assert!(plan.is_empty());
        assert_eq!(plan.validate(world(1), SimMode::stepped()), Ok(()));
        assert_eq!(plan.validate(world(1), SimMode::Threaded), Ok(()));
        assert_eq!(plan.to_string(), "no faults");
    }

    #[test]
    fn probabilities_must_lie_in_the_unit_interval() {
        for p in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
            let plan = FaultPlan::new().drop_probability(Channel::Control, p);
            assert_eq!(
                plan.validate(world(2), SimMode::stepped()),
                Err(SimError::Probability {
                    channel: Channel::Control,
                    fault: FaultKind::Drop
                })
            );
            let plan = FaultPlan::new().duplicate_probability(Channel::Action, p);
            assert_eq!(
                plan.validate(world(2), SimMode::stepped()),
                Err(SimError::Probability {
                    channel: Channel::Action,
                    fault: FaultKind::Duplicate
                })
            );
        }
        let plan = FaultPlan::new().drop_probability(Channel::Action, 1.0);
        assert_eq!(plan.validate(world(2), SimMode::stepped()), Ok(()));
    }

    #[test]
    fn lane_shapes_are_checked() {
        let stepped = SimMode::stepped();
        let plan = FaultPlan::new().delay(Channel::Action, Delay::Uniform { min: 4, max: 2 });
        assert_eq!(
            plan.validate(world(2), stepped),
            Err(SimError::DelayRange {
                channel: Channel::Action,
                min: 4,
                max: 2
            })
        );
        let plan = FaultPlan::new().inbox_capacity(Channel::Control, 0);
        assert_eq!(
            plan.validate(world(2), stepped),
            Err(SimError::ZeroInboxCapacity {
                channel: Channel::Control
            })
        );
    }

    #[test]
    fn threaded_mode_refuses_what_needs_logical_time() {
        let delayed = FaultPlan::new().delay(Channel::Action, Delay::Fixed(2));
        assert_eq!(
            delayed.validate(world(2), SimMode::Threaded),
            Err(SimError::UnsupportedInThreadedMode {
                fault: FaultKind::Delay
            })
        );
        let zero_delay = FaultPlan::new().delay(Channel::Action, Delay::Fixed(0));
        assert_eq!(zero_delay.validate(world(2), SimMode::Threaded), Ok(()));
        let partitioned = FaultPlan::new().partition(Partition::new(
            [rank(0)],
            [rank(1)],
            0..5,
            PartitionMode::Drop,
        ));
        assert_eq!(
            partitioned.validate(world(2), SimMode::Threaded),
            Err(SimError::UnsupportedInThreadedMode {
                fault: FaultKind::Partition
            })
        );
        let rest = FaultPlan::new()
            .drop_probability(Channel::Action, 0.5)
            .duplicate_probability(Channel::Control, 0.5)
            .reorder(Channel::Action, 4)
            .inbox_capacity(Channel::Action, 2)
            .disconnect_rank(rank(1), 50);
        assert_eq!(rest.validate(world(2), SimMode::Threaded), Ok(()));
    }

    #[test]
    fn ranks_must_be_in_the_world_and_distinct() {
        let stepped = SimMode::stepped();
        let plan = FaultPlan::new().disconnect_rank(rank(4), 1);
        assert_eq!(
            plan.validate(world(4), stepped),
            Err(SimError::RankOutOfWorld { rank: 4, world: 4 })
        );
        let plan = FaultPlan::new().disconnect_pair(rank(1), rank(1), 1);
        assert_eq!(
            plan.validate(world(4), stepped),
            Err(SimError::SelfDisconnect { rank: rank(1) })
        );
        let plan = FaultPlan::new().partition(Partition::new(
            [rank(0)],
            [rank(5)],
            0..1,
            PartitionMode::Drop,
        ));
        assert_eq!(
            plan.validate(world(4), stepped),
            Err(SimError::RankOutOfWorld { rank: 5, world: 4 })
        );
    }

    #[test]
    fn partitions_need_two_disjoint_sides_and_ticks() {
        let stepped = SimMode::stepped();
        let empty_side = Partition::new([rank(0)], [], 0..3, PartitionMode::Drop);
        let empty_ticks = Partition::new([rank(0)], [rank(1)], 3..3, PartitionMode::Drop);
        let overlap = Partition::new([rank(0), rank(1)], [rank(1)], 0..3, PartitionMode::Hold);
        let fine = Partition::new([rank(0)], [rank(1)], 0..3, PartitionMode::Hold);
        assert_eq!(
            FaultPlan::new()
                .partition(empty_side)
                .validate(world(2), stepped),
            Err(SimError::EmptyPartition { index: 0 })
        );
        assert_eq!(
            FaultPlan::new()
                .partition(fine.clone())
                .partition(empty_ticks)
                .validate(world(2), stepped),
            Err(SimError::EmptyPartition { index: 1 })
        );
        assert_eq!(
            FaultPlan::new()
                .partition(overlap)
                .validate(world(2), stepped),
            Err(SimError::PartitionOverlap {
                index: 0,
                rank: rank(1)
            })
        );
        assert!(fine.blocks(rank(0), rank(1), 0));
        assert!(fine.blocks(rank(1), rank(0), 2));
        assert!(!fine.blocks(rank(1), rank(0), 3));
        assert!(!fine.blocks(rank(0), rank(0), 1));
    }

    #[test]
    fn the_display_lists_every_fault() {
        let plan = FaultPlan::new()
            .duplicate_probability(Channel::Control, 0.5)
            .inbox_capacity(Channel::Control, 2)
            .delay(Channel::Action, Delay::Fixed(3))
            .disconnect_pair(rank(0), rank(2), 7)
            .partition(Partition::new(
                [rank(0), rank(1)],
                [rank(2)],
                1..4,
                PartitionMode::Drop,
            ));
        assert_eq!(
            plan.to_string(),
            "control: duplicate 0.5, inbox 2 frames; action: delay 3 ticks; \
             disconnect rank 0 from rank 2 at tick 7; partition {0,1}|{2} ticks 1..4 drop"
        );
        assert!(!plan.is_empty());
        assert_eq!(plan.disconnects()[0].at_tick(), 7);
    }
}
