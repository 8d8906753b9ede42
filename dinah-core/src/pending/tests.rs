use super::*;
extern crate std;
use std::boxed::Box;
use std::rc::Rc;
use std::string::ToString;
use std::vec::Vec;

fn t(nanos: u64) -> Instant {
    Instant::from_nanos(nanos)
}

fn id(n: u64) -> RequestId {
    RequestId::new(n).unwrap()
}

fn boxed<P>(n: usize) -> PendingTable<P, Box<[PendingSlot<P>]>> {
    PendingTable::with_storage((0..n).map(|_| PendingSlot::EMPTY).collect()).unwrap()
}

#[test]
fn const_new_works_in_a_static_context() {
    static TABLE: ArrayPendingTable<u32, 8> = PendingTable::new();
    assert_eq!(TABLE.capacity(), 8);
    assert!(TABLE.is_empty());
    assert_eq!(TABLE.next_deadline(), None);
    let table: ArrayPendingTable<Rc<u8>, 2> = Default::default();
    assert!(!table.is_full());
}

#[test]
fn insert_get_and_complete() {
    let mut table = ArrayPendingTable::<u32, 4>::new();
    table.insert(id(7), t(100), 70).unwrap();
    assert!(table.contains(id(7)));
    assert_eq!(table.get(id(7)), Some(&70));
    *table.get_mut(id(7)).unwrap() += 1;
    assert_eq!(table.deadline(id(7)), Some(t(100)));
    assert_eq!(table.len(), 1);
    assert_eq!(table.complete(id(7)), Ok(71));
    assert_eq!(table.len(), 0);
    assert_eq!(table.get(id(7)), None);
    assert_eq!(table.get_mut(id(7)), None);
    assert_eq!(table.deadline(id(7)), None);
}

#[test]
fn duplicate_and_full_give_the_value_back() {
    let mut table = ArrayPendingTable::<&str, 2>::new();
    table.insert(id(1), t(1), "a").unwrap();
    let error = table.insert(id(1), t(2), "dup").unwrap_err();
    assert_eq!(
        error,
        PendingInsertError::Duplicate {
            id: id(1),
            value: "dup"
        }
    );
    assert!(!error.is_full());
    assert_eq!(error.into_inner(), "dup");
    table.insert(id(2), t(1), "b").unwrap();
    assert!(table.is_full());
    let error = table.insert(id(3), t(1), "c").unwrap_err();
    assert!(error.is_full());
    assert_eq!(
        error,
        PendingInsertError::Full {
            capacity: 2,
            value: "c"
        }
    );
    // Duplicate is reported even when full.
    assert!(matches!(
        table.insert(id(2), t(1), "d"),
        Err(PendingInsertError::Duplicate { .. })
    ));
    assert_eq!(table.get(id(1)), Some(&"a"));
    assert_eq!(table.deadline(id(1)), Some(t(1)));
}

#[test]
fn insert_after_computes_and_checks_the_deadline() {
    let mut table = ArrayPendingTable::<u8, 2>::new();
    assert_eq!(
        table.insert_after(id(1), t(5), Duration::from_nanos(10), 1),
        Ok(t(15))
    );
    let error = table
        .insert_after(id(2), Instant::MAX, Duration::from_nanos(1), 2)
        .unwrap_err();
    assert_eq!(
        error,
        PendingInsertError::DeadlineOverflow {
            now: Instant::MAX,
            timeout: Duration::from_nanos(1),
            value: 2
        }
    );
    assert_eq!(error.into_inner(), 2);
    assert_eq!(table.len(), 1);
    // Overflow is checked before the duplicate.
    assert!(matches!(
        table.insert_after(id(1), Instant::MAX, Duration::MAX, 3),
        Err(PendingInsertError::DeadlineOverflow { .. })
    ));
}

#[test]
fn late_results_never_resurrect() {
    let mut table = ArrayPendingTable::<u32, 4>::new();
    table.insert(id(1), t(10), 1).unwrap();
    table.insert(id(2), t(20), 2).unwrap();
    table.insert(id(3), t(30), 3).unwrap();
    // Expired, dropped, completed: each later result is late.
    assert_eq!(table.pop_expired(t(10)), Some((id(1), 1)));
    assert_eq!(table.remove(id(2)), Some(2));
    assert_eq!(table.complete(id(3)), Ok(3));
    for n in 1..=3 {
        assert_eq!(table.complete(id(n)), Err(LateResult { id: id(n) }));
        assert!(!table.contains(id(n)));
    }
    assert_eq!(table.remove(id(9)), None);
    assert!(table.is_empty());
}

#[test]
fn expiry_is_in_deadline_order_without_touching_later_calls() {
    let mut table = boxed::<u64>(16);
    for (n, d) in [(1, 50), (2, 10), (3, 30), (4, 10), (5, 70), (6, 20)] {
        table.insert(id(n), t(d), n).unwrap();
    }
    assert_eq!(table.next_deadline(), Some(t(10)));
    assert_eq!(table.pop_expired(t(5)), None);
    let expired: Vec<_> = table.drain_expired(t(30)).collect();
    assert_eq!(expired, [(id(2), 2), (id(4), 4), (id(6), 6), (id(3), 3)]);
    assert_eq!(table.len(), 2);
    assert_eq!(table.next_deadline(), Some(t(50)));
    assert_eq!(table.drain_expired(t(1000)).take(1).count(), 1);
    assert_eq!(table.get(id(5)), Some(&5));
}

#[test]
fn slots_are_reused_at_full_load() {
    // Many cycles at full load exercise backward-shift deletion across the
    // whole bucket range.
    let mut table = ArrayPendingTable::<u64, 32>::new();
    let mut next = 1u64;
    let mut live = std::collections::VecDeque::new();
    let rounds = if cfg!(miri) { 60 } else { 2000 };
    for round in 0..rounds {
        while !table.is_full() {
            table.insert(id(next), t(next % 7), next).unwrap();
            live.push_back(next);
            next += 1;
        }
        let victim = live.remove((round * 7) % live.len()).unwrap();
        assert_eq!(table.remove(id(victim)), Some(victim));
        for n in &live {
            assert_eq!(table.get(id(*n)), Some(n));
        }
    }
    assert_eq!(table.len(), 31);
}

#[test]
fn drain_empties_and_drops_values() {
    let marker = Rc::new(());
    let mut table = boxed::<Rc<()>>(8);
    for n in 1..=5 {
        table.insert(id(n), t(n), Rc::clone(&marker)).unwrap();
    }
    assert_eq!(Rc::strong_count(&marker), 6);
    {
        let mut drain = table.drain();
        assert_eq!(drain.len(), 5);
        assert!(drain.next().is_some());
        assert!(std::format!("{drain:?}").contains("remaining: 4"));
        // Dropped early: the rest is removed anyway.
    }
    assert!(table.is_empty());
    assert_eq!(Rc::strong_count(&marker), 1);
    for n in 1..=5 {
        assert!(!table.contains(id(n)));
    }
    let mut ids: Vec<_> = {
        table.insert(id(1), t(1), Rc::clone(&marker)).unwrap();
        table.insert(id(2), t(2), Rc::clone(&marker)).unwrap();
        table.drain().map(|(i, _)| i.get()).collect()
    };
    ids.sort_unstable();
    assert_eq!(ids, [1, 2]);
    table.insert(id(3), t(3), Rc::clone(&marker)).unwrap();
    drop(table);
    assert_eq!(Rc::strong_count(&marker), 1);
}

#[test]
fn iter_lists_every_call() {
    let mut table = ArrayPendingTable::<char, 4>::new();
    table.insert(id(3), t(30), 'c').unwrap();
    table.insert(id(1), t(10), 'a').unwrap();
    let iter = table.iter();
    assert_eq!(iter.len(), 2);
    assert!(std::format!("{:?}", iter.clone()).contains("remaining: 2"));
    let mut all: Vec<_> = iter.map(|(i, d, v)| (i.get(), d, *v)).collect();
    all.sort_unstable();
    assert_eq!(all, [(1, t(10), 'a'), (3, t(30), 'c')]);
}

#[test]
fn with_storage_resets_reused_storage() {
    let mut storage: Vec<PendingSlot<u8>> = (0..4).map(|_| PendingSlot::new()).collect();
    {
        let mut table = PendingTable::with_storage(&mut storage[..]).unwrap();
        table.insert(id(1), t(1), 1).unwrap();
    }
    let mut table = PendingTable::with_storage(&mut storage[..]).unwrap();
    assert!(table.is_empty());
    assert!(!table.contains(id(1)));
    table.insert(id(1), t(1), 2).unwrap();
    assert_eq!(table.get(id(1)), Some(&2));
    let copy = storage.clone();
    assert_eq!(copy.len(), 4);
}

#[test]
fn empty_storage_is_rejected() {
    assert_eq!(
        PendingTable::<u8, _>::with_storage(Vec::new()).err(),
        Some(TableStorageError::Empty)
    );
}

#[test]
fn errors_and_debug_say_what_failed_without_payloads() {
    struct Opaque;
    let full = PendingInsertError::Full {
        capacity: 4,
        value: Opaque,
    };
    assert_eq!(full.to_string(), "pending-call table is full (4 calls)");
    assert_eq!(std::format!("{full:?}"), "Full { capacity: 4, .. }");
    let duplicate = PendingInsertError::Duplicate {
        id: id(9),
        value: Opaque,
    };
    assert_eq!(duplicate.to_string(), "request#9 is already pending");
    assert!(std::format!("{duplicate:?}").starts_with("Duplicate { id: RequestId("));
    let overflow = PendingInsertError::DeadlineOverflow {
        now: t(1),
        timeout: Duration::from_millis(2),
        value: Opaque,
    };
    assert_eq!(
        overflow.to_string(),
        "call deadline t+1ns + 2ms overflows the clock"
    );
    assert!(std::format!("{overflow:?}").starts_with("DeadlineOverflow { now:"));
    assert_eq!(
        LateResult { id: id(5) }.to_string(),
        "late result for request#5: the call is no longer pending"
    );
    let mut table = ArrayPendingTable::<Opaque, 2>::new();
    assert!(table.insert(id(1), t(4), Opaque).is_ok());
    assert_eq!(
        std::format!("{table:?}"),
        "PendingTable { len: 1, capacity: 2, next_deadline: Some(Instant { nanos: 4 }) }"
    );
    assert_eq!(
        std::format!("{:?}", PendingSlot::<Opaque>::EMPTY),
        "PendingSlot { id: None, .. }"
    );
    assert!(std::format!("{:?}", table.drain_expired(t(0))).starts_with("DrainExpired"));
}

/// Runs of consecutive IDs are placed side by side: at full load, with
/// IDs in sequence, strided as one target's IDs are in a larger world,
/// and wrapping past the last bucket, every call stays reachable through
/// removals in any order, and the home of a run's IDs is contiguous.
#[test]
fn ids_in_sequence_stay_reachable_at_full_load() {
    for capacity in [1_usize, 3, 8, 17, 64] {
        for stride in [1_u64, 2, 3, 16, 1024] {
            for start in [1_u64, 15, 1 << 40] {
                let mut table = boxed::<u64>(capacity);
                let ids: Vec<u64> = (0..capacity as u64).map(|i| start + i * stride).collect();
                for &n in &ids {
                    table.insert(id(n), t(n), n).unwrap();
                }
                assert!(table.is_full());
                for &n in &ids {
                    assert_eq!(table.get(id(n)), Some(&n), "{capacity} {stride} {start}");
                }
                // Every other one first, then the rest from the back.
                let (evens, odds): (Vec<u64>, Vec<u64>) =
                    ids.iter().partition(|&&n| (n - start) / stride % 2 == 0);
                for &n in &evens {
                    assert_eq!(table.remove(id(n)), Some(n));
                }
                for &n in &odds {
                    assert_eq!(table.get(id(n)), Some(&n));
                }
                for &n in odds.iter().rev() {
                    assert_eq!(table.remove(id(n)), Some(n));
                }
                assert!(table.is_empty());
            }
        }
    }
    let count = 2 * 64;
    let base = <PendingSlot<u8> as Keyed>::home(id(32), count);
    for offset in 1..slots::ID_RUN {
        let home = <PendingSlot<u8> as Keyed>::home(id(32 + offset), count);
        assert_eq!(
            home,
            (base + offset as usize) % count,
            "a run is contiguous"
        );
    }
}
