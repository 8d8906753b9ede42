extern crate std;

use super::*;
use crate::WorldSize;
use std::collections::BTreeSet;
use std::string::ToString;
use std::vec::Vec;

fn task(n: u64) -> TaskId {
    TaskId::new(n).unwrap()
}

fn submitted(n: u64) -> TraceEvent {
    TraceEvent::task(TraceEventKind::Submitted, task(n))
}

fn ids(events: &[TraceEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|event| match event.subject {
            TraceSubject::Task(id) => id.get(),
            other => panic!("unexpected subject {other:?}"),
        })
        .collect()
}

#[test]
fn records_in_order() {
    let trace: TraceBuffer<4> = TraceBuffer::new();
    assert!(trace.is_empty());
    assert_eq!(trace.capacity(), 4);
    for n in 1..=3 {
        trace.record(submitted(n)).unwrap();
    }
    assert_eq!(trace.len(), 3);
    assert!(!trace.is_full());
    assert_eq!(ids(&trace.snapshot()), [1, 2, 3]);
    // A snapshot leaves the events in place.
    assert_eq!(trace.len(), 3);
}

#[test]
fn full_buffer_rejects_and_preserves_history() {
    let trace: TraceBuffer<2> = TraceBuffer::new();
    trace.record(submitted(1)).unwrap();
    trace.record(submitted(2)).unwrap();
    assert!(trace.is_full());
    let error = trace.record(submitted(3)).unwrap_err();
    assert_eq!(error.to_string(), "trace buffer is full");
    assert_eq!(error.into_inner(), submitted(3));
    assert_eq!(ids(&trace.snapshot()), [1, 2]);
}

#[test]
fn drain_empties_and_the_buffer_is_reusable() {
    let trace: TraceBuffer<2> = TraceBuffer::default();
    trace.record(submitted(1)).unwrap();
    trace.record(submitted(2)).unwrap();
    assert_eq!(ids(&trace.drain()), [1, 2]);
    assert!(trace.is_empty());
    assert!(trace.drain().is_empty());
    trace.record(submitted(3)).unwrap();
    trace.record(submitted(4)).unwrap();
    assert_eq!(ids(&trace.snapshot()), [3, 4]);
    trace.clear();
    assert!(trace.is_empty());
    trace.record(submitted(5)).unwrap();
    assert_eq!(ids(&trace.snapshot()), [5]);
}

#[test]
fn drain_with_runs_the_callback_outside_the_lock() {
    let trace: TraceBuffer<4> = TraceBuffer::new();
    trace.record(submitted(1)).unwrap();
    trace.record(submitted(2)).unwrap();
    let mut seen = Vec::new();
    trace.drain_with(|event| {
        seen.push(event);
        // Recording from the callback would deadlock if it ran under the
        // buffer's lock.
        trace.record(submitted(10 + seen.len() as u64)).unwrap();
    });
    assert_eq!(ids(&seen), [1, 2]);
    assert_eq!(ids(&trace.snapshot()), [11, 12]);
}

#[test]
fn concurrent_recording_keeps_each_threads_order() {
    const THREADS: u64 = 4;
    #[cfg(not(miri))]
    const PER_THREAD: u64 = 200;
    #[cfg(miri)]
    const PER_THREAD: u64 = 10;
    static TRACE: TraceBuffer<{ (THREADS * PER_THREAD) as usize }> = TraceBuffer::new();
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            scope.spawn(move || {
                for n in 0..PER_THREAD {
                    // Thread `t`'s n-th event names task `t * 1000 + n + 1`.
                    TRACE.record(submitted(thread * 1000 + n + 1)).unwrap();
                }
            });
        }
    });
    let events = TRACE.drain();
    assert_eq!(events.len() as u64, THREADS * PER_THREAD);
    let all = ids(&events);
    for thread in 0..THREADS {
        let mine: Vec<u64> = all
            .iter()
            .copied()
            .filter(|id| (id - 1) / 1000 == thread)
            .collect();
        let expected: Vec<u64> = (0..PER_THREAD).map(|n| thread * 1000 + n + 1).collect();
        assert_eq!(mine, expected, "thread {thread}'s events out of order");
    }
    assert!(TRACE.is_empty());
}

#[test]
fn kinds_have_distinct_names_and_all_lists_each_once() {
    // An exhaustive match: adding a kind without updating `ALL` fails here.
    fn position(kind: TraceEventKind) -> usize {
        match kind {
            TraceEventKind::Submitted => 0,
            TraceEventKind::Started => 1,
            TraceEventKind::Completed => 2,
            TraceEventKind::Failed => 3,
            TraceEventKind::CancellationRequested => 4,
            TraceEventKind::CancellationAcknowledged => 5,
            TraceEventKind::RequestSent => 6,
            TraceEventKind::ResultReceived => 7,
            TraceEventKind::DuplicateSuppressed => 8,
            TraceEventKind::LateResultDiscarded => 9,
            TraceEventKind::DeadlineExpired => 10,
            TraceEventKind::ProtocolRejected => 11,
            TraceEventKind::PeerDown => 12,
        }
    }
    for (index, kind) in TraceEventKind::ALL.iter().enumerate() {
        assert_eq!(position(*kind), index);
        assert_eq!(kind.to_string(), kind.name());
    }
    let names: BTreeSet<&str> = TraceEventKind::ALL.iter().map(|kind| kind.name()).collect();
    assert_eq!(names.len(), TraceEventKind::ALL.len());
}

#[test]
fn builders_and_display() {
    let origin = WorldSize::new(2).unwrap().rank(1).unwrap();
    let request = RequestId::new(5).unwrap();
    let event = TraceEvent::request(TraceEventKind::DeadlineExpired, origin, request)
        .with_domain(DomainId::new(2).unwrap())
        .with_worker(WorkerId::new(4).unwrap())
        .with_time(Instant::from_nanos(10));
    assert_eq!(
        event.subject,
        TraceSubject::Request {
            origin,
            id: request
        }
    );
    assert_eq!(
        event.to_string(),
        "deadline-expired request#5 from rank 1 at t+10ns on worker#4 in domain#2"
    );
    let bare = TraceEvent::new(TraceEventKind::PeerDown, TraceSubject::default());
    assert_eq!(bare.subject, TraceSubject::None);
    assert_eq!((bare.at, bare.worker, bare.domain), (None, None, None));
    assert_eq!(bare.to_string(), "peer-down -");
    assert_eq!(
        TraceEvent::task(TraceEventKind::Failed, task(3)).to_string(),
        "failed task#3"
    );
}

#[test]
fn debug_shows_capacity_and_len() {
    let trace: TraceBuffer<3> = TraceBuffer::new();
    trace.record(submitted(1)).unwrap();
    assert_eq!(
        std::format!("{trace:?}"),
        "TraceBuffer { capacity: 3, len: 1 }"
    );
}
