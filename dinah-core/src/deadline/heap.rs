//! The indexed binary min-heap shared by [`DeadlineQueue`](super::DeadlineQueue)
//! and [`PendingTable`](crate::PendingTable).
//!
//! Storage is one array of cells; cell `i` carries two unrelated things:
//! the heap node at position `i` (deadline, sequence number, slot) and the
//! current heap position of slot `i`. The node array is always a
//! permutation of `0..capacity`: positions `0..len` form the heap, positions
//! `len..capacity` hold the vacant slots. Membership is therefore
//! `pos[slot] < len`, a vacant slot is available in O(1) at position `len`,
//! and no free list is needed.
//!
//! Nodes are ordered by `(deadline, seq)`; `seq` grows by one per insertion,
//! so equal deadlines leave in insertion order. Moves use a hole instead of
//! swaps: each level of a sift writes one node and one position.

use super::DeadlineSlot;
use crate::Instant;

/// Storage elements that embed a [`DeadlineSlot`].
pub(crate) trait HeapCell {
    /// The embedded heap cell.
    fn heap_cell(&self) -> &DeadlineSlot;
    /// The embedded heap cell, mutably.
    fn heap_cell_mut(&mut self) -> &mut DeadlineSlot;
}

impl HeapCell for DeadlineSlot {
    fn heap_cell(&self) -> &DeadlineSlot {
        self
    }

    fn heap_cell_mut(&mut self) -> &mut DeadlineSlot {
        self
    }
}

/// One heap node, as moved by the sifts.
#[derive(Clone, Copy)]
struct Node {
    deadline: Instant,
    seq: u64,
    slot: u32,
}

impl Node {
    fn precedes(&self, other: &Self) -> bool {
        (self.deadline, self.seq) < (other.deadline, other.seq)
    }
}

fn read<C: HeapCell>(cells: &[C], at: usize) -> Node {
    let cell = cells[at].heap_cell();
    Node {
        deadline: cell.deadline,
        seq: cell.seq,
        slot: cell.slot,
    }
}

/// Writes `node` at heap position `at` and records that position for its
/// slot.
fn write<C: HeapCell>(cells: &mut [C], at: usize, node: Node) {
    let cell = cells[at].heap_cell_mut();
    cell.deadline = node.deadline;
    cell.seq = node.seq;
    cell.slot = node.slot;
    cells[node.slot as usize].heap_cell_mut().pos = at as u32;
}

fn position<C: HeapCell>(cells: &[C], slot: usize) -> usize {
    cells[slot].heap_cell().pos as usize
}

/// The heap's bookkeeping; the cells live in the caller's storage.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heap {
    len: u32,
    seq: u64,
}

impl Heap {
    /// An empty heap over cells that already hold the identity permutation.
    pub(crate) const fn new() -> Self {
        Self { len: 0, seq: 0 }
    }

    /// Writes the identity permutation into `cells` (every slot vacant).
    pub(crate) fn reset<C: HeapCell>(&mut self, cells: &mut [C]) {
        for (index, cell) in cells.iter_mut().enumerate() {
            *cell.heap_cell_mut() = DeadlineSlot::identity(index as u32);
        }
        *self = Self::new();
    }

    /// Empties the heap in O(1): the permutation stays valid.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    pub(crate) const fn len(&self) -> usize {
        self.len as usize
    }

    /// Is `slot` (which must be below the capacity) in the heap?
    pub(crate) fn contains<C: HeapCell>(&self, cells: &[C], slot: usize) -> bool {
        position(cells, slot) < self.len()
    }

    /// The deadline of `slot`, if it is in the heap.
    pub(crate) fn deadline<C: HeapCell>(&self, cells: &[C], slot: usize) -> Option<Instant> {
        let at = position(cells, slot);
        (at < self.len()).then(|| cells[at].heap_cell().deadline)
    }

    /// The vacant slot an insertion would use cheapest, if any is left.
    pub(crate) fn vacant<C: HeapCell>(&self, cells: &[C]) -> Option<usize> {
        cells
            .get(self.len())
            .map(|cell| cell.heap_cell().slot as usize)
    }

    /// The slot and deadline at heap position `at` (below `len`).
    pub(crate) fn at<C: HeapCell>(cells: &[C], at: usize) -> (usize, Instant) {
        let node = read(cells, at);
        (node.slot as usize, node.deadline)
    }

    /// The earliest entry.
    pub(crate) fn peek<C: HeapCell>(&self, cells: &[C]) -> Option<(usize, Instant)> {
        (self.len > 0).then(|| Self::at(cells, 0))
    }

    /// Inserts the vacant `slot` (the caller checked both facts).
    pub(crate) fn insert<C: HeapCell>(&mut self, cells: &mut [C], slot: usize, deadline: Instant) {
        debug_assert!(!self.contains(cells, slot), "slot {slot} already queued");
        let end = self.len();
        let from = position(cells, slot);
        if from != end {
            // Move the vacant node now at `end` to where `slot` was.
            let displaced = read(cells, end);
            write(cells, from, displaced);
        }
        let node = Node {
            deadline,
            seq: self.next_seq(),
            slot: slot as u32,
        };
        self.len += 1;
        sift_up(cells, end, node);
    }

    /// Removes `slot` (which must be in the heap) and returns its deadline.
    pub(crate) fn remove<C: HeapCell>(&mut self, cells: &mut [C], slot: usize) -> Instant {
        debug_assert!(self.contains(cells, slot), "slot {slot} not queued");
        let at = position(cells, slot);
        let removed = read(cells, at);
        let last = self.len() - 1;
        self.len -= 1;
        if at != last {
            let moved = read(cells, last);
            // The removed slot becomes the first vacant position.
            write(cells, last, removed);
            self.place(cells, at, moved);
        }
        removed.deadline
    }

    /// Gives `slot` (in the heap) a new deadline, queued behind entries
    /// that already have the same deadline. Returns the old deadline.
    pub(crate) fn reschedule<C: HeapCell>(
        &mut self,
        cells: &mut [C],
        slot: usize,
        deadline: Instant,
    ) -> Instant {
        let at = position(cells, slot);
        let old = read(cells, at).deadline;
        let node = Node {
            deadline,
            seq: self.next_seq(),
            slot: slot as u32,
        };
        self.place(cells, at, node);
        old
    }

    /// Removes the last heap leaf in O(1): for draining in no order.
    pub(crate) fn pop_leaf<C: HeapCell>(&mut self, cells: &[C]) -> Option<(usize, Instant)> {
        let last = self.len().checked_sub(1)?;
        self.len -= 1;
        Some(Self::at(cells, last))
    }

    /// Puts `node` into the hole at `at`, sifting whichever way it belongs.
    fn place<C: HeapCell>(&self, cells: &mut [C], at: usize, node: Node) {
        if at > 0 && node.precedes(&read(cells, (at - 1) / 2)) {
            sift_up(cells, at, node);
        } else {
            sift_down(cells, self.len(), at, node);
        }
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.seq;
        // 2^64 insertions do not happen; wrapping only keeps this total.
        self.seq = self.seq.wrapping_add(1);
        seq
    }
}

fn sift_up<C: HeapCell>(cells: &mut [C], mut hole: usize, node: Node) {
    while hole > 0 {
        let parent = (hole - 1) / 2;
        let above = read(cells, parent);
        if !node.precedes(&above) {
            break;
        }
        write(cells, hole, above);
        hole = parent;
    }
    write(cells, hole, node);
}

fn sift_down<C: HeapCell>(cells: &mut [C], len: usize, mut hole: usize, node: Node) {
    loop {
        let left = 2 * hole + 1;
        if left >= len {
            break;
        }
        let mut child = left;
        let mut below = read(cells, left);
        if left + 1 < len {
            let right = read(cells, left + 1);
            if right.precedes(&below) {
                child = left + 1;
                below = right;
            }
        }
        if !below.precedes(&node) {
            break;
        }
        write(cells, hole, below);
        hole = child;
    }
    write(cells, hole, node);
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    fn cells(n: usize) -> Vec<DeadlineSlot> {
        let mut cells = std::vec![DeadlineSlot::EMPTY; n];
        Heap::new().reset(&mut cells);
        cells
    }

    /// Checks the heap property and that nodes and positions are inverse
    /// permutations.
    fn check(heap: &Heap, cells: &[DeadlineSlot]) {
        let mut seen = std::vec![false; cells.len()];
        for (at, cell) in cells.iter().enumerate() {
            let slot = cell.slot as usize;
            assert!(!seen[slot], "slot {slot} twice");
            seen[slot] = true;
            assert_eq!(cells[slot].pos as usize, at);
            if at > 0 && at < heap.len() {
                let parent = read(cells, (at - 1) / 2);
                assert!(!read(cells, at).precedes(&parent), "heap order at {at}");
            }
        }
    }

    #[test]
    fn permutation_and_order_survive_mixed_operations() {
        let mut cells = cells(9);
        let mut heap = Heap::new();
        let deadlines = [50, 10, 90, 10, 30, 70, 20, 60, 40];
        for (slot, d) in deadlines.iter().enumerate() {
            heap.insert(&mut cells, slot, Instant::from_nanos(*d));
            check(&heap, &cells);
        }
        assert_eq!(heap.vacant(&cells), None);
        assert_eq!(heap.remove(&mut cells, 4), Instant::from_nanos(30));
        check(&heap, &cells);
        assert_eq!(heap.vacant(&cells), Some(4));
        assert_eq!(
            heap.reschedule(&mut cells, 2, Instant::from_nanos(5)),
            Instant::from_nanos(90)
        );
        check(&heap, &cells);
        let mut order = Vec::new();
        while let Some((slot, _)) = heap.peek(&cells) {
            heap.remove(&mut cells, slot);
            check(&heap, &cells);
            order.push(slot);
        }
        // Ties (slots 1 and 3 at 10) leave in insertion order.
        assert_eq!(order, [2, 1, 3, 6, 8, 0, 7, 5]);
    }

    #[test]
    fn pop_leaf_and_clear_keep_the_permutation() {
        let mut cells = cells(4);
        let mut heap = Heap::new();
        for slot in 0..4 {
            heap.insert(&mut cells, slot, Instant::from_nanos(4 - slot as u64));
        }
        assert!(heap.pop_leaf(&cells).is_some());
        check(&heap, &cells);
        assert_eq!(heap.len(), 3);
        heap.clear();
        check(&heap, &cells);
        assert_eq!(heap.pop_leaf(&cells), None);
        assert!((0..4).all(|slot| !heap.contains(&cells, slot)));
    }
}
