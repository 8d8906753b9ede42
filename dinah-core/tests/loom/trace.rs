//! `TraceBuffer` under every interleaving loom explores: concurrent
//! recorders and a concurrent drainer lose nothing, duplicate nothing, and
//! keep each recorder's order; a full buffer rejects exactly the events
//! that do not fit and keeps its history.

use ::loom::sync::Arc;
use ::loom::thread;
use dinah_core::{TaskId, TraceBuffer, TraceEvent, TraceEventKind, TraceSubject};

fn event(id: u64) -> TraceEvent {
    TraceEvent::task(TraceEventKind::Started, TaskId::new(id).expect("non-zero"))
}

fn id(event: &TraceEvent) -> u64 {
    match event.subject {
        TraceSubject::Task(id) => id.get(),
        other => panic!("unexpected subject {other:?}"),
    }
}

/// Recorder `r` records events `r * 10 + 1` and `r * 10 + 2`, in order.
fn spawn_recorder<const N: usize>(
    trace: &Arc<TraceBuffer<N>>,
    recorder: u64,
) -> thread::JoinHandle<Vec<u64>> {
    let trace = Arc::clone(trace);
    thread::spawn(move || {
        let mut rejected = Vec::new();
        for n in 1..=2 {
            if let Err(error) = trace.record(event(recorder * 10 + n)) {
                rejected.push(id(&error.into_inner()));
            }
        }
        rejected
    })
}

#[test]
fn two_recorders_and_a_drainer_lose_nothing() {
    ::loom::model(|| {
        let trace = Arc::new(TraceBuffer::<4>::new());
        let recorders = [spawn_recorder(&trace, 1), spawn_recorder(&trace, 2)];
        let drainer = {
            let trace = Arc::clone(&trace);
            thread::spawn(move || trace.drain())
        };
        for recorder in recorders {
            assert!(recorder.join().expect("recorder panicked").is_empty());
        }
        let first = drainer.join().expect("drainer panicked");
        let rest = trace.drain();
        let all: Vec<u64> = first.iter().chain(rest.iter()).map(id).collect();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(sorted, [11, 12, 21, 22], "lost or duplicated: {all:?}");
        for recorder in [1, 2] {
            let mine: Vec<u64> = all
                .iter()
                .copied()
                .filter(|id| id / 10 == recorder)
                .collect();
            assert_eq!(mine, [recorder * 10 + 1, recorder * 10 + 2]);
        }
        assert!(trace.is_empty());
    });
}

#[test]
fn full_buffer_rejects_only_what_does_not_fit() {
    ::loom::model(|| {
        let trace = Arc::new(TraceBuffer::<3>::new());
        let recorders = [spawn_recorder(&trace, 1), spawn_recorder(&trace, 2)];
        let rejected: Vec<u64> = recorders
            .into_iter()
            .flat_map(|recorder| recorder.join().expect("recorder panicked"))
            .collect();
        // Four events into three places: the last one recorded is refused,
        // and it is a second event (a recorder's first always fits).
        assert_eq!(rejected.len(), 1);
        assert_eq!(rejected[0] % 10, 2);
        let kept: Vec<u64> = trace.snapshot().iter().map(id).collect();
        assert_eq!(kept.len(), 3);
        assert!(!kept.contains(&rejected[0]));
        assert!(trace.is_full());
    });
}
