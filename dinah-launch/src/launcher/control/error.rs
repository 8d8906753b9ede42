//! The control protocol's errors: malformed messages ([`ControlError`])
//! and the launcher's refusals ([`Refusal`]), with their wire codes.

use core::fmt;

use super::MAX_RANKS;

/// A malformed control message.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlError {
    /// The length prefix exceeds [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES).
    TooLong {
        /// The announced body length.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// The body ends before its fields do.
    Truncated,
    /// The body does not start with the protocol's magic.
    BadMagic([u8; 4]),
    /// The peer speaks another version of the protocol.
    UnsupportedVersion {
        /// The version in the message.
        found: u16,
        /// [`CONTROL_VERSION`](super::CONTROL_VERSION).
        supported: u16,
    },
    /// The message kind is unknown.
    UnknownKind(u8),
    /// A reserved byte is not zero.
    ReservedNotZero,
    /// An address family byte is neither 4 nor 6.
    UnknownFamily(u8),
    /// A refusal code is unknown.
    UnknownRefusal(u8),
    /// The world size is zero or above [`MAX_RANKS`].
    BadWorldSize(u32),
    /// Bytes are left after the last field.
    TrailingBytes(u32),
    /// A message of a kind this side never receives (a rank sending a
    /// members list, or the launcher sending a report).
    Unexpected(u8),
    /// The members list does not match the rank's report (another run ID
    /// or world size, or another address for the rank itself).
    MembersMismatch,
    /// The coordinator's address list does not carry a valid tag under
    /// the run key: whoever answered does not hold it.
    Unproven,
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong { len, max } => {
                write!(f, "message of {len} bytes exceeds the limit of {max}")
            }
            Self::Truncated => f.write_str("message ends before its fields"),
            Self::BadMagic(found) => write!(f, "bad magic {found:02x?}"),
            Self::UnsupportedVersion { found, supported } => {
                write!(
                    f,
                    "control protocol version {found} is not supported (this side speaks {supported})"
                )
            }
            Self::UnknownKind(kind) => write!(f, "unknown message kind {kind}"),
            Self::ReservedNotZero => f.write_str("reserved bytes are not zero"),
            Self::UnknownFamily(family) => write!(f, "unknown address family {family}"),
            Self::UnknownRefusal(code) => write!(f, "unknown refusal code {code}"),
            Self::BadWorldSize(world) => write!(f, "world size {world} is outside 1..={MAX_RANKS}"),
            Self::TrailingBytes(extra) => write!(f, "{extra} bytes after the last field"),
            Self::Unexpected(kind) => write!(f, "unexpected message kind {kind}"),
            Self::MembersMismatch => {
                f.write_str("the address list does not match this rank's report")
            }
            Self::Unproven => f.write_str(
                "the address list is not proven with the run key: the coordinator does not hold it",
            ),
        }
    }
}

impl core::error::Error for ControlError {}

/// Why the rendezvous (`dinah-run`, or rank 0 as the coordinator) refused
/// a rank's report or aborted.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The report carries another run's ID.
    RunMismatch,
    /// The report's world size differs from the rendezvous's.
    WorldMismatch {
        /// The world size the rendezvous serves.
        expected: u32,
    },
    /// The report's rank is outside the world.
    RankOutOfRange {
        /// The world size.
        world: u32,
    },
    /// Another connection already reported this rank.
    DuplicateRank,
    /// The report's protocol version is not the rendezvous's.
    UnsupportedVersion {
        /// The rendezvous's version.
        supported: u16,
    },
    /// A rank exited before reporting, so the list can never be complete.
    RankExited {
        /// That rank.
        rank: u32,
    },
    /// A rank failed; the launch is being torn down.
    RankFailed {
        /// That rank.
        rank: u32,
    },
    /// Not every rank reported within the start-up timeout.
    StartupTimeout,
    /// The rendezvous gave up for a reason of its own (its run timeout, or
    /// an operating-system error).
    Aborted,
}

impl Refusal {
    pub(super) fn to_wire(self) -> (u8, u32) {
        match self {
            Self::RunMismatch => (1, 0),
            Self::WorldMismatch { expected } => (2, expected),
            Self::RankOutOfRange { world } => (3, world),
            Self::DuplicateRank => (4, 0),
            Self::UnsupportedVersion { supported } => (5, u32::from(supported)),
            Self::RankExited { rank } => (6, rank),
            Self::RankFailed { rank } => (7, rank),
            Self::StartupTimeout => (8, 0),
            Self::Aborted => (9, 0),
        }
    }

    pub(super) fn from_wire(code: u8, arg: u32) -> Result<Self, ControlError> {
        Ok(match code {
            1 => Self::RunMismatch,
            2 => Self::WorldMismatch { expected: arg },
            3 => Self::RankOutOfRange { world: arg },
            4 => Self::DuplicateRank,
            5 => Self::UnsupportedVersion {
                supported: u16::try_from(arg).unwrap_or(u16::MAX),
            },
            6 => Self::RankExited { rank: arg },
            7 => Self::RankFailed { rank: arg },
            8 => Self::StartupTimeout,
            9 => Self::Aborted,
            other => return Err(ControlError::UnknownRefusal(other)),
        })
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RunMismatch => f.write_str("the report belongs to another run"),
            Self::WorldMismatch { expected } => write!(
                f,
                "the report's world size differs from the rendezvous's {expected}"
            ),
            Self::RankOutOfRange { world } => {
                write!(f, "the reported rank is outside the world of {world}")
            }
            Self::DuplicateRank => f.write_str("another process already reported this rank"),
            Self::UnsupportedVersion { supported } => {
                write!(
                    f,
                    "the rendezvous speaks control protocol version {supported}"
                )
            }
            Self::RankExited { rank } => {
                write!(f, "rank {rank} exited before reporting its address")
            }
            Self::RankFailed { rank } => write!(f, "rank {rank} failed"),
            Self::StartupTimeout => f.write_str("not every rank reported its address in time"),
            Self::Aborted => f.write_str("the rendezvous aborted the run"),
        }
    }
}

impl core::error::Error for Refusal {}
