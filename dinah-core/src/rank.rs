//! Transport ranks and world sizes.
//!
//! Ranks number the processes of a run from zero, as MPI does, so zero is a
//! valid [`Rank`]; what makes a rank valid is being below the
//! [`WorldSize`]. A `Rank` is built from a world size (or checked against
//! one), which keeps out-of-range peers out of the tables indexed by rank.
//!
//! # Examples
//!
//! ```
//! use dinah_core::{IdError, Rank, WorldSize};
//!
//! let world = WorldSize::new(4)?;
//! let last = world.rank(3)?;
//! assert_eq!(last, Rank::new(3, world)?);
//! assert_eq!(world.rank(4), Err(IdError::RankOutOfRange { rank: 4, world_size: 4 }));
//! assert_eq!(world.ranks().count(), 4);
//! # Ok::<(), IdError>(())
//! ```

use core::fmt;
use core::num::NonZeroU32;

use crate::IdError;

/// The number of ranks in a run (at least one).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct WorldSize(NonZeroU32);

impl WorldSize {
    /// A world of one rank.
    pub const ONE: Self = Self(NonZeroU32::MIN);

    /// A world of `size` ranks.
    ///
    /// # Errors
    ///
    /// [`IdError::EmptyWorld`] if `size` is zero.
    pub const fn new(size: u32) -> Result<Self, IdError> {
        match NonZeroU32::new(size) {
            Some(size) => Ok(Self(size)),
            None => Err(IdError::EmptyWorld),
        }
    }

    /// The number of ranks.
    pub const fn get(self) -> u32 {
        self.0.get()
    }

    /// The rank `index` of this world.
    ///
    /// # Errors
    ///
    /// [`IdError::RankOutOfRange`] if `index >= self.get()`.
    pub const fn rank(self, index: u32) -> Result<Rank, IdError> {
        Rank::new(index, self)
    }

    /// Does `rank` belong to this world?
    pub const fn contains(self, rank: Rank) -> bool {
        rank.0 < self.0.get()
    }

    /// Every rank of this world, in order.
    pub fn ranks(self) -> impl DoubleEndedIterator<Item = Rank> + ExactSizeIterator {
        (0..self.0.get()).map(Rank)
    }
}

impl fmt::Display for WorldSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} rank(s)", self.0)
    }
}

/// A process's index in a run: `0..world_size`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Rank(u32);

impl Rank {
    /// Rank zero, which every world has.
    pub const ZERO: Self = Self(0);

    /// Rank `rank`, checked against `world`.
    ///
    /// # Errors
    ///
    /// [`IdError::RankOutOfRange`] if `rank >= world.get()`.
    pub const fn new(rank: u32, world: WorldSize) -> Result<Self, IdError> {
        if rank < world.get() {
            Ok(Self(rank))
        } else {
            Err(IdError::RankOutOfRange {
                rank,
                world_size: world.get(),
            })
        }
    }

    /// The rank number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The rank as an index into per-rank tables.
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Checks that this rank still belongs to `world` (for a rank decoded
    /// from bytes or carried across worlds).
    ///
    /// # Errors
    ///
    /// [`IdError::RankOutOfRange`] if it does not.
    pub const fn check(self, world: WorldSize) -> Result<Self, IdError> {
        Self::new(self.0, world)
    }
}

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}", self.0)
    }
}

impl From<Rank> for u32 {
    fn from(rank: Rank) -> u32 {
        rank.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;
    use std::vec::Vec;

    #[test]
    fn zero_rank_is_valid_and_world_bounds_ranks() {
        let world = WorldSize::new(2).unwrap();
        assert_eq!(Rank::new(0, world), Ok(Rank::ZERO));
        assert_eq!(Rank::new(1, world).unwrap().get(), 1);
        assert_eq!(
            Rank::new(2, world),
            Err(IdError::RankOutOfRange {
                rank: 2,
                world_size: 2
            })
        );
        assert_eq!(
            Rank::new(u32::MAX, world),
            Err(IdError::RankOutOfRange {
                rank: u32::MAX,
                world_size: 2
            })
        );
    }

    #[test]
    fn empty_world_is_rejected() {
        assert_eq!(WorldSize::new(0), Err(IdError::EmptyWorld));
        assert_eq!(WorldSize::new(1), Ok(WorldSize::ONE));
    }

    #[test]
    fn check_against_a_smaller_world_fails() {
        let big = WorldSize::new(8).unwrap();
        let small = WorldSize::new(4).unwrap();
        let rank = big.rank(5).unwrap();
        assert!(big.contains(rank));
        assert!(!small.contains(rank));
        assert!(rank.check(small).is_err());
        assert_eq!(rank.check(big), Ok(rank));
    }

    #[test]
    fn ranks_iterates_in_order_and_displays() {
        let world = WorldSize::new(3).unwrap();
        let ranks: Vec<u32> = world.ranks().map(Rank::get).collect();
        assert_eq!(ranks, [0, 1, 2]);
        assert_eq!(world.ranks().next_back().unwrap().index(), 2);
        assert_eq!(Rank::ZERO.to_string(), "rank 0");
        assert_eq!(world.to_string(), "3 rank(s)");
    }
}
