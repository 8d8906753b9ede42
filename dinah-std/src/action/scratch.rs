//! Each thread's scratch [`SegmentWriter`], and encoding a payload where
//! its frame will be.
//!
//! A value is encoded into the writer, then framed: the frame's head
//! (header and segment length table) goes in front of the payload. For a
//! small payload the frame is a fresh buffer and the payload is copied
//! into it, which costs little. A large payload is not copied: the writer
//! keeps room for the head in front of the first segment, and the frame is
//! written into that room, so the writer's buffer becomes the frame.
//!
//! The room must be exactly the head's length, which depends on how many
//! segments the value writes. The thread remembers, for each kind of frame
//! it made recently (by action and direction), that count and whether the
//! payload was large. Room is reserved only when the last payload of the
//! kind was large, so small frames cost no reservation, and it is right
//! for every large value after the first of its kind, unless the kind
//! writes a varying number of segments (an enum's variants may); then the
//! payload is copied, as for a small one.

use std::cell::RefCell;

use dinah_core::wire::{HEADER_LEN, LENGTH_ENTRY_LEN};

use super::SegmentWriter;

/// The most buffer capacity a thread keeps in its scratch writer between
/// uses; a larger payload's buffer is released after it is encoded.
///
/// Payloads up to about a megabyte reuse the buffer: allocating a fresh
/// megabyte per call costs page faults that, on small VMs, took longer
/// than the copy into it. Each thread that encodes (owner threads and
/// domain workers) keeps at most this much.
pub(super) const SCRATCH_KEEP_BYTES: usize = (1 << 20) + (64 << 10);

/// The smallest payload whose frame is written around it rather than
/// copied. Below this, a copy costs less than the buffer the writer would
/// have to allocate again for the next value.
pub(crate) const IN_PLACE_FROM: usize = 64 << 10;

/// What a frame carries, for remembering its segment count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameKind {
    /// A request's input.
    Request,
    /// A result's output.
    Result,
}

/// How many kinds of frame a thread remembers the segment count of.
const HINTS: usize = 8;

/// What a thread remembers of the last frame of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hint {
    /// The action's ID.
    action: u128,
    /// The direction.
    kind: FrameKind,
    /// How many segments its payload had.
    segments: usize,
    /// Were its payload's bytes in the writer's own buffer (detached
    /// segments aside) at least [`IN_PLACE_FROM`] bytes?
    large: bool,
}

/// A thread's scratch writer and the segment counts it remembers, in one
/// thread-local so that a frame costs one borrow.
struct Scratch {
    writer: SegmentWriter,
    /// Segment counts of recent frame kinds, by `slot(action, kind)`.
    hints: [Option<Hint>; HINTS],
}

impl Scratch {
    const fn new() -> Self {
        Self {
            writer: SegmentWriter {
                data: Vec::new(),
                ends: Vec::new(),
                depth: 0,
                start: 0,
                apart: Vec::new(),
            },
            hints: [None; HINTS],
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::new()) };
}

/// Runs `f` with this thread's scratch, its writer empty. The scratch is
/// borrowed where it lives (nothing moves in or out of the thread-local);
/// nested use (an encoder calling this again) finds it borrowed and gets a
/// fresh one.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            // Cleared before use, so a panic in an earlier `f` leaves
            // nothing behind.
            scratch.writer.clear();
            let result = f(&mut scratch);
            if scratch.writer.data.capacity() > SCRATCH_KEEP_BYTES {
                let buffer = std::mem::take(&mut scratch.writer).data;
                crate::transport::frame_buffers::give(buffer);
            }
            result
        }
        Err(_) => f(&mut Scratch::new()),
    })
}

/// Runs `f` with this thread's empty scratch writer, so encoding a value
/// on a hot path reuses one buffer instead of allocating two per value.
#[cfg(test)]
fn with_scratch_writer<R>(f: impl FnOnce(&mut SegmentWriter) -> R) -> R {
    with_scratch(|scratch| f(&mut scratch.writer))
}

/// Encodes a payload with `encode` into this thread's scratch writer, with
/// room in front for the head of a `kind` frame of `action` if the last
/// such frame's payload was large (room for as many segments as it had),
/// then makes the frame with
/// `frame`, which may take the writer's buffer (see
/// [`SegmentWriter::frame_in_place`]).
pub(crate) fn with_frame_writer<R, E>(
    action: u128,
    kind: FrameKind,
    encode: impl FnOnce(&mut SegmentWriter) -> Result<(), E>,
    frame: impl FnOnce(&mut SegmentWriter) -> Result<R, E>,
) -> Result<R, E> {
    with_scratch(|Scratch { writer, hints }| {
        let hint = &mut hints[slot(action, kind)];
        let last = hint.filter(|last| last.action == action && last.kind == kind);
        if let Some(Hint {
            segments,
            large: true,
            ..
        }) = last
        {
            writer.reserve_head(head_len(segments));
        }
        encode(writer)?;
        *hint = Some(Hint {
            action,
            kind,
            segments: writer.len(),
            large: writer.bytes().len() >= IN_PLACE_FROM,
        });
        frame(writer)
    })
}

/// A frame head's length for `segments` segments.
const fn head_len(segments: usize) -> usize {
    HEADER_LEN + LENGTH_ENTRY_LEN * segments
}

/// Where `action`'s `kind` frames are remembered.
fn slot(action: u128, kind: FrameKind) -> usize {
    // Action IDs are hashes (or chosen by hand): their low bits spread.
    (action as usize ^ kind as usize) % HINTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_writer_starts_empty_and_keeps_small_buffers() {
        let first = with_scratch_writer(|writer| {
            assert!(writer.is_empty());
            writer.push(b"abc");
            writer.data.as_ptr()
        });
        let second = with_scratch_writer(|writer| {
            assert!(writer.is_empty(), "cleared between uses");
            writer.push(b"de");
            writer.data.as_ptr()
        });
        assert_eq!(first, second, "the buffer is reused");
    }

    #[test]
    fn nested_use_gets_its_own_writer() {
        with_scratch_writer(|outer| {
            outer.push(b"outer");
            with_scratch_writer(|inner| {
                assert!(inner.is_empty());
                inner.push(b"inner");
            });
            assert_eq!(outer.segments().collect::<Vec<_>>(), [b"outer".as_slice()]);
        });
    }

    #[test]
    fn a_panic_while_encoding_leaves_the_writer_usable_and_empty() {
        let panicked = std::panic::catch_unwind(|| {
            with_scratch_writer(|writer| {
                writer.push(b"half");
                panic!("an encoder failed");
            })
        });
        assert!(panicked.is_err());
        with_scratch_writer(|writer| {
            assert!(writer.is_empty());
            assert_eq!(writer.payload_len(), 0);
        });
    }

    #[test]
    fn a_large_buffer_is_released_after_use() {
        with_scratch_writer(|writer| writer.push(&vec![0; SCRATCH_KEEP_BYTES + 1]));
        with_scratch_writer(|writer| {
            assert!(writer.data.capacity() <= SCRATCH_KEEP_BYTES);
        });
    }

    /// Encodes `segments` segments of `len` bytes each through the frame
    /// writer and reports the room that was reserved for the head.
    fn reserved(action: u128, kind: FrameKind, segments: usize, len: usize) -> usize {
        with_frame_writer::<_, ()>(
            action,
            kind,
            |writer| {
                (0..segments).for_each(|i| writer.push(&vec![i as u8; len]));
                Ok(())
            },
            |writer| {
                assert_eq!(writer.len(), segments);
                assert_eq!(
                    writer.payload_len(),
                    len * segments,
                    "the room is not payload"
                );
                let lens: Vec<_> = writer.lens().collect();
                assert_eq!(lens, vec![len; segments]);
                Ok(writer.start)
            },
        )
        .unwrap()
    }

    #[test]
    fn the_room_for_the_head_follows_the_last_large_frame_of_each_kind() {
        let action = 0xfeed_0001;
        let large = IN_PLACE_FROM;
        let small = 3;
        let (request, result) = (FrameKind::Request, FrameKind::Result);
        assert_eq!(reserved(action, request, 3, large), 0, "unknown: none");
        assert_eq!(reserved(action, request, 3, large), head_len(3));
        assert_eq!(reserved(action, result, 2, large), 0, "per direction");
        assert_eq!(reserved(action, result, 2, large), head_len(2));
        assert_eq!(reserved(action, request, 1, large), head_len(3));
        assert_eq!(reserved(action, request, 5, small), head_len(1));
        assert_eq!(reserved(action, request, 5, small), 0, "last was small");
        assert_eq!(reserved(action, request, 2, large / 2), 0);
        assert_eq!(reserved(action, request, 2, large / 2), head_len(2));
        assert_eq!(reserved(action, result, 0, small), head_len(2));
        assert_eq!(reserved(action, result, 0, small), 0);
    }

    #[test]
    fn a_frame_is_made_in_place_only_with_the_exact_room() {
        with_scratch_writer(|writer| {
            writer.reserve_head(4);
            writer.push(b"payload");
            let unused = || panic!("no replacement is needed");
            assert!(
                writer.frame_in_place(&[1, 2, 3], unused).is_none(),
                "too short"
            );
            assert!(
                writer.frame_in_place(&[1, 2, 3, 4, 5], unused).is_none(),
                "too long"
            );
            assert_eq!(writer.bytes(), b"payload", "unchanged");
            let frame = writer
                .frame_in_place(&[1, 2, 3, 4], || Vec::with_capacity(16))
                .unwrap();
            assert_eq!(frame, b"\x01\x02\x03\x04payload");
            assert!(writer.is_empty() && writer.payload_len() == 0);
            assert!(writer.data.capacity() >= 16);
        });
    }
}
