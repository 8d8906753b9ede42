//! Unit tests of the table of pending calls.

use super::*;
use dinah_core::{ActionId, DomainId};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Wake;

struct CountingWaker(AtomicUsize);
impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn world() -> WorldSize {
    WorldSize::new(4).unwrap()
}

fn table(capacity: usize) -> Calls {
    Calls::new(capacity, world())
}

/// Begins a call to `peer` whose send always succeeds.
fn begin(
    calls: &Calls,
    peer: Rank,
    deadline: Instant,
) -> Result<(Ticket, RequestId), BeginError<()>> {
    calls.begin(info(peer), deadline, |_| Ok(()))
}

fn info(peer: Rank) -> CallInfo {
    CallInfo {
        peer,
        call: Call {
            request: RequestId::MIN,
            action: ActionId::new(1).unwrap(),
            domain: DomainId::new(1).unwrap(),
            trace: None,
        },
        deadline_after: Duration::from_secs(1),
    }
}

fn peer(n: u32) -> Rank {
    world().rank(n).unwrap()
}

#[test]
fn complete_wakes_and_poll_takes_the_outcome_once() {
    let calls = table(2);
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&counter));
    let mut cx = Context::from_waker(&waker);
    let (ticket, id) = begin(&calls, peer(1), Instant::MAX).unwrap();
    assert!(calls.poll(ticket, &mut cx).is_pending());
    calls
        .complete(id, |_| CallOutcome::Failed(RuntimeError::Cancelled))
        .unwrap();
    assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    assert!(matches!(
        calls.poll(ticket, &mut cx),
        Poll::Ready(CallOutcome::Failed(RuntimeError::Cancelled))
    ));
    assert_eq!(calls.in_use(), 0);
    // A late result is reported, never resurrecting the call.
    let late = calls.complete(id, |_| CallOutcome::Failed(RuntimeError::Cancelled));
    assert!(late.is_err());
}

#[test]
fn a_full_table_refuses_and_the_ids_follow_the_sends() {
    let calls = table(1);
    let (ticket, first) = begin(&calls, peer(1), Instant::MAX).unwrap();
    assert_eq!(first.sequence(world()), (peer(1), 0));
    assert!(matches!(
        begin(&calls, peer(1), Instant::MAX),
        Err(BeginError::Full)
    ));
    assert!(calls.abandon(ticket).is_some());
    // A refused send takes nothing: the next call gets the same ID.
    let refused = calls.begin(info(peer(2)), Instant::MAX, |_| Err("lane full"));
    assert!(matches!(refused, Err(BeginError::Send("lane full"))));
    assert_eq!(calls.pending(), 0);
    let mut sent = None;
    let fresh = table(1);
    let (_, id) = fresh
        .begin(info(peer(2)), Instant::MAX, |id| {
            sent = Some(id);
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!(sent, Some(id), "the send saw the recorded ID");
    assert_eq!(id.sequence(world()), (peer(2), 0));
}

#[test]
fn ids_to_each_target_count_up_in_send_order() {
    let calls = table(8);
    let mut seen = Vec::new();
    for (i, target) in [1, 2, 1, 1, 3, 2].into_iter().enumerate() {
        let refuse = i == 3;
        let result = calls.begin(info(peer(target)), Instant::MAX, |_| {
            if refuse { Err(()) } else { Ok(()) }
        });
        if let Ok((_, id)) = result {
            seen.push(id.sequence(world()));
        }
    }
    let numbers = [(1, 0), (2, 0), (1, 1), (3, 0), (2, 1)].map(|(t, n)| (peer(t), n));
    assert_eq!(seen, numbers);
}

#[test]
fn abandon_frees_the_slot_and_reports_waiting_calls() {
    let calls = table(1);
    let (ticket, _) = begin(&calls, peer(1), Instant::MAX).unwrap();
    assert!(calls.abandon(ticket).is_some());
    assert_eq!(calls.pending(), 0);
    // The stale ticket is harmless.
    assert!(calls.abandon(ticket).is_none());
    let (again, _) = begin(&calls, peer(1), Instant::MAX).unwrap();
    assert_ne!(again, ticket);
}

#[test]
fn expiry_and_peer_failure_fail_exactly_the_right_calls() {
    let calls = table(4);
    let now = Instant::from_nanos(100);
    let (_, first) = begin(&calls, peer(1), Instant::from_nanos(50)).unwrap();
    begin(&calls, peer(2), Instant::from_nanos(500)).unwrap();
    begin(&calls, peer(2), Instant::MAX).unwrap();
    let mut expired = Vec::new();
    calls.expire(now, 10, &mut expired);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].call.request, first);
    let error = RuntimeError::Cancelled;
    assert_eq!(calls.fail_peer(peer(2), &error), 2);
    assert_eq!(calls.pending(), 0);
    assert_eq!(calls.in_use(), 3, "outcomes wait for their futures");
}

#[test]
fn the_published_deadline_follows_every_change_of_the_table() {
    let calls = table(4);
    let at = |n: u64| Instant::from_nanos(n);
    assert_eq!(calls.next_deadline(), None);
    let (late, _) = begin(&calls, peer(1), at(300)).unwrap();
    assert_eq!(calls.next_deadline(), Some(at(300)));
    let (early, _) = begin(&calls, peer(1), at(100)).unwrap();
    let (_, middle) = begin(&calls, peer(2), at(200)).unwrap();
    assert_eq!(calls.next_deadline(), Some(at(100)));
    // Nothing due before 100: expire finds nothing (without the lock).
    let mut expired = Vec::new();
    calls.expire(at(99), 8, &mut expired);
    assert!(expired.is_empty());
    assert_eq!(calls.pending(), 3);
    // Abandoning the earliest moves the deadline on.
    assert!(calls.abandon(early).is_some());
    assert_eq!(calls.next_deadline(), Some(at(200)));
    // Completing and expiring move it on too.
    let result = RuntimeError::Cancelled;
    calls
        .complete(middle, |_| CallOutcome::Failed(result.clone()))
        .unwrap();
    assert_eq!(calls.next_deadline(), Some(at(300)));
    calls.expire(at(300), 8, &mut expired);
    assert_eq!(expired.len(), 1);
    assert_eq!(calls.next_deadline(), None);
    assert!(!calls.is_waiting(late));
    // A deadline that never passes counts as none, and never expires.
    let _never = begin(&calls, peer(3), Instant::MAX).unwrap();
    assert_eq!(calls.next_deadline(), None);
    calls.expire(at(u64::MAX - 1), 8, &mut expired);
    assert_eq!(calls.pending(), 1);
    // Failing a peer's calls publishes as well.
    let _fresh = begin(&calls, peer(1), at(500)).unwrap();
    assert_eq!(calls.next_deadline(), Some(at(500)));
    calls.fail_peer(peer(1), &RuntimeError::Cancelled);
    assert_eq!(calls.next_deadline(), None);
}
