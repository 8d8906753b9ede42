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
//! A frame held in parts (a head and segments held apart from it: middle
//! parts and a tail, see `dinah_std::transport::Frame`) is announced with
//! [`PARTS_MAGIC`], the head's length, whether its last part is the
//! frame's tail, and each part's place in the head, length and the width
//! of the numbers it packs ([`parts_announcement`]); the head and then
//! each part follow on the large tag as messages of their own, in order.
//! The receiver receives each into a buffer of its own, a part of numbers
//! into one of numbers of that width (see `dinah_std::transport::Tail`),
//! so every part reaches the runtime, and a decoded vector of numbers,
//! without being copied. A frame with more than [`MAX_PARTS`] parts has
//! its middle parts copied into its head first.
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

/// How the announcement of a frame held in parts starts.
pub(crate) const PARTS_MAGIC: [u8; 8] = *b"DNAHbig4";

/// The bytes of a parted announcement before its parts: its magic, the
/// head's length, whether the last part is the tail, and the number of
/// parts, each a `u64`.
const PARTS_FIXED_LEN: usize = PARTS_MAGIC.len() + 24;

/// The bytes of one part's entry: its place, its length and its width
/// (its [`TailWidth::log2`]), each a `u64`.
const PART_ENTRY_LEN: usize = 24;

/// The most parts one announcement lists (a posted receive holds that
/// many entries easily; the default protocol limits allow 64 segments).
pub(crate) const MAX_PARTS: usize = 64;

/// A part of an announced frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AnnouncedPart {
    /// The head's byte it goes before.
    pub(crate) at: u64,
    /// Its length.
    pub(crate) len: u64,
    /// The width of the numbers it packs (bytes if the width byte names
    /// none).
    pub(crate) width: TailWidth,
}

/// What an announcement announces: the messages that follow on the large
/// tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Announced {
    /// The first message's length: the whole frame, or a parted frame's
    /// head.
    pub(crate) head: u64,
    /// A parted frame's parts, each a message after the head, in order
    /// (none: the frame is whole, and nothing follows its one message).
    pub(crate) parts: Vec<AnnouncedPart>,
    /// Is the last part the frame's tail (its last segment)?
    pub(crate) tail: bool,
}

impl Announced {
    /// The frame's length, if the parts are in order within the head,
    /// none is empty, and it is at most `max` bytes.
    pub(crate) fn checked_len(&self, max: u64) -> Option<u64> {
        let mut total = self.head;
        let mut last = 0;
        for part in &self.parts {
            if part.len == 0 || part.at < last || part.at > self.head {
                return None;
            }
            last = part.at;
            total = total.checked_add(part.len)?;
        }
        (total <= max).then_some(total)
    }
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

/// The announcement of a frame held as a head of `head` bytes and `parts`
/// (each its place, length and width; at most [`MAX_PARTS`]), the last of
/// them the frame's tail if `tail`.
pub(crate) fn parts_announcement(
    head: usize,
    parts: impl ExactSizeIterator<Item = (usize, usize, TailWidth)>,
    tail: bool,
) -> Vec<u8> {
    debug_assert!((1..=MAX_PARTS).contains(&parts.len()));
    let mut bytes = Vec::with_capacity(PARTS_FIXED_LEN + PART_ENTRY_LEN * parts.len());
    bytes.extend_from_slice(&PARTS_MAGIC);
    bytes.extend_from_slice(&(head as u64).to_le_bytes());
    bytes.extend_from_slice(&u64::from(tail).to_le_bytes());
    bytes.extend_from_slice(&(parts.len() as u64).to_le_bytes());
    for (at, len, width) in parts {
        bytes.extend_from_slice(&(at as u64).to_le_bytes());
        bytes.extend_from_slice(&(len as u64).to_le_bytes());
        bytes.extend_from_slice(&u64::from(width.log2()).to_le_bytes());
    }
    bytes
}

/// The `u64`s of `bytes`, little-endian.
fn words(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|word| u64::from_le_bytes(word.try_into().unwrap_or_default()))
}

/// The number of parts a parted announcement of exactly `message`'s
/// length lists, if `message` has that form.
fn parts_count(message: &[u8]) -> Option<usize> {
    let rest = message.strip_prefix(&PARTS_MAGIC)?;
    let count = usize::try_from(words(rest.get(16..24)?).next()?).ok()?;
    let form = (1..=MAX_PARTS).contains(&count)
        && message.len() == PARTS_FIXED_LEN + PART_ENTRY_LEN * count;
    form.then_some(count)
}

/// Could `message` be read as an announcement (of either kind)?
pub(crate) fn looks_announced(message: &[u8]) -> bool {
    (message.len() == ANNOUNCEMENT_LEN && message.starts_with(&ANNOUNCEMENT_MAGIC))
        || parts_count(message).is_some()
}

/// What `message` announces, if it is an announcement.
pub(crate) fn announced(message: &[u8]) -> Option<Announced> {
    if message.len() == ANNOUNCEMENT_LEN && message.starts_with(&ANNOUNCEMENT_MAGIC) {
        let head = words(&message[ANNOUNCEMENT_MAGIC.len()..]).next()?;
        return Some(Announced {
            head,
            parts: Vec::new(),
            tail: false,
        });
    }
    parts_count(message)?;
    let mut fixed = words(&message[PARTS_MAGIC.len()..PARTS_FIXED_LEN]);
    let (head, tail) = (fixed.next()?, fixed.next()? == 1);
    let parts = message[PARTS_FIXED_LEN..]
        .chunks_exact(PART_ENTRY_LEN)
        .map(|entry| {
            let mut entry = words(entry);
            let (at, len) = (entry.next().unwrap_or(0), entry.next().unwrap_or(0));
            let width = entry
                .next()
                .and_then(|log2| TailWidth::from_log2(u8::try_from(log2).ok()?))
                .unwrap_or_default();
            AnnouncedPart { at, len, width }
        })
        .collect();
    Some(Announced { head, parts, tail })
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
        assert_ne!(PARTS_MAGIC, BATCH_MAGIC);
    }

    #[test]
    fn only_messages_past_a_slot_are_large() {
        assert!(!is_large(&vec![0; SLOT]));
        assert!(is_large(&vec![0; SLOT + 1]));
    }

    #[test]
    fn the_most_parts_fit_a_posted_receive() {
        let parts = (0..MAX_PARTS).map(|i| (i, 1, TailWidth::One));
        let bytes = parts_announcement(MAX_PARTS, parts, false);
        assert!(!is_large(&bytes));
        assert_eq!(announced(&bytes).map(|a| a.parts.len()), Some(MAX_PARTS));
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
        let parted = parts_announcement(7, [(7, 8, TailWidth::Eight)].into_iter(), true);
        assert!(announced(&parted).is_some());
        assert_eq!(announced(&parted[..parted.len() - 1]), None, "cut short");
        let mut more = parted.clone();
        more.extend_from_slice(&[0; PART_ENTRY_LEN]);
        assert_eq!(announced(&more), None, "more entries than counted");
        let mut none = parted[..PARTS_FIXED_LEN].to_vec();
        none[PARTS_FIXED_LEN - 8..].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(announced(&none), None, "no parts");
        let mut whole_magic = parted;
        whole_magic[7] = b'1';
        assert_eq!(announced(&whole_magic), None, "the whole frame's magic");
    }

    #[test]
    fn parts_out_of_order_empty_or_too_long_are_caught() {
        let part = |at, len| AnnouncedPart {
            at,
            len,
            width: TailWidth::One,
        };
        let announced = |head, parts| Announced {
            head,
            parts,
            tail: false,
        };
        assert_eq!(
            announced(10, vec![part(3, 5), part(10, 2)]).checked_len(17),
            Some(17)
        );
        assert_eq!(
            announced(10, vec![part(3, 5), part(10, 2)]).checked_len(16),
            None
        );
        assert_eq!(
            announced(10, vec![part(4, 5), part(3, 2)]).checked_len(99),
            None
        );
        assert_eq!(announced(10, vec![part(11, 5)]).checked_len(99), None);
        assert_eq!(announced(10, vec![part(3, 0)]).checked_len(99), None);
        assert_eq!(
            announced(u64::MAX, vec![part(3, 5)]).checked_len(u64::MAX),
            None
        );
    }

    proptest! {
        #[test]
        fn an_announcement_gives_back_its_length(len in 0usize..=usize::MAX) {
            let bytes = announcement(len);
            prop_assert_eq!(bytes.len(), ANNOUNCEMENT_LEN);
            prop_assert!(looks_announced(&bytes));
            let expected = Announced { head: len as u64, parts: Vec::new(), tail: false };
            prop_assert_eq!(announced(&bytes), Some(expected));
        }

        #[test]
        fn a_parted_announcement_gives_back_its_parts(
            head: usize,
            parts in prop::collection::vec((any::<usize>(), any::<usize>(), 0..5u8), 1..=MAX_PARTS),
            tail: bool,
        ) {
            let parts: Vec<(usize, usize, TailWidth)> = parts
                .into_iter()
                .map(|(at, len, log2)| (at, len, TailWidth::from_log2(log2).unwrap()))
                .collect();
            let bytes = parts_announcement(head, parts.iter().copied(), tail);
            prop_assert!(looks_announced(&bytes));
            let expected = Announced {
                head: head as u64,
                parts: parts
                    .iter()
                    .map(|&(at, len, width)| AnnouncedPart { at: at as u64, len: len as u64, width })
                    .collect(),
                tail,
            };
            prop_assert_eq!(announced(&bytes), Some(expected));
        }

        #[test]
        fn a_width_that_names_none_reads_as_bytes(log2 in 5..=u64::MAX) {
            let mut bytes = parts_announcement(1, [(1, 2, TailWidth::Four)].into_iter(), true);
            let at = bytes.len() - 8;
            bytes[at..].copy_from_slice(&log2.to_le_bytes());
            let widths: Vec<TailWidth> = announced(&bytes).unwrap().parts.iter().map(|p| p.width).collect();
            prop_assert_eq!(widths, [TailWidth::One]);
        }
    }
}
