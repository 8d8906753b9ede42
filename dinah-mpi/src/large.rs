//! Messages too large for a posted receive: announced on their lane, sent
//! on the lane's large tag.
//!
//! Every message on a lane's tag is received into one of the receives the
//! driver keeps posted (`posted.rs`), each of [`SLOT`] bytes, the most a
//! batch carries. A longer message (one large frame) would not fit, so
//! the sender posts, in its place on the lane, an *announcement* of
//! [`ANNOUNCEMENT_LEN`] bytes ([`ANNOUNCEMENT_MAGIC`] and the frame's
//! length as a little-endian `u64`), and the frame itself on the lane's
//! large tag. The receiver, when it reaches the announcement in the lane's
//! order, starts a receive of exactly that length from the announcing
//! rank on the large tag. MPI keeps one source's messages on one tag in
//! order, so that receive matches the announced frame, and the frame keeps
//! its place among the lane's frames from that rank.
//!
//! A split frame (a head and a detached last segment, see
//! `dinah_std::transport::Frame`) is announced with [`SPLIT_MAGIC`], both
//! lengths and the width of the numbers its tail packs
//! ([`SPLIT_ANNOUNCEMENT_LEN`] bytes), and its two parts follow on the
//! large tag as two messages, head first. The receiver receives each into
//! a buffer of its own, the tail into one of numbers of that width (see
//! `dinah_std::transport::Tail`), so the tail reaches the runtime, and a
//! decoded vector of numbers, without being copied.
//!
//! A frame that could be mistaken for an announcement (exactly an
//! announcement's length, starting with its magic) is sent as a batch of
//! one (`coalesce.rs`), so every message of exactly that form is one.

/// The bytes of the largest message a lane's tag carries: what each posted
/// receive holds. It is the batch bound, which keeps such a message
/// within the common eager limits, so a posted receive completes as soon
/// as its message is matched; anything longer is announced.
pub(crate) const SLOT: usize = crate::coalesce::MAX_BATCH_BYTES;

use dinah_core::wire::TailWidth;

/// How an announcement starts. It differs from a batch's; a frame that
/// starts with it is never sent as it is (see the module docs).
pub(crate) const ANNOUNCEMENT_MAGIC: [u8; 8] = *b"DNAHbig1";

/// The length of an announcement: its magic and a `u64`.
pub(crate) const ANNOUNCEMENT_LEN: usize = ANNOUNCEMENT_MAGIC.len() + 8;

/// How the announcement of a split frame starts.
pub(crate) const SPLIT_MAGIC: [u8; 8] = *b"DNAHbig3";

/// The length of a split frame's announcement: its magic, two `u64`
/// lengths and the tail's width (its [`TailWidth::log2`] as a `u64`).
pub(crate) const SPLIT_ANNOUNCEMENT_LEN: usize = SPLIT_MAGIC.len() + 24;

/// What an announcement announces: the messages that follow on the large
/// tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Announced {
    /// The first message's length: the whole frame, or a split frame's
    /// head.
    pub(crate) head: u64,
    /// A split frame's tail, the second message (0: the frame is whole,
    /// and nothing follows its one message).
    pub(crate) tail: u64,
    /// The width of the numbers the tail packs (bytes for a whole frame,
    /// or a width byte that names none).
    pub(crate) width: TailWidth,
}

/// Does `message` need the large tag (is it longer than a posted receive)?
pub(crate) fn is_large(message: &[u8]) -> bool {
    message.len() > SLOT
}

/// The announcement of a frame of `len` bytes.
pub(crate) fn announcement(len: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ANNOUNCEMENT_LEN);
    bytes.extend_from_slice(&ANNOUNCEMENT_MAGIC);
    bytes.extend_from_slice(&(len as u64).to_le_bytes());
    bytes
}

/// The announcement of a split frame of a `head` and a `tail` bytes, the
/// tail packing numbers of `width`.
pub(crate) fn split_announcement(head: usize, tail: usize, width: TailWidth) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(SPLIT_ANNOUNCEMENT_LEN);
    bytes.extend_from_slice(&SPLIT_MAGIC);
    bytes.extend_from_slice(&(head as u64).to_le_bytes());
    bytes.extend_from_slice(&(tail as u64).to_le_bytes());
    bytes.extend_from_slice(&u64::from(width.log2()).to_le_bytes());
    bytes
}

/// Could `message` be read as an announcement (of either kind)?
pub(crate) fn looks_announced(message: &[u8]) -> bool {
    (message.len() == ANNOUNCEMENT_LEN && message.starts_with(&ANNOUNCEMENT_MAGIC))
        || (message.len() == SPLIT_ANNOUNCEMENT_LEN && message.starts_with(&SPLIT_MAGIC))
}

/// What `message` announces, if it is an announcement.
pub(crate) fn announced(message: &[u8]) -> Option<Announced> {
    if !looks_announced(message) {
        return None;
    }
    let mut lens = message[ANNOUNCEMENT_MAGIC.len()..]
        .chunks_exact(8)
        .map(|len| u64::from_le_bytes(len.try_into().unwrap_or_default()));
    let head = lens.next()?;
    let tail = lens.next().unwrap_or(0);
    let width = lens
        .next()
        .and_then(|log2| TailWidth::from_log2(u8::try_from(log2).ok()?))
        .unwrap_or_default();
    Some(Announced { head, tail, width })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::coalesce::BATCH_MAGIC;

    #[test]
    fn an_announcement_is_not_a_batch() {
        assert!(!crate::coalesce::is_batch(&announcement(1)));
        assert_ne!(ANNOUNCEMENT_MAGIC, BATCH_MAGIC);
    }

    #[test]
    fn only_messages_past_a_slot_are_large() {
        assert!(!is_large(&vec![0; SLOT]));
        assert!(is_large(&vec![0; SLOT + 1]));
    }

    #[test]
    fn other_messages_are_not_announcements() {
        assert_eq!(announced(b"DNAHbig1"), None, "too short");
        let mut long = announcement(7);
        long.push(0);
        assert_eq!(announced(&long), None, "too long");
        let mut other = announcement(7);
        other[0] = b'X';
        assert_eq!(announced(&other), None, "another magic");
        let mut split = split_announcement(7, 8, TailWidth::Eight);
        assert_eq!(announced(&split[..ANNOUNCEMENT_LEN]), None, "cut short");
        split[7] = b'1';
        assert_eq!(announced(&split), None, "the whole frame's magic, too long");
        assert_ne!(SPLIT_MAGIC, crate::coalesce::BATCH_MAGIC);
    }

    proptest! {
        #[test]
        fn an_announcement_gives_back_its_length(len in 0usize..=usize::MAX) {
            let bytes = announcement(len);
            prop_assert_eq!(bytes.len(), ANNOUNCEMENT_LEN);
            prop_assert!(looks_announced(&bytes));
            let expected = Announced { head: len as u64, tail: 0, width: TailWidth::One };
            prop_assert_eq!(announced(&bytes), Some(expected));
        }

        #[test]
        fn a_split_announcement_gives_back_both_lengths_and_the_width(
            head: usize,
            tail: usize,
            log2 in 0..5u8,
        ) {
            let width = TailWidth::from_log2(log2).unwrap();
            let bytes = split_announcement(head, tail, width);
            prop_assert_eq!(bytes.len(), SPLIT_ANNOUNCEMENT_LEN);
            prop_assert!(looks_announced(&bytes));
            let expected = Announced { head: head as u64, tail: tail as u64, width };
            prop_assert_eq!(announced(&bytes), Some(expected));
        }

        #[test]
        fn a_width_that_names_none_reads_as_bytes(log2 in 5..=u64::MAX) {
            let mut bytes = split_announcement(1, 2, TailWidth::One);
            bytes[SPLIT_ANNOUNCEMENT_LEN - 8..].copy_from_slice(&log2.to_le_bytes());
            prop_assert_eq!(announced(&bytes).map(|a| a.width), Some(TailWidth::One));
        }
    }
}
