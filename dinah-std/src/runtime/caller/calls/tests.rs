//! Unit tests of the table of pending calls and its pacing.

use super::*;
use crate::action::SegmentWriter;
use crate::transport::Frame;
use crate::transport::HandleConfig;
use dinah_core::wire::Channel;
use dinah_core::wire::{DecodeContext, Message, RelativeDeadline, decode_frame};
use dinah_core::{ActionId, DomainId, ProtocolLimits, WorldSize};
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

fn domain() -> DomainId {
    DomainId::new(1).unwrap()
}

/// A handle of rank 0 whose action lane holds `queue` frames, advertising
/// `admission` (a window of `admission / 4` per lane).
fn handle(queue: usize, admission: u32) -> TransportHandle {
    let config = HandleConfig {
        action_queue: queue,
        admission_capacity: admission,
        ..HandleConfig::default()
    };
    TransportHandle::new(Rank::ZERO, world(), config)
}

/// A table of `capacity` calls, unpaced in practice (a large window).
fn table(capacity: usize) -> Calls {
    paced(capacity, 1 << 20)
}

/// A table of `capacity` calls whose lanes hold `admission / 4` calls.
fn paced(capacity: usize, admission: u32) -> Calls {
    Calls::new(capacity, handle(64, admission), vec![domain()], 1 << 20)
}

fn frame() -> Frame {
    let call = info(Rank::ZERO).call;
    let deadline = RelativeDeadline::from_duration(Duration::from_secs(1)).unwrap();
    let mut input = SegmentWriter::default();
    crate::runtime::frames::request(
        Rank::ZERO,
        call,
        deadline,
        &mut input,
        &ProtocolLimits::DEFAULT,
    )
    .unwrap()
}

/// Begins a call to `peer`, paced.
fn begin(calls: &Calls, peer: Rank, deadline: Instant) -> Result<(Ticket, RequestId), BeginError> {
    match calls.begin(info(peer), deadline, frame(), Pacing::Wait)? {
        Begun::Sent(ticket) => Ok((ticket, last_sent(calls, peer))),
        other => panic!("expected a sent call, got {other:?}"),
    }
}

/// The request ID of the call to `peer` sent last.
fn last_sent(calls: &Calls, peer: Rank) -> RequestId {
    let inner = calls.lock_slots();
    let sent = inner.ids.sent(peer);
    RequestId::in_sequence(peer, world(), sent - 1).unwrap()
}

/// The request IDs of the frames handed to the transport, in order.
fn sent_ids(calls: &Calls) -> Vec<RequestId> {
    let ctx = |to| {
        DecodeContext::new(
            Channel::Action,
            Rank::ZERO,
            world(),
            ProtocolLimits::DEFAULT,
        )
        .map(|c: DecodeContext| (c, to))
    };
    let mut ids = Vec::new();
    while let Some(out) = calls.handle.pop_outgoing(Channel::Action) {
        let (ctx, _) = ctx(out.to).unwrap();
        let frame = decode_frame(out.frame.head(), &ctx).unwrap();
        let Message::Request { call, .. } = *frame.header().message() else {
            panic!("a request");
        };
        ids.push(call.request);
        calls.handle.complete_send(out.frame.len(), true);
    }
    ids
}

fn info(peer: Rank) -> CallInfo {
    CallInfo {
        peer,
        call: Call {
            request: RequestId::MIN,
            action: ActionId::new(1).unwrap(),
            domain: domain(),
            trace: None,
        },
        deadline_after: Duration::from_secs(1),
    }
}

fn peer(n: u32) -> Rank {
    world().rank(n).unwrap()
}

fn cancelled(_: &CallInfo) -> CallOutcome {
    CallOutcome::Failed(RuntimeError::Cancelled)
}

#[test]
fn complete_wakes_and_poll_takes_the_outcome_once() {
    let calls = table(2);
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&counter));
    let mut cx = Context::from_waker(&waker);
    let (ticket, id) = begin(&calls, peer(1), Instant::MAX).unwrap();
    assert!(calls.poll(ticket, &mut cx).is_pending());
    calls.complete(id, cancelled).unwrap();
    assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    assert!(matches!(
        calls.poll(ticket, &mut cx),
        Poll::Ready(CallOutcome::Failed(RuntimeError::Cancelled))
    ));
    assert_eq!(calls.in_use(), 0);
    // A late result is reported, never resurrecting the call.
    assert!(calls.complete(id, cancelled).is_err());
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
    assert!(matches!(calls.abandon(ticket), Some(Abandoned::Sent(_))));
    // A refused send takes nothing: the next call gets the same ID.
    let full = Calls::new(1, handle(1, 1 << 20), vec![domain()], 1 << 20);
    full.handle
        .try_send(peer(3), Channel::Action, frame())
        .unwrap();
    let refused = full.begin(info(peer(2)), Instant::MAX, frame(), Pacing::Wait);
    assert!(matches!(refused, Err(BeginError::Send(_))));
    assert_eq!(full.pending(), 0);
    sent_ids(&full);
    let (_, id) = begin(&full, peer(2), Instant::MAX).unwrap();
    assert_eq!(id.sequence(world()), (peer(2), 0));
    assert_eq!(sent_ids(&full), [id], "the frame carries the recorded ID");
}

#[test]
fn ids_to_each_target_count_up_in_send_order() {
    let calls = table(8);
    let seen: Vec<_> = [1, 2, 1, 3, 2]
        .into_iter()
        .map(|target| {
            let (_, id) = begin(&calls, peer(target), Instant::MAX).unwrap();
            id.sequence(world())
        })
        .collect();
    let numbers = [(1, 0), (2, 0), (1, 1), (3, 0), (2, 1)].map(|(t, n)| (peer(t), n));
    assert_eq!(seen, numbers);
}

#[test]
fn abandon_frees_the_slot_and_reports_sent_calls() {
    let calls = table(1);
    let (ticket, _) = begin(&calls, peer(1), Instant::MAX).unwrap();
    assert!(matches!(calls.abandon(ticket), Some(Abandoned::Sent(_))));
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
    // Abandoning the earliest leaves it owed until 100 + 1 s.
    assert!(matches!(calls.abandon(early), Some(Abandoned::Sent(_))));
    assert_eq!(calls.next_deadline(), Some(at(200)));
    // Completing and expiring move it on too.
    calls.complete(middle, cancelled).unwrap();
    assert_eq!(calls.next_deadline(), Some(at(300)));
    calls.expire(at(300), 8, &mut expired);
    assert_eq!(expired.len(), 1);
    assert!(!calls.is_waiting(late));
    let owed = at(100).checked_add(Duration::from_secs(1)).unwrap();
    assert_eq!(calls.next_deadline(), Some(owed), "the abandoned call");
    // Failing a peer's calls forgets what is owed to it, and publishes.
    calls.fail_peer(peer(1), &RuntimeError::Cancelled);
    assert_eq!(calls.next_deadline(), None);
    // A deadline that never passes counts as none, and never expires.
    let _never = begin(&calls, peer(3), Instant::MAX).unwrap();
    assert_eq!(calls.next_deadline(), None);
    calls.expire(at(u64::MAX - 1), 8, &mut expired);
    assert_eq!(calls.pending(), 1);
}

#[test]
fn calls_beyond_the_window_wait_and_go_in_order_as_calls_end() {
    // Admission 8 over a world of 4: two calls in flight per lane.
    let calls = paced(8, 8);
    let (_, a) = begin(&calls, peer(1), Instant::MAX).unwrap();
    let (_, b) = begin(&calls, peer(1), Instant::MAX).unwrap();
    let mut waiting = Vec::new();
    for _ in 0..3 {
        let begun = calls.begin(info(peer(1)), Instant::MAX, frame(), Pacing::Wait);
        let Ok(Begun::Waiting(ticket)) = begun else {
            panic!("the lane is full: the call waits");
        };
        waiting.push(ticket);
    }
    // Another lane is not held up.
    let (_, other) = begin(&calls, peer(2), Instant::MAX).unwrap();
    assert_eq!(sent_ids(&calls), [a, b, other]);
    assert_eq!(calls.pending(), 6);
    assert_eq!(calls.flow_stats().waiting, 3);
    // Fail-fast refuses instead of queueing behind them.
    let busy = calls.begin(info(peer(1)), Instant::MAX, frame(), Pacing::FailFast);
    assert!(matches!(busy, Err(BeginError::Busy)));
    // An ending call releases the oldest waiting one, with the next ID.
    calls.complete(a, cancelled).unwrap();
    let released = sent_ids(&calls);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].sequence(world()), (peer(1), 2));
    assert!(calls.is_waiting(waiting[0]));
    // A dropped waiting call was never sent: nothing to cancel, and its
    // place goes to the next one.
    assert!(matches!(calls.abandon(waiting[1]), Some(Abandoned::Unsent)));
    calls.complete(b, cancelled).unwrap();
    let released = sent_ids(&calls);
    assert_eq!(released[0].sequence(world()), (peer(1), 3));
    assert_eq!(calls.flow_stats().waiting, 0);
    assert_eq!(calls.flow_stats().waited, 3);
}

#[test]
fn a_call_the_caller_stopped_waiting_for_counts_until_its_target_is_done() {
    let calls = paced(8, 4); // one call in flight per lane
    let at = |n: u64| Instant::from_nanos(n);
    let (first, id) = begin(&calls, peer(1), at(1_000)).unwrap();
    let Ok(Begun::Waiting(second)) = calls.begin(info(peer(1)), at(10_000), frame(), Pacing::Wait)
    else {
        panic!("the lane is full");
    };
    sent_ids(&calls);
    // Dropped: owed, so the waiting call stays waiting.
    assert!(matches!(calls.abandon(first), Some(Abandoned::Sent(_))));
    assert_eq!(calls.flow_stats().owed, 1);
    assert!(sent_ids(&calls).is_empty());
    // The late answer ends the debt and releases the waiting call.
    assert!(calls.complete(id, cancelled).is_err());
    assert_eq!(calls.flow_stats().owed, 0);
    let [next] = sent_ids(&calls)[..] else {
        panic!("one call released");
    };
    // Its deadline passes: it fails here, and is owed until as long again
    // has passed without an answer.
    let mut expired = Vec::new();
    calls.expire(at(10_000), 8, &mut expired);
    assert_eq!(expired.len(), 1);
    assert!(!calls.is_waiting(second));
    assert_eq!(calls.flow_stats().owed, 1);
    let third = calls.begin(info(peer(1)), Instant::MAX, frame(), Pacing::Wait);
    assert!(matches!(third, Ok(Begun::Waiting(_))));
    let owed_until = at(10_000).checked_add(Duration::from_secs(1)).unwrap();
    calls.expire(owed_until, 8, &mut expired);
    assert_eq!(calls.flow_stats().owed_expired, 1);
    let released = sent_ids(&calls);
    assert_eq!(released.len(), 1);
    assert_ne!(released[0], next);
}

#[test]
fn waiting_calls_expire_fail_with_their_peer_and_keep_to_their_byte_budget() {
    let calls = Calls::new(8, handle(64, 4), vec![domain()], 2 * frame().len() as u64);
    let at = |n: u64| Instant::from_nanos(n);
    begin(&calls, peer(1), Instant::MAX).unwrap();
    let wait = |deadline| calls.begin(info(peer(1)), deadline, frame(), Pacing::Wait);
    let Ok(Begun::Waiting(soon)) = wait(at(50)) else {
        panic!("waits");
    };
    let Ok(Begun::Waiting(later)) = wait(Instant::MAX) else {
        panic!("waits");
    };
    assert!(matches!(wait(Instant::MAX), Err(BeginError::WaitingBytes)));
    assert_eq!(calls.next_deadline(), Some(at(50)));
    let mut expired = Vec::new();
    calls.expire(at(60), 8, &mut expired);
    assert!(expired.is_empty(), "never sent: nothing to cancel");
    assert!(!calls.is_waiting(soon));
    assert!(calls.is_waiting(later));
    assert_eq!(calls.fail_peer(peer(1), &RuntimeError::Cancelled), 2);
    assert_eq!(calls.flow_stats().waiting, 0);
    assert_eq!(calls.pending(), 0);
}

#[test]
fn unpaced_calls_and_undeclared_domains_never_wait() {
    let calls = paced(8, 4);
    for _ in 0..3 {
        let begun = calls.begin(info(peer(1)), Instant::MAX, frame(), Pacing::None);
        assert!(matches!(begun, Ok(Begun::Sent(_))));
    }
    let mut other = info(peer(1));
    other.call.domain = DomainId::new(9).unwrap();
    let begun = calls.begin(other, Instant::MAX, frame(), Pacing::Wait);
    assert!(matches!(begun, Ok(Begun::Sent(_))));
}

#[test]
fn calls_to_this_rank_come_back_to_be_submitted_and_wait_like_others() {
    let calls = paced(8, 4);
    let Ok(Begun::Local(first)) =
        calls.begin(info(Rank::ZERO), Instant::MAX, frame(), Pacing::Wait)
    else {
        panic!("a local call is submitted by its caller");
    };
    let begun = calls.begin(info(Rank::ZERO), Instant::MAX, frame(), Pacing::Wait);
    assert!(matches!(begun, Ok(Begun::Waiting(_))));
    let mut released = Vec::new();
    calls.take_local_releases(&mut released);
    assert!(released.is_empty());
    // Its submission failed: the next one is released to the owner.
    calls.unsubmitted(first.ticket, first.info.call.request, None);
    calls.take_local_releases(&mut released);
    assert_eq!(released.len(), 1);
    assert_eq!(
        released[0].info.call.request.sequence(world()),
        (Rank::ZERO, 1)
    );
}

#[test]
fn a_waiting_call_whose_peer_went_down_fails_when_released_and_is_woken() {
    let calls = paced(8, 4); // one call in flight per lane
    let (_, first) = begin(&calls, peer(1), Instant::MAX).unwrap();
    let Ok(Begun::Waiting(second)) =
        calls.begin(info(peer(1)), Instant::MAX, frame(), Pacing::Wait)
    else {
        panic!("the lane is full");
    };
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&counter));
    let mut cx = Context::from_waker(&waker);
    assert!(calls.poll(second, &mut cx).is_pending());
    calls
        .handle
        .mark_down(peer(1), crate::transport::DownReason::LocalClose);
    calls.complete(first, cancelled).unwrap();
    assert_eq!(
        counter.0.load(Ordering::SeqCst),
        1,
        "the waiting call is woken"
    );
    assert!(matches!(
        calls.poll(second, &mut cx),
        Poll::Ready(CallOutcome::Failed(RuntimeError::Transport { .. }))
    ));
    assert_eq!(calls.take_release_counts().1, 1, "counted for the metrics");
    assert_eq!(calls.take_release_counts().1, 0);
}

#[test]
fn a_local_call_that_failed_here_before_its_submission_owes_nothing() {
    let calls = paced(8, 4);
    let Ok(Begun::Local(first)) = calls.begin(info(Rank::ZERO), at(100), frame(), Pacing::Wait)
    else {
        panic!("a local call");
    };
    let Ok(Begun::Waiting(_)) = calls.begin(info(Rank::ZERO), Instant::MAX, frame(), Pacing::Wait)
    else {
        panic!("the lane is full");
    };
    // Its deadline passes before the owner submitted it: owed...
    let mut expired = Vec::new();
    assert_eq!(calls.expire(at(100), 8, &mut expired), 0);
    assert_eq!(calls.flow_stats().owed, 1);
    // ...until its submission fails: it never ran, so the lane moves on.
    calls.unsubmitted(first.ticket, first.info.call.request, None);
    assert_eq!(calls.flow_stats().owed, 0);
    let mut released = Vec::new();
    calls.take_local_releases(&mut released);
    assert_eq!(released.len(), 1);
}

#[test]
fn a_waiting_call_that_expires_is_counted_as_never_sent() {
    let calls = paced(8, 4);
    begin(&calls, peer(2), Instant::MAX).unwrap();
    let Ok(Begun::Waiting(_)) = calls.begin(info(peer(2)), at(10), frame(), Pacing::Wait) else {
        panic!("the lane is full");
    };
    let mut expired = Vec::new();
    assert_eq!(calls.expire(at(10), 8, &mut expired), 1);
    assert!(expired.is_empty(), "nothing to cancel");
}

fn at(n: u64) -> Instant {
    Instant::from_nanos(n)
}

#[test]
fn a_waiting_call_the_transport_cannot_take_yet_waits_at_the_front_and_is_retried() {
    // One frame fits the transport's action lane; one call per lane.
    let calls = Calls::new(8, handle(1, 4), vec![domain()], 1 << 20);
    let (_, first) = begin(&calls, peer(1), Instant::MAX).unwrap();
    let wait = || calls.begin(info(peer(1)), Instant::MAX, frame(), Pacing::Wait);
    let (Ok(Begun::Waiting(second)), Ok(Begun::Waiting(third))) = (wait(), wait()) else {
        panic!("the lane is full");
    };
    // The first call's frame still fills the transport when it ends.
    calls.complete(first, cancelled).unwrap();
    assert!(calls.is_waiting(second) && calls.is_waiting(third));
    assert_eq!(calls.flow_stats().waiting, 2, "both still wait");
    assert!(!calls.retry_stalled() || calls.flow_stats().waiting == 2);
    // Once the transport took the frame, the retry sends the oldest.
    let sent = sent_ids(&calls);
    assert_eq!(sent.len(), 1);
    calls.stalled.store(true, Ordering::Release);
    assert!(calls.retry_stalled());
    let released = sent_ids(&calls);
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].sequence(world()), (peer(1), 1));
    assert_eq!(calls.flow_stats().waiting, 1);
    assert_eq!(calls.take_release_counts().1, 0, "nothing failed");
    assert!(!calls.retry_stalled(), "nothing left stalled");
}
