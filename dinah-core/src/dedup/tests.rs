use super::*;
extern crate std;
use crate::{Rank, RequestId, TableStorageError, WorldSize};
use std::string::ToString;
use std::vec::Vec;

const TTL: Duration = Duration::from_nanos(100);

fn t(nanos: u64) -> Instant {
    Instant::from_nanos(nanos)
}

fn key(origin: u32, id: u64) -> DedupKey {
    let world = WorldSize::new(64).unwrap();
    DedupKey::new(
        Rank::new(origin, world).unwrap(),
        RequestId::new(id).unwrap(),
    )
}

fn table<const N: usize>(budget: u64) -> ArrayDedupTable<N> {
    DedupTable::new(DedupConfig::new(TTL, budget))
}

/// Which state a key is put in before an operation is tried on it.
#[derive(Debug, Clone, Copy)]
enum Start {
    Absent,
    Running,
    CancelRequested,
    Completed,
    Cancelled,
}

const STARTS: [Start; 5] = [
    Start::Absent,
    Start::Running,
    Start::CancelRequested,
    Start::Completed,
    Start::Cancelled,
];

fn prepared(start: Start) -> (ArrayDedupTable<4>, DedupKey, usize) {
    let mut dedup = table::<4>(1000);
    let k = key(1, 9);
    // Occupy slot 0 so the key's slot is not trivially zero.
    let _ = dedup.begin(key(2, 1)).unwrap();
    let slot = match start {
        Start::Absent => usize::MAX,
        Start::Running => dedup.begin(k).unwrap().slot(),
        Start::CancelRequested => {
            let slot = dedup.begin(k).unwrap().slot();
            assert_eq!(
                dedup.cancel(k, t(0)).unwrap(),
                CancelOutcome::Requested { slot }
            );
            slot
        }
        Start::Completed => {
            let _ = dedup.begin(k).unwrap();
            dedup.complete(k, t(0), 10).unwrap().slot()
        }
        Start::Cancelled => match dedup.cancel(k, t(0)).unwrap() {
            CancelOutcome::Tombstoned { slot } => slot,
            other => panic!("{other:?}"),
        },
    };
    (dedup, k, slot)
}

#[test]
fn begin_in_every_state() {
    for start in STARTS {
        let (mut dedup, k, slot) = prepared(start);
        let got = dedup.begin(k).unwrap();
        let want = match start {
            Start::Absent => Arrival::Execute { slot: 1 },
            Start::Running | Start::CancelRequested => Arrival::DuplicateRunning { slot },
            Start::Completed => Arrival::DuplicateCompleted { slot, cached: true },
            Start::Cancelled => Arrival::DuplicateCancelled { slot },
        };
        assert_eq!(got, want, "{start:?}");
        assert_eq!(got.is_execute(), matches!(start, Start::Absent));
    }
}

#[test]
fn cancel_in_every_state() {
    for start in STARTS {
        let (mut dedup, k, slot) = prepared(start);
        let got = dedup.cancel(k, t(5)).unwrap();
        let want = match start {
            Start::Absent => CancelOutcome::Tombstoned { slot: 1 },
            Start::Running => CancelOutcome::Requested { slot },
            Start::CancelRequested => CancelOutcome::AlreadyRequested { slot },
            Start::Completed => CancelOutcome::AlreadyCompleted { slot },
            Start::Cancelled => CancelOutcome::AlreadyCancelled { slot },
        };
        assert_eq!(got, want, "{start:?}");
        let state = dedup.get(k).unwrap().state;
        let want_state = match start {
            Start::Absent | Start::Cancelled => DedupState::Cancelled,
            Start::Running | Start::CancelRequested => DedupState::Running {
                cancel_requested: true,
            },
            Start::Completed => DedupState::Completed { cached: true },
        };
        assert_eq!(state, want_state, "{start:?}");
    }
}

#[test]
fn complete_in_every_state() {
    for start in STARTS {
        let (mut dedup, k, slot) = prepared(start);
        let got = dedup.complete(k, t(5), 7);
        let want = match start {
            Start::Absent => Err(DedupError::NotFound { key: k }),
            Start::Running => Ok(Retention::Retained { slot, bytes: 7 }),
            Start::CancelRequested => Ok(Retention::Cancelled { slot }),
            Start::Completed => Err(DedupError::NotRunning {
                key: k,
                state: DedupState::Completed { cached: true },
            }),
            Start::Cancelled => Err(DedupError::NotRunning {
                key: k,
                state: DedupState::Cancelled,
            }),
        };
        assert_eq!(got, want, "{start:?}");
    }
}

#[test]
fn rollback_in_every_state() {
    for start in STARTS {
        let (mut dedup, k, slot) = prepared(start);
        let before = dedup.len();
        let got = dedup.rollback(k);
        match start {
            Start::Absent => assert_eq!(got, Err(DedupError::NotFound { key: k })),
            Start::Running | Start::CancelRequested => {
                assert_eq!(got, Ok(slot));
                assert_eq!(dedup.len(), before - 1);
                assert_eq!(dedup.running(), 1);
                // A retry executes again (user code never ran).
                assert!(dedup.begin(k).unwrap().is_execute());
            }
            Start::Completed | Start::Cancelled => {
                assert!(matches!(got, Err(DedupError::NotRunning { .. })));
                assert_eq!(dedup.len(), before);
            }
        }
    }
}

#[test]
fn expiry_in_every_state() {
    for start in STARTS {
        let (mut dedup, k, slot) = prepared(start);
        let expired: Vec<_> = dedup.drain_expired(Instant::MAX).collect();
        let want: Vec<_> = match start {
            Start::Absent | Start::Running | Start::CancelRequested => Vec::new(),
            Start::Completed => std::vec![ExpiredEntry {
                key: k,
                slot,
                state: DedupState::Completed { cached: true },
                released_bytes: 10,
            }],
            Start::Cancelled => std::vec![ExpiredEntry {
                key: k,
                slot,
                state: DedupState::Cancelled,
                released_bytes: 0,
            }],
        };
        assert_eq!(expired, want, "{start:?}");
        // The unrelated running entry is never expired.
        assert_eq!(dedup.running(), dedup.len());
        assert_eq!(dedup.retained_bytes(), 0);
        assert_eq!(dedup.tombstones(), 0);
    }
}

#[test]
fn ttl_is_measured_from_finishing_and_is_inclusive() {
    let mut dedup = table::<4>(1000);
    let (a, b) = (key(0, 1), key(0, 2));
    let _ = dedup.begin(a).unwrap();
    let _ = dedup.begin(b).unwrap();
    let _ = dedup.complete(b, t(10), 1).unwrap();
    let _ = dedup.complete(a, t(20), 2).unwrap();
    assert_eq!(dedup.next_expiry(), Some(t(110)));
    assert_eq!(
        dedup.get(b).unwrap(),
        DedupEntry {
            slot: 1,
            state: DedupState::Completed { cached: true },
            retained_bytes: 1,
            expiry: Some(t(110)),
        }
    );
    assert_eq!(dedup.pop_expired(t(109)), None);
    assert_eq!(dedup.pop_expired(t(110)).unwrap().key, b);
    assert_eq!(dedup.pop_expired(t(110)), None);
    assert_eq!(dedup.pop_expired(t(120)).unwrap().key, a);
    assert!(dedup.is_empty());
    assert_eq!(dedup.next_expiry(), None);
}

#[test]
fn a_clock_stepping_back_never_shortens_the_window() {
    let mut dedup = table::<4>(1000);
    let (a, b) = (key(0, 1), key(0, 2));
    let _ = dedup.begin(a).unwrap();
    let _ = dedup.complete(a, t(50), 0).unwrap();
    let _ = dedup.cancel(b, t(10)).unwrap();
    assert_eq!(dedup.get(b).unwrap().expiry, Some(t(150)));
    assert_eq!(dedup.pop_expired(t(149)), None);
    assert_eq!(dedup.drain_expired(t(150)).count(), 2);
}

#[test]
fn byte_budget_decides_retention() {
    let mut dedup = table::<8>(100);
    let keys: Vec<_> = (1..=4).map(|n| key(3, n)).collect();
    for k in &keys {
        assert!(dedup.begin(*k).unwrap().is_execute());
    }
    let first = dedup.complete(keys[0], t(0), 60).unwrap();
    assert!(first.retain());
    assert_eq!(first, Retention::Retained { slot: 0, bytes: 60 });
    let second = dedup.complete(keys[1], t(1), 41).unwrap();
    assert_eq!(second, Retention::MarkerOnly { slot: 1 });
    assert!(!second.retain());
    assert_eq!(second.slot(), 1);
    assert_eq!(
        dedup.complete(keys[2], t(2), 40).unwrap(),
        Retention::Retained { slot: 2, bytes: 40 }
    );
    assert_eq!(dedup.retained_bytes(), 100);
    // u64 overflow of the running total counts as over budget.
    assert_eq!(
        dedup.complete(keys[3], t(3), u64::MAX).unwrap(),
        Retention::MarkerOnly { slot: 3 }
    );
    assert_eq!(
        dedup.begin(keys[1]).unwrap(),
        Arrival::DuplicateCompleted {
            slot: 1,
            cached: false
        }
    );
    let released: u64 = dedup.drain_expired(t(1000)).map(|e| e.released_bytes).sum();
    assert_eq!(released, 100);
    assert_eq!(dedup.retained_bytes(), 0);
}

#[test]
fn a_full_table_admits_nothing_and_never_evicts_running_entries() {
    let mut dedup = table::<2>(10);
    let _ = dedup.begin(key(0, 1)).unwrap();
    let _ = dedup.begin(key(0, 2)).unwrap();
    assert!(dedup.is_full());
    assert_eq!(
        dedup.begin(key(0, 3)),
        Err(DedupError::Full { capacity: 2 })
    );
    assert_eq!(
        dedup.cancel(key(0, 3), t(0)),
        Err(DedupError::Full { capacity: 2 })
    );
    assert_eq!(dedup.drain_expired(Instant::MAX).count(), 0);
    assert_eq!(dedup.len(), 2);
    // Duplicates of entries present are still answered when full.
    assert_eq!(
        dedup.begin(key(0, 1)),
        Ok(Arrival::DuplicateRunning { slot: 0 })
    );
    // Expired finished entries are reclaimed only by draining.
    let _ = dedup.complete(key(0, 1), t(0), 0).unwrap();
    assert_eq!(
        dedup.begin(key(0, 3)),
        Err(DedupError::Full { capacity: 2 })
    );
    assert_eq!(dedup.pop_expired(t(100)).unwrap().slot, 0);
    assert_eq!(dedup.begin(key(0, 3)), Ok(Arrival::Execute { slot: 0 }));
}

#[test]
fn tombstones_are_bounded_separately() {
    let config = DedupConfig::new(TTL, 0).with_max_tombstones(1);
    let mut dedup = ArrayDedupTable::<4>::new(config);
    assert_eq!(
        dedup.cancel(key(1, 1), t(0)),
        Ok(CancelOutcome::Tombstoned { slot: 0 })
    );
    assert_eq!(
        dedup.cancel(key(1, 2), t(0)),
        Err(DedupError::TombstonesFull { limit: 1 })
    );
    assert_eq!(dedup.tombstones(), 1);
    // Cancelling a running request is not a tombstone.
    let _ = dedup.begin(key(1, 3)).unwrap();
    assert_eq!(
        dedup.cancel(key(1, 3), t(0)),
        Ok(CancelOutcome::Requested { slot: 1 })
    );
    assert_eq!(
        dedup.complete(key(1, 3), t(0), 5),
        Ok(Retention::Cancelled { slot: 1 })
    );
    assert_eq!(dedup.tombstones(), 1);
    let _ = dedup.pop_expired(t(100)).unwrap();
    assert_eq!(dedup.tombstones(), 0);
    assert!(dedup.cancel(key(1, 2), t(100)).is_ok());
}

#[test]
fn time_overflow_is_an_error_and_changes_nothing() {
    let mut dedup = table::<4>(10);
    let k = key(0, 1);
    let _ = dedup.begin(k).unwrap();
    assert_eq!(
        dedup.complete(k, Instant::MAX, 1),
        Err(DedupError::TimeOverflow { now: Instant::MAX })
    );
    assert_eq!(
        dedup.get(k).unwrap().state,
        DedupState::Running {
            cancel_requested: false
        }
    );
    assert_eq!(
        dedup.cancel(key(0, 2), Instant::MAX),
        Err(DedupError::TimeOverflow { now: Instant::MAX })
    );
    assert_eq!(dedup.len(), 1);
    assert_eq!(dedup.tombstones(), 0);
    // Lookup errors take precedence over time errors.
    assert_eq!(
        dedup.complete(key(0, 3), Instant::MAX, 1),
        Err(DedupError::NotFound { key: key(0, 3) })
    );
}

#[test]
fn clear_releases_everything() {
    let mut dedup = table::<4>(100);
    let _ = dedup.begin(key(0, 1)).unwrap();
    let _ = dedup.begin(key(0, 2)).unwrap();
    let _ = dedup.complete(key(0, 2), t(0), 30).unwrap();
    let _ = dedup.cancel(key(0, 3), t(0)).unwrap();
    assert_eq!(
        (dedup.len(), dedup.running(), dedup.tombstones()),
        (3, 1, 1)
    );
    assert_eq!(dedup.clear(), 30);
    assert_eq!(
        (
            dedup.len(),
            dedup.running(),
            dedup.tombstones(),
            dedup.retained_bytes()
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(dedup.next_expiry(), None);
    assert!(!dedup.contains(key(0, 1)));
    for n in 1..=4 {
        assert!(dedup.begin(key(0, n)).unwrap().is_execute());
    }
}

#[test]
fn storage_forms_and_limits() {
    let limits = crate::RuntimeLimits::default();
    let storage = std::vec![DedupSlot::EMPTY; 16];
    let mut dedup = DedupTable::from_limits(storage, &limits).unwrap();
    assert_eq!(dedup.capacity(), 16);
    assert_eq!(dedup.ttl(), limits.dedup_ttl);
    assert_eq!(dedup.byte_budget(), limits.max_dedup_bytes);
    assert_eq!(
        dedup.config().max_tombstones,
        limits.max_cancellations as usize
    );
    let _ = dedup.begin(key(0, 1)).unwrap();
    let mut slots = [DedupSlot::new(); 3];
    {
        let mut borrowed =
            DedupTable::with_storage(&mut slots[..], DedupConfig::new(TTL, 1)).unwrap();
        let _ = borrowed.begin(key(0, 1)).unwrap();
    }
    let reused = DedupTable::with_storage(&mut slots[..], DedupConfig::new(TTL, 1)).unwrap();
    assert!(reused.is_empty());
    assert!(!reused.contains(key(0, 1)));
    static TABLE: ArrayDedupTable<2> = DedupTable::new(DedupConfig::new(TTL, 0));
    assert_eq!(TABLE.capacity(), 2);
    assert_eq!(DedupSlot::default().key, None);
}

#[test]
fn empty_storage_is_rejected() {
    assert_eq!(
        DedupTable::with_storage(Vec::new(), DedupConfig::new(TTL, 0)).err(),
        Some(TableStorageError::Empty)
    );
}

#[test]
fn many_origins_and_churn_keep_every_key_reachable() {
    let mut dedup = table::<64>(u64::MAX);
    let mut live = std::collections::VecDeque::new();
    let mut now = 0;
    let requests = if cfg!(miri) { 300 } else { 5000 };
    for n in 0..requests {
        let k = key((n % 7) as u32, n / 7 + 1);
        if dedup.is_full() {
            now += 1;
            let finished = live.pop_front().unwrap();
            let _ = dedup.complete(finished, t(now), n).unwrap();
            let _ = dedup.pop_expired(t(now + 100)).unwrap();
        }
        assert!(dedup.begin(k).unwrap().is_execute());
        live.push_back(k);
        if n % 97 == 0 {
            for k in &live {
                assert!(dedup.contains(*k));
            }
        }
    }
    assert_eq!(dedup.len(), 64);
}

#[test]
fn display_and_debug() {
    let k = key(2, 5);
    assert_eq!(k.to_string(), "request#5 from rank 2");
    let cases = [
        (
            DedupError::Full { capacity: 8 },
            "dedup table is full (8 entries)",
        ),
        (
            DedupError::TombstonesFull { limit: 3 },
            "too many remembered cancellations (3)",
        ),
        (
            DedupError::NotFound { key: k },
            "no dedup entry for request#5 from rank 2",
        ),
        (
            DedupError::NotRunning {
                key: k,
                state: DedupState::Completed { cached: false },
            },
            "request#5 from rank 2 is not running: it is completed without a cached response",
        ),
        (
            DedupError::TimeOverflow { now: t(3) },
            "dedup expiry after t+3ns overflows the clock",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
    assert!(DedupError::Full { capacity: 1 }.is_exhaustion());
    assert!(DedupError::TombstonesFull { limit: 1 }.is_exhaustion());
    assert!(!DedupError::NotFound { key: k }.is_exhaustion());
    let states = [
        (
            DedupState::Running {
                cancel_requested: false,
            },
            "running",
        ),
        (
            DedupState::Running {
                cancel_requested: true,
            },
            "running with cancellation requested",
        ),
        (
            DedupState::Completed { cached: true },
            "completed with its response cached",
        ),
        (DedupState::Cancelled, "cancelled"),
    ];
    for (state, text) in states {
        assert_eq!(state.to_string(), text);
    }
    assert_eq!(Retention::Cancelled { slot: 4 }.slot(), 4);
    assert_eq!(Arrival::DuplicateCancelled { slot: 2 }.slot(), 2);
    let mut dedup = table::<2>(9);
    let _ = dedup.begin(k).unwrap();
    assert_eq!(
        std::format!("{dedup:?}"),
        "DedupTable { len: 1, running: 1, tombstones: 0, capacity: 2, retained_bytes: 0, byte_budget: 9, ttl: 100ns }"
    );
    assert!(std::format!("{:?}", DedupSlot::EMPTY).starts_with("DedupSlot { key: None"));
    assert!(std::format!("{:?}", dedup.drain_expired(t(0))).starts_with("DrainExpiredEntries"));
}

/// A table kept full by IDs in sequence from two origins, each new request
/// evicting the oldest finished one (a busy receiver's steady state), finds
/// every entry it holds and none it evicted.
#[test]
fn ids_in_sequence_from_two_origins_at_full_load() {
    let mut dedup = table::<37>(u64::MAX);
    let mut held = std::collections::VecDeque::new();
    for step in 0..500_u64 {
        let key = key((step % 2) as u32, 3 + 2 * (step / 2));
        if dedup.is_full() {
            let evicted = dedup.pop_expired(Instant::MAX).expect("a finished entry");
            assert_eq!(Some(evicted.key), held.pop_front());
            assert!(!dedup.contains(evicted.key));
        }
        assert!(dedup.begin(key).unwrap().is_execute());
        assert!(matches!(
            dedup.complete(key, t(step), 1),
            Ok(Retention::Retained { .. })
        ));
        held.push_back(key);
        for &kept in &held {
            assert!(dedup.contains(kept), "{kept:?} at step {step}");
        }
    }
}
