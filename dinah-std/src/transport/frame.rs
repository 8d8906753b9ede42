//! A frame as transports carry it: one buffer, or a head and segments held
//! apart from it.

use std::fmt;

use dinah_core::wire::PartPlace;

use super::Tail;

/// A frame's bytes (header, length table, segments), held in one buffer
/// or, for large payloads, as a **head** and segments held apart from it:
/// the **tail**, the frame's last segment in a buffer of its own, and
/// **middle** parts, earlier segments each in a buffer of its own. The
/// head holds every other byte, in order.
///
/// The bytes a frame stands for are the head with each middle part
/// inserted where it belongs, then the tail ([`wire_parts`] yields them
/// in that order). A transport sends exactly those bytes, and may send
/// the parts from their own buffers (a vectored write, a message each)
/// so that a large segment is never copied next to its head; a receiving
/// transport may receive each large segment into a buffer of its own
/// too. The runtime checks the parts of a frame it is handed against the
/// frame's length table
/// ([`decode_split_frame`](dinah_core::wire::decode_split_frame) for a
/// head and a tail,
/// [`decode_parted_frame`](dinah_core::wire::decode_parted_frame) with
/// middle parts), and each part becomes the value decoded from it. A
/// transport that cannot keep the parts apart joins them
/// ([`into_whole`](Self::into_whole), or [`settle`](Self::settle) for the
/// middle parts alone).
///
/// The parts held apart are [`Tail`]s: bytes, or vectors of numbers kept
/// in their own allocations (a `Vec<f64>` sent or received without a
/// copy).
///
/// A whole frame is exactly its one `Vec<u8>` in size: the queues and
/// events that carry every small frame stay as small as before, and the
/// parts of a split frame (rare, and large) are boxed.
///
/// [`wire_parts`]: Self::wire_parts
#[derive(Clone, PartialEq, Eq)]
pub struct Frame(Repr);

#[derive(Clone, PartialEq, Eq)]
enum Repr {
    Whole(Vec<u8>),
    /// The tail, or at least one middle part, is not empty.
    Split(Box<Parts>),
}

#[derive(Clone, PartialEq, Eq)]
struct Parts {
    head: Vec<u8>,
    /// Earlier segments held apart, in order: each goes before the head's
    /// byte `at` (none empty, `at` never decreasing, at most the head's
    /// length).
    middle: Vec<(usize, Tail)>,
    tail: Tail,
}

impl Default for Frame {
    fn default() -> Self {
        Self::whole(Vec::new())
    }
}

impl Frame {
    /// A frame held in one buffer.
    #[inline]
    pub const fn whole(bytes: Vec<u8>) -> Self {
        Self(Repr::Whole(bytes))
    }

    /// A frame held as `head` followed by `tail` (an empty tail makes a
    /// whole frame).
    #[inline]
    pub fn split(head: Vec<u8>, tail: impl Into<Tail>) -> Self {
        let tail = tail.into();
        if tail.is_empty() {
            return Self::whole(head);
        }
        Self(Repr::Split(Box::new(Parts {
            head,
            middle: Vec::new(),
            tail,
        })))
    }

    /// A frame held as `head` with each of `middle`'s parts inserted
    /// before the head's byte at its offset, then `tail` (empty parts are
    /// dropped; with none left, a whole frame).
    ///
    /// # Panics
    ///
    /// If the offsets decrease or one is past the head's end.
    pub fn with_middle(head: Vec<u8>, middle: Vec<(usize, Tail)>, tail: impl Into<Tail>) -> Self {
        let mut last = 0;
        for &(at, _) in &middle {
            assert!(
                last <= at && at <= head.len(),
                "middle parts go in order, within the head"
            );
            last = at;
        }
        let middle: Vec<_> = middle
            .into_iter()
            .filter(|(_, part)| !part.is_empty())
            .collect();
        let tail = tail.into();
        if middle.is_empty() {
            return Self::split(head, tail);
        }
        Self(Repr::Split(Box::new(Parts { head, middle, tail })))
    }

    /// The frame's length in bytes, all parts together.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Whole(bytes) => bytes.len(),
            Repr::Split(parts) => {
                let middle: usize = parts.middle.iter().map(|(_, part)| part.len()).sum();
                parts.head.len() + middle + parts.tail.len()
            }
        }
    }

    /// Is the frame empty?
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Is the frame held in more than one part?
    #[inline]
    pub fn is_split(&self) -> bool {
        matches!(self.0, Repr::Split(_))
    }

    /// Does it hold middle parts (segments held apart before its last)?
    #[inline]
    pub fn has_middle(&self) -> bool {
        matches!(&self.0, Repr::Split(parts) if !parts.middle.is_empty())
    }

    /// The head: the whole frame, or every byte not held apart.
    #[inline]
    pub fn head(&self) -> &[u8] {
        match &self.0 {
            Repr::Whole(bytes) => bytes,
            Repr::Split(parts) => &parts.head,
        }
    }

    /// The head, writable (stamping a request ID into its header).
    #[inline]
    pub fn head_mut(&mut self) -> &mut Vec<u8> {
        match &mut self.0 {
            Repr::Whole(bytes) => bytes,
            Repr::Split(parts) => &mut parts.head,
        }
    }

    /// The head, and the tail of a split frame to be taken (a received
    /// tail becomes the decoded value). For a [settled](Self::settle)
    /// frame, the two are the frame's bytes.
    #[inline]
    pub fn parts_mut(&mut self) -> (&[u8], Option<&mut Tail>) {
        match &mut self.0 {
            Repr::Whole(bytes) => (bytes, None),
            Repr::Split(parts) => {
                let Parts { head, tail, .. } = &mut **parts;
                (head, Some(tail))
            }
        }
    }

    /// The places of the parts held apart, in order: the middle parts,
    /// then the tail (at the head's end) if there is one. What the runtime
    /// checks a received frame with parts against
    /// ([`decode_parted_frame`](dinah_core::wire::decode_parted_frame)).
    pub fn part_places(&self) -> impl Iterator<Item = PartPlace> + Clone + '_ {
        let (middle, tail): (&[(usize, Tail)], Option<PartPlace>) = match &self.0 {
            Repr::Whole(_) => (&[], None),
            Repr::Split(parts) => {
                let tail = (!parts.tail.is_empty()).then(|| PartPlace {
                    at: parts.head.len(),
                    len: parts.tail.len(),
                });
                (&parts.middle, tail)
            }
        };
        let middle = middle.iter().map(|(at, part)| PartPlace {
            at: *at,
            len: part.len(),
        });
        middle.chain(tail)
    }

    /// The head, the middle parts and the tail (if any), the parts to be
    /// taken: a received part becomes the decoded value.
    pub fn parts_apart_mut(&mut self) -> (&[u8], &mut [(usize, Tail)], Option<&mut Tail>) {
        match &mut self.0 {
            Repr::Whole(bytes) => (bytes, &mut [], None),
            Repr::Split(parts) => {
                let Parts { head, middle, tail } = &mut **parts;
                let tail = (!tail.is_empty()).then_some(tail);
                (head, middle, tail)
            }
        }
    }

    /// The detached last segment; empty for a whole frame or one whose
    /// last segment is in its head.
    #[inline]
    pub fn tail(&self) -> &[u8] {
        match &self.0 {
            Repr::Whole(_) => &[],
            Repr::Split(parts) => parts.tail.as_bytes(),
        }
    }

    /// The tail's width (see [`Tail`]); bytes for a whole frame.
    #[inline]
    pub fn tail_width(&self) -> super::TailWidth {
        match &self.0 {
            Repr::Whole(_) => super::TailWidth::One,
            Repr::Split(parts) => parts.tail.width(),
        }
    }

    /// The frame's bytes in order, as the slices of its parts (none
    /// empty): what a vectored write sends.
    pub fn wire_parts(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let (head, middle, tail): (&[u8], &[(usize, Tail)], &[u8]) = match &self.0 {
            Repr::Whole(bytes) => (bytes, &[], &[]),
            Repr::Split(parts) => (&parts.head, &parts.middle, parts.tail.as_bytes()),
        };
        let mut from = 0;
        let around = middle.iter().flat_map(move |(at, part)| {
            let before = &head[from..*at];
            from = *at;
            [before, part.as_bytes()]
        });
        // The head's bytes after the last middle part, found once the
        // iterator above is spent.
        let after = middle.last().map_or(0, |(at, _)| *at);
        around
            .chain([&head[after..], tail])
            .filter(|part| !part.is_empty())
    }

    /// Copies the middle parts into the head where they belong (a frame
    /// without them is left as it is), so that the frame is whole or a
    /// head and a tail. The middle parts' buffers go to this thread's
    /// [`frame_buffers`](super::frame_buffers).
    pub fn settle(&mut self) {
        let Repr::Split(parts) = &mut self.0 else {
            return;
        };
        if parts.middle.is_empty() {
            return;
        }
        let middle = std::mem::take(&mut parts.middle);
        let len = parts.head.len() + middle.iter().map(|(_, part)| part.len()).sum::<usize>();
        let mut head = super::frame_buffers::take(len);
        let mut from = 0;
        for (at, part) in middle {
            head.extend_from_slice(&parts.head[from..at]);
            head.extend_from_slice(part.as_bytes());
            from = at;
            super::frame_buffers::give_tail(part);
        }
        head.extend_from_slice(&parts.head[from..]);
        super::frame_buffers::give(std::mem::replace(&mut parts.head, head));
        if parts.tail.is_empty() {
            *self = Self::whole(std::mem::take(&mut parts.head));
        }
    }

    /// The bytes the parts' buffers occupy (what a frame held costs).
    pub fn capacity(&self) -> usize {
        match &self.0 {
            Repr::Whole(bytes) => bytes.capacity(),
            Repr::Split(parts) => {
                let middle: usize = parts.middle.iter().map(|(_, part)| part.capacity()).sum();
                parts.head.capacity() + middle + parts.tail.capacity()
            }
        }
    }

    /// The frame as a head and a tail (the second empty for a whole
    /// frame), middle parts [settled](Self::settle) into the head.
    #[inline]
    pub fn into_parts(mut self) -> (Vec<u8>, Tail) {
        self.settle();
        match self.0 {
            Repr::Whole(bytes) => (bytes, Tail::new()),
            Repr::Split(parts) => (parts.head, parts.tail),
        }
    }

    /// The head, the middle parts (each with its place in the head) and
    /// the tail (empty if the last segment is in the head), as they are:
    /// for a transport that sends each from its own buffer.
    pub fn into_all_parts(self) -> (Vec<u8>, Vec<(usize, Tail)>, Tail) {
        match self.0 {
            Repr::Whole(bytes) => (bytes, Vec::new(), Tail::new()),
            Repr::Split(parts) => {
                let Parts { head, middle, tail } = *parts;
                (head, middle, tail)
            }
        }
    }

    /// The frame in one buffer: the head, with the other parts copied
    /// into it if the frame is split.
    pub fn into_whole(mut self) -> Vec<u8> {
        self.settle();
        match self.0 {
            Repr::Whole(bytes) => bytes,
            Repr::Split(parts) => {
                let Parts { mut head, tail, .. } = *parts;
                head.extend_from_slice(tail.as_bytes());
                head
            }
        }
    }

    /// The frame's bytes copied into one new buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len());
        self.append_to(&mut bytes);
        bytes
    }

    /// Appends the frame's bytes, in order, to `out`.
    #[inline]
    pub fn append_to(&self, out: &mut Vec<u8>) {
        match &self.0 {
            // One slice: cheaper than walking the parts.
            Repr::Whole(bytes) => out.extend_from_slice(bytes),
            Repr::Split(_) => self
                .wire_parts()
                .for_each(|part| out.extend_from_slice(part)),
        }
    }

    /// Do the frame's bytes equal `bytes`, however they are held?
    pub fn bytes_eq(&self, mut bytes: &[u8]) -> bool {
        if bytes.len() != self.len() {
            return false;
        }
        self.wire_parts().all(|part| {
            let (here, rest) = bytes.split_at(part.len());
            bytes = rest;
            here == part
        })
    }
}

impl From<Vec<u8>> for Frame {
    #[inline]
    fn from(bytes: Vec<u8>) -> Self {
        Self::whole(bytes)
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Sizes only: never payload bytes.
        let mut out = f.debug_struct("Frame");
        out.field("head", &self.head().len());
        if let Repr::Split(parts) = &self.0 {
            if !parts.middle.is_empty() {
                let lens: Vec<usize> = parts.middle.iter().map(|(_, part)| part.len()).collect();
                out.field("middle", &lens);
            }
        }
        out.field("tail", &self.tail().len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_frame_stands_for_its_parts_back_to_back() {
        let frame = Frame::split(b"head".to_vec(), b"tail".to_vec());
        assert!(frame.is_split());
        assert_eq!(frame.len(), 8);
        assert!(frame.bytes_eq(b"headtail"));
        assert!(!frame.bytes_eq(b"headtai"));
        assert!(!frame.bytes_eq(b"heaxtail"));
        assert_eq!(frame.to_vec(), b"headtail");
        assert_eq!(frame.into_whole(), b"headtail");
    }

    #[test]
    fn a_frame_appends_its_bytes_after_what_the_buffer_holds() {
        let mut out = b">".to_vec();
        Frame::whole(b"whole".to_vec()).append_to(&mut out);
        Frame::with_middle(
            b"hd".to_vec(),
            vec![(1, b"m".to_vec().into())],
            b"t".to_vec(),
        )
        .append_to(&mut out);
        assert_eq!(out, b">wholehmdt");
    }

    #[test]
    fn a_whole_frame_is_its_buffer() {
        let bytes = b"frame".to_vec();
        let pointer = bytes.as_ptr();
        let frame = Frame::from(bytes);
        assert!(!frame.is_split());
        assert_eq!(frame.tail(), b"");
        let back = frame.into_whole();
        assert_eq!(back.as_ptr(), pointer, "not copied");
        assert_eq!(
            Frame::split(b"x".to_vec(), Vec::new()),
            Frame::whole(b"x".to_vec())
        );
    }

    #[test]
    fn middle_parts_go_where_they_belong() {
        let middle = vec![
            (2, Tail::from(b"AB".to_vec())),
            (2, Tail::from(b"C".to_vec())),
        ];
        let mut frame = Frame::with_middle(b"hexy".to_vec(), middle, b"tail".to_vec());
        assert!(frame.is_split() && frame.has_middle());
        assert_eq!(frame.len(), 11);
        let parts: Vec<&[u8]> = frame.wire_parts().collect();
        assert_eq!(parts, [&b"he"[..], b"AB", b"C", b"xy", b"tail"]);
        assert!(frame.bytes_eq(b"heABCxytail"));
        assert!(!frame.bytes_eq(b"heABCxytaiL"));
        assert_eq!(frame.to_vec(), b"heABCxytail");
        assert_eq!(
            format!("{frame:?}"),
            "Frame { head: 4, middle: [2, 1], tail: 4 }"
        );
        frame.settle();
        assert!(!frame.has_middle());
        assert_eq!(
            (frame.head(), frame.tail()),
            (&b"heABCxy"[..], &b"tail"[..])
        );
    }

    #[test]
    fn a_frame_whose_last_segment_is_in_its_head_settles_whole() {
        let middle = vec![(0, Tail::from(b"big".to_vec())), (1, Tail::new())];
        let frame = Frame::with_middle(b"h-rest".to_vec(), middle, Vec::new());
        assert_eq!(frame.tail(), b"");
        assert_eq!(
            frame.wire_parts().collect::<Vec<_>>(),
            [&b"big"[..], b"h-rest"]
        );
        let mut settled = frame.clone();
        settled.settle();
        assert_eq!(settled, Frame::whole(b"bigh-rest".to_vec()));
        assert_eq!(frame.into_whole(), b"bigh-rest");
        let none = Frame::with_middle(b"x".to_vec(), vec![(1, Tail::new())], Vec::new());
        assert_eq!(none, Frame::whole(b"x".to_vec()));
    }

    #[test]
    #[should_panic(expected = "in order")]
    fn middle_parts_out_of_order_are_refused() {
        let middle = vec![(2, Tail::from(vec![1u8])), (1, Tail::from(vec![2u8]))];
        let _ = Frame::with_middle(vec![0; 4], middle, Vec::new());
    }

    #[test]
    fn a_frame_is_the_size_of_one_vector() {
        assert_eq!(size_of::<Frame>(), size_of::<Vec<u8>>());
    }

    #[test]
    fn debug_shows_sizes_only() {
        let frame = Frame::split(b"secret".to_vec(), b"data".to_vec());
        assert_eq!(format!("{frame:?}"), "Frame { head: 6, tail: 4 }");
    }
}
