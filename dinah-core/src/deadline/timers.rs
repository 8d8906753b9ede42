//! The order behind [`DeadlineQueue`](super::DeadlineQueue) and
//! [`PendingTable`](crate::PendingTable): a few sorted runs, with an
//! indexed heap for whatever fits no run, over cells the caller owns.
//!
//! Most deadlines arrive in order: a runtime gives most calls the same
//! timeout, and its clock only moves forward, so each new deadline is at
//! or after the previous one. Such an entry is appended to a **run**, a
//! doubly linked list through the cells that stays sorted because it only
//! ever grows at its tail, and leaves it in O(1) from anywhere (calls
//! mostly finish long before their deadline, and in no particular order).
//! There are [`RUNS`] runs, so a few interleaved timeouts (say 1 s and
//! 30 s calls) each keep a run of their own. An entry earlier than the
//! tail of every run goes to the **spill heap** instead (`spill.rs`), an
//! indexed binary heap, where it costs O(log n) as before.
//!
//! Entries compare by `(deadline, insertion sequence)`, so equal deadlines
//! leave in insertion order whichever structure holds them. The earliest
//! entry is the least of the run heads and the heap root.
//!
//! Vacant cells form a doubly linked free list (a stack), so a caller can
//! take the next vacant slot, or claim a particular one, in O(1).

use super::DeadlineSlot;
use super::spill;
use crate::Instant;

/// Gives the timers access to the [`DeadlineSlot`] inside a table's cell.
pub(crate) trait TimerCell {
    fn timer(&self) -> &DeadlineSlot;
    fn timer_mut(&mut self) -> &mut DeadlineSlot;
}

impl TimerCell for DeadlineSlot {
    fn timer(&self) -> &DeadlineSlot {
        self
    }

    fn timer_mut(&mut self) -> &mut DeadlineSlot {
        self
    }
}

/// How many sorted runs the timers keep.
pub(crate) const RUNS: usize = 4;

/// No cell (the end of a list).
pub(crate) const NIL: u32 = u32::MAX;

/// A cell's `place`: vacant.
pub(crate) const VACANT: u32 = u32::MAX;

/// A cell's `place` for run `k` is `FIRST_RUN + k`; any smaller value is
/// a heap position (positions stay below `MAX_TABLE_CAPACITY`, far less).
const FIRST_RUN: u32 = u32::MAX - RUNS as u32;

/// The head and tail of one run (both [`NIL`] when it is empty), and the
/// tail's deadline, kept here so choosing a run reads no cell.
#[derive(Debug, Clone, Copy)]
struct Run {
    head: u32,
    tail: u32,
    last: Instant,
}

impl Run {
    const EMPTY: Self = Self {
        head: NIL,
        tail: NIL,
        last: Instant::ZERO,
    };
}

/// The queue state that is not in the cells.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timers {
    /// Cells with a deadline.
    len: u32,
    /// The next insertion sequence number.
    seq: u64,
    /// The first vacant cell.
    free: u32,
    /// Cells in the spill heap.
    heap_len: u32,
    /// The earliest entry (kept on every change, so a peek reads it).
    first: u32,
    runs: [Run; RUNS],
}

pub(crate) fn cell<C: TimerCell>(cells: &[C], slot: u32) -> &DeadlineSlot {
    cells[slot as usize].timer()
}

pub(crate) fn cell_mut<C: TimerCell>(cells: &mut [C], slot: u32) -> &mut DeadlineSlot {
    cells[slot as usize].timer_mut()
}

/// Does `a` leave before `b`?
pub(crate) fn precedes<C: TimerCell>(cells: &[C], a: u32, b: u32) -> bool {
    let (a, b) = (cell(cells, a), cell(cells, b));
    (a.deadline, a.seq) < (b.deadline, b.seq)
}

impl Timers {
    /// The state of `capacity` vacant cells initialised by
    /// [`DeadlineSlot::vacant`].
    pub(crate) const fn new() -> Self {
        Self {
            len: 0,
            seq: 0,
            free: 0,
            heap_len: 0,
            first: NIL,
            runs: [Run::EMPTY; RUNS],
        }
    }

    /// Makes every cell vacant (O(capacity)).
    pub(crate) fn reset<C: TimerCell>(&mut self, cells: &mut [C]) {
        let count = cells.len() as u32;
        for (index, cell) in cells.iter_mut().enumerate() {
            *cell.timer_mut() = DeadlineSlot::vacant(index as u32, count);
        }
        *self = Self::new();
    }

    pub(crate) const fn len(&self) -> usize {
        self.len as usize
    }

    pub(crate) fn contains<C: TimerCell>(&self, cells: &[C], slot: usize) -> bool {
        cells[slot].timer().place != VACANT
    }

    pub(crate) fn deadline<C: TimerCell>(&self, cells: &[C], slot: usize) -> Option<Instant> {
        let cell = cells[slot].timer();
        (cell.place != VACANT).then_some(cell.deadline)
    }

    /// The vacant slot [`insert`](Self::insert) would take next, if any.
    pub(crate) fn vacant(&self) -> Option<usize> {
        (self.free != NIL).then_some(self.free as usize)
    }

    /// Gives the vacant `slot` the deadline `deadline`.
    pub(crate) fn insert<C: TimerCell>(&mut self, cells: &mut [C], slot: usize, deadline: Instant) {
        debug_assert!(!self.contains(cells, slot), "slot {slot} already queued");
        let slot = slot as u32;
        self.unlink_free(cells, slot);
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        let entry = cell_mut(cells, slot);
        entry.deadline = deadline;
        entry.seq = seq;
        self.len += 1;
        match self.run_for(deadline) {
            Some(run) => self.append(cells, run, slot),
            None => {
                let at = self.heap_len;
                self.heap_len += 1;
                spill::push(cells, at, slot);
            }
        }
        if self.first == NIL || precedes(cells, slot, self.first) {
            self.first = slot;
        }
    }

    /// The run `deadline` can be appended to: the first whose tail is not
    /// after it, else the first empty one. (While no run empties, the first
    /// fit is also the best one: the tails stay in descending order, as in
    /// patience sorting. In the common case, one timeout for every entry,
    /// the first run always fits and this looks at one tail.)
    fn run_for(&self, deadline: Instant) -> Option<usize> {
        let mut empty = None;
        for (index, run) in self.runs.iter().enumerate() {
            if run.tail == NIL {
                empty = empty.or(Some(index));
            } else if run.last <= deadline {
                return Some(index);
            }
        }
        empty
    }

    fn append<C: TimerCell>(&mut self, cells: &mut [C], run: usize, slot: u32) {
        let tail = self.runs[run].tail;
        let entry = cell_mut(cells, slot);
        self.runs[run].last = entry.deadline;
        entry.place = FIRST_RUN + run as u32;
        entry.prev = tail;
        entry.next = NIL;
        if tail == NIL {
            self.runs[run].head = slot;
        } else {
            cell_mut(cells, tail).next = slot;
        }
        self.runs[run].tail = slot;
    }

    /// Removes the queued `slot` and returns its deadline.
    pub(crate) fn remove<C: TimerCell>(&mut self, cells: &mut [C], slot: usize) -> Instant {
        debug_assert!(self.contains(cells, slot), "slot {slot} not queued");
        let slot = slot as u32;
        let entry = *cell(cells, slot);
        if entry.place >= FIRST_RUN {
            let run = &mut self.runs[(entry.place - FIRST_RUN) as usize];
            if entry.prev == NIL {
                run.head = entry.next;
            } else {
                cell_mut(cells, entry.prev).next = entry.next;
            }
            if entry.next == NIL {
                run.tail = entry.prev;
                if entry.prev != NIL {
                    run.last = cell(cells, entry.prev).deadline;
                }
            } else {
                cell_mut(cells, entry.next).prev = entry.prev;
            }
        } else {
            self.heap_len -= 1;
            spill::remove(cells, self.heap_len, entry.place);
        }
        self.len -= 1;
        self.push_free(cells, slot);
        if self.first == slot {
            self.first = self.earliest(cells);
        }
        entry.deadline
    }

    /// Gives the queued `slot` a new deadline (behind entries that already
    /// have it); returns the old one.
    pub(crate) fn reschedule<C: TimerCell>(
        &mut self,
        cells: &mut [C],
        slot: usize,
        deadline: Instant,
    ) -> Instant {
        let old = self.remove(cells, slot);
        self.insert(cells, slot, deadline);
        old
    }

    /// The earliest entry.
    pub(crate) fn peek<C: TimerCell>(&self, cells: &[C]) -> Option<(usize, Instant)> {
        (self.first != NIL).then(|| (self.first as usize, cell(cells, self.first).deadline))
    }

    /// Finds the earliest entry: the least of the run heads and the heap's
    /// root ([`NIL`] if there is none).
    fn earliest<C: TimerCell>(&self, cells: &[C]) -> u32 {
        let mut first = if self.heap_len > 0 {
            cell(cells, 0).heap
        } else {
            NIL
        };
        for run in &self.runs {
            if run.head != NIL && (first == NIL || precedes(cells, run.head, first)) {
                first = run.head;
            }
        }
        first
    }

    /// Removes some entry (the cheapest to take), for draining.
    pub(crate) fn pop_any<C: TimerCell>(&mut self, cells: &mut [C]) -> Option<(usize, Instant)> {
        let slot = if self.heap_len > 0 {
            cell(cells, self.heap_len - 1).heap
        } else {
            self.runs.iter().find(|run| run.tail != NIL)?.tail
        };
        Some((slot as usize, self.remove(cells, slot as usize)))
    }

    /// Removes every entry (O(len)).
    pub(crate) fn clear<C: TimerCell>(&mut self, cells: &mut [C]) {
        while self.pop_any(cells).is_some() {}
    }

    /// The first queued entry in iteration order at or after `cursor`.
    pub(crate) fn next_entry<C: TimerCell>(
        &self,
        cells: &[C],
        cursor: &mut Cursor,
    ) -> Option<(usize, Instant)> {
        loop {
            match *cursor {
                Cursor::Heap(at) if at < self.heap_len => {
                    *cursor = Cursor::Heap(at + 1);
                    let slot = cell(cells, at).heap;
                    return Some((slot as usize, cell(cells, slot).deadline));
                }
                Cursor::Heap(_) => *cursor = Cursor::Run(0, None),
                Cursor::Run(run, _) if run >= RUNS => return None,
                Cursor::Run(run, None) => {
                    let head = self.runs[run].head;
                    *cursor = if head == NIL {
                        Cursor::Run(run + 1, None)
                    } else {
                        Cursor::Run(run, Some(head))
                    };
                }
                Cursor::Run(run, Some(slot)) => {
                    let entry = cell(cells, slot);
                    *cursor = if entry.next == NIL {
                        Cursor::Run(run + 1, None)
                    } else {
                        Cursor::Run(run, Some(entry.next))
                    };
                    return Some((slot as usize, entry.deadline));
                }
            }
        }
    }

    fn unlink_free<C: TimerCell>(&mut self, cells: &mut [C], slot: u32) {
        let entry = *cell(cells, slot);
        if entry.prev == NIL {
            self.free = entry.next;
        } else {
            cell_mut(cells, entry.prev).next = entry.next;
        }
        if entry.next != NIL {
            cell_mut(cells, entry.next).prev = entry.prev;
        }
    }

    fn push_free<C: TimerCell>(&mut self, cells: &mut [C], slot: u32) {
        let head = self.free;
        let entry = cell_mut(cells, slot);
        entry.place = VACANT;
        entry.prev = NIL;
        entry.next = head;
        if head != NIL {
            cell_mut(cells, head).prev = slot;
        }
        self.free = slot;
    }
}

/// Where an iteration over the entries stands: heap positions first, then
/// each run from its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cursor {
    Heap(u32),
    Run(usize, Option<u32>),
}

impl Cursor {
    pub(crate) const START: Self = Self::Heap(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    fn cells(n: usize) -> (Timers, Vec<DeadlineSlot>) {
        let mut cells = std::vec![DeadlineSlot::EMPTY; n];
        let mut timers = Timers::new();
        timers.reset(&mut cells);
        (timers, cells)
    }

    fn t(nanos: u64) -> Instant {
        Instant::from_nanos(nanos)
    }

    /// Every structural invariant: runs sorted and linked both ways, the
    /// heap ordered with places matching positions, the free list linking
    /// exactly the vacant cells, and the counts adding up.
    fn check(timers: &Timers, cells: &[DeadlineSlot]) {
        let mut seen = std::vec![false; cells.len()];
        let mut queued = 0;
        for (index, run) in timers.runs.iter().enumerate() {
            let (mut at, mut prev) = (run.head, NIL);
            while at != NIL {
                assert!(!seen[at as usize], "cell {at} twice");
                seen[at as usize] = true;
                let entry = cells[at as usize];
                assert_eq!(entry.place, FIRST_RUN + index as u32);
                assert_eq!(entry.prev, prev);
                if prev != NIL {
                    assert!(precedes(cells, prev, at), "run {index} out of order");
                }
                queued += 1;
                prev = at;
                at = entry.next;
            }
            assert_eq!(run.tail, prev);
            if prev != NIL {
                assert_eq!(
                    run.last, cells[prev as usize].deadline,
                    "run {index}'s last deadline"
                );
            }
        }
        for at in 0..timers.heap_len {
            let slot = cells[at as usize].heap;
            assert!(!seen[slot as usize], "cell {slot} twice");
            seen[slot as usize] = true;
            assert_eq!(cells[slot as usize].place, at);
            if at > 0 {
                let parent = cells[((at - 1) / 2) as usize].heap;
                assert!(!precedes(cells, slot, parent), "heap order at {at}");
            }
            queued += 1;
        }
        assert_eq!(queued, timers.len());
        assert_eq!(
            timers.first,
            timers.earliest(cells),
            "the cached earliest entry"
        );
        let (mut at, mut prev, mut vacant) = (timers.free, NIL, 0);
        while at != NIL {
            assert!(!seen[at as usize], "cell {at} twice");
            seen[at as usize] = true;
            let entry = cells[at as usize];
            assert_eq!(entry.place, VACANT);
            assert_eq!(entry.prev, prev);
            vacant += 1;
            prev = at;
            at = entry.next;
        }
        assert_eq!(queued + vacant, cells.len());
    }

    fn drain(timers: &mut Timers, cells: &mut [DeadlineSlot]) -> Vec<(usize, Instant)> {
        let mut order = Vec::new();
        while let Some((slot, deadline)) = timers.peek(cells) {
            assert_eq!(timers.remove(cells, slot), deadline);
            check(timers, cells);
            order.push((slot, deadline));
        }
        order
    }

    #[test]
    fn in_order_deadlines_stay_in_one_run() {
        let (mut timers, mut cells) = cells(8);
        for slot in 0..8 {
            timers.insert(&mut cells, slot, t(10 + slot as u64 / 2));
        }
        check(&timers, &cells);
        assert_eq!(timers.heap_len, 0);
        assert_eq!(timers.runs.iter().filter(|r| r.head != NIL).count(), 1);
        // Out of order removal from the middle and both ends.
        for slot in [3, 0, 7, 5] {
            timers.remove(&mut cells, slot);
            check(&timers, &cells);
        }
        let order: Vec<_> = drain(&mut timers, &mut cells).iter().map(|e| e.0).collect();
        assert_eq!(order, [1, 2, 4, 6]);
    }

    #[test]
    fn interleaved_timeouts_take_a_run_each_and_the_rest_spills() {
        let (mut timers, mut cells) = cells(32);
        // Five timeouts issued in turn: four runs, one spills to the heap.
        let mut slot = 0;
        for now in 0..6_u64 {
            for timeout in [500, 400, 300, 200, 100] {
                timers.insert(&mut cells, slot, t(now + timeout));
                check(&timers, &cells);
                slot += 1;
            }
        }
        assert!(timers.runs.iter().all(|r| r.head != NIL));
        assert!(timers.heap_len > 0);
        let order = drain(&mut timers, &mut cells);
        assert!(order.windows(2).all(|w| w[0].1 <= w[1].1));
        assert_eq!(order.len(), 30);
    }

    #[test]
    fn equal_deadlines_leave_in_insertion_order_across_runs_and_heap() {
        let (mut timers, mut cells) = cells(8);
        // 50 starts a run, 40 a second, 30 a third, 20 the fourth; 10 spills.
        for (slot, d) in [(0, 50), (1, 40), (2, 30), (3, 20), (4, 10)] {
            timers.insert(&mut cells, slot, t(d));
        }
        assert_eq!(timers.heap_len, 1);
        // Equal to the heap entry and to run tails: order is insertion.
        timers.insert(&mut cells, 5, t(10));
        timers.insert(&mut cells, 6, t(20));
        check(&timers, &cells);
        let order: Vec<_> = drain(&mut timers, &mut cells).iter().map(|e| e.0).collect();
        assert_eq!(order, [4, 5, 3, 6, 2, 1, 0]);
    }

    #[test]
    fn the_free_list_hands_out_and_claims_any_vacant_slot() {
        let (mut timers, mut cells) = cells(4);
        assert_eq!(timers.vacant(), Some(0));
        timers.insert(&mut cells, 2, t(5));
        check(&timers, &cells);
        assert_eq!(timers.vacant(), Some(0));
        timers.insert(&mut cells, 0, t(6));
        assert_eq!(timers.vacant(), Some(1));
        timers.insert(&mut cells, 1, t(1));
        timers.insert(&mut cells, 3, t(7));
        assert_eq!(timers.vacant(), None);
        check(&timers, &cells);
        assert_eq!(timers.remove(&mut cells, 1), t(1));
        assert_eq!(timers.vacant(), Some(1));
        timers.clear(&mut cells);
        check(&timers, &cells);
        assert_eq!(timers.len(), 0);
        assert!((0..4).all(|slot| !timers.contains(&cells, slot)));
    }

    #[test]
    fn reschedule_and_iteration_cover_every_entry_once() {
        let (mut timers, mut cells) = cells(9);
        let deadlines = [50, 10, 90, 10, 30, 70, 20, 60, 40];
        for (slot, d) in deadlines.iter().enumerate() {
            timers.insert(&mut cells, slot, t(*d));
            check(&timers, &cells);
        }
        assert_eq!(timers.reschedule(&mut cells, 2, t(5)), t(90));
        check(&timers, &cells);
        let mut cursor = Cursor::START;
        let mut seen = Vec::new();
        while let Some((slot, deadline)) = timers.next_entry(&cells, &mut cursor) {
            assert_eq!(timers.deadline(&cells, slot), Some(deadline));
            seen.push(slot);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..9).collect::<Vec<_>>());
        let order: Vec<_> = drain(&mut timers, &mut cells).iter().map(|e| e.0).collect();
        assert_eq!(order, [2, 1, 3, 6, 4, 8, 0, 7, 5]);
    }

    #[test]
    fn pop_any_empties_the_heap_then_the_runs() {
        let (mut timers, mut cells) = cells(6);
        for (slot, d) in [(0, 60), (1, 50), (2, 40), (3, 30), (4, 20), (5, 70)] {
            timers.insert(&mut cells, slot, t(d));
        }
        let mut taken = 0;
        while timers.pop_any(&mut cells).is_some() {
            check(&timers, &cells);
            taken += 1;
        }
        assert_eq!(taken, 6);
        // The free list is a stack: the last slot taken (run 3's) is next.
        assert_eq!(timers.vacant(), Some(3));
    }
}
