//! The caller side: calls this rank issued and still waits for.
//!
//! One bounded table shared by every client thread and the owner thread:
//! the core [`PendingTable`] (request ID to slot, deadline order) plus a
//! fixed array of slots, each holding the call's identity, its waker and,
//! once it finished, its outcome. Both are sized once from
//! `max_pending_calls`; a full table refuses new calls.
//!
//! A [`Ticket`] (slot index plus generation) names a call from its future;
//! the generation makes a stale ticket harmless after the slot is reused.
//! No user code runs under the lock, and wakers are woken after it is
//! released.

use std::any::Any;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah_core::wire::{Call, Header};
use dinah_core::{Instant, LateResult, LimitField, PendingSlot, PendingTable, Rank, RequestId};

use super::error::{RuntimeError, Side};
use crate::domain::JobCanceller;

/// How a call ended, as delivered to its future.
pub(crate) enum CallOutcome {
    /// A result frame, validated into `header` when it arrived: the future
    /// decodes the output.
    Frame { header: Header, frame: Vec<u8> },
    /// The typed output of a local call.
    Local(Box<dyn Any + Send>),
    /// The call failed.
    Failed(RuntimeError),
}

/// What the runtime remembers about a call in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallInfo {
    pub(crate) peer: Rank,
    pub(crate) call: Call,
    pub(crate) deadline_after: Duration,
}

/// Names a call from its future.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    slot: u32,
    generation: u32,
}

enum State {
    Vacant,
    Waiting(Option<Waker>),
    Ready(CallOutcome),
}

struct Slot {
    generation: u32,
    info: Option<CallInfo>,
    state: State,
    /// Cancels the job of a local call.
    canceller: Option<JobCanceller>,
}

struct Inner {
    pending: PendingTable<u32, Box<[PendingSlot<u32>]>>,
    slots: Box<[Slot]>,
    free: Vec<u32>,
}

pub(crate) struct Calls {
    inner: Mutex<Inner>,
    capacity: usize,
}

impl Calls {
    /// A table for `capacity` calls (non-zero, at most the core tables'
    /// maximum: validated limits guarantee both).
    pub(crate) fn new(capacity: usize) -> Self {
        let storage: Box<[PendingSlot<u32>]> = (0..capacity).map(|_| PendingSlot::EMPTY).collect();
        let pending =
            PendingTable::with_storage(storage).expect("validated limits size the pending table");
        let slots = (0..capacity)
            .map(|_| Slot {
                generation: 0,
                info: None,
                state: State::Vacant,
                canceller: None,
            })
            .collect();
        let free = (0..capacity as u32).rev().collect();
        Self {
            inner: Mutex::new(Inner {
                pending,
                slots,
                free,
            }),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding the lock; recover the data if a
        // panic elsewhere ever poisoned it.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a new call with `deadline`.
    pub(crate) fn begin(&self, info: CallInfo, deadline: Instant) -> Result<Ticket, RuntimeError> {
        let exhausted = RuntimeError::ResourceExhausted {
            limit: LimitField::MaxPendingCalls,
            side: Side::Local,
        };
        let mut inner = self.lock();
        let Some(slot) = inner.free.pop() else {
            return Err(exhausted);
        };
        if inner
            .pending
            .insert(info.call.request, deadline, slot)
            .is_err()
        {
            inner.free.push(slot);
            return Err(exhausted);
        }
        let entry = &mut inner.slots[slot as usize];
        entry.info = Some(info);
        entry.state = State::Waiting(None);
        Ok(Ticket {
            slot,
            generation: entry.generation,
        })
    }

    /// Polls the call: its outcome once it finished (freeing the slot),
    /// otherwise registers the waker.
    pub(crate) fn poll(&self, ticket: Ticket, cx: &mut Context<'_>) -> Poll<CallOutcome> {
        let mut inner = self.lock();
        let Some(entry) = inner.slots.get_mut(ticket.slot as usize) else {
            return Poll::Ready(CallOutcome::Failed(RuntimeError::Cancelled));
        };
        if entry.generation != ticket.generation {
            // Already taken: a future polled after completion.
            return Poll::Ready(CallOutcome::Failed(RuntimeError::Cancelled));
        }
        match &mut entry.state {
            State::Waiting(waker) => {
                match waker {
                    Some(existing) if existing.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Ready(_) => {
                let State::Ready(outcome) = std::mem::replace(&mut entry.state, State::Vacant)
                else {
                    unreachable!("matched Ready above")
                };
                Self::release(&mut inner, ticket.slot);
                Poll::Ready(outcome)
            }
            State::Vacant => Poll::Ready(CallOutcome::Failed(RuntimeError::Cancelled)),
        }
    }

    fn release(inner: &mut Inner, slot: u32) {
        let entry = &mut inner.slots[slot as usize];
        entry.generation = entry.generation.wrapping_add(1);
        entry.info = None;
        entry.state = State::Vacant;
        entry.canceller = None;
        inner.free.push(slot);
    }

    /// Remembers how to cancel the job of the local call `ticket`.
    pub(crate) fn attach_canceller(&self, ticket: Ticket, canceller: JobCanceller) {
        let mut inner = self.lock();
        if let Some(entry) = inner.slots.get_mut(ticket.slot as usize) {
            if entry.generation == ticket.generation && matches!(entry.state, State::Waiting(_)) {
                entry.canceller = Some(canceller);
                return;
            }
        }
        drop(inner);
        // Already finished or abandoned: the job is no longer wanted.
        canceller.cancel();
    }

    /// The future was dropped: forgets the call. Returns its identity if it
    /// was still waiting (so a cancellation should be sent), after
    /// cancelling a local call's job.
    pub(crate) fn abandon(&self, ticket: Ticket) -> Option<CallInfo> {
        let (info, canceller) = {
            let mut inner = self.lock();
            let entry = inner.slots.get_mut(ticket.slot as usize)?;
            if entry.generation != ticket.generation {
                return None;
            }
            let waiting = matches!(entry.state, State::Waiting(_));
            let info = entry.info;
            let canceller = entry.canceller.take();
            if waiting {
                if let Some(info) = info {
                    inner.pending.remove(info.call.request);
                }
            }
            Self::release(&mut inner, ticket.slot);
            (if waiting { info } else { None }, canceller)
        };
        if let (Some(_), Some(canceller)) = (info, canceller) {
            canceller.cancel();
        }
        info
    }

    /// Is the call still waiting for its outcome?
    pub(crate) fn is_waiting(&self, ticket: Ticket) -> bool {
        let inner = self.lock();
        inner.slots.get(ticket.slot as usize).is_some_and(|entry| {
            entry.generation == ticket.generation && matches!(entry.state, State::Waiting(_))
        })
    }

    /// Finishes `request` with the outcome `make` builds from its identity.
    ///
    /// # Errors
    ///
    /// [`LateResult`] if `request` is not pending (expired, dropped, or
    /// already finished); nothing changes.
    pub(crate) fn complete(
        &self,
        request: RequestId,
        make: impl FnOnce(&CallInfo) -> CallOutcome,
    ) -> Result<(), LateResult> {
        let waker = {
            let mut inner = self.lock();
            let slot = inner.pending.complete(request)?;
            let entry = &mut inner.slots[slot as usize];
            let info = entry.info.expect("a pending slot has its call");
            entry.canceller = None;
            Self::finish(entry, make(&info))
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }

    fn finish(entry: &mut Slot, outcome: CallOutcome) -> Option<Waker> {
        match std::mem::replace(&mut entry.state, State::Ready(outcome)) {
            State::Waiting(waker) => waker,
            _ => None,
        }
    }

    /// Fails up to `max` calls whose deadline passed by `now` with
    /// `DeadlineExceeded`, earliest first, appending their identities to
    /// `expired` (for cancellations).
    pub(crate) fn expire(&self, now: Instant, max: usize, expired: &mut Vec<CallInfo>) {
        let mut wakers = Vec::new();
        let mut cancellers = Vec::new();
        {
            let mut inner = self.lock();
            for _ in 0..max {
                let Some((_, slot)) = inner.pending.pop_expired(now) else {
                    break;
                };
                let entry = &mut inner.slots[slot as usize];
                let info = entry.info.expect("a pending slot has its call");
                let error = RuntimeError::DeadlineExceeded {
                    after: info.deadline_after,
                };
                wakers.extend(Self::finish(entry, CallOutcome::Failed(error)));
                cancellers.extend(entry.canceller.take());
                expired.push(info);
            }
        }
        cancellers.iter().for_each(|c| {
            c.cancel();
        });
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Fails every call to `peer` with `error`; returns how many.
    pub(crate) fn fail_peer(&self, peer: Rank, error: &RuntimeError) -> usize {
        self.fail_where(|info| info.peer == peer, |_| error.clone(), &mut Vec::new())
    }

    /// Fails every pending call with the error `make` builds, appending
    /// their identities to `failed`; returns how many.
    pub(crate) fn fail_all(
        &self,
        make: impl Fn(&CallInfo) -> RuntimeError,
        failed: &mut Vec<CallInfo>,
    ) -> usize {
        self.fail_where(|_| true, make, failed)
    }

    fn fail_where(
        &self,
        select: impl Fn(&CallInfo) -> bool,
        make: impl Fn(&CallInfo) -> RuntimeError,
        failed: &mut Vec<CallInfo>,
    ) -> usize {
        let mut wakers = Vec::new();
        let mut cancellers = Vec::new();
        let mut count = 0;
        {
            let mut inner = self.lock();
            let Inner { pending, slots, .. } = &mut *inner;
            for entry in slots.iter_mut() {
                let Some(info) = entry.info else { continue };
                if !matches!(entry.state, State::Waiting(_)) || !select(&info) {
                    continue;
                }
                pending.remove(info.call.request);
                wakers.extend(Self::finish(entry, CallOutcome::Failed(make(&info))));
                cancellers.extend(entry.canceller.take());
                failed.push(info);
                count += 1;
            }
        }
        cancellers.iter().for_each(|c| {
            c.cancel();
        });
        wakers.into_iter().for_each(Waker::wake);
        count
    }

    /// Calls waiting for an outcome.
    pub(crate) fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    /// Slots in use: waiting calls plus finished ones whose future has not
    /// taken the outcome yet.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.capacity - self.lock().free.len()
    }

    /// The earliest deadline of a waiting call.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.lock().pending.next_deadline()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

impl std::fmt::Debug for Calls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Calls")
            .field("pending", &self.pending())
            .field("capacity", &self.capacity)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dinah_core::{ActionId, DomainId, WorldSize};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct CountingWaker(AtomicUsize);
    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn info(request: u64, peer: Rank) -> CallInfo {
        CallInfo {
            peer,
            call: Call {
                request: RequestId::new(request).unwrap(),
                action: ActionId::new(1).unwrap(),
                domain: DomainId::new(1).unwrap(),
                trace: None,
            },
            deadline_after: Duration::from_secs(1),
        }
    }

    fn peer(n: u32) -> Rank {
        WorldSize::new(4).unwrap().rank(n).unwrap()
    }

    #[test]
    fn complete_wakes_and_poll_takes_the_outcome_once() {
        let calls = Calls::new(2);
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counter));
        let mut cx = Context::from_waker(&waker);
        let ticket = calls.begin(info(1, peer(1)), Instant::MAX).unwrap();
        assert!(calls.poll(ticket, &mut cx).is_pending());
        calls
            .complete(RequestId::new(1).unwrap(), |_| {
                CallOutcome::Failed(RuntimeError::Cancelled)
            })
            .unwrap();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert!(matches!(
            calls.poll(ticket, &mut cx),
            Poll::Ready(CallOutcome::Failed(RuntimeError::Cancelled))
        ));
        assert_eq!(calls.in_use(), 0);
        // A late result is reported, never resurrecting the call.
        let late = calls.complete(RequestId::new(1).unwrap(), |_| {
            CallOutcome::Failed(RuntimeError::Cancelled)
        });
        assert!(late.is_err());
    }

    #[test]
    fn a_full_table_refuses_with_resource_exhaustion() {
        let calls = Calls::new(1);
        calls.begin(info(1, peer(1)), Instant::MAX).unwrap();
        let error = calls.begin(info(2, peer(1)), Instant::MAX).unwrap_err();
        assert!(matches!(
            error,
            RuntimeError::ResourceExhausted {
                limit: LimitField::MaxPendingCalls,
                side: Side::Local
            }
        ));
    }

    #[test]
    fn abandon_frees_the_slot_and_reports_waiting_calls() {
        let calls = Calls::new(1);
        let ticket = calls.begin(info(1, peer(1)), Instant::MAX).unwrap();
        assert!(calls.abandon(ticket).is_some());
        assert_eq!(calls.pending(), 0);
        // The stale ticket is harmless.
        assert!(calls.abandon(ticket).is_none());
        let again = calls.begin(info(2, peer(1)), Instant::MAX).unwrap();
        assert_ne!(again, ticket);
    }

    #[test]
    fn expiry_and_peer_failure_fail_exactly_the_right_calls() {
        let calls = Calls::new(4);
        let now = Instant::from_nanos(100);
        calls
            .begin(info(1, peer(1)), Instant::from_nanos(50))
            .unwrap();
        calls
            .begin(info(2, peer(2)), Instant::from_nanos(500))
            .unwrap();
        calls.begin(info(3, peer(2)), Instant::MAX).unwrap();
        let mut expired = Vec::new();
        calls.expire(now, 10, &mut expired);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].call.request.get(), 1);
        let error = RuntimeError::Cancelled;
        assert_eq!(calls.fail_peer(peer(2), &error), 2);
        assert_eq!(calls.pending(), 0);
        assert_eq!(calls.in_use(), 3, "outcomes wait for their futures");
    }
}
