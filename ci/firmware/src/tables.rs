//! The request tables on a tick clock: pending calls with deadlines, the
//! deadline queue, and the dedup table with its retention window.

use core::time::Duration;

use dinah_core::{
    ArrayDeadlineQueue, ArrayDedupTable, ArrayPendingTable, Arrival, DedupConfig, DedupKey,
    Instant, LateResult, Rank, RequestId, Retention,
};

use crate::report::check;

/// One tick of the firmware's clock.
const TICK: Duration = Duration::from_millis(1);

/// The clock at `ticks`.
fn at(ticks: u64) -> Instant {
    Instant::from_nanos(ticks * TICK.as_nanos() as u64)
}

fn id(n: u64) -> RequestId {
    RequestId::new(n).expect("non-zero")
}

pub fn run() {
    pending();
    deadlines();
    dedup();
}

fn pending() {
    let mut pending = ArrayPendingTable::<u32, 16>::new();
    let inserted = pending.insert_after(id(1), at(0), 5 * TICK, 10).is_ok()
        && pending.insert_after(id(2), at(0), TICK, 20).is_ok();
    check(
        "pending table: two calls with deadlines",
        inserted && pending.len() == 2,
    );
    check(
        "pending table: an answer completes its call once",
        pending.complete(id(1)) == Ok(10)
            && pending.complete(id(1)) == Err(LateResult { id: id(1) }),
    );
    check(
        "pending table: nothing expires before its tick",
        pending.pop_expired(at(0)).is_none(),
    );
    check(
        "pending table: the other expires at tick 2",
        pending.pop_expired(at(2)) == Some((id(2), 20)) && pending.is_empty(),
    );
    let full = (1..=16).all(|n| pending.insert(id(n), Instant::MAX, 0).is_ok())
        && pending.insert(id(17), Instant::MAX, 0).is_err();
    check("pending table: refuses a call beyond its 16 slots", full);
}

fn deadlines() {
    let mut queue = ArrayDeadlineQueue::<8>::new();
    let inserted = [(0, 30), (1, 10), (2, 20)]
        .into_iter()
        .all(|(slot, tick)| queue.insert(slot, at(tick)).is_ok());
    let order = [queue.pop(), queue.pop(), queue.pop()];
    check(
        "deadline queue: pops in deadline order",
        inserted && order == [Some((1, at(10))), Some((2, at(20))), Some((0, at(30)))],
    );
}

fn dedup() {
    let config = DedupConfig::new(Duration::from_millis(100), 1024);
    let mut dedup = ArrayDedupTable::<8>::new(config);
    let key = DedupKey::new(Rank::ZERO, id(7));
    let Ok(Arrival::Execute { slot }) = dedup.begin(key) else {
        check("dedup: a new request executes", false);
        return;
    };
    check("dedup: a new request executes", true);
    check(
        "dedup: a duplicate while running does not",
        dedup.begin(key) == Ok(Arrival::DuplicateRunning { slot }),
    );
    check(
        "dedup: the result is retained",
        dedup.complete(key, at(0), 100) == Ok(Retention::Retained { slot, bytes: 100 }),
    );
    check(
        "dedup: a duplicate after completion gets the cached result",
        dedup.begin(key) == Ok(Arrival::DuplicateCompleted { slot, cached: true }),
    );
    check(
        "dedup: kept until its window ends",
        dedup.pop_expired(at(99)).is_none(),
    );
    let expired = dedup.pop_expired(at(101));
    check(
        "dedup: released after 100 ticks",
        expired.is_some_and(|e| e.key == key && e.released_bytes == 100) && dedup.is_empty(),
    );
}
