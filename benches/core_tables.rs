//! The request tables of `dinah-core` at steady state.
//!
//! Each benchmark keeps a table at a realistic fill (three quarters of a
//! capacity of 64 or 4096, the default dedup size) and measures one
//! operation cycle that leaves the fill unchanged:
//!
//! - `pending/insert_remove`: a new call arrives and the oldest one is
//!   answered (FIFO churn of request IDs), deadlines random;
//! - `pending/insert_remove_one_timeout`: the same with every call given
//!   the same timeout on a clock that moves forward, as a runtime gives
//!   most calls (deadlines arrive in order);
//! - `pending/insert_expire`: a new call with a random deadline, then the
//!   earliest deadline expires;
//! - `dedup/begin_complete_expire`: a new request is admitted, completes
//!   with a cached response, and the oldest finished entry expires;
//! - `dedup/begin_duplicate`: a duplicate of a completed request is looked
//!   up (no change).
//!
//! Storage is caller-provided (`Box<[_]>`), as `dinah-std` builds it.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use dinah_core::{
    DedupConfig, DedupKey, DedupSlot, DedupTable, Instant, PendingSlot, PendingTable, Rank,
    RequestId, WorldSize,
};

const CAPACITIES: [usize; 2] = [64, 4096];

fn fill(capacity: usize) -> u64 {
    (capacity * 3 / 4) as u64
}

fn id(n: u64) -> RequestId {
    RequestId::new(n).expect("benchmark ids start at one")
}

/// xorshift64: deterministic pseudo-random deadlines.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

fn pending_table(capacity: usize) -> PendingTable<u64, Box<[PendingSlot<u64>]>> {
    let storage = (0..capacity).map(|_| PendingSlot::EMPTY).collect();
    PendingTable::with_storage(storage).expect("non-empty storage")
}

fn pending(c: &mut Criterion) {
    let mut group = c.benchmark_group("pending");
    for capacity in CAPACITIES {
        let fill = fill(capacity);
        group.bench_with_input(
            BenchmarkId::new("insert_remove", capacity),
            &capacity,
            |b, &capacity| {
                let mut table = pending_table(capacity);
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
                for n in 1..=fill {
                    let deadline = Instant::from_nanos(rng.next(1 << 20));
                    table.insert(id(n), deadline, n).expect("below capacity");
                }
                let mut next = fill + 1;
                b.iter(|| {
                    let deadline = Instant::from_nanos(rng.next(1 << 20));
                    table
                        .insert(id(next), deadline, next)
                        .expect("below capacity");
                    black_box(table.remove(id(next - fill)));
                    next += 1;
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("insert_remove_one_timeout", capacity),
            &capacity,
            |b, &capacity| {
                let mut table = pending_table(capacity);
                let timeout = 1 << 20;
                for n in 1..=fill {
                    let deadline = Instant::from_nanos(n + timeout);
                    table.insert(id(n), deadline, n).expect("below capacity");
                }
                let mut next = fill + 1;
                b.iter(|| {
                    let deadline = Instant::from_nanos(next + timeout);
                    table
                        .insert(id(next), deadline, next)
                        .expect("below capacity");
                    black_box(table.remove(id(next - fill)));
                    next += 1;
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("insert_expire", capacity),
            &capacity,
            |b, &capacity| {
                let mut table = pending_table(capacity);
                let mut rng = Rng(0x2545_F491_4F6C_DD1D);
                let mut now = 0u64;
                for n in 1..=fill {
                    let deadline = Instant::from_nanos(now + 1 + rng.next(2 * fill));
                    table.insert(id(n), deadline, n).expect("below capacity");
                }
                let mut next = fill + 1;
                b.iter(|| {
                    now += 1;
                    let deadline = Instant::from_nanos(now + 1 + rng.next(2 * fill));
                    table
                        .insert(id(next), deadline, next)
                        .expect("below capacity");
                    // The earliest deadline expires (one per cycle keeps the
                    // fill steady).
                    let earliest = table.next_deadline().expect("non-empty");
                    black_box(table.pop_expired(earliest));
                    next += 1;
                });
            },
        );
    }
    group.finish();
}

fn dedup_key(n: u64) -> DedupKey {
    let world = WorldSize::new(4).expect("non-empty world");
    let origin = Rank::new((n % 4) as u32, world).expect("in range");
    DedupKey::new(origin, id(n / 4 + 1))
}

fn dedup_table(capacity: usize, ttl: u64) -> DedupTable<Box<[DedupSlot]>> {
    let config = DedupConfig::new(Duration::from_nanos(ttl), 4 << 20);
    DedupTable::with_storage(vec![DedupSlot::EMPTY; capacity].into(), config)
        .expect("non-empty storage")
}

fn dedup(c: &mut Criterion) {
    let mut group = c.benchmark_group("dedup");
    for capacity in CAPACITIES {
        let fill = fill(capacity);
        group.bench_with_input(
            BenchmarkId::new("begin_complete_expire", capacity),
            &capacity,
            |b, &capacity| {
                // One request finishes per tick and lives `fill` ticks.
                let mut table = dedup_table(capacity, fill);
                let mut now = 0u64;
                let mut next = 0u64;
                let mut cycle = |table: &mut DedupTable<Box<[DedupSlot]>>| {
                    now += 1;
                    let key = dedup_key(next);
                    next += 1;
                    let admission = table.begin(key).expect("steady fill");
                    let completion = table
                        .complete(key, Instant::from_nanos(now), 64)
                        .expect("running");
                    let _ = black_box((admission, completion));
                    black_box(table.pop_expired(Instant::from_nanos(now)));
                };
                for _ in 0..fill {
                    cycle(&mut table);
                }
                b.iter(|| cycle(&mut table));
            },
        );
        group.bench_with_input(
            BenchmarkId::new("begin_duplicate", capacity),
            &capacity,
            |b, &capacity| {
                let mut table = dedup_table(capacity, u64::MAX / 2);
                for n in 0..fill {
                    let key = dedup_key(n);
                    let _ = table.begin(key).expect("below capacity");
                    let _ = table.complete(key, Instant::ZERO, 64).expect("running");
                }
                let mut n = 0u64;
                b.iter(|| {
                    let admission = table.begin(dedup_key(n % fill));
                    n += 1;
                    admission
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, pending, dedup);
criterion_main!(benches);
