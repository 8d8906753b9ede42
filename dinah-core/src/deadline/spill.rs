//! The spill heap of the timers (`timers.rs`): an indexed binary min-heap
//! over the table's own cells, for entries that fit no sorted run.
//!
//! Heap position `p` is recorded in cell `p` (its `heap` field names the
//! slot there), and each queued slot's `place` is its position, so any
//! entry is removed in O(log n). Entries compare by `(deadline, insertion
//! sequence)` as everywhere in the timers.

use super::timers::{TimerCell, cell, cell_mut, precedes};

/// Puts `slot` at position `at` and records the position in the slot.
fn put<C: TimerCell>(cells: &mut [C], at: u32, slot: u32) {
    cell_mut(cells, at).heap = slot;
    cell_mut(cells, slot).place = at;
}

/// Adds `slot` at the end of a heap of `at` entries and restores order.
pub(super) fn push<C: TimerCell>(cells: &mut [C], at: u32, slot: u32) {
    sift_up(cells, at, slot);
}

/// Removes the entry at position `at` of a heap that had `last + 1`
/// entries: the last entry takes its place and moves up or down.
pub(super) fn remove<C: TimerCell>(cells: &mut [C], last: u32, at: u32) {
    if at == last {
        return;
    }
    let moved = cell(cells, last).heap;
    if at > 0 && precedes(cells, moved, cell(cells, (at - 1) / 2).heap) {
        sift_up(cells, at, moved);
    } else {
        sift_down(cells, last, at, moved);
    }
}

fn sift_up<C: TimerCell>(cells: &mut [C], mut hole: u32, slot: u32) {
    while hole > 0 {
        let parent = (hole - 1) / 2;
        let above = cell(cells, parent).heap;
        if !precedes(cells, slot, above) {
            break;
        }
        put(cells, hole, above);
        hole = parent;
    }
    put(cells, hole, slot);
}

/// Moves `slot` down from `hole` in a heap of `len` entries.
fn sift_down<C: TimerCell>(cells: &mut [C], len: u32, mut hole: u32, slot: u32) {
    loop {
        let left = 2 * hole + 1;
        if left >= len {
            break;
        }
        let mut child = left;
        let mut below = cell(cells, left).heap;
        if left + 1 < len {
            let right = cell(cells, left + 1).heap;
            if precedes(cells, right, below) {
                child = left + 1;
                below = right;
            }
        }
        if !precedes(cells, below, slot) {
            break;
        }
        put(cells, hole, below);
        hole = child;
    }
    put(cells, hole, slot);
}
