//! [`RequestSequencer`]: the request IDs one origin hands out, one gapless
//! sequence per target rank.

use core::fmt;

use crate::{IdError, IdKind, Rank, RequestId, WorldSize};

impl RequestId {
    /// The ID of request number `seq` (counting from 0) that an origin
    /// sends to `target` in a world of `world` ranks: `seq * world +
    /// target + 1`.
    ///
    /// The sequences to different targets interleave without meeting, so
    /// an ID is unique per origin, and the target recovers the number from
    /// the ID alone ([`sequence`](Self::sequence)). `None` if the ID would
    /// not fit a `u64`, or `target` is not in the world.
    ///
    /// # Examples
    ///
    /// ```
    /// use dinah_core::{RequestId, WorldSize};
    ///
    /// let world = WorldSize::new(4)?;
    /// let to_two = world.rank(2)?;
    /// let id = RequestId::in_sequence(to_two, world, 10).ok_or("overflow")?;
    /// assert_eq!(id.get(), 10 * 4 + 2 + 1);
    /// assert_eq!(id.sequence(world), (to_two, 10));
    /// # Ok::<(), Box<dyn core::error::Error>>(())
    /// ```
    #[must_use]
    #[inline]
    pub const fn in_sequence(target: Rank, world: WorldSize, seq: u64) -> Option<Self> {
        if !world.contains(target) {
            return None;
        }
        let Some(base) = seq.checked_mul(world.get() as u64) else {
            return None;
        };
        let Some(id) = base.checked_add(target.get() as u64 + 1) else {
            return None;
        };
        match Self::new(id) {
            Ok(id) => Some(id),
            Err(_) => None,
        }
    }

    /// The target whose sequence this ID belongs to in a world of `world`
    /// ranks, and its number in that sequence (the inverse of
    /// [`in_sequence`](Self::in_sequence)).
    #[must_use]
    #[inline]
    pub const fn sequence(self, world: WorldSize) -> (Rank, u64) {
        let zero_based = self.get() - 1;
        let size = world.get() as u64;
        // Worlds of a power-of-two size (the usual ones) split the ID with a
        // mask and a shift: the receiving path does this for every frame,
        // and a 64-bit division costs tens of cycles.
        let (target, seq) = if size.is_power_of_two() {
            (zero_based & (size - 1), zero_based >> size.trailing_zeros())
        } else {
            (zero_based % size, zero_based / size)
        };
        let target = target as u32;
        let rank = match Rank::new(target, world) {
            Ok(rank) => rank,
            Err(_) => unreachable!(),
        };
        (rank, seq)
    }
}

/// Why [`RequestSequencer`] could not be built or could not hand out an ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SequenceError {
    /// The storage does not have exactly one counter per rank.
    Storage {
        /// The world's size.
        expected: u32,
        /// The counters offered.
        found: usize,
    },
    /// The target is not a rank of the world.
    NoSuchRank {
        /// The target asked for.
        target: Rank,
    },
    /// The target's sequence has reached the top of the ID range; every
    /// later request to it fails the same way.
    Exhausted {
        /// The target.
        target: Rank,
    },
}

impl fmt::Display for SequenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Storage { expected, found } => write!(
                f,
                "request sequencer storage has {found} counters for a world of {expected} ranks"
            ),
            Self::NoSuchRank { target } => write!(f, "{target} is not in the world"),
            Self::Exhausted { target } => {
                write!(f, "request IDs to {target} are exhausted")
            }
        }
    }
}

impl core::error::Error for SequenceError {}

impl From<SequenceError> for IdError {
    /// Every failure to hand out an ID reads as exhaustion of request IDs
    /// to the caller that only knows [`IdError`].
    fn from(_: SequenceError) -> Self {
        Self::Exhausted {
            kind: IdKind::Request,
        }
    }
}

/// Hands out one origin's [`RequestId`]s: for each target, request
/// numbers 0, 1, 2, ... with no gaps, in the order the requests are sent.
///
/// A request is identified on the wire by the pair (origin rank,
/// [`RequestId`]). The ID encodes the target and the request's number in
/// the origin's sequence to that target ([`RequestId::in_sequence`]), so a
/// target knows, from the IDs it has seen, exactly which of an origin's
/// requests it has not seen yet: that is what lets its deduplication
/// forget finished requests without ever refusing one it never saw (see
/// [`SeenWindow`](crate::SeenWindow)).
///
/// For that, the numbers must follow send order. The sequencer is
/// therefore not synchronised: its owner keeps it under the lock it sends
/// under, and per request it [`peek`](Self::peek)s the next ID, writes it
/// into the frame, hands the frame to the transport and only then
/// [`commit`](Self::commit)s. A request the transport refused never took
/// its number: the next one takes it.
///
/// Storage is one `u64` counter per rank of the world, sized once by the
/// caller (an array, or a boxed slice sized from the world).
///
/// # Examples
///
/// ```
/// use dinah_core::{RequestSequencer, WorldSize};
///
/// let world = WorldSize::new(2)?;
/// let mut ids = RequestSequencer::with_storage([0_u64; 2], world)?;
/// let peer = world.rank(1)?;
/// let first = ids.peek(peer)?;
/// assert_eq!(ids.peek(peer)?, first, "nothing taken until committed");
/// ids.commit(peer);
/// let second = ids.next(peer)?;
/// assert_eq!(second.sequence(world), (peer, 1));
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
pub struct RequestSequencer<S> {
    /// Per target, the number of its next request.
    next: S,
    world: WorldSize,
}

impl<S> RequestSequencer<S>
where
    S: AsRef<[u64]> + AsMut<[u64]>,
{
    /// A sequencer for an origin in a world of `world` ranks, over
    /// `storage` (one counter per rank; zeroed here).
    ///
    /// # Errors
    ///
    /// [`SequenceError::Storage`] if `storage` does not have exactly
    /// `world` counters.
    pub fn with_storage(mut storage: S, world: WorldSize) -> Result<Self, SequenceError> {
        let found = storage.as_ref().len();
        if found != world.get() as usize {
            return Err(SequenceError::Storage {
                expected: world.get(),
                found,
            });
        }
        storage.as_mut().fill(0);
        Ok(Self {
            next: storage,
            world,
        })
    }

    /// The world the IDs are made for.
    pub const fn world(&self) -> WorldSize {
        self.world
    }

    /// The ID of the next request to `target`, without taking it.
    ///
    /// # Errors
    ///
    /// [`SequenceError::NoSuchRank`] or [`SequenceError::Exhausted`].
    pub fn peek(&self, target: Rank) -> Result<RequestId, SequenceError> {
        let seq = *self
            .next
            .as_ref()
            .get(target.index())
            .ok_or(SequenceError::NoSuchRank { target })?;
        RequestId::in_sequence(target, self.world, seq).ok_or(SequenceError::Exhausted { target })
    }

    /// Takes the ID [`peek`](Self::peek) returned for `target`: the
    /// request was sent. Does nothing for a target outside the world.
    pub fn commit(&mut self, target: Rank) {
        if let Some(next) = self.next.as_mut().get_mut(target.index()) {
            *next = next.saturating_add(1);
        }
    }

    /// [`peek`](Self::peek) and [`commit`](Self::commit) at once, for a
    /// request that cannot be refused after it has its ID (a local call).
    ///
    /// # Errors
    ///
    /// As [`peek`](Self::peek); nothing is taken.
    pub fn next(&mut self, target: Rank) -> Result<RequestId, SequenceError> {
        let id = self.peek(target)?;
        self.commit(target);
        Ok(id)
    }

    /// How many requests to `target` have taken their ID.
    pub fn sent(&self, target: Rank) -> u64 {
        self.next.as_ref().get(target.index()).copied().unwrap_or(0)
    }
}

impl<S> fmt::Debug for RequestSequencer<S>
where
    S: AsRef<[u64]>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestSequencer")
            .field("world", &self.world)
            .field("next", &self.next.as_ref())
            .finish()
    }
}

#[cfg(all(test, not(dinah_loom)))]
mod tests {
    use super::*;

    extern crate std;
    use std::collections::BTreeSet;

    fn world(n: u32) -> WorldSize {
        WorldSize::new(n).expect("non-zero")
    }

    #[test]
    fn each_target_counts_from_zero_without_gaps() {
        let world = world(3);
        let mut ids = RequestSequencer::with_storage([0; 3], world).expect("sized");
        let mut seen = BTreeSet::new();
        for round in 0..5_u64 {
            for target in world.ranks() {
                let id = ids.next(target).expect("far from the top");
                assert_eq!(id.sequence(world), (target, round));
                assert!(seen.insert(id), "{id} handed out twice");
            }
        }
        assert_eq!(ids.sent(world.rank(1).expect("in world")), 5);
    }

    #[test]
    fn a_peeked_id_is_handed_out_again_until_committed() {
        let world = world(2);
        let mut ids = RequestSequencer::with_storage([7, 7], world).expect("sized");
        let peer = world.rank(1).expect("in world");
        let first = ids.peek(peer).expect("fresh");
        assert_eq!(first.sequence(world), (peer, 0), "storage is zeroed");
        assert_eq!(ids.peek(peer), Ok(first));
        ids.commit(peer);
        assert_ne!(ids.peek(peer), Ok(first));
    }

    #[test]
    fn storage_rank_and_exhaustion_are_typed_errors() {
        let world = world(2);
        assert_eq!(
            RequestSequencer::with_storage([0; 3], world).err(),
            Some(SequenceError::Storage {
                expected: 2,
                found: 3
            })
        );
        let mut ids = RequestSequencer::with_storage([0; 2], world).expect("sized");
        let outside = Rank::new(5, WorldSize::new(8).expect("non-zero")).expect("in 8");
        assert_eq!(
            ids.peek(outside),
            Err(SequenceError::NoSuchRank { target: outside })
        );
        let top = Rank::ZERO;
        ids.next.as_mut()[0] = u64::MAX / 2;
        assert_eq!(ids.peek(top), Ok(RequestId::MAX));
        ids.commit(top);
        assert_eq!(ids.next(top), Err(SequenceError::Exhausted { target: top }));
        assert_eq!(
            IdError::from(SequenceError::Exhausted { target: top }),
            IdError::Exhausted {
                kind: IdKind::Request
            }
        );
        assert!(std::format!("{}", SequenceError::Exhausted { target: top }).contains("exhausted"));
    }

    #[test]
    fn ids_round_trip_through_their_sequence_at_the_edges() {
        for size in [1, 2, 3, 1024, u32::MAX] {
            let world = world(size);
            for target in [0, size / 2, size - 1] {
                let target = world.rank(target).expect("in world");
                for seq in [0, 1, 1 << 20, u64::MAX / u64::from(size) - 1] {
                    let id = RequestId::in_sequence(target, world, seq).expect("fits");
                    assert_eq!(id.sequence(world), (target, seq));
                }
            }
        }
        let world = world(2);
        let last = world.rank(1).expect("in world");
        assert_eq!(RequestId::in_sequence(last, world, u64::MAX), None);
    }
}
