//! Admit: the dedup verdict on each request and cancellation from a peer.
//!
//! Two structures decide, both sized once from the limits:
//!
//! - the **dedup table** ([`DedupTable`]) holds an entry per request that
//!   is running, and per finished request until its TTL passes, with the
//!   slot where the serving side keeps its response for duplicates;
//! - a **seen window** per origin ([`SeenWindow`]) records which of the
//!   origin's request numbers have arrived. Origins number their requests
//!   to this rank without gaps in send order
//!   ([`RequestId::in_sequence`](dinah_core::RequestId::in_sequence)), so
//!   the window is exact, and it never forgets.
//!
//! A request found in the table is a duplicate and gets its entry's
//! answer. A request not in the table that the window has seen is
//! **stale**: it arrived before and its entry is gone, so it is refused
//! without running. Only a request the window has never seen runs. That
//! is why a full table may evict its oldest finished entry early (a
//! **pressure eviction**): the eviction drops a cached response, never
//! the knowledge that the request arrived. A table full of running
//! requests refuses a new one with a typed resource error, and a request
//! more than the window's span ahead of the oldest one its origin has not
//! delivered yet (possible only when a frame was lost or reordered
//! further than that) is refused the same way; neither ran.

use dinah_core::{
    Arrival, CancelOutcome, DedupKey, DedupSlot, DedupState, DedupTable, Instant, Rank, Retention,
    RuntimeLimits, SeenWindow, Sighting, WorldSize,
};

/// What to do with a request from a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Never seen: now recorded as running in dedup slot `slot`; run it.
    Run { slot: usize },
    /// A duplicate of a request still running: send nothing now (its
    /// response follows when it finishes).
    Running,
    /// A duplicate of a finished request: resend the response kept in
    /// `slot` if `cached`, else answer that it is not retained.
    Completed { slot: usize, cached: bool },
    /// A duplicate of a request cancelled by its origin: answer
    /// "cancelled".
    Cancelled,
    /// Seen before (or cancelled before it arrived) and no entry left:
    /// answer that the result is not retained.
    Stale,
    /// Not run, and not recorded.
    Refused(AdmitRefusal),
}

/// Why a request was refused without running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AdmitRefusal {
    /// Every dedup entry belongs to a running request.
    TableFull,
    /// Too far ahead of the oldest request its origin has not delivered.
    AheadOfWindow,
    /// Its ID is not in its origin's sequence to this rank.
    Misaddressed,
}

/// What a cancellation from a peer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CancelVerdict {
    /// The request is running in `slot`: tell its job.
    Running { slot: usize },
    /// Nothing to do: it finished, was cancelled before, or is a repeat.
    Settled,
    /// It has not arrived: the window now refuses it if it does.
    Remembered,
    /// It has not arrived and the window cannot record it (too far ahead):
    /// the request will run if it arrives.
    Dropped,
    /// Its ID is not in the origin's sequence to this rank.
    Misaddressed,
}

/// Counts of admission decisions since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AdmitCounts {
    /// Requests found in the table (running, finished or cancelled).
    pub(crate) duplicates: u64,
    /// Requests seen before whose entry was gone.
    pub(crate) stale: u64,
    /// Finished entries evicted before their TTL to make room.
    pub(crate) pressure_evictions: u64,
    /// Requests refused because the table was full of running ones.
    pub(crate) table_full: u64,
    /// Requests refused for being too far ahead of their origin's window.
    pub(crate) ahead_of_window: u64,
}

/// The dedup state of the serving side (see the module docs).
pub(crate) struct Admit {
    table: DedupTable<Box<[DedupSlot]>>,
    /// Per origin rank.
    seen: Box<[SeenWindow<Box<[u64]>>]>,
    rank: Rank,
    world: WorldSize,
    counts: AdmitCounts,
}

impl Admit {
    /// The table sized by `limits.max_dedup_entries`, and per origin a
    /// window reaching at least `limits.max_pending_calls` numbers (rounded
    /// up to a power of two words): as many requests as an origin with the
    /// same limits can have outstanding, so an ordered transport never puts
    /// one ahead of it.
    pub(crate) fn new(limits: &RuntimeLimits, rank: Rank, world: WorldSize) -> Self {
        let entries = limits.max_dedup_entries as usize;
        let storage: Box<[DedupSlot]> = vec![DedupSlot::EMPTY; entries].into_boxed_slice();
        let table = DedupTable::from_limits(storage, limits)
            .expect("validated limits size the dedup table");
        let words = (limits.max_pending_calls as usize)
            .div_ceil(64)
            .next_power_of_two();
        let seen = world
            .ranks()
            .map(|_| {
                SeenWindow::with_storage(vec![0; words].into_boxed_slice())
                    .expect("a non-zero window")
            })
            .collect();
        Self {
            table,
            seen,
            rank,
            world,
            counts: AdmitCounts::default(),
        }
    }

    /// The verdict on request `key`, recording it when it runs. A full
    /// table evicts its oldest finished entry first; `forget` is told the
    /// slot of each entry evicted, whose response must go.
    ///
    /// The window is asked first. Every entry in the table was marked in
    /// its origin's window when it was admitted, so a number the window
    /// has never seen has no entry: it is inserted without looking for a
    /// duplicate, and room is made before the insertion rather than after
    /// a refused one.
    pub(crate) fn request(&mut self, key: DedupKey, mut forget: impl FnMut(usize)) -> Verdict {
        let (target, number) = key.id.sequence(self.world);
        if target != self.rank {
            return Verdict::Refused(AdmitRefusal::Misaddressed);
        }
        let window = &mut self.seen[key.origin.index()];
        match window.sighting(number) {
            Sighting::New => {}
            Sighting::Seen => return self.seen_before(key),
            Sighting::Ahead => {
                self.counts.ahead_of_window += 1;
                return Verdict::Refused(AdmitRefusal::AheadOfWindow);
            }
        }
        if self.table.is_full() {
            // Evicting the oldest finished entry forgets a response, never
            // an arrival: its origin's window still has it.
            let Some(evicted) = self.table.pop_expired(Instant::MAX) else {
                self.counts.table_full += 1;
                // It arrived: a duplicate of it must not run later.
                let _ = window.mark(number);
                return Verdict::Refused(AdmitRefusal::TableFull);
            };
            self.counts.pressure_evictions += 1;
            forget(evicted.slot);
        }
        match self.table.begin(key) {
            Ok(Arrival::Execute { slot }) => {
                let _ = window.mark(number);
                Verdict::Run { slot }
            }
            // Neither happens: the key is absent (the window never saw it)
            // and a slot is free. Refused, not run, if it ever did.
            Ok(_) | Err(_) => {
                self.counts.table_full += 1;
                let _ = window.mark(number);
                Verdict::Refused(AdmitRefusal::TableFull)
            }
        }
    }

    /// The verdict on a request its origin's window has seen: a duplicate
    /// while its entry is kept, stale once it is gone.
    fn seen_before(&mut self, key: DedupKey) -> Verdict {
        let Some(entry) = self.table.get(key) else {
            self.counts.stale += 1;
            return Verdict::Stale;
        };
        self.counts.duplicates += 1;
        match entry.state {
            DedupState::Completed { cached } => Verdict::Completed {
                slot: entry.slot,
                cached,
            },
            DedupState::Cancelled => Verdict::Cancelled,
            DedupState::Running { .. } => Verdict::Running,
        }
    }

    /// A cancellation of request `key` from its origin, arriving at `now`.
    pub(crate) fn cancel(&mut self, key: DedupKey, now: Instant) -> CancelVerdict {
        let (target, number) = key.id.sequence(self.world);
        if target != self.rank {
            return CancelVerdict::Misaddressed;
        }
        if self.table.contains(key) {
            return match self.table.cancel(key, now) {
                Ok(CancelOutcome::Requested { slot }) => CancelVerdict::Running { slot },
                _ => CancelVerdict::Settled,
            };
        }
        match self.seen[key.origin.index()].mark(number) {
            Ok(true) => CancelVerdict::Remembered,
            Ok(false) => CancelVerdict::Settled,
            Err(_) => CancelVerdict::Dropped,
        }
    }

    /// Records that the request `key` finished at `now` with a response of
    /// `bytes` bytes; the retention says whether to keep the response.
    pub(crate) fn finish(&mut self, key: DedupKey, now: Instant, bytes: u64) -> Option<Retention> {
        self.table.complete(key, now, bytes).ok()
    }

    /// Drops up to `max` entries whose TTL passed by `now`, telling
    /// `forget` each one's slot; returns how many.
    pub(crate) fn expire(
        &mut self,
        now: Instant,
        max: usize,
        mut forget: impl FnMut(usize),
    ) -> usize {
        let mut count = 0;
        while count < max {
            let Some(expired) = self.table.pop_expired(now) else {
                break;
            };
            forget(expired.slot);
            count += 1;
        }
        count
    }

    /// Forgets every entry (shutdown step 5, once no job is left). The
    /// windows stay: they hold no entries, only what arrived.
    pub(crate) fn clear(&mut self) {
        self.table.clear();
    }

    /// Entries in the table.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Requests admitted and not finished.
    pub(crate) fn running(&self) -> usize {
        self.table.running()
    }

    /// Response bytes the table accounts for.
    pub(crate) fn retained_bytes(&self) -> u64 {
        self.table.retained_bytes()
    }

    /// When the next entry expires.
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.table.next_expiry()
    }

    /// The decisions so far.
    pub(crate) fn counts(&self) -> AdmitCounts {
        self.counts
    }
}

#[cfg(test)]
mod tests;
