//! Finished job blocks kept for the next submission of the same kind.
//!
//! A pooled action's job is one shared block: allocated by the submitting
//! thread, shared by the domain's queue and the submitter (which cancels
//! through it), and let go of by the worker before it delivers the
//! outcome. Once the submitter has the outcome, the block is usually its
//! alone again. A submitter that keeps [`SpareJobs`] gives such blocks
//! back and writes the next job into one ([`SpareJobs::make`]) instead of
//! allocating: with many actions in flight, the bursts of allocations and
//! frees otherwise went past the allocator's per-thread cache.
//!
//! No `unsafe`: a block is reused only through [`Arc::get_mut`], which
//! proves no other reference (a worker still holding it) exists; anything
//! else is dropped as usual. The store is bounded: it keeps at most `keep`
//! blocks and frees the rest.

use std::fmt;
use std::sync::Arc;

/// A bounded store of finished job blocks of type `J` (see the module
/// docs).
pub(crate) struct SpareJobs<J> {
    blocks: Vec<Arc<J>>,
    keep: usize,
    /// Blocks [`make`](Self::make) allocated, and blocks it reused.
    made: (u64, u64),
}

impl<J> SpareJobs<J> {
    /// An empty store that keeps at most `keep` blocks; its room is
    /// allocated once, here.
    pub(crate) fn new(keep: usize) -> Self {
        Self {
            blocks: Vec::with_capacity(keep),
            keep,
            made: (0, 0),
        }
    }

    /// Keeps `block` for a later [`make`](Self::make) if there is room
    /// and nobody else holds it; drops it otherwise.
    pub(crate) fn give(&mut self, mut block: Arc<J>) {
        if self.blocks.len() < self.keep && Arc::get_mut(&mut block).is_some() {
            self.blocks.push(block);
        }
    }

    /// `value` in a shared block: a kept block, overwritten in place, or a
    /// new allocation if none is kept.
    pub(crate) fn make(&mut self, value: J) -> Arc<J> {
        if let Some(mut block) = self.blocks.pop() {
            if let Some(slot) = Arc::get_mut(&mut block) {
                *slot = value;
                self.made.1 += 1;
                return block;
            }
        }
        self.made.0 += 1;
        Arc::new(value)
    }

    /// How many blocks [`make`](Self::make) allocated, and how many it
    /// reused, since the start.
    pub(crate) fn made(&self) -> (u64, u64) {
        self.made
    }

    /// Blocks kept right now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.blocks.len()
    }
}

impl<J> fmt::Debug for SpareJobs<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpareJobs")
            .field("kept", &self.blocks.len())
            .field("keep", &self.keep)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_comes_back_once_and_only_when_unshared() {
        let mut spare = SpareJobs::new(2);
        let block = Arc::new(7_u64);
        let clone = Arc::clone(&block);
        spare.give(block);
        assert_eq!(spare.len(), 0, "a shared block is not kept");
        let at = Arc::as_ptr(&clone);
        spare.give(clone);
        assert_eq!(spare.len(), 1);
        let again = spare.make(8_u64);
        assert_eq!(*again, 8);
        assert_eq!(Arc::as_ptr(&again), at, "the kept block was reused");
        assert_eq!(spare.len(), 0);
        let fresh = spare.make(9_u64);
        assert_ne!(Arc::as_ptr(&fresh), at, "nothing kept: a new block");
        assert_eq!(spare.made(), (1, 1));
    }

    #[test]
    fn the_store_is_bounded() {
        let mut spare = SpareJobs::new(1);
        spare.give(Arc::new(1_u32));
        spare.give(Arc::new(2_u32));
        assert_eq!(spare.len(), 1, "the second block is freed");
        assert_eq!(*spare.make(3_u32), 3);
        assert_eq!(spare.len(), 0);
    }
}
