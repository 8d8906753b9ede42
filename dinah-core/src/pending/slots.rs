//! Open addressing over the slot storage of the pending and dedup tables.
//!
//! A table of capacity `n` has `2n` buckets, two in each storage element
//! (bucket `b` lives in element `b / 2`), so the load factor never exceeds
//! one half and every probe sequence ends at an empty bucket. A bucket
//! holds `slot + 1`, or zero when empty; the key itself stays in the slot.
//!
//! - Hash: the key is folded to a `u64` and multiplied by 2^64/φ (Fibonacci
//!   hashing); the top 32 bits are mapped onto `0..2n` with a
//!   multiply-shift, so the bucket count need not be a power of two.
//! - The pending table places runs of consecutive request IDs side by side
//!   instead ([`Keyed::home`], [`run_home`]): a rank's IDs come in
//!   sequence. The dedup table hashes single keys: it is full at all
//!   times on a busy receiver, where runs make probes longer than the
//!   lines they save.
//! - Probing: linear, wrapping at `2n`.
//! - Deletion: backward shift (Knuth's algorithm R), so there are no
//!   tombstones and probe lengths never degrade over time.
//!
//! At load α ≤ ½ linear probing expects about 1.5 probes for a hit and 2.5
//! for a miss. The hash is fixed, not keyed: keys are request IDs issued by
//! the runtime's peers, which are trusted not to choose colliding IDs on
//! purpose; a worst case is still bounded by the capacity.

/// Empty bucket marker.
const EMPTY: u32 = 0;

/// A storage element that carries two buckets and may hold one key.
pub(crate) trait Keyed {
    /// What the table is keyed by.
    type Key: Copy + Eq;

    /// The key held by this element's slot, if occupied.
    fn key(&self) -> Option<Self::Key>;

    /// The first bucket probed for `key` in a table of `count` buckets:
    /// its hash reduced with [`home`], or [`run_home`] for IDs in sequence.
    fn home(key: Self::Key, count: usize) -> usize;

    /// This element's two buckets.
    fn buckets(&self) -> &[u32; 2];

    /// This element's two buckets, mutably.
    fn buckets_mut(&mut self) -> &mut [u32; 2];
}

/// Fibonacci hashing multiplier: 2^64 divided by the golden ratio.
const PHI: u64 = 0x9E37_79B9_7F4A_7C15;

/// Spreads `x` over the high bits (used before [`home`]).
pub(crate) const fn mix(x: u64) -> u64 {
    x.wrapping_mul(PHI)
}

/// The first bucket probed for `hash` in a table of `count` buckets
/// (`count < 2^32`).
pub(crate) fn home(hash: u64, count: usize) -> usize {
    (((hash >> 32) * count as u64) >> 32) as usize
}

/// How many consecutive request IDs the pending table places side by side
/// (see [`run_home`]).
pub(crate) const ID_RUN: u64 = 16;

/// The first bucket probed for a request ID at `offset` in its run of
/// [`ID_RUN`] consecutive IDs, the run hashing to `run_hash`: the run's
/// home, then the offset. A rank hands out its request IDs in sequence,
/// so the calls in flight (or recently served) hold runs of nearby IDs;
/// placed so, their buckets share cache lines instead of each taking its
/// own, and the runs' homes still spread as single keys' would.
pub(crate) fn run_home(run_hash: u64, offset: u64, count: usize) -> usize {
    let at = home(run_hash, count) + offset as usize;
    if at < count { at } else { (at - count) % count }
}

fn next(bucket: usize, count: usize) -> usize {
    let next = bucket + 1;
    if next == count { 0 } else { next }
}

/// Cyclic distance from `from` forward to `to`.
fn distance(from: usize, to: usize, count: usize) -> usize {
    if to >= from {
        to - from
    } else {
        to + count - from
    }
}

fn bucket<T: Keyed>(cells: &[T], at: usize) -> u32 {
    cells[at >> 1].buckets()[at & 1]
}

fn set_bucket<T: Keyed>(cells: &mut [T], at: usize, value: u32) {
    cells[at >> 1].buckets_mut()[at & 1] = value;
}

/// Where a key is, or where it would go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// The key is in `slot`, linked from `bucket`.
    Found {
        /// The bucket that links the slot.
        bucket: usize,
        /// The slot holding the key.
        slot: usize,
    },
    /// The key is absent; `bucket` is the empty bucket ending its probe.
    Vacant {
        /// Where [`link`] would put it.
        bucket: usize,
    },
}

/// Looks `key` up.
pub(crate) fn find<T: Keyed>(cells: &[T], key: T::Key) -> Probe {
    let count = cells.len() * 2;
    let mut at = T::home(key, count);
    // Terminates: at most half of the buckets are ever occupied.
    loop {
        let value = bucket(cells, at);
        if value == EMPTY {
            return Probe::Vacant { bucket: at };
        }
        let slot = (value - 1) as usize;
        if cells[slot].key() == Some(key) {
            return Probe::Found { bucket: at, slot };
        }
        at = next(at, count);
    }
}

/// Links `slot` from the empty `bucket` returned by [`find`].
pub(crate) fn link<T: Keyed>(cells: &mut [T], at: usize, slot: usize) {
    debug_assert_eq!(bucket(cells, at), EMPTY);
    set_bucket(cells, at, slot as u32 + 1);
}

/// Empties `bucket` (from [`Probe::Found`]) and shifts later entries of its
/// cluster back so every key stays reachable from its home bucket. Reads
/// the keys of the slots it moves, so call it before clearing any other
/// slot's key; the unlinked slot's own key is not read.
pub(crate) fn unlink<T: Keyed>(cells: &mut [T], at: usize) {
    let count = cells.len() * 2;
    let mut hole = at;
    let mut probe = next(hole, count);
    loop {
        let value = bucket(cells, probe);
        if value == EMPTY {
            break;
        }
        if let Some(key) = cells[(value - 1) as usize].key() {
            let home = T::home(key, count);
            // Movable into the hole iff the hole lies on its probe path
            // (cyclically within [home, probe)).
            if distance(home, probe, count) >= distance(hole, probe, count) {
                set_bucket(cells, hole, value);
                hole = probe;
            }
        }
        probe = next(probe, count);
    }
    set_bucket(cells, hole, EMPTY);
}

/// Empties every bucket.
pub(crate) fn clear<T: Keyed>(cells: &mut [T]) {
    for cell in cells {
        *cell.buckets_mut() = [EMPTY; 2];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    #[derive(Clone, Copy, Default)]
    struct Cell {
        key: Option<u64>,
        buckets: [u32; 2],
    }

    impl Keyed for Cell {
        type Key = u64;
        fn key(&self) -> Option<u64> {
            self.key
        }
        fn home(key: u64, count: usize) -> usize {
            // Deliberately poor: keys collide in groups of eight, so
            // clusters form and wrap around the end.
            home(mix(key / 8), count)
        }
        fn buckets(&self) -> &[u32; 2] {
            &self.buckets
        }
        fn buckets_mut(&mut self) -> &mut [u32; 2] {
            &mut self.buckets
        }
    }

    fn insert(cells: &mut [Cell], key: u64, slot: usize) {
        let Probe::Vacant { bucket } = find(cells, key) else {
            panic!("{key} present");
        };
        cells[slot].key = Some(key);
        link(cells, bucket, slot);
    }

    fn remove(cells: &mut [Cell], key: u64) -> usize {
        let Probe::Found { bucket, slot } = find(cells, key) else {
            panic!("{key} absent");
        };
        unlink(cells, bucket);
        cells[slot].key = None;
        slot
    }

    #[test]
    fn clustered_keys_stay_reachable_through_deletions() {
        let mut cells = std::vec![Cell::default(); 16];
        let keys: Vec<u64> = (0..16).collect();
        for (slot, key) in keys.iter().enumerate() {
            insert(&mut cells, *key, slot);
        }
        // Remove every third key, in an order that splits clusters.
        let mut live: Vec<u64> = keys.clone();
        for key in [0, 9, 3, 12, 6, 15, 1] {
            let slot = remove(&mut cells, key);
            assert_eq!(slot as u64, key);
            live.retain(|k| *k != key);
            for k in &live {
                assert!(
                    matches!(find(&cells, *k), Probe::Found { slot, .. } if slot as u64 == *k),
                    "{k} lost after removing {key}"
                );
            }
            assert!(matches!(find(&cells, key), Probe::Vacant { .. }));
        }
        let occupied = cells
            .iter()
            .flat_map(|c| c.buckets)
            .filter(|b| *b != EMPTY)
            .count();
        assert_eq!(occupied, live.len());
        clear(&mut cells);
        assert!(cells.iter().all(|c| c.buckets == [EMPTY; 2]));
    }

    #[test]
    fn home_spreads_sequential_keys() {
        // Sequential IDs (what an allocator hands out) land on distinct
        // home buckets at half load.
        let count = 2 * 4096;
        let mut homes: Vec<usize> = (1..=4096u64).map(|k| home(mix(k), count)).collect();
        homes.sort_unstable();
        homes.dedup();
        assert!(homes.len() > 4000, "{} distinct homes", homes.len());
        assert!(homes.iter().all(|h| *h < count));
        assert_eq!(distance(5, 2, 8), 5);
        assert_eq!(distance(2, 5, 8), 3);
    }
}
