//! Buffers kept for reuse instead of going back to the allocator.
//!
//! Under a pipeline of small actions the driver handles many buffers per
//! poll: batches of a few kilobytes (`coalesce.rs`), and the small frames
//! copied into and out of them, up to
//! [`MAX_BATCH_FRAMES`](crate::coalesce::MAX_BATCH_FRAMES) at a time.
//! Neither suits the allocator: batches are past what its per-thread cache
//! serves, and a poll's worth of small frames is more than that cache
//! holds per size (glibc keeps 7), so both went to the general allocator,
//! which merged its free lists whenever a batch came next to many freed
//! frames. Measured on the serving rank of a pipeline, that was about a
//! tenth of its time. The driver therefore keeps what it is done with and
//! lends it again:
//!
//! - **batch buffers**, of exactly [`CAPACITY`] bytes (the batch bound, so
//!   a batch never reallocates), kept here: taken when a second frame
//!   joins a peer's staged one, and to receive a message of
//!   [`POOLED_FROM`] to [`CAPACITY`] bytes; given back by a completed
//!   send, or once a received message's frames are copied out (a lone
//!   frame in such a buffer is copied out too);
//! - **frame buffers**, kept by the owner thread's
//!   [`frame_buffers`] (shared with the runtime, which encodes its frames
//!   in them and gives back the frames it decoded): the frames a batch was
//!   built from (and a lone frame whose send completed) go back there, and
//!   frames copied out of a received batch, or a short message received,
//!   are taken from there.
//!
//! At most [`MAX_BATCHES_KEPT`] batch buffers are kept here (62 KiB), and
//! the frame buffers within `frame_buffers`' per-thread bounds; the rest
//! are freed. Kept buffers are free memory, not frames: they are not
//! counted as retained bytes.

use dinah_std::transport::frame_buffers;

use crate::coalesce::MAX_BATCH_BYTES;

/// The capacity of every pooled batch buffer: the most bytes a batch
/// carries.
pub(crate) const CAPACITY: usize = MAX_BATCH_BYTES;

/// The most batch buffers kept.
pub(crate) const MAX_BATCHES_KEPT: usize = 16;

/// Messages at least this long (and at most [`CAPACITY`]) are received
/// into a batch buffer; shorter ones into a frame buffer.
pub(crate) const POOLED_FROM: usize = 1024;

/// Free batch buffers of [`CAPACITY`] bytes, all empty (frame buffers are
/// [`frame_buffers`]').
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    batches: Vec<Vec<u8>>,
}

impl BufferPool {
    /// An empty pool; its list is allocated once, at its bound.
    pub(crate) fn new() -> Self {
        Self {
            batches: Vec::with_capacity(MAX_BATCHES_KEPT),
        }
    }

    /// An empty batch buffer of [`CAPACITY`] bytes: a kept one, or new.
    pub(crate) fn take_batch(&mut self) -> Vec<u8> {
        self.batches
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(CAPACITY))
    }

    /// A copy of `frame`, in a spare frame buffer of this thread if there
    /// is one.
    pub(crate) fn copy(frame: &[u8]) -> Vec<u8> {
        let mut buffer = frame_buffers::take(frame.len());
        buffer.extend_from_slice(frame);
        buffer
    }

    /// A zeroed buffer of `len` bytes to receive a message into: a batch
    /// buffer for a batch-sized message, a frame buffer for a short one.
    pub(crate) fn take_len(&mut self, len: usize) -> Vec<u8> {
        let mut buffer = if (POOLED_FROM..=CAPACITY).contains(&len) {
            self.take_batch()
        } else {
            frame_buffers::take(len)
        };
        buffer.resize(len, 0);
        buffer
    }

    /// Whether `buffer` is a batch buffer (which frames are copied out of,
    /// rather than handed out).
    pub(crate) fn is_batch(buffer: &Vec<u8>) -> bool {
        buffer.capacity() == CAPACITY
    }

    /// Takes `buffer` back: a batch buffer if its list has room, any other
    /// buffer into this thread's [`frame_buffers`] (which keeps it or
    /// frees it).
    pub(crate) fn give(&mut self, mut buffer: Vec<u8>) {
        if !Self::is_batch(&buffer) {
            frame_buffers::give(buffer);
        } else if self.batches.len() < MAX_BATCHES_KEPT {
            buffer.clear();
            self.batches.push(buffer);
        }
    }

    /// Batch buffers kept.
    pub(crate) fn kept(&self) -> usize {
        self.batches.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a fresh thread, so its frame buffers start empty.
    fn on_fresh_thread(f: impl FnOnce() + Send + 'static) {
        std::thread::spawn(f)
            .join()
            .expect("the test thread passes");
    }

    #[test]
    fn a_given_batch_buffer_is_taken_again_without_allocating() {
        let mut pool = BufferPool::new();
        let mut buffer = pool.take_batch();
        assert_eq!(buffer.capacity(), CAPACITY);
        buffer.extend_from_slice(b"batch");
        let address = buffer.as_ptr();
        pool.give(buffer);
        assert_eq!(pool.kept(), 1);
        let again = pool.take_batch();
        assert_eq!(again.as_ptr(), address, "the same allocation");
        assert!(again.is_empty(), "handed out empty");
        assert_eq!(pool.kept(), 0);
    }

    #[test]
    fn a_frame_copy_reuses_a_given_frame_buffer() {
        on_fresh_thread(|| {
            let mut pool = BufferPool::new();
            let old = frame_buffers::take(100);
            let address = old.as_ptr();
            pool.give(old);
            assert_eq!(frame_buffers::kept().buffers, 1);
            assert_eq!(pool.kept(), 0, "not a batch");
            let copy = BufferPool::copy(b"new frame");
            assert_eq!(copy, b"new frame");
            assert_eq!(copy.as_ptr(), address, "the same allocation");
            assert_eq!(
                BufferPool::copy(b"no kept buffer left"),
                b"no kept buffer left"
            );
        });
    }

    #[test]
    fn a_receive_buffer_has_the_message_length_and_is_zeroed() {
        on_fresh_thread(|| {
            let mut pool = BufferPool::new();
            for len in [3000, 100] {
                let mut used = pool.take_len(len);
                used.fill(7);
                pool.give(used);
            }
            assert_eq!((pool.kept(), frame_buffers::kept().buffers), (1, 1));
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
            assert_eq!((pool.kept(), frame_buffers::kept().buffers), (0, 0));
        });
    }

    #[test]
    fn only_batch_buffers_are_kept_here_and_only_up_to_the_bound() {
        let mut pool = BufferPool::new();
        pool.give(Vec::new());
        pool.give(Vec::with_capacity(CAPACITY + 1));
        pool.give(Vec::with_capacity(64));
        assert_eq!(pool.kept(), 0, "other capacities are not batches");
        for _ in 0..MAX_BATCHES_KEPT + 5 {
            pool.give(Vec::with_capacity(CAPACITY));
        }
        assert_eq!(pool.kept(), MAX_BATCHES_KEPT);
    }
}
