//! [`SeenWindow`]: which of one origin's requests a receiver has seen.

use core::fmt;

use crate::TableStorageError;
use crate::deadline::check_capacity;

/// Which numbers of one origin's request sequence a receiver has seen:
/// all numbers below a **floor**, and any of the next
/// [`span`](SeenWindow::span) numbers marked in a bitmap.
///
/// An origin numbers the requests it sends to each target 0, 1, 2, ...
/// with no gaps, in send order ([`RequestSequencer`](crate::RequestSequencer)),
/// so the floor is the oldest request of that origin the receiver has not
/// seen, and everything the window says is exact: a number it reports
/// [`Seen`](Sighting::Seen) really arrived (or was cancelled by its
/// origin); a number it reports [`New`](Sighting::New) never did. That is
/// what lets a receiver forget a finished request's dedup entry whenever it
/// needs the room, without ever running the request twice and without ever
/// refusing, as a duplicate, a request it never saw.
///
/// On an ordered transport the floor simply follows the arrivals; numbers
/// above it are marked only while a reordered or lost frame holds it back,
/// or when a cancellation overtakes its request on another lane. A number
/// more than `span` above the floor is [`Ahead`](Sighting::Ahead): the
/// window cannot record it.
///
/// The bitmap is a ring over the caller's storage of `u64` words: with
/// `words` the largest power of two not above the storage's length, `span =
/// 64 * words` and the bit of number `n` is bit `n % span` (a mask, no
/// division), so moving the floor clears one bit per number and never
/// shifts. Give it a power-of-two number of words to use all of them.
///
/// # Examples
///
/// ```
/// use dinah_core::{SeenWindow, Sighting};
///
/// let mut window = SeenWindow::with_storage([0_u64; 1])?;
/// assert_eq!(window.sighting(0), Sighting::New);
/// window.mark(1)?; // overtook number 0
/// assert_eq!(window.floor(), 0);
/// window.mark(0)?;
/// assert_eq!(window.floor(), 2, "0 and 1 are both below the floor now");
/// assert_eq!(window.sighting(1), Sighting::Seen);
/// assert_eq!(window.sighting(2 + 64), Sighting::Ahead);
/// # Ok::<(), Box<dyn core::error::Error>>(())
/// ```
pub struct SeenWindow<B> {
    /// The lowest number not seen yet.
    floor: u64,
    /// `span - 1`: the bit of number `n` is bit `n & mask` of the ring.
    mask: u64,
    /// The ring bitmap of numbers in `floor + 1 .. floor + span` seen.
    bits: B,
}

/// What a [`SeenWindow`] knows of one request number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sighting {
    /// It arrived before (or its origin cancelled it first).
    Seen,
    /// It never arrived.
    New,
    /// More than [`SeenWindow::span`] above the floor: it never arrived,
    /// but the window cannot record it.
    Ahead,
}

/// [`SeenWindow::mark`] was given a number beyond the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowAhead {
    /// The number.
    pub number: u64,
    /// The floor when it was refused.
    pub floor: u64,
    /// How far above the floor the window reaches.
    pub span: u64,
}

impl fmt::Display for WindowAhead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "request number {} is more than {} ahead of the oldest unseen one ({})",
            self.number, self.span, self.floor
        )
    }
}

impl core::error::Error for WindowAhead {}

impl<B> SeenWindow<B>
where
    B: AsRef<[u64]> + AsMut<[u64]>,
{
    /// A window that has seen nothing, over `bits` (zeroed here), reaching
    /// `64 * w` numbers above its floor, `w` the largest power of two not
    /// above `bits.len()`.
    ///
    /// # Errors
    ///
    /// [`TableStorageError`] if `bits` is empty or longer than
    /// [`MAX_TABLE_CAPACITY`](crate::MAX_TABLE_CAPACITY) words.
    pub fn with_storage(mut bits: B) -> Result<Self, TableStorageError> {
        let len = bits.as_ref().len();
        check_capacity(len)?;
        bits.as_mut().fill(0);
        let words = 1_u64 << (usize::BITS - 1 - len.leading_zeros());
        Ok(Self {
            floor: 0,
            mask: words * 64 - 1,
            bits,
        })
    }

    /// The oldest number not seen yet: every number below it was.
    pub const fn floor(&self) -> u64 {
        self.floor
    }

    /// How many numbers from the floor up the window can record.
    pub const fn span(&self) -> u64 {
        self.mask + 1
    }

    /// What the window knows of `number`.
    pub fn sighting(&self, number: u64) -> Sighting {
        if number < self.floor {
            return Sighting::Seen;
        }
        if number - self.floor > self.mask {
            return Sighting::Ahead;
        }
        if self.bit(number) {
            Sighting::Seen
        } else {
            Sighting::New
        }
    }

    /// Records that `number` arrived; returns whether it was new. The
    /// floor moves up past every number seen without a gap.
    ///
    /// # Errors
    ///
    /// [`WindowAhead`] if `number` is more than [`span`](Self::span)
    /// above the floor; nothing changes.
    pub fn mark(&mut self, number: u64) -> Result<bool, WindowAhead> {
        match self.sighting(number) {
            Sighting::Seen => Ok(false),
            Sighting::Ahead => Err(WindowAhead {
                number,
                floor: self.floor,
                span: self.span(),
            }),
            Sighting::New if number == self.floor => {
                self.floor += 1;
                while self.floor < u64::MAX && self.bit(self.floor) {
                    self.set_bit(self.floor, false);
                    self.floor += 1;
                }
                Ok(true)
            }
            Sighting::New => {
                self.set_bit(number, true);
                Ok(true)
            }
        }
    }

    fn bit(&self, number: u64) -> bool {
        let (word, mask) = self.locate(number);
        self.bits.as_ref()[word] & mask != 0
    }

    fn set_bit(&mut self, number: u64, on: bool) {
        let (word, mask) = self.locate(number);
        let bits = &mut self.bits.as_mut()[word];
        if on {
            *bits |= mask;
        } else {
            *bits &= !mask;
        }
    }

    fn locate(&self, number: u64) -> (usize, u64) {
        let at = number & self.mask;
        ((at >> 6) as usize, 1 << (at & 63))
    }
}

impl<B> fmt::Debug for SeenWindow<B>
where
    B: AsRef<[u64]>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let marked: u32 = self.bits.as_ref().iter().map(|w| w.count_ones()).sum();
        f.debug_struct("SeenWindow")
            .field("floor", &self.floor)
            .field("marked_above", &marked)
            .field("span", &(self.mask + 1))
            .finish()
    }
}

#[cfg(all(test, not(dinah_loom)))]
mod tests {
    use super::*;

    extern crate std;
    use std::collections::BTreeSet;
    use std::format;

    use proptest::prelude::*;

    #[test]
    fn in_order_arrivals_only_move_the_floor() {
        let mut window = SeenWindow::with_storage([0_u64; 2]).expect("sized");
        for n in 0..1000 {
            assert_eq!(window.sighting(n), Sighting::New);
            assert_eq!(window.mark(n), Ok(true));
            assert_eq!(window.mark(n), Ok(false), "a second arrival is not new");
            assert_eq!(window.floor(), n + 1);
        }
        assert!(format!("{window:?}").contains("marked_above: 0"));
    }

    #[test]
    fn a_gap_holds_the_floor_and_the_window_edge_is_exact() {
        let mut window = SeenWindow::with_storage([u64::MAX; 1]).expect("sized");
        assert_eq!(window.span(), 64);
        for n in 1..64 {
            assert_eq!(window.mark(n), Ok(true));
        }
        assert_eq!(window.floor(), 0);
        assert_eq!(window.sighting(64), Sighting::Ahead);
        let refused = window.mark(64).expect_err("beyond the window");
        assert_eq!(
            refused,
            WindowAhead {
                number: 64,
                floor: 0,
                span: 64
            }
        );
        assert!(format!("{refused}").contains("ahead"));
        assert_eq!(window.mark(0), Ok(true));
        assert_eq!(window.floor(), 64, "the gap closed over 63 marks");
        assert_eq!(window.sighting(64), Sighting::New);
        assert_eq!(window.sighting(127), Sighting::New);
        assert_eq!(window.sighting(128), Sighting::Ahead);
    }

    #[test]
    fn a_storage_of_other_than_a_power_of_two_uses_the_largest_one_it_holds() {
        let window = SeenWindow::with_storage([0_u64; 3]).expect("sized");
        assert_eq!(window.span(), 128);
        let window = SeenWindow::with_storage([0_u64; 4]).expect("sized");
        assert_eq!(window.span(), 256);
    }

    #[test]
    fn storage_must_not_be_empty() {
        let empty: [u64; 0] = [];
        assert_eq!(
            SeenWindow::with_storage(empty).err(),
            Some(TableStorageError::Empty)
        );
    }

    /// Marks per case: fewer under Miri, which runs each probe slowly.
    const MARKS: usize = if cfg!(miri) { 24 } else { 300 };

    /// Proptest's failure file needs the file system, which Miri's
    /// isolation refuses.
    fn config() -> ProptestConfig {
        let mut config = ProptestConfig::default();
        if cfg!(miri) {
            config.failure_persistence = None;
        }
        config
    }

    proptest! {
        #![proptest_config(config())]

        /// The window agrees with a plain set of everything marked, for
        /// every number: seen exactly when marked, new when not marked and
        /// within the span of the lowest unmarked number, ahead beyond it.
        #[test]
        fn matches_a_set_of_marked_numbers(
            words in prop_oneof![Just(1_usize), Just(2), Just(4)],
            marks in proptest::collection::vec(0_u64..400, 0..MARKS),
        ) {
            let storage = std::vec![0_u64; words];
            let mut window = SeenWindow::with_storage(storage).expect("sized");
            let span = 64 * words as u64;
            let mut model = BTreeSet::new();
            for number in marks {
                let floor = (0..).find(|n| !model.contains(n)).expect("finite set");
                let result = window.mark(number);
                if number >= floor + span {
                    prop_assert!(result.is_err());
                } else {
                    prop_assert_eq!(result, Ok(model.insert(number)));
                }
                let floor = (0..).find(|n| !model.contains(n)).expect("finite set");
                prop_assert_eq!(window.floor(), floor);
                for probe in 0..floor + span + 2 {
                    let expected = if model.contains(&probe) {
                        Sighting::Seen
                    } else if probe >= floor + span {
                        Sighting::Ahead
                    } else {
                        Sighting::New
                    };
                    prop_assert_eq!(window.sighting(probe), expected, "number {}", probe);
                }
            }
        }
    }
}
