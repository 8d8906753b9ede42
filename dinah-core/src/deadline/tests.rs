use super::*;
extern crate std;
use std::boxed::Box;
use std::string::ToString;
use std::vec::Vec;

fn t(nanos: u64) -> Instant {
    Instant::from_nanos(nanos)
}

fn boxed(n: usize) -> DeadlineQueue<Box<[DeadlineSlot]>> {
    DeadlineQueue::with_storage(std::vec![DeadlineSlot::EMPTY; n].into_boxed_slice()).unwrap()
}

#[test]
fn const_new_works_in_a_static_context() {
    static QUEUE: ArrayDeadlineQueue<4> = DeadlineQueue::new();
    assert_eq!(QUEUE.capacity(), 4);
    assert!(QUEUE.is_empty());
    assert_eq!(QUEUE.peek(), None);
    let queue: ArrayDeadlineQueue<3> = Default::default();
    assert_eq!(queue.len(), 0);
}

#[test]
fn insert_errors_leave_the_queue_unchanged() {
    let mut q = ArrayDeadlineQueue::<2>::new();
    assert_eq!(
        q.insert(2, t(1)),
        Err(DeadlineError::SlotOutOfRange {
            slot: 2,
            capacity: 2
        })
    );
    q.insert(1, t(5)).unwrap();
    assert_eq!(q.insert(1, t(6)), Err(DeadlineError::Occupied { slot: 1 }));
    assert_eq!(q.deadline(1), Some(t(5)));
    assert_eq!(q.insert_vacant(t(9)), Ok(0));
    assert!(q.is_full());
    assert_eq!(
        q.insert_vacant(t(9)),
        Err(DeadlineError::Full { capacity: 2 })
    );
    assert_eq!(q.len(), 2);
}

#[test]
fn insert_after_checks_overflow() {
    let mut q = ArrayDeadlineQueue::<2>::new();
    assert_eq!(q.insert_after(0, t(10), Duration::from_nanos(5)), Ok(t(15)));
    assert_eq!(
        q.insert_after(1, Instant::MAX, Duration::from_nanos(1)),
        Err(DeadlineError::Overflow {
            now: Instant::MAX,
            timeout: Duration::from_nanos(1)
        })
    );
    assert!(!q.contains(1));
    assert_eq!(
        q.insert_after(1, t(0), Duration::MAX),
        Err(DeadlineError::Overflow {
            now: t(0),
            timeout: Duration::MAX
        })
    );
}

#[test]
fn expiry_is_inclusive_ordered_and_stable_for_ties() {
    let mut q = boxed(8);
    for (slot, d) in [(0, 30), (1, 10), (2, 20), (3, 10), (4, 40)] {
        q.insert(slot, t(d)).unwrap();
    }
    assert_eq!(q.next_deadline(), Some(t(10)));
    assert_eq!(q.pop_expired(t(9)), None);
    let expired: Vec<_> = q.drain_expired(t(20)).collect();
    assert_eq!(expired, [(1, t(10)), (3, t(10)), (2, t(20))]);
    assert_eq!(q.len(), 2);
    assert_eq!(q.pop(), Some((0, t(30))));
    assert_eq!(q.pop(), Some((4, t(40))));
    assert_eq!(q.pop(), None);
}

#[test]
fn drain_expired_can_stop_early() {
    let mut q = ArrayDeadlineQueue::<4>::new();
    for slot in 0..4 {
        q.insert(slot, t(slot as u64)).unwrap();
    }
    assert_eq!(q.drain_expired(t(10)).take(2).count(), 2);
    assert_eq!(q.len(), 2);
    assert_eq!(q.peek(), Some((2, t(2))));
}

#[test]
fn remove_and_reschedule_any_slot() {
    let mut q = ArrayDeadlineQueue::<5>::new();
    for slot in 0..5 {
        q.insert(slot, t(10 * slot as u64)).unwrap();
    }
    assert_eq!(q.remove(2), Some(t(20)));
    assert_eq!(q.remove(2), None);
    assert_eq!(q.remove(99), None);
    assert_eq!(q.reschedule(4, t(0)), Some(t(40)));
    assert_eq!(q.reschedule(2, t(0)), None);
    assert_eq!(q.reschedule(99, t(0)), None);
    assert!(!q.contains(2));
    assert!(!q.contains(99));
    // Slot 0 was inserted at 0 before slot 4 was moved there.
    let order: Vec<_> = core::iter::from_fn(|| q.pop()).collect();
    assert_eq!(order, [(0, t(0)), (4, t(0)), (1, t(10)), (3, t(30))]);
}

#[test]
fn iter_lists_every_entry_and_clear_empties() {
    let mut q = boxed(6);
    for slot in [5, 1, 3] {
        q.insert(slot, t(slot as u64)).unwrap();
    }
    let mut all: Vec<_> = q.iter().collect();
    all.sort_unstable();
    assert_eq!(all, [(1, t(1)), (3, t(3)), (5, t(5))]);
    assert_eq!(q.iter().len(), 3);
    q.clear();
    assert!(q.is_empty());
    assert_eq!(q.iter().count(), 0);
    // Every slot is usable again after clear.
    for slot in 0..6 {
        q.insert(slot, t(1)).unwrap();
    }
    assert!(q.is_full());
}

#[test]
fn with_storage_overwrites_previous_contents() {
    let mut storage = [DeadlineSlot::EMPTY; 3];
    {
        let mut q = DeadlineQueue::with_storage(&mut storage[..]).unwrap();
        q.insert(2, t(1)).unwrap();
    }
    let q = DeadlineQueue::with_storage(&mut storage[..]).unwrap();
    assert!(q.is_empty());
    assert!(!q.contains(2));
}

#[test]
fn unusable_storage_is_rejected() {
    assert_eq!(
        DeadlineQueue::with_storage(&mut [][..]).err(),
        Some(TableStorageError::Empty)
    );
    assert_eq!(check_capacity(MAX_TABLE_CAPACITY), Ok(()));
    assert_eq!(
        check_capacity(MAX_TABLE_CAPACITY + 1),
        Err(TableStorageError::TooLarge {
            slots: MAX_TABLE_CAPACITY + 1
        })
    );
    assert_eq!(
        TableStorageError::Empty.to_string(),
        "table storage has no slots"
    );
    assert_eq!(
        TableStorageError::TooLarge { slots: 1 << 40 }.to_string(),
        "table storage of 1099511627776 slots exceeds the limit of 2147483647"
    );
}

#[test]
fn errors_and_debug_say_what_failed() {
    let cases = [
        (
            DeadlineError::Full { capacity: 4 },
            "deadline queue is full (4 slots)",
        ),
        (
            DeadlineError::SlotOutOfRange {
                slot: 9,
                capacity: 4,
            },
            "deadline slot 9 is out of range for a capacity of 4",
        ),
        (
            DeadlineError::Occupied { slot: 1 },
            "deadline slot 1 is already scheduled",
        ),
        (
            DeadlineError::Overflow {
                now: Instant::MAX,
                timeout: Duration::from_secs(1),
            },
            "deadline t+18446744073709551615ns + 1s overflows the clock",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
    let mut q = ArrayDeadlineQueue::<2>::new();
    q.insert(0, t(3)).unwrap();
    assert_eq!(
        std::format!("{q:?}"),
        "DeadlineQueue { len: 1, capacity: 2, next_deadline: Some(Instant { nanos: 3 }) }"
    );
    assert_eq!(
        std::format!("{:?}", DeadlineSlot::default()),
        "DeadlineSlot { .. }"
    );
    assert!(std::format!("{:?}", q.drain_expired(t(0))).starts_with("DrainExpiredSlots"));
}
