//! Errors of the simulated network: an invalid fault plan or mode, or an
//! endpoint that cannot be handed out.

use std::fmt;

use dinah_core::Rank;
use dinah_core::wire::Channel;

/// A kind of fault a [`FaultPlan`](super::FaultPlan) can inject, named in
/// [`SimError`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultKind {
    /// Frames lost with a probability.
    Drop,
    /// Frames delivered twice with a probability.
    Duplicate,
    /// Frames held for some ticks.
    Delay,
    /// Frames overtaking earlier ones within a window.
    Reorder,
    /// A small per-lane inbox at the destination (back-pressure).
    Saturation,
    /// A rank or a pair cut off at a tick.
    Disconnect,
    /// Two sets of ranks unable to reach each other for a range of ticks.
    Partition,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Drop => "drop",
            Self::Duplicate => "duplicate",
            Self::Delay => "delay",
            Self::Reorder => "reorder",
            Self::Saturation => "saturation",
            Self::Disconnect => "disconnect",
            Self::Partition => "partition",
        })
    }
}

/// Why a simulated network or one of its endpoints could not be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimError {
    /// A drop or duplicate probability is not in `[0, 1]` (or is NaN).
    Probability {
        /// The lane.
        channel: Channel,
        /// [`FaultKind::Drop`] or [`FaultKind::Duplicate`].
        fault: FaultKind,
    },
    /// A uniform delay's minimum exceeds its maximum.
    DelayRange {
        /// The lane.
        channel: Channel,
        /// The minimum, in ticks.
        min: u64,
        /// The maximum, in ticks.
        max: u64,
    },
    /// An inbox capacity of zero would block the lane forever.
    ZeroInboxCapacity {
        /// The lane.
        channel: Channel,
    },
    /// A disconnect or partition names a rank outside the world.
    RankOutOfWorld {
        /// The rank's index.
        rank: u32,
        /// The world size.
        world: u32,
    },
    /// A pair disconnect names the same rank twice.
    SelfDisconnect {
        /// The rank.
        rank: Rank,
    },
    /// A partition has an empty side or an empty tick range.
    EmptyPartition {
        /// The partition's position in the plan.
        index: usize,
    },
    /// A rank is on both sides of a partition.
    PartitionOverlap {
        /// The partition's position in the plan.
        index: usize,
        /// The rank.
        rank: Rank,
    },
    /// The fault needs logical time, which threaded mode does not have.
    UnsupportedInThreadedMode {
        /// The fault.
        fault: FaultKind,
    },
    /// A stepped network's tick lasts zero time, so deadlines never pass.
    ZeroTick,
    /// A handle queue size is zero.
    EmptyHandleQueue,
    /// The rank is not in the network's world.
    NoSuchRank {
        /// The rank.
        rank: Rank,
    },
    /// The rank's endpoint was already handed out.
    EndpointTaken {
        /// The rank.
        rank: Rank,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Probability { channel, fault } => {
                write!(
                    f,
                    "the {fault} probability of the {channel} lane is not in [0, 1]"
                )
            }
            Self::DelayRange { channel, min, max } => write!(
                f,
                "the {channel} lane's delay range {min}..={max} ticks is empty"
            ),
            Self::ZeroInboxCapacity { channel } => {
                write!(f, "the {channel} lane's inbox capacity is zero")
            }
            Self::RankOutOfWorld { rank, world } => {
                write!(
                    f,
                    "fault plan names rank {rank}, outside a world of {world}"
                )
            }
            Self::SelfDisconnect { rank } => write!(f, "cannot disconnect {rank} from itself"),
            Self::EmptyPartition { index } => {
                write!(f, "partition {index} has an empty side or tick range")
            }
            Self::PartitionOverlap { index, rank } => {
                write!(f, "{rank} is on both sides of partition {index}")
            }
            Self::UnsupportedInThreadedMode { fault } => {
                write!(f, "{fault} faults need stepped mode")
            }
            Self::ZeroTick => f.write_str("a network tick must last longer than zero"),
            Self::EmptyHandleQueue => f.write_str("handle queue sizes must be non-zero"),
            Self::NoSuchRank { rank } => write!(f, "{rank} is not in the simulated world"),
            Self::EndpointTaken { rank } => write!(f, "the endpoint of {rank} was already taken"),
        }
    }
}

impl std::error::Error for SimError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_lowercase_without_trailing_period() {
        let rank = Rank::ZERO;
        let errors = [
            SimError::Probability {
                channel: Channel::Action,
                fault: FaultKind::Drop,
            },
            SimError::DelayRange {
                channel: Channel::Control,
                min: 3,
                max: 1,
            },
            SimError::ZeroInboxCapacity {
                channel: Channel::Action,
            },
            SimError::RankOutOfWorld { rank: 5, world: 4 },
            SimError::SelfDisconnect { rank },
            SimError::EmptyPartition { index: 0 },
            SimError::PartitionOverlap { index: 1, rank },
            SimError::UnsupportedInThreadedMode {
                fault: FaultKind::Delay,
            },
            SimError::ZeroTick,
            SimError::EmptyHandleQueue,
            SimError::NoSuchRank { rank },
            SimError::EndpointTaken { rank },
        ];
        for error in errors {
            let text = error.to_string();
            assert!(text.starts_with(|c: char| c.is_lowercase()), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
        assert_eq!(
            SimError::Probability {
                channel: Channel::Action,
                fault: FaultKind::Duplicate
            }
            .to_string(),
            "the duplicate probability of the action lane is not in [0, 1]"
        );
    }
}
