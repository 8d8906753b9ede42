//! Multi-threaded stress tests of `MpmcQueue` with std threads.
//!
//! They check what the queue promises under real contention: every item is
//! received exactly once, each producer's items come out in the order it
//! pushed them, `try_push` reports `Full` only when the queue is really full
//! and `pop` returns `None` only when it is really empty. Under Miri the
//! round counts shrink so the interpreter finishes quickly.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

use dinah_core::{ArrayMpmcQueue, MpmcQueue, MpmcSlot};

/// Items per producer in the throughput tests.
const ITEMS: usize = if cfg!(miri) { 20 } else { 100_000 };
/// Rounds per producer in the never-full tests.
const ROUNDS: usize = if cfg!(miri) { 6 } else { 10_000 };
/// Rounds for the tests that aim at the release and store windows: each
/// round is one chance to land in the window, so they run longer.
const WINDOW_ROUNDS: usize = if cfg!(miri) { 6 } else { 50_000 };

/// What the tests send: (producer, sequence number).
type Item = (usize, usize);

/// A queue of test items over slots on the heap.
type BoxedQueue = MpmcQueue<Item, Box<[MpmcSlot<Item>]>>;

/// A queue with `capacity` slots on the heap.
fn queue(capacity: usize) -> BoxedQueue {
    let slots = std::iter::repeat_with(MpmcSlot::new)
        .take(capacity)
        .collect::<Box<[_]>>();
    MpmcQueue::with_storage(slots).expect("non-empty storage")
}

/// Waits politely: a few spins, then let the other threads (there are more
/// of them than cores here) run.
fn pause(spins: &mut u32) {
    if *spins < 16 {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        thread::yield_now();
    }
}

/// Set when any test thread panics, so the others stop waiting for it and
/// the scope can end (and report the panic) instead of hanging.
struct Abort(AtomicBool);

impl Abort {
    fn new() -> Self {
        Self(AtomicBool::new(false))
    }

    fn raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Raises the flag if the current thread unwinds before the guard drops.
    fn guard(&self) -> AbortOnPanic<'_> {
        AbortOnPanic(self)
    }
}

struct AbortOnPanic<'a>(&'a Abort);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.0.store(true, Ordering::Relaxed);
        }
    }
}

/// Pushes `item`, retrying while the queue is full (or until aborted).
fn push_retrying<S: AsRef<[MpmcSlot<Item>]>>(
    queue: &MpmcQueue<Item, S>,
    mut item: Item,
    abort: &Abort,
) {
    let mut spins = 0;
    while let Err(error) = queue.try_push(item) {
        if abort.raised() {
            return;
        }
        item = error.into_inner();
        pause(&mut spins);
    }
}

/// Checks one consumer's log: every producer's sequence numbers increase.
fn assert_per_producer_fifo(log: &[Item], producers: usize) {
    let mut last: Vec<Option<usize>> = vec![None; producers];
    for &(producer, seq) in log {
        if let Some(previous) = last[producer] {
            assert!(
                seq > previous,
                "producer {producer}: {seq} came out after {previous}"
            );
        }
        last[producer] = Some(seq);
    }
}

/// Checks that the consumers together received each producer's items
/// `0..items` exactly once.
fn assert_exactly_once(logs: &[Vec<Item>], producers: usize, items: usize) {
    let mut all: Vec<Item> = logs.iter().flatten().copied().collect();
    all.sort_unstable();
    let expected: Vec<Item> = (0..producers)
        .flat_map(|producer| (0..items).map(move |seq| (producer, seq)))
        .collect();
    assert_eq!(all.len(), expected.len(), "items lost or duplicated");
    assert!(all == expected, "items lost or duplicated");
}

/// Pops until `received` reaches `total` (or the test aborts), calling
/// `on_item` for each item; returns what this consumer received, in order.
fn consume<S: AsRef<[MpmcSlot<Item>]>>(
    queue: &MpmcQueue<Item, S>,
    received: &AtomicUsize,
    total: usize,
    abort: &Abort,
    mut on_item: impl FnMut(Item),
) -> Vec<Item> {
    let _guard = abort.guard();
    let mut log = Vec::new();
    let mut spins = 0;
    while received.load(Ordering::Relaxed) < total && !abort.raised() {
        match queue.pop() {
            Some(item) => {
                log.push(item);
                received.fetch_add(1, Ordering::Relaxed);
                on_item(item);
                spins = 0;
            }
            None => pause(&mut spins),
        }
    }
    log
}

/// `producers` threads push `items` each (retrying while full) into a queue
/// of `capacity`; `consumers` threads pop until everything arrived.
fn run_producers_consumers(capacity: usize, producers: usize, consumers: usize, items: usize) {
    let queue = queue(capacity);
    let (received, abort, logs) = (AtomicUsize::new(0), Abort::new(), Mutex::new(Vec::new()));
    let total = producers * items;
    thread::scope(|scope| {
        for producer in 0..producers {
            let (queue, abort) = (&queue, &abort);
            scope.spawn(move || {
                let _guard = abort.guard();
                for seq in 0..items {
                    push_retrying(queue, (producer, seq), abort);
                }
            });
        }
        for _ in 0..consumers {
            scope.spawn(|| {
                let log = consume(&queue, &received, total, &abort, |_| {});
                logs.lock().expect("no panic while holding it").push(log);
            });
        }
    });
    let logs = logs.into_inner().expect("no panic while holding it");
    for log in &logs {
        assert_per_producer_fifo(log, producers);
    }
    assert_exactly_once(&logs, producers, items);
    assert!(queue.is_empty());
    assert_eq!(queue.pop(), None);
}

#[test]
fn two_producers_one_consumer_at_capacity() {
    // The full run at a mid-size capacity; capacities one and two hand
    // every item over individually, so fewer items cover them.
    run_producers_consumers(4, 2, 1, ITEMS);
    run_producers_consumers(1, 2, 1, ITEMS / 10);
    run_producers_consumers(2, 2, 1, ITEMS / 10);
}

#[test]
fn two_producers_two_consumers() {
    run_producers_consumers(16, 2, 2, ITEMS / 2);
    run_producers_consumers(3, 2, 2, ITEMS / 10);
    run_producers_consumers(1, 2, 2, ITEMS / 10);
}

/// The regression test for "a push fails although the queue is not full".
///
/// Each producer keeps at most one item in flight: after a push it waits
/// for the consumer's acknowledgement of that item before pushing the next.
/// With `producers <= capacity` the queue therefore never holds `capacity`
/// items when a push starts, and `try_push` must never report `Full`. With
/// two consumers, one consumer can still be releasing a slot (its pop has
/// taken the item but not yet handed the slot back) when the other consumer
/// acknowledges a later item and its producer pushes into exactly that
/// slot: the window in which per-slot-sequence queues fail.
fn never_full(capacity: usize, producers: usize, consumers: usize, rounds: usize) {
    assert!(producers <= capacity, "the test's invariant needs this");
    let queue = queue(capacity);
    let acks: Vec<AtomicUsize> = (0..producers).map(|_| AtomicUsize::new(0)).collect();
    let (received, abort, logs) = (AtomicUsize::new(0), Abort::new(), Mutex::new(Vec::new()));
    let total = producers * rounds;
    thread::scope(|scope| {
        for producer in 0..producers {
            let (queue, acks, abort) = (&queue, &acks, &abort);
            scope.spawn(move || {
                let _guard = abort.guard();
                for round in 0..rounds {
                    let mut spins = 0;
                    // Wait until the previous item was popped.
                    while acks[producer].load(Ordering::Acquire) != round {
                        if abort.raised() {
                            return;
                        }
                        pause(&mut spins);
                    }
                    if let Err(error) = queue.try_push((producer, round)) {
                        panic!(
                            "capacity {capacity}: {error} with at most {} items queued \
                             (producer {producer}, round {round})",
                            producers - 1
                        );
                    }
                }
            });
        }
        for _ in 0..consumers {
            scope.spawn(|| {
                let log = consume(&queue, &received, total, &abort, |(producer, round)| {
                    acks[producer].store(round + 1, Ordering::Release);
                });
                logs.lock().expect("no panic while holding it").push(log);
            });
        }
    });
    let logs = logs.into_inner().expect("no panic while holding it");
    for log in &logs {
        assert_per_producer_fifo(log, producers);
    }
    assert_exactly_once(&logs, producers, rounds);
}

#[test]
fn push_never_reports_full_when_not_full_capacity_2() {
    never_full(2, 2, 1, ROUNDS);
    never_full(2, 2, 2, ROUNDS);
}

#[test]
fn push_never_reports_full_when_not_full_capacity_1() {
    // With two producers a capacity-one queue could legitimately be full,
    // so one producer and two racing consumers here; see also
    // `push_after_len_shows_room_never_reports_full`.
    never_full(1, 1, 2, ROUNDS);
}

#[test]
fn push_never_reports_full_when_not_full_capacity_3() {
    never_full(3, 2, 2, ROUNDS);
    never_full(3, 3, 2, ROUNDS);
}

/// heapless issue 583's scenario: the queue starts full and every thread
/// repeatedly pops an item and pushes it straight back. A thread that holds
/// an item knows the queue has room for it, so the push must succeed,
/// however the threads interleave.
fn pop_then_push_back<const N: usize>(threads: usize, rounds: usize) {
    let queue: ArrayMpmcQueue<usize, N> = ArrayMpmcQueue::new();
    for item in 0..N {
        queue.try_push(item).expect("filling an empty queue");
    }
    thread::scope(|scope| {
        for _ in 0..threads {
            let queue = &queue;
            scope.spawn(move || {
                for round in 0..rounds {
                    if let Some(item) = queue.pop() {
                        if let Err(error) = queue.try_push(item) {
                            panic!("capacity {N}, round {round}: {error} right after a pop");
                        }
                    }
                }
            });
        }
    });
    let mut items: Vec<usize> = std::iter::from_fn(|| queue.pop()).collect();
    items.sort_unstable();
    assert_eq!(items, (0..N).collect::<Vec<_>>());
}

#[test]
fn pop_then_push_back_never_reports_full() {
    let rounds = WINDOW_ROUNDS;
    pop_then_push_back::<1>(2, rounds);
    pop_then_push_back::<2>(2, rounds);
    pop_then_push_back::<3>(3, rounds);
    pop_then_push_back::<4>(2, rounds);
}

/// Symmetric to `never_full`: producers push, then announce the item
/// through `pushed`; a consumer that was told an item is there must get
/// one. With two producers, the oldest slot can belong to a push that has
/// claimed it but is still storing its item while a later push has already
/// completed and been announced: `pop` must wait for the slow push rather
/// than report an empty queue.
#[test]
fn pop_never_reports_empty_when_not_empty() {
    const PRODUCERS: usize = 2;
    for capacity in [1, 2, 3] {
        let queue = queue(capacity);
        let (pushed, abort) = (AtomicUsize::new(0), Abort::new());
        let mut log = Vec::new();
        thread::scope(|scope| {
            for producer in 0..PRODUCERS {
                let (queue, pushed, abort) = (&queue, &pushed, &abort);
                scope.spawn(move || {
                    let _guard = abort.guard();
                    for seq in 0..ROUNDS {
                        push_retrying(queue, (producer, seq), abort);
                        pushed.fetch_add(1, Ordering::Release);
                    }
                });
            }
            let _guard = abort.guard();
            let mut spins = 0;
            while log.len() < PRODUCERS * ROUNDS && !abort.raised() {
                if pushed.load(Ordering::Acquire) > log.len() {
                    match queue.pop() {
                        Some(item) => log.push(item),
                        None => panic!(
                            "capacity {capacity}: None with {} announced items unpopped",
                            pushed.load(Ordering::Acquire) - log.len()
                        ),
                    }
                    spins = 0;
                } else {
                    pause(&mut spins);
                }
            }
        });
        assert_per_producer_fifo(&log, PRODUCERS);
        assert_exactly_once(&[log], PRODUCERS, ROUNDS);
        assert!(queue.is_empty());
    }
}

#[test]
fn len_stays_within_bounds_under_contention() {
    let queue = queue(4);
    let (done, abort) = (AtomicUsize::new(0), Abort::new());
    thread::scope(|scope| {
        for producer in 0..2 {
            let (queue, done, abort) = (&queue, &done, &abort);
            scope.spawn(move || {
                let _guard = abort.guard();
                for seq in 0..ITEMS / 10 {
                    push_retrying(queue, (producer, seq), abort);
                    let _ = queue.pop();
                }
                done.fetch_add(1, Ordering::Release);
            });
        }
        let _guard = abort.guard();
        while done.load(Ordering::Acquire) < 2 && !abort.raised() {
            let len = queue.len();
            assert!(len <= 4, "len {len} above capacity");
            thread::yield_now();
        }
    });
}

/// The release window at any capacity, including one: a single producer
/// waits until `len()` shows room, then pushes. `len` counts a pop as done
/// as soon as it has claimed its item, which can be before that pop has
/// handed the slot back, so the push regularly lands on a slot that is
/// still being released; it must wait for it, not report `Full` (no other
/// thread pushes, so the room `len` showed is still there).
#[test]
fn push_after_len_shows_room_never_reports_full() {
    let rounds = WINDOW_ROUNDS;
    for capacity in [1, 2, 3] {
        let queue = queue(capacity);
        let (received, abort) = (AtomicUsize::new(0), Abort::new());
        thread::scope(|scope| {
            scope.spawn(|| {
                let _guard = abort.guard();
                for seq in 0..rounds {
                    let mut spins = 0;
                    while queue.len() == capacity {
                        if abort.raised() {
                            return;
                        }
                        pause(&mut spins);
                    }
                    if let Err(error) = queue.try_push((0, seq)) {
                        panic!("capacity {capacity}, item {seq}: {error} after len showed room");
                    }
                }
            });
            for _ in 0..2 {
                scope.spawn(|| consume(&queue, &received, rounds, &abort, |_| {}));
            }
        });
        assert!(queue.is_empty());
    }
}

/// The mirror image: a single consumer waits until `is_empty()` turns
/// false, then pops. `is_empty` sees a push as soon as it has claimed its
/// slot, possibly before it has stored the item, so the pop regularly finds
/// a slot that is still being filled; it must wait for the item, not
/// return `None` (no other thread pops, so the item `is_empty` showed is
/// still there).
#[test]
fn pop_after_is_empty_shows_items_never_reports_empty() {
    const PRODUCERS: usize = 2;
    let rounds = WINDOW_ROUNDS;
    for capacity in [1, 2, 3] {
        let queue = queue(capacity);
        let abort = Abort::new();
        let mut log = Vec::new();
        thread::scope(|scope| {
            for producer in 0..PRODUCERS {
                let (queue, abort) = (&queue, &abort);
                scope.spawn(move || {
                    let _guard = abort.guard();
                    for seq in 0..rounds {
                        push_retrying(queue, (producer, seq), abort);
                    }
                });
            }
            let _guard = abort.guard();
            while log.len() < PRODUCERS * rounds && !abort.raised() {
                let mut spins = 0;
                while queue.is_empty() {
                    if abort.raised() {
                        return;
                    }
                    pause(&mut spins);
                }
                match queue.pop() {
                    Some(item) => log.push(item),
                    None => panic!("capacity {capacity}: None after is_empty() was false"),
                }
            }
        });
        assert_per_producer_fifo(&log, PRODUCERS);
        assert_exactly_once(&[log], PRODUCERS, rounds);
    }
}
