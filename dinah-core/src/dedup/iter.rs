//! Iterators over a [`DedupTable`].

use core::fmt;

use super::{DedupSlot, DedupTable, ExpiredEntry};
use crate::Instant;

/// Pops expired entries of a [`DedupTable`]; see
/// [`DedupTable::drain_expired`].
pub struct DrainExpiredEntries<'a, S> {
    table: &'a mut DedupTable<S>,
    now: Instant,
}

impl<'a, S> DrainExpiredEntries<'a, S> {
    pub(super) fn new(table: &'a mut DedupTable<S>, now: Instant) -> Self {
        Self { table, now }
    }
}

impl<S> Iterator for DrainExpiredEntries<'_, S>
where
    S: AsRef<[DedupSlot]> + AsMut<[DedupSlot]>,
{
    type Item = ExpiredEntry;

    fn next(&mut self) -> Option<ExpiredEntry> {
        self.table.pop_expired(self.now)
    }
}

impl<S> fmt::Debug for DrainExpiredEntries<'_, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrainExpiredEntries")
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}
