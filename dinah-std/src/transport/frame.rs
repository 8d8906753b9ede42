//! A frame as transports carry it: one buffer, or a head and a detached
//! last segment.

use std::fmt;

use super::Tail;

/// A frame's bytes (header, length table, segments), held in one buffer
/// or, for a large payload, as a **head** and a **tail**: the tail is the
/// frame's last segment in a buffer of its own, the head everything before
/// it.
///
/// The bytes a frame stands for are always `head` followed by `tail`; a
/// transport sends exactly those bytes, and may send or receive the two
/// parts separately (a vectored write, two MPI messages) so that a large
/// segment is never copied next to its head. The runtime splits only at
/// the last segment and checks a received split against the frame's
/// length table
/// ([`decode_split_frame`](dinah_core::wire::decode_split_frame)); a
/// transport that cannot keep the parts apart joins them
/// ([`into_whole`](Self::into_whole)).
///
/// The tail is a [`Tail`]: bytes, or a vector of numbers kept in its own
/// allocation (a `Vec<f64>` sent or received without a copy).
///
/// A whole frame is exactly its one `Vec<u8>` in size: the queues and
/// events that carry every small frame stay as small as before, and the
/// parts of a split frame (rare, and large) are boxed.
#[derive(Clone, PartialEq, Eq)]
pub struct Frame(Repr);

#[derive(Clone, PartialEq, Eq)]
enum Repr {
    Whole(Vec<u8>),
    /// The tail is never empty.
    Split(Box<Parts>),
}

#[derive(Clone, PartialEq, Eq)]
struct Parts {
    head: Vec<u8>,
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
        Self(Repr::Split(Box::new(Parts { head, tail })))
    }

    /// The frame's length in bytes, both parts together.
    #[inline]
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Whole(bytes) => bytes.len(),
            Repr::Split(parts) => parts.head.len() + parts.tail.len(),
        }
    }

    /// Is the frame empty?
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Is the frame held in two parts?
    #[inline]
    pub fn is_split(&self) -> bool {
        matches!(self.0, Repr::Split(_))
    }

    /// The first part: the whole frame, or everything before the tail.
    #[inline]
    pub fn head(&self) -> &[u8] {
        match &self.0 {
            Repr::Whole(bytes) => bytes,
            Repr::Split(parts) => &parts.head,
        }
    }

    /// The first part, writable (stamping a request ID into its header).
    #[inline]
    pub fn head_mut(&mut self) -> &mut Vec<u8> {
        match &mut self.0 {
            Repr::Whole(bytes) => bytes,
            Repr::Split(parts) => &mut parts.head,
        }
    }

    /// The head, and the tail of a split frame to be taken (a received
    /// tail becomes the decoded value).
    #[inline]
    pub fn parts_mut(&mut self) -> (&[u8], Option<&mut Tail>) {
        match &mut self.0 {
            Repr::Whole(bytes) => (bytes, None),
            Repr::Split(parts) => {
                let Parts { head, tail } = &mut **parts;
                (head, Some(tail))
            }
        }
    }

    /// The detached last segment; empty for a whole frame.
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

    /// The bytes the two parts' buffers occupy (what a frame held costs).
    pub fn capacity(&self) -> usize {
        match &self.0 {
            Repr::Whole(bytes) => bytes.capacity(),
            Repr::Split(parts) => parts.head.capacity() + parts.tail.capacity(),
        }
    }

    /// The two parts (the second empty for a whole frame).
    #[inline]
    pub fn into_parts(self) -> (Vec<u8>, Tail) {
        match self.0 {
            Repr::Whole(bytes) => (bytes, Tail::new()),
            Repr::Split(parts) => (parts.head, parts.tail),
        }
    }

    /// The frame in one buffer: the head, with the tail copied after it if
    /// the frame is split.
    pub fn into_whole(self) -> Vec<u8> {
        match self.0 {
            Repr::Whole(bytes) => bytes,
            Repr::Split(parts) => {
                let Parts { mut head, tail } = *parts;
                head.extend_from_slice(tail.as_bytes());
                head
            }
        }
    }

    /// The frame's bytes copied into one new buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len());
        bytes.extend_from_slice(self.head());
        bytes.extend_from_slice(self.tail());
        bytes
    }

    /// Do the frame's bytes equal `bytes`, wherever the split is?
    pub fn bytes_eq(&self, bytes: &[u8]) -> bool {
        let head = self.head();
        bytes.len() == self.len()
            && bytes[..head.len()] == *head
            && bytes[head.len()..] == *self.tail()
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
        f.debug_struct("Frame")
            .field("head", &self.head().len())
            .field("tail", &self.tail().len())
            .finish()
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
    fn a_frame_is_the_size_of_one_vector() {
        assert_eq!(size_of::<Frame>(), size_of::<Vec<u8>>());
    }

    #[test]
    fn debug_shows_sizes_only() {
        let frame = Frame::split(b"secret".to_vec(), b"data".to_vec());
        assert_eq!(format!("{frame:?}"), "Frame { head: 6, tail: 4 }");
    }
}
