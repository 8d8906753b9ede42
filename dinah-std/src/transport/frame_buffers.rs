//! Reusing the buffers of small frames on the thread that frees them.
//!
//! Every action moves two frames, the request and the response, and each
//! is a heap buffer: encoded on one rank, handed to the transport, and
//! freed once it is written out or decoded. The thread that frees a frame
//! (a rank's owner thread, which reads and writes the sockets and serves
//! inline handlers, or the thread polling the futures) is mostly one that
//! encodes or receives the next frame. This module keeps, per thread, the
//! buffers of freed small frames and hands them out again for the next
//! frame made on that thread, so a steady stream of actions does not go
//! through the allocator there. The runtime takes every frame it encodes
//! from [`take`] and gives back every frame it has decoded; a transport
//! may do the same with the frames it receives and writes (the TCP
//! transport does).
//!
//! - **Size classes.** A buffer from [`take`] has a capacity of a power of
//!   two from [`MIN_CLASS_BYTES`] to [`MAX_CLASS_BYTES`] (not the exact
//!   frame length), so one freed frame can carry any later frame of its
//!   class.
//! - **Large buffers.** A frame beyond the classes gets the smallest kept
//!   large buffer that holds it, or a new one of its exact length. A
//!   thread keeps at most [`LARGE_KEEP_BUFFERS`] large buffers, of at most
//!   [`LARGE_KEEP_BYTES`] together. Large payloads are framed in the
//!   buffer they were encoded in (see `SegmentWriter`), which the encoding
//!   thread replaces from here; a transport that writes a frame on the
//!   thread that encoded it (the owner thread's requests and inline
//!   results) gives it back, so a steady stream of large frames reuses the
//!   same memory instead of allocating (and on a fresh mapping, faulting
//!   in) a megabyte per frame.
//! - **Numbers.** A frame's tail of wider numbers (a `Vec<f64>` sent
//!   whole, see [`Tail`]) is kept among the large buffers too once sent
//!   ([`give_tail`]), and [`take_numbers`] hands it out again to receive a
//!   tail of numbers of its width: its bytes are overwritten, not zeroed
//!   first, since they hold numbers already. When the bounds are reached,
//!   a buffer of another width makes room for the one given back.
//! - **Bounded.** A thread keeps at most [`CLASS_KEEP_BUFFERS`] buffers
//!   and [`CLASS_KEEP_BYTES`] of capacity per class (384 KiB over all six
//!   classes, a buffer counting at most twice its class), and the large
//!   buffers within their bounds; [`give`] frees what does not fit. Nothing grows past that, and the buffers go with
//!   the thread when it exits, or at [`release`] (a runtime's shutdown
//!   releases those of its owner thread).
//! - **Any buffer.** [`give`] takes any `Vec<u8>`: one whose capacity is
//!   not a class size serves the class below it, and one too small or too
//!   large for every class is freed.
//!
//! No `unsafe`: a reused byte buffer is cleared and written from its
//! start, like a fresh one; a reused buffer of numbers holds its old
//! numbers until they are overwritten. Nothing else runs while a thread's spares are
//! borrowed, so the borrow is never re-entered.
//!
//! # Examples
//!
//! ```
//! use dinah_std::transport::frame_buffers;
//!
//! let mut frame = frame_buffers::take(92);
//! assert!(frame.is_empty() && frame.capacity() >= 92);
//! frame.extend_from_slice(&[0; 92]);
//! let buffer = frame.as_ptr();
//! frame_buffers::give(frame);
//! // The next frame of its class made on this thread reuses the buffer.
//! let next = frame_buffers::take(100);
//! assert_eq!(next.as_ptr(), buffer);
//! ```

use std::cell::RefCell;

use super::{Tail, TailWidth};

/// The smallest class: a frame header and a short payload fit.
pub const MIN_CLASS_BYTES: usize = 1 << 7;

/// The largest class; bigger frames bypass the pool.
pub const MAX_CLASS_BYTES: usize = 1 << 12;

/// The most capacity a thread keeps in one class.
pub const CLASS_KEEP_BYTES: usize = 64 << 10;

/// The most buffers a thread keeps in one class (enough for a few hundred
/// small frames in flight).
pub const CLASS_KEEP_BUFFERS: usize = 512;

/// The most capacity a thread keeps in large buffers (past the classes),
/// and so the largest large buffer kept.
pub const LARGE_KEEP_BYTES: usize = (4 << 20) + (64 << 10);

/// The most large buffers a thread keeps.
pub const LARGE_KEEP_BUFFERS: usize = 4;

/// The number of classes.
const CLASSES: usize =
    (MAX_CLASS_BYTES.trailing_zeros() - MIN_CLASS_BYTES.trailing_zeros() + 1) as usize;

/// One thread's spare buffers, by class, and its large ones (bytes or
/// numbers).
struct Spare {
    classes: [Vec<Vec<u8>>; CLASSES],
    large: Vec<Tail>,
}

impl Spare {
    const fn new() -> Self {
        Self {
            classes: [const { Vec::new() }; CLASSES],
            large: Vec::new(),
        }
    }

    /// The smallest large buffer of `width` that holds `len` bytes, taken
    /// out.
    fn take_large(&mut self, width: TailWidth, len: usize) -> Option<Tail> {
        let (at, _) = self
            .large
            .iter()
            .enumerate()
            .filter(|(_, buffer)| buffer.width() == width && buffer.capacity() >= len)
            .min_by_key(|(_, buffer)| buffer.capacity())?;
        Some(self.large.swap_remove(at))
    }

    /// Keeps `buffer` (past the classes) if the bounds allow, making room
    /// by freeing kept buffers of other widths first (oldest first): a
    /// thread that sends numbers and receives bytes, or the other way
    /// round, keeps what it will reuse.
    fn keep_large(&mut self, buffer: Tail) {
        let fits = |large: &[Tail]| {
            let kept: usize = large.iter().map(Tail::capacity).sum();
            large.len() < LARGE_KEEP_BUFFERS
                && kept.saturating_add(buffer.capacity()) <= LARGE_KEEP_BYTES
        };
        while !fits(&self.large) {
            let Some(other) = self
                .large
                .iter()
                .position(|kept| kept.width() != buffer.width())
            else {
                return;
            };
            drop(self.large.remove(other));
        }
        self.large.push(buffer);
    }
}

/// The most buffers a thread keeps in `class`.
const fn class_keep(class: usize) -> usize {
    let share = CLASS_KEEP_BYTES / (MIN_CLASS_BYTES << class);
    if share < CLASS_KEEP_BUFFERS {
        share
    } else {
        CLASS_KEEP_BUFFERS
    }
}

thread_local! {
    static SPARE: RefCell<Spare> = const { RefCell::new(Spare::new()) };
}

/// The class that holds frames of `len` bytes, if any.
fn class_for_len(len: usize) -> Option<usize> {
    if len > MAX_CLASS_BYTES {
        return None;
    }
    let size = len.max(MIN_CLASS_BYTES).next_power_of_two();
    Some((size.trailing_zeros() - MIN_CLASS_BYTES.trailing_zeros()) as usize)
}

/// The class a buffer of `capacity` bytes can serve (every frame of the
/// class fits), if any.
fn class_for_capacity(capacity: usize) -> Option<usize> {
    if capacity < MIN_CLASS_BYTES {
        return None;
    }
    let floor = capacity.min(MAX_CLASS_BYTES).ilog2();
    Some((floor - MIN_CLASS_BYTES.trailing_zeros()) as usize)
}

/// An empty buffer for a frame of `len` bytes: a spare one of this
/// thread if one is kept, else a new one of the class's capacity (or of
/// exactly `len` bytes past the largest class).
pub fn take(len: usize) -> Vec<u8> {
    let Some(class) = class_for_len(len) else {
        return SPARE
            .with_borrow_mut(|spare| spare.take_large(TailWidth::One, len))
            .and_then(|tail| tail.into_bytes().ok())
            .map(|mut bytes| {
                bytes.clear();
                bytes
            })
            .unwrap_or_else(|| Vec::with_capacity(len));
    };
    SPARE
        .with_borrow_mut(|spare| spare.classes[class].pop())
        .unwrap_or_else(|| Vec::with_capacity(MIN_CLASS_BYTES << class))
}

/// Takes back a frame's buffer that is no longer needed: kept for
/// [`take`] on this thread if it is of a useful size and the bounds
/// allow, freed otherwise.
#[inline]
pub fn give(mut buffer: Vec<u8>) {
    let Some(class) = class_for_capacity(buffer.capacity()) else {
        return;
    };
    buffer.clear();
    if buffer.capacity() > 2 * MAX_CLASS_BYTES {
        // Too big to keep for small frames.
        SPARE.with_borrow_mut(|spare| spare.keep_large(buffer.into()));
        return;
    }
    SPARE.with_borrow_mut(|spare| {
        let kept = &mut spare.classes[class];
        if kept.len() < class_keep(class) {
            kept.push(buffer);
        }
    });
}

/// [`give`] for every part of a frame.
#[inline]
pub fn give_frame(frame: super::Frame) {
    if !frame.is_split() {
        return give(frame.into_whole());
    }
    let (head, middle, tail) = frame.into_all_parts();
    give(head);
    middle.into_iter().for_each(|(_, part)| give_tail(part));
    give_tail(tail);
}

/// Takes back a frame's tail that is no longer needed: bytes as by
/// [`give`]; numbers kept among the large buffers, for [`take_numbers`],
/// if the bounds allow.
pub fn give_tail(tail: Tail) {
    match tail.into_bytes() {
        Ok(bytes) => give(bytes),
        Err(numbers) if numbers.capacity() > 2 * MAX_CLASS_BYTES => {
            SPARE.with_borrow_mut(|spare| spare.keep_large(numbers));
        }
        Err(_) => {}
    }
}

/// A tail of `len` bytes kept as numbers of `width` (where
/// [`TailWidth::for_len`] allows; bytes otherwise), to receive into: a
/// spare one of this thread of that width when one holds it, its old
/// numbers left to be overwritten, else a new zeroed one.
pub fn take_numbers(width: TailWidth, len: usize) -> Tail {
    let width = width.for_len(len);
    if width != TailWidth::One {
        if let Some(mut tail) = SPARE.with_borrow_mut(|spare| spare.take_large(width, len)) {
            tail.resize(len);
            return tail;
        }
    }
    Tail::zeroed(width, len)
}

/// What a thread keeps: see [`kept`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kept {
    /// Spare buffers.
    pub buffers: usize,
    /// Their capacity in bytes.
    pub bytes: usize,
}

/// The spare buffers this thread keeps right now.
///
/// # Examples
///
/// ```
/// use dinah_std::transport::frame_buffers;
///
/// std::thread::spawn(|| {
///     assert_eq!(frame_buffers::kept().buffers, 0);
///     frame_buffers::give(Vec::with_capacity(512));
///     assert_eq!(frame_buffers::kept().bytes, 512);
///     frame_buffers::release();
///     assert_eq!(frame_buffers::kept(), frame_buffers::Kept::default());
/// })
/// .join()
/// .unwrap();
/// ```
pub fn kept() -> Kept {
    SPARE.with_borrow(|spare| Kept {
        buffers: spare.classes.iter().map(Vec::len).sum::<usize>() + spare.large.len(),
        bytes: spare
            .classes
            .iter()
            .flatten()
            .map(Vec::capacity)
            .chain(spare.large.iter().map(Tail::capacity))
            .sum(),
    })
}

/// Frees every spare buffer of this thread (a runtime's shutdown does this
/// on its owner thread).
pub fn release() {
    SPARE.with_borrow_mut(|spare| *spare = Spare::new());
}

/// [`kept`] as a pair, for the tests.
#[cfg(test)]
fn kept_pair() -> (usize, usize) {
    let kept = kept();
    (kept.buffers, kept.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a fresh thread, so each test starts with no spares.
    fn on_fresh_thread(f: impl FnOnce() + Send + 'static) {
        std::thread::spawn(f)
            .join()
            .expect("the test thread passes");
    }

    #[test]
    fn a_freed_frame_buffer_is_reused_for_the_next_frame_of_its_class() {
        on_fresh_thread(|| {
            let mut frame = take(92);
            assert_eq!(frame.capacity(), MIN_CLASS_BYTES);
            frame.extend_from_slice(&[7; 92]);
            let pointer = frame.as_ptr();
            give(frame);
            assert_eq!(kept_pair(), (1, MIN_CLASS_BYTES));
            let again = take(100);
            assert_eq!(again.as_ptr(), pointer, "the same buffer");
            assert!(again.is_empty(), "handed out cleared");
            assert_eq!(kept_pair(), (0, 0));
            // A frame of another class does not take it.
            give(again);
            let bigger = take(300);
            assert_eq!(bigger.capacity(), 512);
            assert_eq!(kept_pair(), (1, MIN_CLASS_BYTES));
        });
    }

    #[test]
    fn a_sent_tail_of_numbers_receives_the_next_one_of_its_width() {
        on_fresh_thread(|| {
            let numbers: Vec<f64> = (0..20_000).map(f64::from).collect();
            let tail = Tail::from_numbers(numbers);
            let pointer = tail.as_bytes().as_ptr();
            give_tail(tail);
            if cfg!(target_endian = "big") {
                // Kept as bytes, which serve byte frames.
                assert_eq!(kept_pair().0, 1);
                return;
            }
            assert_eq!(kept_pair(), (1, 160_000));
            // Another width does not take it: a new zeroed tail.
            let other = take_numbers(TailWidth::Four, 80_000);
            assert_ne!(other.as_bytes().as_ptr(), pointer);
            assert!(other.as_bytes().iter().all(|&b| b == 0));
            // Nor does a byte frame.
            assert_eq!(take(100_000).capacity(), 100_000);
            // Its width does, cut to the length asked for, its old numbers
            // still there until overwritten.
            let again = take_numbers(TailWidth::Eight, 80_000);
            assert_eq!(again.as_bytes().as_ptr(), pointer, "the same buffer");
            assert_eq!((again.len(), again.width()), (80_000, TailWidth::Eight));
            assert_eq!(again.as_bytes()[8..16], 1.0f64.to_le_bytes());
            assert_eq!(kept_pair(), (0, 0));
            // A length that is no whole number of them gets bytes.
            assert_eq!(
                take_numbers(TailWidth::Eight, 80_001).width(),
                TailWidth::One
            );
        });
    }

    #[test]
    fn classes_cover_every_small_length_and_large_frames_get_their_length() {
        on_fresh_thread(|| {
            for len in [0, 1, 127, 128, 129, 1000, 4095, 4096] {
                let frame = take(len);
                assert!(frame.capacity() >= len, "{len}");
                assert!(frame.capacity().is_power_of_two(), "{len}");
            }
            let large = take(MAX_CLASS_BYTES + 1);
            assert_eq!(large.capacity(), MAX_CLASS_BYTES + 1);
            give(large);
            assert_eq!(kept_pair().0, 1, "kept in the largest class");
            give(Vec::with_capacity(MIN_CLASS_BYTES - 1));
            give(Vec::new());
            assert_eq!(kept_pair().0, 1, "too small and empty are freed");
        });
    }

    #[test]
    fn large_buffers_are_reused_smallest_first_within_their_bounds() {
        on_fresh_thread(|| {
            let big = 2 << 20;
            let (first, second) = (Vec::with_capacity(big), Vec::with_capacity(64 << 10));
            let (first_at, second_at) = (first.as_ptr(), second.as_ptr());
            give(first);
            give(second);
            assert_eq!(kept_pair(), (2, big + (64 << 10)));
            // A 40 KiB frame gets the 64 KiB buffer, not the 2 MiB one.
            let reused = take(40 << 10);
            assert_eq!(reused.as_ptr(), second_at);
            // Nothing kept holds 3 MiB: a new buffer of exactly that.
            let third = take(3 << 20);
            assert_eq!(third.capacity(), 3 << 20);
            let reused_first = take(1 << 20);
            assert_eq!(reused_first.as_ptr(), first_at);
            assert_eq!(kept_pair(), (0, 0));
            drop((reused, reused_first));
            // Bounds: the bytes (3 MiB and 2 MiB exceed them together)...
            give(third);
            give(Vec::with_capacity(big));
            assert_eq!(kept_pair(), (1, 3 << 20));
            // ...and the count.
            release();
            for _ in 0..2 * LARGE_KEEP_BUFFERS {
                give(Vec::with_capacity(16 << 10));
            }
            assert_eq!(
                kept_pair(),
                (LARGE_KEEP_BUFFERS, LARGE_KEEP_BUFFERS * (16 << 10))
            );
            // A buffer larger than the whole bound is freed.
            release();
            give(Vec::with_capacity(LARGE_KEEP_BYTES + 1));
            assert_eq!(kept_pair(), (0, 0));
        });
    }

    #[test]
    fn a_foreign_buffer_serves_the_class_below_its_capacity() {
        on_fresh_thread(|| {
            let foreign = Vec::with_capacity(200);
            let pointer = foreign.as_ptr();
            give(foreign);
            // 200 bytes of capacity serve the 128-byte class, never 256.
            let other = take(150);
            assert_ne!(other.as_ptr(), pointer);
            assert_eq!(other.capacity(), 256);
            let reused = take(128);
            assert_eq!(reused.as_ptr(), pointer);
            assert!(reused.capacity() >= 128);
        });
    }

    #[test]
    fn a_thread_keeps_no_more_than_its_bounds() {
        on_fresh_thread(|| {
            for class in 0..CLASSES {
                for _ in 0..2 * CLASS_KEEP_BUFFERS {
                    give(Vec::with_capacity(MIN_CLASS_BYTES << class));
                }
            }
            let (buffers, bytes) = kept_pair();
            assert!(buffers <= CLASSES * CLASS_KEEP_BUFFERS, "{buffers} buffers");
            assert!(bytes <= CLASSES * CLASS_KEEP_BYTES, "{bytes} bytes");
            assert_eq!(class_keep(0), CLASS_KEEP_BUFFERS);
            assert_eq!(class_keep(CLASSES - 1), CLASS_KEEP_BYTES / MAX_CLASS_BYTES);
            // Every class kept its share.
            for class in 0..CLASSES {
                let size = MIN_CLASS_BYTES << class;
                for _ in 0..class_keep(class) {
                    assert_eq!(take(size).capacity(), size, "class {class}");
                }
            }
            assert_eq!(kept_pair(), (0, 0));
        });
        // Oversized buffers in the largest class stay within twice its
        // share of bytes.
        on_fresh_thread(|| {
            for _ in 0..CLASS_KEEP_BUFFERS {
                give(Vec::with_capacity(2 * MAX_CLASS_BYTES));
            }
            let (buffers, bytes) = kept_pair();
            assert_eq!(buffers, class_keep(CLASSES - 1));
            assert!(bytes <= 2 * CLASS_KEEP_BYTES, "{bytes} bytes");
        });
    }
}
