//! Several small frames to one peer in one MPI message.
//!
//! Every MPI message costs both ranks a fixed amount of work whatever its
//! size: an immediate send and its test on one side, a posted receive's
//! test and its posting again on the other. With many small frames in
//! flight (a pipeline of requests and their results) that fixed cost is
//! most of the transport's. So during one poll the driver stages the small
//! frames it takes from the handle per destination, and posts each
//! destination's staged frames as one message: a *batch*.
//!
//! # Format
//!
//! A batch is [`BATCH_MAGIC`] followed by each frame as a little-endian
//! `u32` length and the frame's bytes. Any other message is one frame, as
//! it is. The transport never looks inside a frame, so it stays
//! byte-transparent (the runtime validates frames, as over TCP); a lone
//! frame that happens to start with [`BATCH_MAGIC`], or to look like the
//! announcement of a large frame (`large.rs`), is sent as a batch of one,
//! so it cannot be mistaken for either. The receiver tells a batch
//! from a single frame with [`is_batch`] and splits a batch back into its
//! frames with [`Unbatch`]; a batch whose lengths do not add up
//! (which this sender never produces) ends with its remaining bytes as one
//! frame, which the runtime then rejects as malformed.
//!
//! # Order and bounds
//!
//! Frames to one peer on one lane keep their order: a peer's staged frames
//! are posted before any later frame to it (a large one, sent alone, or
//! the next batch), and MPI keeps the messages of one tag in order. A frame
//! alone in its poll is posted as it is, without a copy, so one request in
//! flight costs what it did without batching. A batch holds at most
//! [`MAX_BATCH_FRAMES`] frames and [`MAX_BATCH_BYTES`] bytes; frames of
//! [`SMALL_FRAME`] bytes or more are never copied into one. Staging lasts
//! one poll: everything staged is posted before the poll receives.

use std::ops::Range;

use dinah_core::{Rank, WorldSize};

use dinah_std::transport::{Frame, Tail};

use crate::pool::BufferPool;

/// A frame at least this long is sent as its own message: copying it
/// would cost more than the message it saves.
pub(crate) const SMALL_FRAME: usize = 4 * 1024;

/// The most bytes one batch carries, its framing included (staged frames
/// are posted once the next one would take the batch past this).
///
/// It keeps a batch, with the library's own header, within the eager
/// limit of OpenMPI's shared-memory transport (4 KiB), the smallest of the
/// common ones. A message past its library's eager limit goes by the
/// rendezvous protocol: it is complete only after more messages between
/// the ranks, and a posted receive holding one would keep the lane's
/// later messages waiting behind it (see `posted.rs`). It is also the size
/// of a posted receive, so a batch always fits one.
pub(crate) const MAX_BATCH_BYTES: usize = 4 * 1024 - 128;

/// The most frames one batch carries: also how many events one message
/// can hold for the receiver (which keeps the rest of a batch when its
/// poll's budget ends inside it).
pub(crate) const MAX_BATCH_FRAMES: usize = 64;

/// How a batch starts. It differs from the wire protocol's magic
/// (`DNAH`), so no dinah frame is ever wrapped.
pub(crate) const BATCH_MAGIC: [u8; 8] = *b"DNAHbat1";

/// The length prefix of each frame in a batch.
const LEN_BYTES: usize = 4;

/// Frames posted as one message (a frame held in parts as one message
/// each: `bytes`, the middle parts, then `tail`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    /// The message: one frame as it is, or a batch; a split frame's head.
    pub(crate) bytes: Vec<u8>,
    /// A split frame's middle parts, each with its place in the head,
    /// posted after the head in order (none otherwise).
    pub(crate) middle: Vec<(usize, Tail)>,
    /// A split frame's tail, posted last (empty otherwise).
    pub(crate) tail: Tail,
    /// How many frames it holds.
    pub(crate) frames: usize,
    /// The frames' own bytes (without the batch framing): what the handle
    /// counts for them.
    pub(crate) frame_bytes: usize,
}

impl Batch {
    /// `frame` alone, posted as it is (or as a batch of one if it could be
    /// mistaken for a batch or for an announcement, see `large.rs`).
    fn one(frame: Vec<u8>) -> Self {
        let frame_bytes = frame.len();
        if frame.starts_with(&BATCH_MAGIC) || crate::large::looks_announced(&frame) {
            let mut bytes = Vec::with_capacity(BATCH_MAGIC.len() + LEN_BYTES + frame.len());
            bytes.extend_from_slice(&BATCH_MAGIC);
            append(&mut bytes, &frame);
            return Self {
                bytes,
                middle: Vec::new(),
                tail: Tail::new(),
                frames: 1,
                frame_bytes,
            };
        }
        Self {
            bytes: frame,
            middle: Vec::new(),
            tail: Tail::new(),
            frames: 1,
            frame_bytes,
        }
    }

    /// A split frame, posted as its head and its parts, each from its own
    /// buffer (its middle parts copied into its head if there are more
    /// parts than an announcement lists, see `large.rs`).
    fn split(mut frame: Frame) -> Self {
        let frame_bytes = frame.len();
        if frame.part_places().count() > crate::large::MAX_PARTS {
            frame.settle();
        }
        let (bytes, middle, tail) = frame.into_all_parts();
        Self {
            bytes,
            middle,
            tail,
            frames: 1,
            frame_bytes,
        }
    }

    /// Is it a split frame (posted as a head and parts)?
    pub(crate) fn is_split(&self) -> bool {
        !self.middle.is_empty() || !self.tail.is_empty()
    }
}

/// Appends `frame` to a batch's bytes, with its length.
fn append(bytes: &mut Vec<u8>, frame: &[u8]) {
    let len = u32::try_from(frame.len()).expect("a batched frame is small");
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend_from_slice(frame);
}

/// What is staged for one peer.
#[derive(Debug)]
enum Staged {
    /// One frame, kept as it is until a second one comes.
    One(Vec<u8>),
    /// A batch being built: its bytes, frames and frame bytes.
    Many(Vec<u8>, usize, usize),
}

impl Staged {
    fn frames(&self) -> usize {
        match self {
            Self::One(_) => 1,
            Self::Many(_, frames, _) => *frames,
        }
    }

    /// Its bytes on the wire if `frame` were added.
    fn wire_len_with(&self, frame: &[u8]) -> usize {
        let current = match self {
            Self::One(first) => BATCH_MAGIC.len() + LEN_BYTES + first.len(),
            Self::Many(bytes, _, _) => bytes.len(),
        };
        current + LEN_BYTES + frame.len()
    }

    /// Adds `frame` (the caller checked that it fits); a new batch's
    /// buffer comes from `pool` and never grows (a batch is at most
    /// [`MAX_BATCH_BYTES`], the pool's capacity).
    fn add(self, frame: &[u8], pool: &mut BufferPool) -> Self {
        match self {
            Self::One(first) => {
                let mut bytes = pool.take_batch();
                bytes.extend_from_slice(&BATCH_MAGIC);
                append(&mut bytes, &first);
                append(&mut bytes, frame);
                let frame_bytes = first.len() + frame.len();
                pool.give(first);
                Self::Many(bytes, 2, frame_bytes)
            }
            Self::Many(mut bytes, frames, frame_bytes) => {
                append(&mut bytes, frame);
                Self::Many(bytes, frames + 1, frame_bytes + frame.len())
            }
        }
    }

    fn into_batch(self) -> Batch {
        match self {
            Self::One(frame) => Batch::one(frame),
            Self::Many(bytes, frames, frame_bytes) => Batch {
                bytes,
                middle: Vec::new(),
                tail: Tail::new(),
                frames,
                frame_bytes,
            },
        }
    }
}

/// The frames staged for each peer during one poll.
#[derive(Debug)]
pub(crate) struct Coalescer {
    world: WorldSize,
    /// Per destination ([`Rank::index`]).
    staged: Vec<Option<Staged>>,
    /// Frames staged over all destinations.
    frames: usize,
}

impl Coalescer {
    /// Nothing staged, for a world of `world` ranks.
    pub(crate) fn new(world: WorldSize) -> Self {
        Self {
            world,
            staged: (0..world.get()).map(|_| None).collect(),
            frames: 0,
        }
    }

    /// Frames staged and not yet handed to `post`.
    pub(crate) fn frames(&self) -> usize {
        self.frames
    }

    /// Stages `frame` for `to`, first calling `post` with whatever must go
    /// out before it: the batch staged for `to` when `frame` does not fit
    /// in it, and `frame` itself when it is too large to stage. A new
    /// batch takes its buffer from `pool`, and a frame copied into a batch
    /// gives its buffer back. A split frame is never staged: it is posted
    /// as it is, after what was staged for `to`.
    pub(crate) fn push(
        &mut self,
        to: Rank,
        frame: Frame,
        pool: &mut BufferPool,
        mut post: impl FnMut(Rank, Batch),
    ) {
        let slot = &mut self.staged[to.index()];
        if frame.is_split() {
            if let Some(staged) = slot.take() {
                self.frames -= staged.frames();
                post(to, staged.into_batch());
            }
            post(to, Batch::split(frame));
            return;
        }
        let frame = frame.into_whole();
        let large = frame.len() >= SMALL_FRAME;
        if let Some(staged) = slot.take() {
            let fits = !large
                && staged.frames() < MAX_BATCH_FRAMES
                && staged.wire_len_with(&frame) <= MAX_BATCH_BYTES;
            if fits {
                *slot = Some(staged.add(&frame, pool));
                // Copied in: its buffer is the pool's for the next copy.
                pool.give(frame);
                self.frames += 1;
                return;
            }
            self.frames -= staged.frames();
            post(to, staged.into_batch());
        }
        if large {
            post(to, Batch::one(frame));
        } else {
            self.frames += 1;
            *slot = Some(Staged::One(frame));
        }
    }

    /// Hands every staged batch to `post`, in rank order.
    pub(crate) fn flush(&mut self, mut post: impl FnMut(Rank, Batch)) {
        if self.frames == 0 {
            return;
        }
        for (index, slot) in self.staged.iter_mut().enumerate() {
            if let Some(staged) = slot.take() {
                let rank = u32::try_from(index)
                    .ok()
                    .and_then(|index| self.world.rank(index).ok())
                    .expect("staged per rank of the world");
                post(rank, staged.into_batch());
            }
        }
        self.frames = 0;
    }
}

/// Is this received message a batch (rather than one frame)?
pub(crate) fn is_batch(message: &[u8]) -> bool {
    message.starts_with(&BATCH_MAGIC)
}

/// How far a batch was split into its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unbatch {
    /// Nothing handed out yet.
    Start,
    /// The next frame's length prefix is at this offset.
    At(usize),
    /// Every frame was handed out.
    Done,
}

impl Unbatch {
    /// Where the next frame of `batch` (a message that [`is_batch`]) is,
    /// or `None` once every frame was handed out. Advances past it.
    pub(crate) fn next(&mut self, batch: &[u8]) -> Option<Range<usize>> {
        let at = match *self {
            Self::Done => return None,
            Self::Start => BATCH_MAGIC.len(),
            Self::At(at) => at,
        };
        if at >= batch.len() {
            *self = Self::Done;
            return None;
        }
        let declared = batch
            .get(at..at + LEN_BYTES)
            .and_then(|len| <[u8; LEN_BYTES]>::try_from(len).ok())
            .map(|len| u32::from_le_bytes(len) as usize);
        let start = at + LEN_BYTES;
        match declared {
            Some(len) if len <= batch.len().saturating_sub(start) => {
                let end = start + len;
                *self = if end == batch.len() {
                    Self::Done
                } else {
                    Self::At(end)
                };
                Some(start..end)
            }
            // Lengths that do not add up: the rest is one (bad) frame.
            _ => {
                *self = Self::Done;
                Some(at..batch.len())
            }
        }
    }

    /// Whether every frame was handed out.
    pub(crate) fn is_done(self) -> bool {
        self == Self::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(size: u32) -> WorldSize {
        WorldSize::new(size).unwrap()
    }

    fn rank(n: u32) -> Rank {
        world(8).rank(n).unwrap()
    }

    /// Pushes every frame, flushes, and returns what was posted.
    fn stage(coalescer: &mut Coalescer, pushes: &[(u32, Vec<u8>)]) -> Vec<(u32, Batch)> {
        let mut posted = Vec::new();
        let mut pool = BufferPool::new();
        for (to, frame) in pushes {
            coalescer.push(rank(*to), frame.clone().into(), &mut pool, |to, batch| {
                posted.push((to.get(), batch));
            });
        }
        coalescer.flush(|to, batch| posted.push((to.get(), batch)));
        assert_eq!(coalescer.frames(), 0);
        posted
    }

    /// The frames a receiver gets from `message`.
    fn split(message: &[u8]) -> Vec<Vec<u8>> {
        if !is_batch(message) {
            return vec![message.to_vec()];
        }
        let mut unbatch = Unbatch::Start;
        let mut frames = Vec::new();
        while let Some(range) = unbatch.next(message) {
            frames.push(message[range].to_vec());
        }
        assert!(unbatch.is_done());
        assert_eq!(unbatch.next(message), None, "done stays done");
        frames
    }

    #[test]
    fn small_frames_to_one_peer_go_as_one_batch_and_split_back_in_order() {
        let mut coalescer = Coalescer::new(world(2));
        let frames = vec![vec![1; 10], vec![2; 20], Vec::new(), vec![3; 5]];
        let pushes: Vec<_> = frames.iter().map(|frame| (1, frame.clone())).collect();
        let posted = stage(&mut coalescer, &pushes);
        assert_eq!(posted.len(), 1);
        let (to, batch) = &posted[0];
        assert_eq!(*to, 1);
        assert_eq!((batch.frames, batch.frame_bytes), (4, 35));
        assert!(batch.bytes.starts_with(&BATCH_MAGIC));
        assert_eq!(split(&batch.bytes), frames);
    }

    #[test]
    fn a_split_frame_follows_what_was_staged_and_keeps_its_parts() {
        let mut coalescer = Coalescer::new(world(2));
        let mut pool = BufferPool::new();
        let mut posted = Vec::new();
        coalescer.push(rank(1), vec![1; 10].into(), &mut pool, |_, batch| {
            posted.push(batch);
        });
        let tail = vec![9_u8; 1 << 17];
        let address = tail.as_ptr();
        let frame = Frame::split(vec![2; 30], tail);
        coalescer.push(rank(1), frame, &mut pool, |_, batch| posted.push(batch));
        assert_eq!(coalescer.frames(), 0, "nothing stays staged");
        assert_eq!(posted.len(), 2);
        assert_eq!(posted[0].bytes, vec![1; 10], "the staged frame first");
        assert!(posted[0].tail.is_empty());
        let split = &posted[1];
        assert_eq!((split.frames, split.frame_bytes), (1, 30 + (1 << 17)));
        assert_eq!(split.bytes, vec![2; 30]);
        assert_eq!(
            split.tail.as_bytes().as_ptr(),
            address,
            "the tail is not copied"
        );
    }

    #[test]
    fn middle_parts_are_posted_from_their_own_buffers() {
        let mut coalescer = Coalescer::new(world(2));
        let mut pool = BufferPool::new();
        let mut posted = Vec::new();
        let (middle, tail) = (vec![5_u8; 1 << 16], vec![9_u8; 1 << 17]);
        let addresses = (middle.as_ptr(), tail.as_ptr());
        let frame = Frame::with_middle(vec![2; 30], vec![(4, Tail::from(middle))], tail);
        coalescer.push(rank(1), frame, &mut pool, |_, batch| posted.push(batch));
        assert_eq!(posted.len(), 1);
        let split = &posted[0];
        assert!(split.is_split());
        assert_eq!(split.frame_bytes, 30 + (1 << 16) + (1 << 17));
        assert_eq!(split.bytes, vec![2; 30], "the head alone");
        assert_eq!(split.middle.len(), 1);
        assert_eq!(split.middle[0].0, 4);
        assert_eq!(
            split.middle[0].1.as_bytes().as_ptr(),
            addresses.0,
            "not copied"
        );
        assert_eq!(split.tail.as_bytes().as_ptr(), addresses.1, "not copied");
        // With the last segment in the head: a head and a middle part.
        let frame = Frame::with_middle(
            vec![2; 30],
            vec![(4, Tail::from(vec![5_u8; 9]))],
            Vec::new(),
        );
        coalescer.push(rank(1), frame, &mut pool, |_, batch| posted.push(batch));
        assert_eq!(posted.len(), 2);
        assert!(posted[1].tail.is_empty() && posted[1].middle.len() == 1);
    }

    #[test]
    fn parts_past_what_an_announcement_lists_are_joined_into_the_head() {
        let mut coalescer = Coalescer::new(world(2));
        let mut posted = Vec::new();
        let middle: Vec<_> = (0..crate::large::MAX_PARTS)
            .map(|i| (i, Tail::from(vec![i as u8; 3])))
            .collect();
        let frame = Frame::with_middle(vec![7; 80], middle, vec![1_u8; 5]);
        let bytes = frame.to_vec();
        coalescer.push(rank(1), frame, &mut BufferPool::new(), |_, batch| {
            posted.push(batch);
        });
        let [split] = &posted[..] else {
            panic!("one message");
        };
        assert!(split.middle.is_empty(), "joined");
        assert_eq!(split.bytes, bytes[..bytes.len() - 5]);
        assert_eq!(split.tail.as_bytes(), [1; 5]);
    }

    #[test]
    fn a_lone_frame_is_posted_as_it_is_without_a_copy() {
        let mut coalescer = Coalescer::new(world(2));
        let frame = vec![7_u8; 100];
        let address = frame.as_ptr();
        let mut posted = Vec::new();
        coalescer.push(rank(1), frame.into(), &mut BufferPool::new(), |_, batch| {
            posted.push(batch);
        });
        assert!(posted.is_empty(), "a small frame waits for the flush");
        assert_eq!(coalescer.frames(), 1);
        coalescer.flush(|_, batch| posted.push(batch));
        assert_eq!(posted.len(), 1);
        assert_eq!((posted[0].frames, posted[0].frame_bytes), (1, 100));
        assert_eq!(posted[0].bytes.as_ptr(), address);
        assert_eq!(split(&posted[0].bytes), [vec![7_u8; 100]]);
    }

    #[test]
    fn a_frame_that_looks_like_a_batch_is_wrapped_in_one() {
        let mut coalescer = Coalescer::new(world(2));
        let tricky = [&BATCH_MAGIC[..], &[9, 0, 0, 0, 1]].concat();
        let posted = stage(&mut coalescer, &[(1, tricky.clone())]);
        assert_eq!(posted.len(), 1);
        assert_ne!(posted[0].1.bytes, tricky);
        assert_eq!(posted[0].1.frame_bytes, tricky.len());
        assert_eq!(split(&posted[0].1.bytes), [tricky]);
    }

    #[test]
    fn a_frame_that_looks_like_an_announcement_is_wrapped_in_a_batch() {
        let mut coalescer = Coalescer::new(world(2));
        let tricky = crate::large::announcement(1 << 20);
        let posted = stage(&mut coalescer, &[(1, tricky.clone())]);
        assert_eq!(posted.len(), 1);
        assert!(crate::large::announced(&posted[0].1.bytes).is_none());
        assert_eq!(posted[0].1.frame_bytes, tricky.len());
        assert_eq!(split(&posted[0].1.bytes), [tricky]);
    }

    #[test]
    fn each_peer_gets_its_own_batch() {
        let mut coalescer = Coalescer::new(world(4));
        let posted = stage(
            &mut coalescer,
            &[
                (3, vec![3; 4]),
                (1, vec![1; 4]),
                (3, vec![30; 4]),
                (2, vec![2; 4]),
            ],
        );
        let summary: Vec<(u32, Vec<Vec<u8>>)> = posted
            .into_iter()
            .map(|(to, batch)| (to, split(&batch.bytes)))
            .collect();
        assert_eq!(
            summary,
            [
                (1, vec![vec![1; 4]]),
                (2, vec![vec![2; 4]]),
                (3, vec![vec![3; 4], vec![30; 4]]),
            ]
        );
    }

    #[test]
    fn a_large_frame_goes_alone_after_what_was_staged_before_it() {
        let mut coalescer = Coalescer::new(world(2));
        let large = vec![9_u8; SMALL_FRAME];
        let posted = stage(
            &mut coalescer,
            &[
                (1, vec![1; 8]),
                (1, vec![2; 8]),
                (1, large.clone()),
                (1, vec![3; 8]),
            ],
        );
        let frames: Vec<Vec<Vec<u8>>> = posted
            .iter()
            .map(|(_, batch)| split(&batch.bytes))
            .collect();
        assert_eq!(
            frames,
            [vec![vec![1; 8], vec![2; 8]], vec![large], vec![vec![3; 8]]]
        );
    }

    #[test]
    fn batches_respect_their_byte_and_frame_bounds() {
        let mut coalescer = Coalescer::new(world(2));
        let frame = vec![5_u8; 1000];
        let pushes: Vec<(u32, Vec<u8>)> = (0..40).map(|_| (1, frame.clone())).collect();
        let posted = stage(&mut coalescer, &pushes);
        assert!(
            posted
                .iter()
                .all(|(_, batch)| batch.bytes.len() <= MAX_BATCH_BYTES)
        );
        assert!(posted.len() > 1);
        let received: Vec<Vec<u8>> = posted
            .iter()
            .flat_map(|(_, batch)| split(&batch.bytes))
            .collect();
        assert_eq!(received, vec![frame; 40]);

        let tiny: Vec<(u32, Vec<u8>)> = (0..=MAX_BATCH_FRAMES).map(|_| (1, vec![0; 1])).collect();
        let posted = stage(&mut coalescer, &tiny);
        let frames: Vec<usize> = posted.iter().map(|(_, batch)| batch.frames).collect();
        assert_eq!(frames, [MAX_BATCH_FRAMES, 1]);
    }

    #[test]
    fn a_batch_whose_lengths_do_not_add_up_ends_with_one_bad_frame() {
        let mut message = BATCH_MAGIC.to_vec();
        append(&mut message, &[1, 2, 3]);
        message.extend_from_slice(&100_u32.to_le_bytes());
        message.extend_from_slice(&[4, 5]);
        let frames = split(&message);
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0], [1, 2, 3]);
        assert_eq!(frames[1], [100, 0, 0, 0, 4, 5]);

        // A length prefix cut short is a bad frame too; nothing is lost.
        let mut message = BATCH_MAGIC.to_vec();
        message.extend_from_slice(&[7, 0]);
        assert_eq!(split(&message), [vec![7, 0]]);
        // The magic alone holds no frame.
        assert!(split(&BATCH_MAGIC).is_empty());
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// A frame: mostly small, sometimes past the batching threshold,
        /// sometimes starting like a batch.
        fn frame() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                8 => proptest::collection::vec(any::<u8>(), 0..200),
                1 => proptest::collection::vec(any::<u8>(), SMALL_FRAME..SMALL_FRAME + 16),
                1 => proptest::collection::vec(any::<u8>(), 0..8)
                    .prop_map(|tail| [&BATCH_MAGIC[..], &tail].concat()),
            ]
        }

        proptest! {
            /// Whatever frames go to whichever peers, every peer receives
            /// exactly its frames, in order, and the counts add up.
            #[test]
            fn every_peer_receives_its_frames_in_order(
                pushes in proptest::collection::vec((0_u32..4, frame()), 0..120)
            ) {
                let mut coalescer = Coalescer::new(world(4));
                let posted = stage(&mut coalescer, &pushes);
                for peer in 0..4 {
                    let sent: Vec<Vec<u8>> = pushes
                        .iter()
                        .filter(|(to, _)| *to == peer)
                        .map(|(_, frame)| frame.clone())
                        .collect();
                    let batches: Vec<&Batch> = posted
                        .iter()
                        .filter(|(to, _)| *to == peer)
                        .map(|(_, batch)| batch)
                        .collect();
                    let received: Vec<Vec<u8>> =
                        batches.iter().flat_map(|batch| split(&batch.bytes)).collect();
                    prop_assert_eq!(&received, &sent);
                    let frames: usize = batches.iter().map(|batch| batch.frames).sum();
                    let bytes: usize = batches.iter().map(|batch| batch.frame_bytes).sum();
                    prop_assert_eq!(frames, sent.len());
                    prop_assert_eq!(bytes, sent.iter().map(Vec::len).sum::<usize>());
                    for batch in batches {
                        prop_assert!(batch.frames <= MAX_BATCH_FRAMES);
                        prop_assert!(batch.frames == 1 || batch.bytes.len() <= MAX_BATCH_BYTES);
                        // A batch stays in its pooled buffer: it never grew.
                        prop_assert!(batch.frames == 1 || BufferPool::is_batch(&batch.bytes));
                    }
                }
            }

            /// Any received bytes split into frames without a panic, and
            /// the frames never hold more than the message.
            #[test]
            fn any_message_splits_without_loss_or_panic(
                tail in proptest::collection::vec(any::<u8>(), 0..300),
                batch in any::<bool>(),
            ) {
                let message = if batch { [&BATCH_MAGIC[..], &tail].concat() } else { tail };
                let frames = split(&message);
                let total: usize = frames.iter().map(Vec::len).sum();
                prop_assert!(total <= message.len());
                if !message.starts_with(&BATCH_MAGIC) {
                    prop_assert_eq!(frames, vec![message]);
                }
            }
        }
    }
}
