//! What a decoder knows about where bytes came from.

use core::fmt;

use super::Channel;
use crate::{LimitsError, ProtocolLimits, Rank, WorldSize};

/// Everything a decoder checks a frame against besides its own bytes: the
/// channel and peer it arrived from, the world, and the negotiated limits.
///
/// A transport builds one per connection (TCP) or per source and channel
/// (MPI) once the hello exchange has succeeded. The constructor validates
/// it, so decoding never trusts an inconsistent context.
///
/// # Examples
///
/// ```
/// use dinah_core::{ProtocolLimits, WorldSize};
/// use dinah_core::wire::{Channel, DecodeContext};
///
/// let world = WorldSize::new(4)?;
/// let ctx = DecodeContext::new(Channel::Action, world.rank(2)?, world, ProtocolLimits::DEFAULT)?;
/// assert_eq!(ctx.source().get(), 2);
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodeContext {
    channel: Channel,
    source: Rank,
    world: WorldSize,
    limits: ProtocolLimits,
}

impl DecodeContext {
    /// A context for frames arriving on `channel` from `source`.
    ///
    /// # Errors
    ///
    /// [`ContextError::Limits`] if `limits` fail
    /// [`ProtocolLimits::validate`]; [`ContextError::SourceOutOfWorld`] if
    /// `source` is not below `world`.
    pub const fn new(
        channel: Channel,
        source: Rank,
        world: WorldSize,
        limits: ProtocolLimits,
    ) -> Result<Self, ContextError> {
        if let Err(error) = limits.validate() {
            return Err(ContextError::Limits(error));
        }
        if !world.contains(source) {
            return Err(ContextError::SourceOutOfWorld { source, world });
        }
        Ok(Self {
            channel,
            source,
            world,
            limits,
        })
    }

    /// The channel frames arrive on.
    pub const fn channel(&self) -> Channel {
        self.channel
    }

    /// The rank frames arrive from.
    pub const fn source(&self) -> Rank {
        self.source
    }

    /// The world's size.
    pub const fn world(&self) -> WorldSize {
        self.world
    }

    /// The negotiated limits (validated).
    pub const fn limits(&self) -> &ProtocolLimits {
        &self.limits
    }

    /// The same context for another channel (a TCP transport's second
    /// connection to the same peer).
    pub const fn with_channel(mut self, channel: Channel) -> Self {
        self.channel = channel;
        self
    }
}

/// A [`DecodeContext`] could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ContextError {
    /// The protocol limits are invalid.
    Limits(LimitsError),
    /// The source rank is not in the world.
    SourceOutOfWorld {
        /// The source rank.
        source: Rank,
        /// The world.
        world: WorldSize,
    },
}

impl fmt::Display for ContextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Limits(_) => f.write_str("invalid protocol limits for a decoder"),
            Self::SourceOutOfWorld { source, world } => {
                write!(f, "decoder source {source} is outside a world of {world}")
            }
        }
    }
}

impl core::error::Error for ContextError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Limits(error) => Some(error),
            Self::SourceOutOfWorld { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use crate::{LimitField, LimitProblem};
    use core::error::Error;
    use std::string::ToString;

    #[test]
    fn rejects_invalid_limits_and_foreign_sources() {
        let world = WorldSize::new(2).unwrap();
        let mut limits = ProtocolLimits::DEFAULT;
        limits.max_segments = 0;
        let error = DecodeContext::new(Channel::Control, Rank::ZERO, world, limits).unwrap_err();
        assert_eq!(
            error,
            ContextError::Limits(LimitsError {
                field: LimitField::MaxSegments,
                problem: LimitProblem::Zero
            })
        );
        assert!(error.source().is_some());

        let big = WorldSize::new(3).unwrap();
        let foreign = big.rank(2).unwrap();
        let error = DecodeContext::new(Channel::Control, foreign, world, ProtocolLimits::DEFAULT)
            .unwrap_err();
        assert_eq!(
            error,
            ContextError::SourceOutOfWorld {
                source: foreign,
                world
            }
        );
        assert_eq!(
            error.to_string(),
            "decoder source rank 2 is outside a world of 2 rank(s)"
        );
        assert!(error.source().is_none());
    }

    #[test]
    fn accessors_and_channel_switch() {
        let world = WorldSize::new(2).unwrap();
        let source = world.rank(1).unwrap();
        let ctx =
            DecodeContext::new(Channel::Control, source, world, ProtocolLimits::DEFAULT).unwrap();
        assert_eq!(ctx.channel(), Channel::Control);
        assert_eq!(ctx.source(), source);
        assert_eq!(ctx.world(), world);
        assert_eq!(ctx.limits(), &ProtocolLimits::DEFAULT);
        assert_eq!(ctx.with_channel(Channel::Action).channel(), Channel::Action);
    }
}
