//! Buffers kept for reuse instead of going back to the allocator.
//!
//! Under a pipeline of small actions the driver handles many buffers per
//! poll: batches of a few kilobytes (`coalesce.rs`), and the small frames
//! copied into and out of them, up to [`MAX_BATCH_FRAMES`] at a time.
//! Neither suits the allocator: batches are past what its per-thread cache
//! serves, and a poll's worth of small frames is more than that cache
//! holds per size (glibc keeps 7), so both went to the general allocator,
//! which merged its free lists whenever a batch came next to many freed
//! frames. Measured on the serving rank of a pipeline, that was about a
//! tenth of its time. The driver therefore keeps what it is done with and
//! lends it again:
//!
//! - **batch buffers**, of exactly [`CAPACITY`] bytes (the batch bound, so
//!   a batch never reallocates): taken when a second frame joins a peer's
//!   staged one, and to receive a message of [`POOLED_FROM`] to
//!   [`CAPACITY`] bytes; given back by a completed send, or once a
//!   received message's frames are copied out (a lone frame in such a
//!   buffer is copied out too);
//! - **frame buffers**, of at most [`MAX_FRAME_KEPT`] bytes: the frames a
//!   batch was built from (and a lone frame whose send completed) come
//!   back here, and frames copied out of a received batch, or a short
//!   message received, go into them.
//!
//! At most [`MAX_BATCHES_KEPT`] batch and [`MAX_FRAMES_KEPT`] frame
//! buffers are kept; the rest are freed. The pool therefore holds at most
//! 256 KiB + 256 KiB whatever the traffic. Kept buffers are free memory,
//! not frames: they are not counted as retained bytes.

use crate::coalesce::{MAX_BATCH_BYTES, MAX_BATCH_FRAMES};

/// The capacity of every pooled batch buffer: the most bytes a batch
/// carries.
pub(crate) const CAPACITY: usize = MAX_BATCH_BYTES;

/// The most batch buffers kept.
pub(crate) const MAX_BATCHES_KEPT: usize = 16;

/// Messages at least this long (and at most [`CAPACITY`]) are received
/// into a batch buffer; shorter ones into a frame buffer.
pub(crate) const POOLED_FROM: usize = 1024;

/// The largest frame buffer kept (by capacity).
pub(crate) const MAX_FRAME_KEPT: usize = POOLED_FROM;

/// The most frame buffers kept: a poll's worth of frames each way.
pub(crate) const MAX_FRAMES_KEPT: usize = 4 * MAX_BATCH_FRAMES;

/// Free buffers, all empty: batch buffers of [`CAPACITY`] bytes and frame
/// buffers of at most [`MAX_FRAME_KEPT`].
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    batches: Vec<Vec<u8>>,
    frames: Vec<Vec<u8>>,
}

impl BufferPool {
    /// An empty pool; its lists are allocated once, at their bounds.
    pub(crate) fn new() -> Self {
        Self {
            batches: Vec::with_capacity(MAX_BATCHES_KEPT),
            frames: Vec::with_capacity(MAX_FRAMES_KEPT),
        }
    }

    /// An empty batch buffer of [`CAPACITY`] bytes: a kept one, or new.
    pub(crate) fn take_batch(&mut self) -> Vec<u8> {
        self.batches
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(CAPACITY))
    }

    /// A copy of `frame`, in a kept frame buffer if there is one.
    pub(crate) fn copy(&mut self, frame: &[u8]) -> Vec<u8> {
        match self.frames.pop() {
            Some(mut buffer) => {
                buffer.extend_from_slice(frame);
                buffer
            }
            None => frame.to_vec(),
        }
    }

    /// A zeroed buffer of `len` bytes to receive a message into: a batch
    /// buffer for a batch-sized message, a frame buffer for a short one.
    pub(crate) fn take_len(&mut self, len: usize) -> Vec<u8> {
        let kept = if len > CAPACITY {
            None
        } else if len >= POOLED_FROM {
            Some(self.take_batch())
        } else {
            self.frames.pop()
        };
        match kept {
            Some(mut buffer) => {
                buffer.resize(len, 0);
                buffer
            }
            None => vec![0; len],
        }
    }

    /// Whether `buffer` is a batch buffer (which frames are copied out of,
    /// rather than handed out).
    pub(crate) fn is_batch(buffer: &Vec<u8>) -> bool {
        buffer.capacity() == CAPACITY
    }

    /// Takes `buffer` back if it is a batch or frame buffer and its list
    /// has room; otherwise frees it.
    pub(crate) fn give(&mut self, mut buffer: Vec<u8>) {
        let list = if Self::is_batch(&buffer) {
            (&mut self.batches, MAX_BATCHES_KEPT)
        } else if buffer.capacity() <= MAX_FRAME_KEPT && buffer.capacity() > 0 {
            (&mut self.frames, MAX_FRAMES_KEPT)
        } else {
            return;
        };
        if list.0.len() < list.1 {
            buffer.clear();
            list.0.push(buffer);
        }
    }

    /// Buffers kept: (batch buffers, frame buffers).
    pub(crate) fn kept(&self) -> (usize, usize) {
        (self.batches.len(), self.frames.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_batch_buffer_is_taken_again_without_allocating() {
        let mut pool = BufferPool::new();
        let mut buffer = pool.take_batch();
        assert_eq!(buffer.capacity(), CAPACITY);
        buffer.extend_from_slice(b"batch");
        let address = buffer.as_ptr();
        pool.give(buffer);
        assert_eq!(pool.kept(), (1, 0));
        let again = pool.take_batch();
        assert_eq!(again.as_ptr(), address, "the same allocation");
        assert!(again.is_empty(), "handed out empty");
        assert_eq!(pool.kept(), (0, 0));
    }

    #[test]
    fn a_frame_copy_reuses_a_given_frame_buffer() {
        let mut pool = BufferPool::new();
        let old = vec![9_u8; 100];
        let address = old.as_ptr();
        pool.give(old);
        assert_eq!(pool.kept(), (0, 1));
        let copy = pool.copy(b"new frame");
        assert_eq!(copy, b"new frame");
        assert_eq!(copy.as_ptr(), address, "the same allocation");
        assert_eq!(pool.copy(b"no kept buffer left"), b"no kept buffer left");
    }

    #[test]
    fn a_receive_buffer_has_the_message_length_and_is_zeroed() {
        let mut pool = BufferPool::new();
        for len in [3000, 100] {
            let mut used = pool.take_len(len);
            used.fill(7);
            pool.give(used);
        }
        assert_eq!(pool.kept(), (1, 1));
        let batch = pool.take_len(2000);
        assert_eq!((batch.len(), batch.capacity()), (2000, CAPACITY));
        assert!(
            batch.iter().all(|&byte| byte == 0),
            "a kept buffer is zeroed"
        );
        let frame = pool.take_len(60);
        assert_eq!(frame.len(), 60);
        assert!(
            frame.iter().all(|&byte| byte == 0),
            "a kept buffer is zeroed"
        );
        let large = pool.take_len(CAPACITY + 1);
        assert_eq!(large.len(), CAPACITY + 1);
        assert_eq!(pool.kept(), (0, 0));
    }

    #[test]
    fn only_pooled_sizes_are_kept_and_only_up_to_the_bounds() {
        let mut pool = BufferPool::new();
        pool.give(Vec::new());
        pool.give(Vec::with_capacity(MAX_FRAME_KEPT + 1));
        pool.give(Vec::with_capacity(CAPACITY + 1));
        assert_eq!(pool.kept(), (0, 0), "other capacities are freed");
        for _ in 0..MAX_BATCHES_KEPT + 5 {
            pool.give(Vec::with_capacity(CAPACITY));
        }
        for _ in 0..MAX_FRAMES_KEPT + 5 {
            pool.give(Vec::with_capacity(64));
        }
        assert_eq!(pool.kept(), (MAX_BATCHES_KEPT, MAX_FRAMES_KEPT));
    }
}
