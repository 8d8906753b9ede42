//! Finished job blocks kept for the next submission of the same kind.
//!
//! A pooled action's job is one shared block (see [`CompletionJob`]):
//! allocated by the submitting thread, shared by the queue and the job's
//! canceller, and let go of by the worker before it delivers the outcome.
//! Once the submitter has the outcome and drops the canceller, the block is
//! usually its alone again. A submitter that keeps [`SpareJobs`] gives
//! such blocks back ([`JobCanceller::into_block`]) and the next submission
//! of the same job type writes its job into one ([`SpareJobs::take`])
//! instead of allocating: with many actions in flight, the bursts of
//! allocations and frees otherwise went past the allocator's per-thread
//! cache.
//!
//! No `unsafe`: a block is reused only through [`Arc::get_mut`], which
//! proves no other reference (a clone of the canceller, a worker still
//! holding it) exists; anything else is dropped as usual. The store is
//! bounded: it keeps at most `keep` blocks and frees the rest.
//!
//! [`CompletionJob`]: super::job::CompletionJob
//! [`JobCanceller::into_block`]: super::JobCanceller::into_block

use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// A bounded store of finished job blocks (see the module docs).
pub(crate) struct SpareJobs {
    blocks: Vec<Arc<dyn Any + Send + Sync>>,
    keep: usize,
}

impl SpareJobs {
    /// An empty store that keeps at most `keep` blocks; its room is
    /// allocated once, here.
    pub(crate) fn new(keep: usize) -> Self {
        Self {
            blocks: Vec::with_capacity(keep),
            keep,
        }
    }

    /// Keeps `block` for a later [`take`](Self::take) if there is room
    /// and nobody else holds it; drops it otherwise.
    pub(crate) fn give(&mut self, mut block: Arc<dyn Any + Send + Sync>) {
        if self.blocks.len() < self.keep && Arc::get_mut(&mut block).is_some() {
            self.blocks.push(block);
        }
    }

    /// A kept block of type `J` that only the caller holds, ready to be
    /// overwritten through [`Arc::get_mut`]; `None` if none is kept (a
    /// block of another type is dropped).
    pub(crate) fn take<J: Any + Send + Sync>(&mut self) -> Option<Arc<J>> {
        let mut block = self.blocks.pop()?.downcast::<J>().ok()?;
        Arc::get_mut(&mut block)?;
        Some(block)
    }

    /// Blocks kept right now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.blocks.len()
    }
}

impl fmt::Debug for SpareJobs {
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
        spare.give(clone);
        assert_eq!(spare.len(), 1);
        let mut again = spare.take::<u64>().expect("the kept block");
        *Arc::get_mut(&mut again).expect("only the caller holds it") = 8;
        assert_eq!(*again, 8);
        assert!(spare.take::<u64>().is_none());
    }

    #[test]
    fn the_store_is_bounded_and_drops_other_types() {
        let mut spare = SpareJobs::new(1);
        spare.give(Arc::new(1_u32));
        spare.give(Arc::new(2_u32));
        assert_eq!(spare.len(), 1, "the second block is freed");
        assert!(spare.take::<u64>().is_none(), "a block of another type");
        assert_eq!(spare.len(), 0, "and it was dropped");
    }
}
