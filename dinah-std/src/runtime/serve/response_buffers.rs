//! Reusing the buffers of the dedup cache's retained responses.
//!
//! Every request from a peer that completes leaves a copy of its response
//! in the dedup cache, for a duplicate to be answered with; the copy is
//! dropped when its entry expires or is evicted to make room. In steady
//! state (a full table) each new response's copy would be one allocation
//! and each dropped one a free. [`ResponseBuffers`] keeps the buffers of
//! dropped small responses and hands them out for the next copies
//! instead.
//!
//! Bounded: it keeps at most `capacity` buffers (sized by the runtime from
//! its action queue, since a burst of requests evicts that many old
//! entries before their jobs complete), each of at most
//! [`ResponseBuffers::MAX_BUFFER_BYTES`], and never grows past that.

/// Spare buffers for response copies.
#[derive(Debug)]
pub(crate) struct ResponseBuffers {
    spare: Vec<Vec<u8>>,
    capacity: usize,
}

impl ResponseBuffers {
    /// The largest buffer kept (bigger ones are freed).
    pub(crate) const MAX_BUFFER_BYTES: usize = 1 << 10;
    /// The most buffers kept, whatever the runtime asks for.
    pub(crate) const MAX_BUFFERS: usize = 1024;

    /// Keeps up to `capacity` buffers (at most [`Self::MAX_BUFFERS`]).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.min(Self::MAX_BUFFERS);
        Self {
            spare: Vec::with_capacity(capacity),
            capacity,
        }
    }

    /// A copy of `bytes`, in a spare buffer if one is kept.
    pub(crate) fn copy(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut copy = self.empty();
        copy.extend_from_slice(bytes);
        copy
    }

    /// An empty buffer: a spare one if one is kept.
    pub(crate) fn empty(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// Takes back a buffer that is no longer needed: kept if small enough
    /// and there is room, freed otherwise.
    pub(crate) fn recycle(&mut self, mut buffer: Vec<u8>) {
        if buffer.capacity() <= Self::MAX_BUFFER_BYTES && self.spare.len() < self.capacity {
            buffer.clear();
            self.spare.push(buffer);
        }
    }

    /// Frees every kept buffer (shutdown).
    pub(crate) fn clear(&mut self) {
        self.spare = Vec::new();
    }

    /// Buffers kept right now.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.spare.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_buffer_carries_the_next_copy() {
        let mut buffers = ResponseBuffers::new(2);
        let first = buffers.copy(b"first response");
        let address = first.as_ptr();
        buffers.recycle(first);
        assert_eq!(buffers.kept(), 1);
        let second = buffers.copy(b"second");
        assert_eq!(second, b"second", "nothing of the old contents is left");
        assert_eq!(second.as_ptr(), address, "the same allocation");
        assert_eq!(buffers.kept(), 0);
    }

    #[test]
    fn large_buffers_and_buffers_beyond_the_capacity_are_freed() {
        let mut buffers = ResponseBuffers::new(2);
        buffers.recycle(vec![0; ResponseBuffers::MAX_BUFFER_BYTES + 1]);
        assert_eq!(buffers.kept(), 0);
        for _ in 0..5 {
            buffers.recycle(Vec::with_capacity(16));
        }
        assert_eq!(buffers.kept(), 2);
        buffers.clear();
        assert_eq!(buffers.kept(), 0);
        // The capacity is capped whatever the caller asks for.
        let mut big = ResponseBuffers::new(usize::MAX);
        for _ in 0..ResponseBuffers::MAX_BUFFERS + 10 {
            big.recycle(Vec::with_capacity(8));
        }
        assert_eq!(big.kept(), ResponseBuffers::MAX_BUFFERS);
    }
}
