extern crate std;

use super::build::one_lap_for;
use super::*;
use core::cell::Cell;
use core::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::boxed::Box;
use std::format;
use std::string::ToString;
use std::sync::Arc;
use std::vec::Vec;

/// Neither `Debug` nor `Clone`: errors and the queue must not need them.
struct Opaque(u32);

/// Counts its drops, to see which items the queue drops and when.
struct Counted(Arc<StdAtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, StdOrdering::Relaxed);
    }
}

fn drain<T, S: AsRef<[MpmcSlot<T>]>>(queue: &MpmcQueue<T, S>) -> Vec<T> {
    core::iter::from_fn(|| queue.pop()).collect()
}

#[test]
fn new_queue_is_empty_with_its_capacity() {
    let queue: ArrayMpmcQueue<u32, 3> = ArrayMpmcQueue::new();
    assert_eq!(queue.capacity(), 3);
    assert_eq!(queue.len(), 0);
    assert!(queue.is_empty());
    assert!(!queue.is_full());
    assert_eq!(queue.pop(), None);
    let default: ArrayMpmcQueue<u32, 1> = ArrayMpmcQueue::default();
    assert!(default.is_empty());
}

#[test]
fn fifo_and_full_rejection_without_mutation() {
    let queue: ArrayMpmcQueue<Opaque, 3> = ArrayMpmcQueue::new();
    for item in 0..3 {
        assert!(queue.try_push(Opaque(item)).is_ok());
    }
    assert!(queue.is_full());
    assert_eq!(queue.len(), 3);
    let error = queue.try_push(Opaque(99)).unwrap_err();
    assert!(error.is_full());
    assert_eq!(format!("{error:?}"), "Full(..)");
    assert_eq!(error.to_string(), "mpmc queue is full");
    assert_eq!(error.into_inner().0, 99);
    assert_eq!(queue.len(), 3);
    let items: Vec<u32> = drain(&queue).into_iter().map(|item| item.0).collect();
    assert_eq!(items, [0, 1, 2]);
    assert!(queue.is_empty());
}

#[test]
fn many_laps_at_small_and_odd_capacities() {
    fn laps<const N: usize>() {
        let queue: ArrayMpmcQueue<usize, N> = ArrayMpmcQueue::new();
        let (mut pushed, mut popped) = (0, 0);
        // Several laps at every capacity (fewer under Miri, still wrapping).
        let rounds = if cfg!(miri) { 2 * N + 3 } else { 7 * N + 5 };
        for round in 0..rounds {
            // Fill by a varying amount, then drain part of it.
            let fill = round % (N + 1);
            for _ in 0..fill {
                match queue.try_push(pushed) {
                    Ok(()) => pushed += 1,
                    Err(error) => {
                        assert_eq!(queue.len(), N, "Full only when full");
                        assert_eq!(error.into_inner(), pushed);
                    }
                }
            }
            assert_eq!(queue.len(), pushed - popped);
            assert_eq!(queue.is_full(), pushed - popped == N);
            for _ in 0..(round % 3) {
                match queue.pop() {
                    Some(item) => {
                        assert_eq!(item, popped);
                        popped += 1;
                    }
                    None => assert_eq!(pushed, popped, "None only when empty"),
                }
            }
        }
        let rest = drain(&queue);
        assert_eq!(rest, (popped..pushed).collect::<Vec<_>>());
    }
    laps::<1>();
    laps::<2>();
    laps::<3>();
    laps::<5>();
    laps::<8>();
    laps::<13>();
}

#[test]
fn lap_counters_wrap_around_usize() {
    let queue: ArrayMpmcQueue<u32, 3> = ArrayMpmcQueue::new();
    // Put both indices and every stamp on the last lap before `usize`
    // overflows, as if the queue had already run for that long.
    let last_lap = usize::MAX & !(queue.one_lap - 1);
    queue.head.store(last_lap, Ordering::Relaxed);
    queue.tail.store(last_lap, Ordering::Relaxed);
    for slot in queue.storage.as_ref() {
        slot.stamp.store(last_lap, Ordering::Relaxed);
    }
    let mut next_out = 0;
    for item in 0..20 {
        queue.try_push(item).unwrap();
        if item % 3 == 2 {
            queue.try_push(100).unwrap();
        }
        while queue.len() > 1 {
            let out = queue.pop().unwrap();
            if out != 100 {
                assert_eq!(out, next_out);
                next_out += 1;
            }
        }
    }
    assert!(
        queue.tail.load(Ordering::Relaxed) < last_lap,
        "the lap wrapped"
    );
    assert_eq!(queue.pop(), Some(19));
    assert_eq!(queue.pop(), None);
}

#[test]
fn one_lap_is_the_next_power_of_two_above_capacity() {
    assert_eq!(one_lap_for(1), Some(2));
    assert_eq!(one_lap_for(3), Some(4));
    assert_eq!(one_lap_for(4), Some(8));
    assert_eq!(one_lap_for(usize::MAX / 4), Some(usize::MAX / 4 + 1));
    assert_eq!(one_lap_for(usize::MAX / 4 + 1), None);
    assert_eq!(one_lap_for(usize::MAX), None);
}

#[test]
fn caller_storage_boxed_and_borrowed() {
    let boxed: Box<[MpmcSlot<u32>]> = core::iter::repeat_with(MpmcSlot::new).take(5).collect();
    let queue = MpmcQueue::with_storage(boxed).unwrap();
    assert_eq!(queue.capacity(), 5);
    for item in 0..5 {
        queue.try_push(item).unwrap();
    }
    assert_eq!(queue.try_push(5), Err(MpmcPushError::Full(5)));
    assert_eq!(drain(&queue), [0, 1, 2, 3, 4]);

    let mut slots: [MpmcSlot<u32>; 2] = MpmcSlot::array();
    let borrowed = MpmcQueue::with_storage(&mut slots[..]).unwrap();
    borrowed.try_push(1).unwrap();
    borrowed.try_push(2).unwrap();
    assert!(borrowed.is_full());
    assert_eq!(borrowed.pop(), Some(1));
}

#[test]
fn reused_storage_is_reset_and_old_items_dropped() {
    let drops = Arc::new(StdAtomicUsize::new(0));
    let mut slots: Vec<MpmcSlot<Counted>> = (0..3).map(|_| MpmcSlot::default()).collect();
    {
        let queue = MpmcQueue::with_storage(&mut slots[..]).unwrap();
        for _ in 0..4 {
            queue.try_push(Counted(drops.clone())).ok();
        }
        // The rejected fourth item was handed back and dropped here.
        assert_eq!(drops.load(StdOrdering::Relaxed), 1);
        drop(queue.pop());
        assert_eq!(drops.load(StdOrdering::Relaxed), 2);
        // Dropping the queue drops the two items still in it.
    }
    assert_eq!(drops.load(StdOrdering::Relaxed), 4);
    let queue = MpmcQueue::with_storage(&mut slots[..]).unwrap();
    assert!(queue.is_empty());
    assert_eq!(queue.capacity(), 3);
    for _ in 0..3 {
        assert!(queue.try_push(Counted(drops.clone())).is_ok());
    }
    assert!(queue.is_full());
}

#[test]
fn with_storage_resets_stamps_left_mid_lap() {
    let mut slots: [MpmcSlot<u32>; 2] = MpmcSlot::array();
    {
        let queue = MpmcQueue::with_storage(&mut slots[..]).unwrap();
        // Leave the stamps on a later lap, with one item still inside.
        for item in 0..3 {
            queue.try_push(item).unwrap();
            assert_eq!(queue.pop(), Some(item));
        }
        queue.try_push(7).unwrap();
        // Forgotten, not dropped: the item and the stamps stay as they are.
        core::mem::forget(queue);
    }
    let queue = MpmcQueue::with_storage(&mut slots[..]).unwrap();
    assert_eq!(queue.pop(), None);
    queue.try_push(1).unwrap();
    queue.try_push(2).unwrap();
    assert_eq!(drain(&queue), [1, 2]);
}

#[test]
fn storage_errors() {
    let none: [MpmcSlot<u8>; 0] = [];
    assert_eq!(
        MpmcQueue::with_storage(none).err(),
        Some(MpmcStorageError::Empty)
    );
    assert_eq!(
        MpmcStorageError::Empty.to_string(),
        "mpmc queue storage has no slots"
    );
    assert_eq!(
        MpmcStorageError::TooLarge { slots: 9 }.to_string(),
        "mpmc queue storage of 9 slots is too large to index"
    );
}

#[test]
fn dropping_the_queue_drops_its_items() {
    let drops = Arc::new(StdAtomicUsize::new(0));
    let queue: ArrayMpmcQueue<Counted, 4> = ArrayMpmcQueue::new();
    for _ in 0..3 {
        assert!(queue.try_push(Counted(drops.clone())).is_ok());
    }
    drop(queue.pop());
    assert_eq!(drops.load(StdOrdering::Relaxed), 1);
    drop(queue);
    assert_eq!(drops.load(StdOrdering::Relaxed), 3);
}

#[test]
fn debug_shows_capacity_and_len_without_items() {
    let queue: ArrayMpmcQueue<Opaque, 2> = ArrayMpmcQueue::new();
    assert!(queue.try_push(Opaque(1)).is_ok());
    assert_eq!(
        format!("{queue:?}"),
        "MpmcQueue { capacity: 2, len: 1, .. }"
    );
    assert_eq!(
        format!("{:?}", MpmcSlot::<Opaque>::new()),
        "MpmcSlot { .. }"
    );
}

#[test]
fn shared_when_items_are_send_only() {
    fn assert_send_sync<Q: Send + Sync>() {}
    assert_send_sync::<ArrayMpmcQueue<Cell<u32>, 4>>();
    assert_send_sync::<MpmcQueue<Cell<u32>, Box<[MpmcSlot<Cell<u32>>]>>>();
    assert_send_sync::<MpmcQueue<Cell<u32>, &mut [MpmcSlot<Cell<u32>>]>>();
    assert_send_sync::<MpmcPushError<u32>>();
}

#[test]
fn static_queue_between_threads() {
    const ITEMS: u32 = if cfg!(miri) { 8 } else { 50 };
    static QUEUE: ArrayMpmcQueue<u32, 2> = ArrayMpmcQueue::new();
    let producer = std::thread::spawn(|| {
        for item in 0..ITEMS {
            let mut item = item;
            while let Err(error) = QUEUE.try_push(item) {
                item = error.into_inner();
                std::thread::yield_now();
            }
        }
    });
    let mut received = Vec::new();
    while received.len() < ITEMS as usize {
        match QUEUE.pop() {
            Some(item) => received.push(item),
            None => std::thread::yield_now(),
        }
    }
    producer.join().unwrap();
    assert_eq!(received, (0..ITEMS).collect::<Vec<_>>());
}
