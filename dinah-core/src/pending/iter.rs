//! Iterators over a [`PendingTable`].

use core::fmt;

use super::{PendingSlot, PendingTable};
use crate::deadline::timers::{Cursor, Timers};
use crate::{Instant, RequestId};

/// Pops expired calls of a [`PendingTable`]; see
/// [`PendingTable::drain_expired`].
pub struct DrainExpired<'a, P, S> {
    table: &'a mut PendingTable<P, S>,
    now: Instant,
}

impl<'a, P, S> DrainExpired<'a, P, S> {
    pub(super) fn new(table: &'a mut PendingTable<P, S>, now: Instant) -> Self {
        Self { table, now }
    }
}

impl<P, S> Iterator for DrainExpired<'_, P, S>
where
    S: AsRef<[PendingSlot<P>]> + AsMut<[PendingSlot<P>]>,
{
    type Item = (RequestId, P);

    fn next(&mut self) -> Option<Self::Item> {
        self.table.pop_expired(self.now)
    }
}

impl<P, S> fmt::Debug for DrainExpired<'_, P, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrainExpired")
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// Removes every call of a [`PendingTable`]; see [`PendingTable::drain`].
/// Dropping it removes whatever was not yielded.
pub struct Drain<'a, P, S>
where
    S: AsRef<[PendingSlot<P>]> + AsMut<[PendingSlot<P>]>,
{
    table: &'a mut PendingTable<P, S>,
}

impl<'a, P, S> Drain<'a, P, S>
where
    S: AsRef<[PendingSlot<P>]> + AsMut<[PendingSlot<P>]>,
{
    pub(super) fn new(table: &'a mut PendingTable<P, S>) -> Self {
        Self { table }
    }
}

impl<P, S> Iterator for Drain<'_, P, S>
where
    S: AsRef<[PendingSlot<P>]> + AsMut<[PendingSlot<P>]>,
{
    type Item = (RequestId, P);

    fn next(&mut self) -> Option<Self::Item> {
        self.table.pop_any()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let len = self.table.len();
        (len, Some(len))
    }
}

impl<P, S> ExactSizeIterator for Drain<'_, P, S> where
    S: AsRef<[PendingSlot<P>]> + AsMut<[PendingSlot<P>]>
{
}

impl<P, S> Drop for Drain<'_, P, S>
where
    S: AsRef<[PendingSlot<P>]> + AsMut<[PendingSlot<P>]>,
{
    fn drop(&mut self) {
        while self.table.pop_any().is_some() {}
    }
}

impl<P, S> fmt::Debug for Drain<'_, P, S>
where
    S: AsRef<[PendingSlot<P>]> + AsMut<[PendingSlot<P>]>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drain")
            .field("remaining", &self.table.len())
            .finish()
    }
}

/// Every pending call as `(id, deadline, &handle)`; see
/// [`PendingTable::iter`].
pub struct Iter<'a, P> {
    cells: &'a [PendingSlot<P>],
    timers: &'a Timers,
    cursor: Cursor,
    left: usize,
}

impl<'a, P> Iter<'a, P> {
    pub(super) fn new(cells: &'a [PendingSlot<P>], timers: &'a Timers) -> Self {
        Self {
            cells,
            timers,
            cursor: Cursor::START,
            left: timers.len(),
        }
    }
}

impl<'a, P> Iterator for Iter<'a, P> {
    type Item = (RequestId, Instant, &'a P);

    fn next(&mut self) -> Option<Self::Item> {
        while let Some((slot, deadline)) = self.timers.next_entry(self.cells, &mut self.cursor) {
            self.left = self.left.saturating_sub(1);
            if let Some((id, value)) = &self.cells[slot].entry {
                return Some((*id, deadline, value));
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<P> ExactSizeIterator for Iter<'_, P> {}

impl<P> Clone for Iter<'_, P> {
    fn clone(&self) -> Self {
        Self { ..*self }
    }
}

impl<P> fmt::Debug for Iter<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter")
            .field("remaining", &self.left)
            .finish()
    }
}
