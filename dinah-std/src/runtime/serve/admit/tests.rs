//! Admission against a model: whatever the network does (duplicates,
//! reordering, loss, cancellations overtaking requests) and however small
//! the table, a request runs at most once, and a request that never
//! arrived before is never given a duplicate's answer.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use dinah_core::{DedupKey, Instant, Rank, RequestId, RuntimeLimits, WorldSize};
use proptest::prelude::*;

use super::{Admit, AdmitRefusal, CancelVerdict, Verdict};

fn world() -> WorldSize {
    WorldSize::new(3).expect("non-zero")
}

/// This rank: 0. Origins 1 and 2 send to it.
fn admit(entries: u32, pending: u32) -> Admit {
    let mut limits = RuntimeLimits::default();
    limits.max_dedup_entries = entries;
    limits.max_pending_calls = pending;
    limits.dedup_ttl = Duration::from_secs(10);
    Admit::new(&limits, Rank::ZERO, world())
}

fn key(origin: u32, number: u64) -> DedupKey {
    let id = RequestId::in_sequence(Rank::ZERO, world(), number).expect("fits");
    DedupKey::new(world().rank(origin).expect("in world"), id)
}

#[test]
fn in_order_requests_evict_finished_entries_and_never_refuse() {
    let mut admit = admit(4, 64);
    let mut forgotten = Vec::new();
    for n in 0..100 {
        let verdict = admit.request(key(1, n), |slot| forgotten.push(slot));
        let Verdict::Run { .. } = verdict else {
            panic!("request {n}: {verdict:?}");
        };
        let now = Instant::from_nanos(n);
        assert!(admit.finish(key(1, n), now, 8).is_some());
        assert!(admit.len() <= 4);
    }
    assert_eq!(admit.counts().pressure_evictions, 96);
    assert_eq!(forgotten.len(), 96);
    // Every evicted request is still known: a duplicate is stale.
    assert_eq!(admit.request(key(1, 0), |_| {}), Verdict::Stale);
    assert!(!admit.request(key(1, 99), |_| {}).is_run());
}

#[test]
fn a_cancel_that_overtakes_a_burst_refuses_only_its_own_request() {
    // The second false refusal of the old watermark: the cancel of the
    // burst's last call arrives first, and its record must not make the
    // earlier, never-seen calls look old.
    let mut admit = admit(4, 1024);
    assert_eq!(
        admit.cancel(key(1, 599), Instant::ZERO),
        CancelVerdict::Remembered
    );
    for n in 0..599 {
        let verdict = admit.request(key(1, n), |_| {});
        assert!(verdict.is_run(), "request {n}: {verdict:?}");
        assert!(admit.finish(key(1, n), Instant::ZERO, 1).is_some());
    }
    assert_eq!(admit.request(key(1, 599), |_| {}), Verdict::Stale);
    assert!(admit.request(key(1, 600), |_| {}).is_run());
}

#[test]
fn misaddressed_ids_and_windows_overrun_are_refused() {
    let mut admit = admit(8, 64);
    let other = RequestId::in_sequence(world().rank(2).unwrap(), world(), 0).unwrap();
    let stray = DedupKey::new(world().rank(1).unwrap(), other);
    assert_eq!(
        admit.request(stray, |_| {}),
        Verdict::Refused(AdmitRefusal::Misaddressed)
    );
    assert_eq!(
        admit.cancel(stray, Instant::ZERO),
        CancelVerdict::Misaddressed
    );
    // Number 0 never arrives: the window reaches 63 numbers above it.
    for n in 1..64 {
        let verdict = admit.request(key(2, n), |_| {});
        assert!(verdict.is_run(), "request {n}: {verdict:?}");
        assert!(admit.finish(key(2, n), Instant::ZERO, 1).is_some());
    }
    assert_eq!(
        admit.request(key(2, 64), |_| {}),
        Verdict::Refused(AdmitRefusal::AheadOfWindow)
    );
    assert_eq!(
        admit.cancel(key(2, 64), Instant::ZERO),
        CancelVerdict::Dropped
    );
    // Once number 0 arrives, the window moves on and 64 is new.
    assert!(admit.request(key(2, 0), |_| {}).is_run());
    assert!(admit.request(key(2, 64), |_| {}).is_run());
}

#[test]
fn a_table_full_of_running_requests_refuses_without_forgetting() {
    let mut admit = admit(2, 64);
    assert!(admit.request(key(1, 0), |_| {}).is_run());
    assert!(admit.request(key(1, 1), |_| {}).is_run());
    assert_eq!(
        admit.request(key(1, 2), |_| {}),
        Verdict::Refused(AdmitRefusal::TableFull)
    );
    assert_eq!(admit.counts().table_full, 1);
    // It arrived and was answered: a duplicate of it never runs.
    assert!(admit.finish(key(1, 0), Instant::ZERO, 1).is_some());
    assert_eq!(admit.request(key(1, 2), |_| {}), Verdict::Stale);
    assert_eq!(admit.running(), 1);
}

impl Verdict {
    fn is_run(&self) -> bool {
        matches!(self, Self::Run { .. })
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// A copy of request `number` from `origin` arrives.
    Request { origin: u32, number: u64 },
    /// Its origin cancels it.
    Cancel { origin: u32, number: u64 },
    /// The oldest running request finishes.
    Finish,
    /// Time passes by this many seconds and entries expire.
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1_u32..3, 0_u64..40).prop_map(|(origin, number)| Op::Request { origin, number }),
        1 => (1_u32..3, 0_u64..40).prop_map(|(origin, number)| Op::Cancel { origin, number }),
        3 => Just(Op::Finish),
        1 => (0_u64..12).prop_map(Op::Tick),
    ]
}

proptest! {
    #[test]
    fn never_runs_twice_and_never_calls_a_new_request_a_duplicate(
        entries in 1_u32..6,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let mut admit = admit(entries, 64);
        // What the network delivered so far (requests and cancels).
        let mut arrived: BTreeSet<(u32, u64)> = BTreeSet::new();
        let mut ran: BTreeMap<(u32, u64), u32> = BTreeMap::new();
        let mut running: Vec<(u32, u64)> = Vec::new();
        let mut now = Instant::ZERO;
        for op in ops {
            match op {
                Op::Request { origin, number } => {
                    let verdict = admit.request(key(origin, number), |_| {});
                    let first_arrival = arrived.insert((origin, number));
                    match verdict {
                        Verdict::Run { .. } => {
                            prop_assert!(first_arrival, "{origin}/{number} ran again");
                            *ran.entry((origin, number)).or_default() += 1;
                            running.push((origin, number));
                        }
                        Verdict::Refused(AdmitRefusal::TableFull | AdmitRefusal::AheadOfWindow) => {}
                        other => prop_assert!(
                            !first_arrival,
                            "{origin}/{number} never arrived, yet {other:?}"
                        ),
                    }
                }
                Op::Cancel { origin, number } => {
                    match admit.cancel(key(origin, number), now) {
                        // A cancel of a request not seen yet stands for it.
                        CancelVerdict::Remembered => {
                            arrived.insert((origin, number));
                        }
                        CancelVerdict::Misaddressed => prop_assert!(false, "well addressed"),
                        _ => {}
                    }
                }
                Op::Finish => {
                    if !running.is_empty() {
                        let (origin, number) = running.remove(0);
                        prop_assert!(admit.finish(key(origin, number), now, 4).is_some());
                    }
                }
                Op::Tick(seconds) => {
                    now = now.checked_add(Duration::from_secs(seconds)).expect("small");
                    admit.expire(now, usize::MAX, |_| {});
                }
            }
            prop_assert!(admit.len() <= entries as usize);
            prop_assert_eq!(admit.running(), running.len());
        }
        prop_assert!(ran.values().all(|&runs| runs == 1));
    }
}
