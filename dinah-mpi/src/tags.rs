//! The MPI tags the transport uses on its private communicator.
//!
//! Every transport duplicates the communicator it is given, so its tags
//! cannot collide with the application's messages or with another
//! transport's; they are small constants, far below the 32,767 every MPI
//! implementation must support.
//!
//! MPI keeps messages in order only per (source, tag, communicator). That
//! is what the two lanes rely on: a cancellation on the control tag is
//! never queued behind action traffic, and, conversely, it may overtake
//! the request it cancels (the runtime's deduplication table keeps a
//! tombstone for a cancellation of a request it has not seen yet).

use dinah_core::wire::Channel;
use mpi::Tag;

/// What a message on the transport's communicator is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Stream {
    /// The bootstrap message: a hello record, the sender's session number
    /// and its framing version (see `hello.rs`).
    Hello,
    /// Frames of the control lane (cancellations, goodbyes).
    Control,
    /// Frames of the action lane (requests, results, errors).
    Action,
    /// The close marker: the sender closed its transport without a clean
    /// drain and will receive nothing more.
    Close,
    /// Control-lane frames too large for a posted receive, each announced
    /// on the control tag first (see `large.rs`).
    LargeControl,
    /// Action-lane frames too large for a posted receive, each announced
    /// on the action tag first.
    LargeAction,
}

impl Stream {
    /// The streams of the two lanes, in the order a driver drains them in
    /// every poll: control before action, so cancellations pass saturated
    /// action traffic (the idle check tests them the other way round, see
    /// `posted.rs`). Close markers are rare and probed only now and then.
    pub(crate) const LANES: [Self; 2] = [Self::Control, Self::Action];

    /// The MPI tag of this stream.
    pub(crate) const fn tag(self) -> Tag {
        match self {
            Self::Hello => 1,
            Self::Control => 2,
            Self::Action => 3,
            Self::Close => 4,
            Self::LargeControl => 5,
            Self::LargeAction => 6,
        }
    }

    /// The stream that carries this lane's large frames (a lane's own
    /// stream for any other).
    pub(crate) const fn large(self) -> Self {
        match self {
            Self::Control => Self::LargeControl,
            Self::Action => Self::LargeAction,
            other => other,
        }
    }

    /// Is this a lane's large tag (whose long messages travel in pieces,
    /// see `pieces.rs`)?
    pub(crate) const fn is_large(self) -> bool {
        matches!(self, Self::LargeControl | Self::LargeAction)
    }

    /// The stream carrying `channel`'s frames.
    pub(crate) const fn of(channel: Channel) -> Self {
        match channel {
            Channel::Control => Self::Control,
            Channel::Action => Self::Action,
        }
    }

    /// How many streams there are.
    pub(crate) const COUNT: usize = 6;

    /// A dense index for per-stream tables (0..[`Self::COUNT`]).
    pub(crate) const fn index(self) -> usize {
        match self {
            Self::Hello => 0,
            Self::Control => 1,
            Self::Action => 2,
            Self::Close => 3,
            Self::LargeControl => 4,
            Self::LargeAction => 5,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_distinct_small_and_positive() {
        let all = [
            Stream::Hello,
            Stream::Control,
            Stream::Action,
            Stream::Close,
            Stream::LargeControl,
            Stream::LargeAction,
        ];
        assert_eq!(all.len(), Stream::COUNT);
        for (i, a) in all.iter().enumerate() {
            assert!((1..32_767).contains(&a.tag()));
            assert_eq!(a.index(), i);
            for b in &all[i + 1..] {
                assert_ne!(a.tag(), b.tag());
            }
        }
    }

    #[test]
    fn lanes_map_to_their_streams() {
        assert_eq!(Stream::of(Channel::Control), Stream::Control);
        assert_eq!(Stream::of(Channel::Action), Stream::Action);
        assert_eq!(Stream::Control.large(), Stream::LargeControl);
        assert_eq!(Stream::Action.large(), Stream::LargeAction);
        assert_eq!(
            Stream::LANES[0],
            Stream::Control,
            "control is drained first"
        );
    }
}
