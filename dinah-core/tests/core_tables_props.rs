//! Model-based property tests of the request tables: `DeadlineQueue`,
//! `PendingTable` and `DedupTable` against plain `BTreeMap` models, over
//! random operation sequences with random time steps. Every sequence runs
//! on both storage forms (an inline array and caller-provided heap
//! storage) in lockstep, and each step compares both with the model.
//!
//! Properties checked at every step:
//! - expiry yields exactly the entries whose deadline (or expiry) is at or
//!   before `now`, in deadline order with ties in insertion order;
//! - a late completion never recreates a pending call;
//! - the dedup byte budget is never exceeded, and released plus retained
//!   bytes always equal the bytes ever retained;
//! - at most once: `Execute` is never handed out for a key whose earlier
//!   execution is still inside its retained window (from admission until
//!   the TTL after it finished).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use dinah_core::{
    ArrayDeadlineQueue, ArrayDedupTable, ArrayPendingTable, Arrival, CancelOutcome, DeadlineError,
    DeadlineQueue, DeadlineSlot, DedupConfig, DedupError, DedupKey, DedupSlot, DedupState,
    DedupTable, ExpiredEntry, Instant, LateResult, PendingInsertError, PendingSlot, PendingTable,
    Rank, RequestId, Retention, WorldSize,
};
use proptest::prelude::*;

fn at(nanos: u64) -> Instant {
    Instant::from_nanos(nanos)
}

/// Longest operation sequence; Miri interprets every step, so it walks the
/// code with shorter ones.
const MAX_OPS: usize = if cfg!(miri) { 40 } else { 200 };

/// The default configuration (so `PROPTEST_CASES` applies); under Miri at
/// most four cases and no regression file (isolation forbids the file
/// system).
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if cfg!(miri) {
        config.cases = config.cases.min(4);
        config.failure_persistence = None;
    }
    config
}

// ---------------------------------------------------------------- deadline

const QUEUE_CAP: usize = 8;

#[derive(Debug, Clone)]
enum QueueOp {
    Insert { slot: usize, delay: u64 },
    InsertVacant { delay: u64 },
    Remove { slot: usize },
    Reschedule { slot: usize, delay: u64 },
    Advance { by: u64, batch: usize },
    Pop,
    Clear,
}

fn queue_op() -> impl Strategy<Value = QueueOp> {
    // Slots up to CAP + 1 include out-of-range ones; small delays make
    // equal deadlines common, so tie-breaking is exercised.
    let slot = 0..QUEUE_CAP + 2;
    let delay = 0u64..40;
    prop_oneof![
        6 => (slot.clone(), delay.clone()).prop_map(|(slot, delay)| QueueOp::Insert { slot, delay }),
        3 => delay.clone().prop_map(|delay| QueueOp::InsertVacant { delay }),
        // One common timeout, as a runtime gives most of its calls: these
        // deadlines arrive in order and fill the sorted runs.
        3 => Just(QueueOp::InsertVacant { delay: 30 }),
        3 => slot.clone().prop_map(|slot| QueueOp::Remove { slot }),
        2 => (slot, delay).prop_map(|(slot, delay)| QueueOp::Reschedule { slot, delay }),
        4 => (0u64..30, 1usize..6).prop_map(|(by, batch)| QueueOp::Advance { by, batch }),
        1 => Just(QueueOp::Pop),
        1 => Just(QueueOp::Clear),
    ]
}

/// slot -> (deadline, insertion sequence).
#[derive(Default)]
struct QueueModel {
    entries: BTreeMap<usize, (Instant, u64)>,
    seq: u64,
}

impl QueueModel {
    fn schedule(&mut self, slot: usize, deadline: Instant) {
        self.entries.insert(slot, (deadline, self.seq));
        self.seq += 1;
    }

    fn earliest(&self) -> Option<(usize, Instant)> {
        self.entries
            .iter()
            .min_by_key(|(_, key)| **key)
            .map(|(slot, (deadline, _))| (*slot, *deadline))
    }
}

type BoxedQueue = DeadlineQueue<Box<[DeadlineSlot]>>;

fn check_queue(model: &QueueModel, a: &ArrayDeadlineQueue<QUEUE_CAP>, b: &BoxedQueue) {
    assert_eq!(a.len(), model.entries.len());
    assert_eq!(b.len(), model.entries.len());
    assert_eq!(a.peek(), model.earliest());
    assert_eq!(b.peek(), model.earliest());
    for slot in 0..QUEUE_CAP + 2 {
        let want = model.entries.get(&slot).map(|(deadline, _)| *deadline);
        assert_eq!(a.deadline(slot), want, "slot {slot}");
        assert_eq!(b.deadline(slot), want, "slot {slot}");
    }
    let want: Vec<_> = model
        .entries
        .iter()
        .map(|(slot, (deadline, _))| (*slot, *deadline))
        .collect();
    let check_iter = |iter: &mut dyn ExactSizeIterator<Item = (usize, Instant)>| {
        assert_eq!(iter.len(), want.len());
        let mut got: Vec<_> = iter.collect();
        got.sort_unstable();
        assert_eq!(got, want, "iter yields every entry once");
    };
    check_iter(&mut a.iter());
    check_iter(&mut b.iter());
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn deadline_queue_matches_model(ops in prop::collection::vec(queue_op(), 0..MAX_OPS)) {
        let mut a = ArrayDeadlineQueue::<QUEUE_CAP>::new();
        let mut b: BoxedQueue =
            DeadlineQueue::with_storage(vec![DeadlineSlot::EMPTY; QUEUE_CAP].into()).unwrap();
        let mut model = QueueModel::default();
        let mut now = 0u64;
        for op in ops {
            match op {
                QueueOp::Insert { slot, delay } => {
                    let deadline = at(now + delay);
                    let want = if slot >= QUEUE_CAP {
                        Err(DeadlineError::SlotOutOfRange { slot, capacity: QUEUE_CAP })
                    } else if model.entries.contains_key(&slot) {
                        Err(DeadlineError::Occupied { slot })
                    } else {
                        model.schedule(slot, deadline);
                        Ok(())
                    };
                    prop_assert_eq!(a.insert(slot, deadline), want);
                    prop_assert_eq!(b.insert(slot, deadline), want);
                }
                QueueOp::InsertVacant { delay } => {
                    let deadline = at(now + delay);
                    let got = a.insert_vacant(deadline);
                    prop_assert_eq!(b.insert_vacant(deadline), got);
                    if model.entries.len() == QUEUE_CAP {
                        prop_assert_eq!(got, Err(DeadlineError::Full { capacity: QUEUE_CAP }));
                    } else {
                        let slot = got.unwrap();
                        prop_assert!(slot < QUEUE_CAP && !model.entries.contains_key(&slot));
                        model.schedule(slot, deadline);
                    }
                }
                QueueOp::Remove { slot } => {
                    let want = model.entries.remove(&slot).map(|(deadline, _)| deadline);
                    prop_assert_eq!(a.remove(slot), want);
                    prop_assert_eq!(b.remove(slot), want);
                }
                QueueOp::Reschedule { slot, delay } => {
                    let deadline = at(now + delay);
                    let want = model.entries.get(&slot).map(|(old, _)| *old);
                    if want.is_some() {
                        model.schedule(slot, deadline);
                    }
                    prop_assert_eq!(a.reschedule(slot, deadline), want);
                    prop_assert_eq!(b.reschedule(slot, deadline), want);
                }
                QueueOp::Advance { by, batch } => {
                    now += by;
                    // Expected: every entry at or before now, earliest
                    // first; the batch bound stops early.
                    let mut due: Vec<_> = model
                        .entries
                        .iter()
                        .filter(|(_, (deadline, _))| *deadline <= at(now))
                        .map(|(slot, key)| (*key, *slot))
                        .collect();
                    due.sort_unstable();
                    let want: Vec<_> = due
                        .iter()
                        .take(batch)
                        .map(|((deadline, _), slot)| (*slot, *deadline))
                        .collect();
                    for (slot, _) in &want {
                        model.entries.remove(slot);
                    }
                    let got_a: Vec<_> = a.drain_expired(at(now)).take(batch).collect();
                    let got_b: Vec<_> = b.drain_expired(at(now)).take(batch).collect();
                    prop_assert_eq!(&got_a, &want);
                    prop_assert_eq!(&got_b, &want);
                    // Nothing left is due once the batch was not filled.
                    if want.len() < batch {
                        prop_assert_eq!(a.pop_expired(at(now)), None);
                    }
                }
                QueueOp::Pop => {
                    let want = model.earliest();
                    if let Some((slot, _)) = want {
                        model.entries.remove(&slot);
                    }
                    prop_assert_eq!(a.pop(), want);
                    prop_assert_eq!(b.pop(), want);
                }
                QueueOp::Clear => {
                    model.entries.clear();
                    a.clear();
                    b.clear();
                }
            }
            check_queue(&model, &a, &b);
        }
    }
}

// ----------------------------------------------------------------- pending

const PENDING_CAP: usize = 6;
const PENDING_IDS: u64 = 10;

#[derive(Debug, Clone)]
enum PendingOp {
    Insert { id: u64, delay: u64, value: u32 },
    InsertAfter { id: u64, timeout: u64, value: u32 },
    Complete { id: u64 },
    Remove { id: u64 },
    Advance { by: u64, batch: usize },
    Drain,
}

fn pending_op() -> impl Strategy<Value = PendingOp> {
    let id = 1..=PENDING_IDS;
    prop_oneof![
        6 => (id.clone(), 0u64..50, any::<u32>())
            .prop_map(|(id, delay, value)| PendingOp::Insert { id, delay, value }),
        2 => (id.clone(), 0u64..50, any::<u32>())
            .prop_map(|(id, timeout, value)| PendingOp::InsertAfter { id, timeout, value }),
        4 => id.clone().prop_map(|id| PendingOp::Complete { id }),
        2 => id.prop_map(|id| PendingOp::Remove { id }),
        4 => (0u64..40, 1usize..8).prop_map(|(by, batch)| PendingOp::Advance { by, batch }),
        1 => Just(PendingOp::Drain),
    ]
}

fn rid(n: u64) -> RequestId {
    RequestId::new(n).unwrap()
}

/// id -> (deadline, insertion sequence, handle).
#[derive(Default)]
struct PendingModel {
    calls: BTreeMap<u64, (Instant, u64, u32)>,
    seq: u64,
}

impl PendingModel {
    fn insert(
        &mut self,
        id: u64,
        deadline: Instant,
        value: u32,
    ) -> Result<(), PendingInsertError<u32>> {
        if self.calls.contains_key(&id) {
            Err(PendingInsertError::Duplicate { id: rid(id), value })
        } else if self.calls.len() == PENDING_CAP {
            Err(PendingInsertError::Full {
                capacity: PENDING_CAP,
                value,
            })
        } else {
            self.calls.insert(id, (deadline, self.seq, value));
            self.seq += 1;
            Ok(())
        }
    }
}

type BoxedPending = PendingTable<u32, Vec<PendingSlot<u32>>>;

fn check_pending(model: &PendingModel, a: &ArrayPendingTable<u32, PENDING_CAP>, b: &BoxedPending) {
    assert_eq!(a.len(), model.calls.len());
    assert_eq!(b.len(), model.calls.len());
    assert_eq!(a.is_full(), model.calls.len() == PENDING_CAP);
    let next = model.calls.values().map(|(deadline, _, _)| *deadline).min();
    assert_eq!(a.next_deadline(), next);
    assert_eq!(b.next_deadline(), next);
    for id in 1..=PENDING_IDS {
        let want = model.calls.get(&id);
        assert_eq!(a.get(rid(id)), want.map(|(_, _, value)| value));
        assert_eq!(b.get(rid(id)), want.map(|(_, _, value)| value));
        assert_eq!(a.deadline(rid(id)), want.map(|(deadline, _, _)| *deadline));
        assert_eq!(b.contains(rid(id)), want.is_some());
    }
    let mut listed: Vec<_> = a
        .iter()
        .map(|(id, deadline, value)| (id.get(), deadline, *value))
        .collect();
    listed.sort_unstable();
    let want: Vec<_> = model
        .calls
        .iter()
        .map(|(id, (d, _, v))| (*id, *d, *v))
        .collect();
    assert_eq!(listed, want);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn pending_table_matches_model(ops in prop::collection::vec(pending_op(), 0..MAX_OPS)) {
        let mut a = ArrayPendingTable::<u32, PENDING_CAP>::new();
        let storage = (0..PENDING_CAP).map(|_| PendingSlot::EMPTY).collect();
        let mut b: BoxedPending = PendingTable::with_storage(storage).unwrap();
        let mut model = PendingModel::default();
        // Ids that were pending once and are not any more.
        let mut gone = BTreeSet::new();
        let mut now = 0u64;
        for op in ops {
            match op {
                PendingOp::Insert { id, delay, value } => {
                    let deadline = at(now + delay);
                    let want = model.insert(id, deadline, value);
                    if want.is_ok() {
                        gone.remove(&id);
                    }
                    prop_assert_eq!(a.insert(rid(id), deadline, value), want);
                    prop_assert_eq!(b.insert(rid(id), deadline, value), want);
                }
                PendingOp::InsertAfter { id, timeout, value } => {
                    let timeout = Duration::from_nanos(timeout);
                    let deadline = at(now).checked_add(timeout).unwrap();
                    let want = model.insert(id, deadline, value).map(|()| deadline);
                    if want.is_ok() {
                        gone.remove(&id);
                    }
                    prop_assert_eq!(a.insert_after(rid(id), at(now), timeout, value), want);
                    prop_assert_eq!(b.insert_after(rid(id), at(now), timeout, value), want);
                }
                PendingOp::Complete { id } => {
                    let want = match model.calls.remove(&id) {
                        Some((_, _, value)) => {
                            gone.insert(id);
                            Ok(value)
                        }
                        None => Err(LateResult { id: rid(id) }),
                    };
                    prop_assert_eq!(a.complete(rid(id)), want);
                    prop_assert_eq!(b.complete(rid(id)), want);
                    // A late result never resurrects the call.
                    if gone.contains(&id) {
                        prop_assert!(!a.contains(rid(id)) && !b.contains(rid(id)));
                    }
                }
                PendingOp::Remove { id } => {
                    let want = model.calls.remove(&id).map(|(_, _, value)| value);
                    if want.is_some() {
                        gone.insert(id);
                    }
                    prop_assert_eq!(a.remove(rid(id)), want);
                    prop_assert_eq!(b.remove(rid(id)), want);
                }
                PendingOp::Advance { by, batch } => {
                    now += by;
                    let mut due: Vec<_> = model
                        .calls
                        .iter()
                        .filter(|(_, (deadline, _, _))| *deadline <= at(now))
                        .map(|(id, (deadline, seq, value))| ((*deadline, *seq), *id, *value))
                        .collect();
                    due.sort_unstable();
                    let want: Vec<_> = due
                        .iter()
                        .take(batch)
                        .map(|(_, id, value)| (rid(*id), *value))
                        .collect();
                    for (id, _) in &want {
                        model.calls.remove(&id.get());
                        gone.insert(id.get());
                    }
                    let got_a: Vec<_> = a.drain_expired(at(now)).take(batch).collect();
                    let got_b: Vec<_> = b.drain_expired(at(now)).take(batch).collect();
                    prop_assert_eq!(&got_a, &want);
                    prop_assert_eq!(&got_b, &want);
                    if want.len() < batch {
                        prop_assert_eq!(a.pop_expired(at(now)), None);
                        prop_assert!(a.next_deadline().is_none_or(|next| next > at(now)));
                    }
                }
                PendingOp::Drain => {
                    let mut want: Vec<_> = model.calls.iter().map(|(id, (_, _, v))| (*id, *v)).collect();
                    gone.extend(model.calls.keys().copied());
                    model.calls.clear();
                    let mut got_a: Vec<_> = a.drain().map(|(id, v)| (id.get(), v)).collect();
                    let mut got_b: Vec<_> = b.drain().map(|(id, v)| (id.get(), v)).collect();
                    want.sort_unstable();
                    got_a.sort_unstable();
                    got_b.sort_unstable();
                    prop_assert_eq!(&got_a, &want);
                    prop_assert_eq!(&got_b, &want);
                }
            }
            check_pending(&model, &a, &b);
        }
    }
}

// ------------------------------------------------------------------- dedup

const DEDUP_CAP: usize = 6;
const DEDUP_BUDGET: u64 = 300;
const DEDUP_TTL: u64 = 50;
const DEDUP_TOMBSTONES: usize = 3;

#[derive(Debug, Clone)]
enum DedupOp {
    Begin { key: (u32, u64) },
    Complete { key: (u32, u64), bytes: u64 },
    Cancel { key: (u32, u64) },
    Rollback { key: (u32, u64) },
    Advance { by: u64, batch: usize },
}

fn dedup_op() -> impl Strategy<Value = DedupOp> {
    // Three origins and four IDs each: duplicates are frequent, and equal
    // IDs from different origins must stay distinct.
    let key = (0u32..3, 1u64..=4);
    prop_oneof![
        6 => key.clone().prop_map(|key| DedupOp::Begin { key }),
        4 => (key.clone(), 0u64..200).prop_map(|(key, bytes)| DedupOp::Complete { key, bytes }),
        2 => key.clone().prop_map(|key| DedupOp::Cancel { key }),
        1 => key.prop_map(|key| DedupOp::Rollback { key }),
        3 => (0u64..40, 1usize..8).prop_map(|(by, batch)| DedupOp::Advance { by, batch }),
    ]
}

fn dkey((origin, id): (u32, u64)) -> DedupKey {
    let world = WorldSize::new(3).unwrap();
    DedupKey::new(Rank::new(origin, world).unwrap(), rid(id))
}

#[derive(Debug, Clone, Copy)]
struct ModelEntry {
    slot: usize,
    state: DedupState,
    bytes: u64,
    tombstone: bool,
    /// (expiry, finishing sequence) once finished.
    finished: Option<(Instant, u64)>,
}

#[derive(Default)]
struct DedupModel {
    entries: BTreeMap<DedupKey, ModelEntry>,
    finish_seq: u64,
    retained: u64,
    /// Bytes ever retained and ever released.
    ever_retained: u64,
    ever_released: u64,
    /// Keys handed `Execute` whose retained window has not ended.
    executing_window: BTreeSet<DedupKey>,
}

impl DedupModel {
    fn finish(&mut self, key: DedupKey, now: u64) {
        let seq = self.finish_seq;
        self.finish_seq += 1;
        self.entries.get_mut(&key).unwrap().finished = Some((at(now + DEDUP_TTL), seq));
    }

    fn fresh_slot_ok(&self, slot: usize) -> bool {
        slot < DEDUP_CAP && self.entries.values().all(|e| e.slot != slot)
    }

    fn tombstones(&self) -> usize {
        self.entries.values().filter(|e| e.tombstone).count()
    }
}

type BoxedDedup = DedupTable<Vec<DedupSlot>>;

fn check_dedup(model: &DedupModel, a: &ArrayDedupTable<DEDUP_CAP>, b: &BoxedDedup) {
    for table in [
        (
            a.len(),
            a.running(),
            a.tombstones(),
            a.retained_bytes(),
            a.next_expiry(),
        ),
        (
            b.len(),
            b.running(),
            b.tombstones(),
            b.retained_bytes(),
            b.next_expiry(),
        ),
    ] {
        let running = model
            .entries
            .values()
            .filter(|e| matches!(e.state, DedupState::Running { .. }))
            .count();
        let next = model
            .entries
            .values()
            .filter_map(|e| e.finished)
            .min()
            .map(|(expiry, _)| expiry);
        assert_eq!(
            table,
            (
                model.entries.len(),
                running,
                model.tombstones(),
                model.retained,
                next
            )
        );
    }
    assert!(a.retained_bytes() <= a.byte_budget());
    assert_eq!(model.ever_released + model.retained, model.ever_retained);
    for origin in 0..3 {
        for id in 1..=4 {
            let key = dkey((origin, id));
            let want = model.entries.get(&key).map(|e| (e.slot, e.state, e.bytes));
            let got = a.get(key).map(|e| (e.slot, e.state, e.retained_bytes));
            assert_eq!(got, want, "{key}");
            assert_eq!(
                b.get(key).map(|e| (e.slot, e.state, e.retained_bytes)),
                want
            );
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn dedup_table_matches_model(ops in prop::collection::vec(dedup_op(), 0..MAX_OPS)) {
        let config = DedupConfig::new(Duration::from_nanos(DEDUP_TTL), DEDUP_BUDGET)
            .with_max_tombstones(DEDUP_TOMBSTONES);
        let mut a = ArrayDedupTable::<DEDUP_CAP>::new(config);
        let mut b: BoxedDedup = DedupTable::with_storage(vec![DedupSlot::EMPTY; DEDUP_CAP], config).unwrap();
        let mut model = DedupModel::default();
        let mut now = 0u64;
        for op in ops {
            match op {
                DedupOp::Begin { key } => {
                    let key = dkey(key);
                    let got = a.begin(key);
                    prop_assert_eq!(b.begin(key), got);
                    match model.entries.get(&key) {
                        Some(e) => {
                            let want = match e.state {
                                DedupState::Running { .. } => Arrival::DuplicateRunning { slot: e.slot },
                                DedupState::Completed { cached } => Arrival::DuplicateCompleted { slot: e.slot, cached },
                                DedupState::Cancelled => Arrival::DuplicateCancelled { slot: e.slot },
                            };
                            prop_assert_eq!(got, Ok(want));
                        }
                        None if model.entries.len() == DEDUP_CAP => {
                            prop_assert_eq!(got, Err(DedupError::Full { capacity: DEDUP_CAP }));
                        }
                        None => {
                            let Ok(Arrival::Execute { slot }) = got else {
                                panic!("{key}: expected Execute, got {got:?}");
                            };
                            prop_assert!(model.fresh_slot_ok(slot));
                            // At most once inside the retained window.
                            prop_assert!(model.executing_window.insert(key), "{} executed twice", key);
                            model.entries.insert(key, ModelEntry {
                                slot,
                                state: DedupState::Running { cancel_requested: false },
                                bytes: 0,
                                tombstone: false,
                                finished: None,
                            });
                        }
                    }
                }
                DedupOp::Complete { key, bytes } => {
                    let key = dkey(key);
                    let got = a.complete(key, at(now), bytes);
                    prop_assert_eq!(b.complete(key, at(now), bytes), got);
                    let want = match model.entries.get(&key).copied() {
                        None => Err(DedupError::NotFound { key }),
                        Some(ModelEntry { state: DedupState::Running { cancel_requested }, slot, .. }) => {
                            let entry = model.entries.get_mut(&key).unwrap();
                            let completion = if cancel_requested {
                                entry.state = DedupState::Cancelled;
                                Retention::Cancelled { slot }
                            } else if model.retained + bytes <= DEDUP_BUDGET {
                                entry.state = DedupState::Completed { cached: true };
                                entry.bytes = bytes;
                                model.retained += bytes;
                                model.ever_retained += bytes;
                                Retention::Retained { slot, bytes }
                            } else {
                                entry.state = DedupState::Completed { cached: false };
                                Retention::MarkerOnly { slot }
                            };
                            model.finish(key, now);
                            Ok(completion)
                        }
                        Some(e) => Err(DedupError::NotRunning { key, state: e.state }),
                    };
                    prop_assert_eq!(got, want);
                }
                DedupOp::Cancel { key } => {
                    let key = dkey(key);
                    let got = a.cancel(key, at(now));
                    prop_assert_eq!(b.cancel(key, at(now)), got);
                    let tombstones = model.tombstones();
                    let len = model.entries.len();
                    match model.entries.get_mut(&key) {
                        Some(e) => {
                            let slot = e.slot;
                            let want = match e.state {
                                DedupState::Running { cancel_requested: false } => {
                                    e.state = DedupState::Running { cancel_requested: true };
                                    CancelOutcome::Requested { slot }
                                }
                                DedupState::Running { .. } => CancelOutcome::AlreadyRequested { slot },
                                DedupState::Completed { .. } => CancelOutcome::AlreadyCompleted { slot },
                                DedupState::Cancelled => CancelOutcome::AlreadyCancelled { slot },
                            };
                            prop_assert_eq!(got, Ok(want));
                        }
                        None if tombstones >= DEDUP_TOMBSTONES => {
                            prop_assert_eq!(got, Err(DedupError::TombstonesFull { limit: DEDUP_TOMBSTONES }));
                        }
                        None if len == DEDUP_CAP => {
                            prop_assert_eq!(got, Err(DedupError::Full { capacity: DEDUP_CAP }));
                        }
                        None => {
                            let Ok(CancelOutcome::Tombstoned { slot }) = got else {
                                panic!("{key}: expected a tombstone, got {got:?}");
                            };
                            prop_assert!(model.fresh_slot_ok(slot));
                            model.entries.insert(key, ModelEntry {
                                slot,
                                state: DedupState::Cancelled,
                                bytes: 0,
                                tombstone: true,
                                finished: None,
                            });
                            model.finish(key, now);
                        }
                    }
                }
                DedupOp::Rollback { key } => {
                    let key = dkey(key);
                    let got = a.rollback(key);
                    prop_assert_eq!(b.rollback(key), got);
                    let want = match model.entries.get(&key).copied() {
                        None => Err(DedupError::NotFound { key }),
                        Some(ModelEntry { state: DedupState::Running { .. }, slot, .. }) => {
                            model.entries.remove(&key);
                            // User code never ran: the window closes.
                            model.executing_window.remove(&key);
                            Ok(slot)
                        }
                        Some(e) => Err(DedupError::NotRunning { key, state: e.state }),
                    };
                    prop_assert_eq!(got, want);
                }
                DedupOp::Advance { by, batch } => {
                    now += by;
                    let mut due: Vec<_> = model
                        .entries
                        .iter()
                        .filter_map(|(key, e)| e.finished.filter(|(expiry, _)| *expiry <= at(now)).map(|f| (f, *key)))
                        .collect();
                    due.sort_unstable();
                    let want: Vec<ExpiredEntry> = due
                        .iter()
                        .take(batch)
                        .map(|(_, key)| {
                            let e = model.entries.remove(key).unwrap();
                            model.retained -= e.bytes;
                            model.ever_released += e.bytes;
                            model.executing_window.remove(key);
                            ExpiredEntry { key: *key, slot: e.slot, state: e.state, released_bytes: e.bytes }
                        })
                        .collect();
                    let got_a: Vec<_> = a.drain_expired(at(now)).take(batch).collect();
                    let got_b: Vec<_> = b.drain_expired(at(now)).take(batch).collect();
                    prop_assert_eq!(&got_a, &want);
                    prop_assert_eq!(&got_b, &want);
                    for expired in &got_a {
                        // Never before the TTL, never a running entry.
                        let running = matches!(expired.state, DedupState::Running { .. });
                        prop_assert!(!running, "running entry {} expired", expired.key);
                    }
                }
            }
            check_dedup(&model, &a, &b);
        }
        let released = a.clear();
        prop_assert_eq!(b.clear(), released);
        prop_assert_eq!(released, model.retained);
        prop_assert!(a.is_empty() && a.retained_bytes() == 0);
    }
}

// ------------------------------------------------------------------- sizes

/// Storage sizes per slot, printed for the size table in `docs/core.md`
/// (`cargo test -p dinah-core --test core_tables_props -- --nocapture
/// sizes`) and pinned so a layout change is noticed.
#[test]
#[expect(clippy::print_stdout, reason = "this test reports the slot sizes")]
fn table_slot_sizes() {
    use core::mem::size_of;
    use core::num::NonZeroU32;
    let sizes = [
        ("DeadlineSlot", size_of::<DeadlineSlot>()),
        ("PendingSlot<u32>", size_of::<PendingSlot<u32>>()),
        (
            "PendingSlot<NonZeroU32>",
            size_of::<PendingSlot<NonZeroU32>>(),
        ),
        ("PendingSlot<u64>", size_of::<PendingSlot<u64>>()),
        ("DedupSlot", size_of::<DedupSlot>()),
        ("DedupKey", size_of::<DedupKey>()),
    ];
    for (name, size) in sizes {
        println!("{name}: {size} bytes");
    }
    assert_eq!(
        sizes.map(|(_, size)| size),
        [32, 56, 56, 56, 56, 16],
        "slot layout changed: update the size table in docs/core.md"
    );
}
