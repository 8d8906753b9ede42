//! The caller side: calls this rank issued and still waits for.
//!
//! One bounded table shared by every client thread and the owner thread:
//! the core [`PendingTable`] (request ID to slot, deadline order) plus a
//! fixed array of slots, each holding the call's identity, its waker and,
//! once it finished, its outcome. Both are sized once from
//! `max_pending_calls`; a full table refuses new calls.
//!
//! The table also hands out the request IDs: under its lock, so that each
//! target's IDs follow the order in which the calls reach the transport
//! (see [`RequestSequencer`]). [`Calls::begin`] takes the next ID, records
//! the call and sends it in one critical section; a send the transport
//! refuses gives the ID back.
//!
//! A [`Ticket`] (slot index plus generation) names a call from its future;
//! the generation makes a stale ticket harmless after the slot is reused.
//! No user code runs under the lock, and wakers are woken after it is
//! released.
//!
//! Every change to the pending table publishes the table's earliest
//! deadline in an atomic (on release of the lock, or at once when a new
//! call is due before all others), so the owner's checks that run every round of progress
//! (anything to expire? how long may the owner wait?) read one atomic
//! instead of taking the lock. A call begun on another thread meanwhile
//! is seen at the next round: the client that began it has woken the
//! owner anyway.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah_core::wire::{Call, Header};
use dinah_core::{
    Instant, LateResult, PendingSlot, PendingTable, Rank, RequestId, RequestSequencer, WorldSize,
};

use crate::domain::JobCanceller;
use crate::runtime::error::RuntimeError;

/// How a call ended, as delivered to its future.
pub(crate) enum CallOutcome {
    /// A result frame, validated into `header` when it arrived (or encoded
    /// by this rank's own job): the future decodes the output.
    Frame { header: Header, frame: Vec<u8> },
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
    /// The next request ID to each target.
    ids: RequestSequencer<Box<[u64]>>,
}

/// Why [`Calls::begin`] did not record a call.
#[derive(Debug)]
pub(crate) enum BeginError<E> {
    /// Every slot of the table is taken.
    Full,
    /// This rank's request IDs to the target are used up.
    Exhausted,
    /// The send refused the call (the call is forgotten, its ID unused).
    Send(E),
}

pub(crate) struct Calls {
    inner: Mutex<Inner>,
    /// The earliest deadline of a waiting call in nanoseconds
    /// ([`NO_DEADLINE`] if none), as of the last release of the lock.
    earliest: AtomicU64,
    capacity: usize,
}

/// What [`Calls::earliest`] holds while no call is waiting (or only calls
/// whose deadline is [`Instant::MAX`], which never passes).
const NO_DEADLINE: u64 = u64::MAX;

/// The lock on a [`Calls`] table; releasing it publishes the earliest
/// deadline (before the mutex itself is released: fields drop after
/// `drop` runs).
struct Locked<'a> {
    inner: MutexGuard<'a, Inner>,
    earliest: &'a AtomicU64,
}

impl Deref for Locked<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let earliest = self
            .inner
            .pending
            .next_deadline()
            .map_or(NO_DEADLINE, Instant::as_nanos);
        if self.earliest.load(Ordering::Relaxed) != earliest {
            self.earliest.store(earliest, Ordering::Release);
        }
    }
}

impl Calls {
    /// A table for `capacity` calls (non-zero, at most the core tables'
    /// maximum: validated limits guarantee both) to ranks of `world`.
    pub(crate) fn new(capacity: usize, world: WorldSize) -> Self {
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
        let counters = vec![0; world.get() as usize].into_boxed_slice();
        let ids = RequestSequencer::with_storage(counters, world)
            .expect("one counter per rank of the world");
        Self {
            inner: Mutex::new(Inner {
                pending,
                slots,
                free,
                ids,
            }),
            earliest: AtomicU64::new(NO_DEADLINE),
            capacity,
        }
    }

    /// The lock, for reads and for changes that leave the pending table's
    /// earliest deadline as it is (or publish it themselves, as
    /// [`begin`](Self::begin) does): nothing published on release.
    fn lock_slots(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock, publishing the earliest deadline when released.
    fn lock(&self) -> Locked<'_> {
        // Nothing panics while holding the lock; recover the data if a
        // panic elsewhere ever poisoned it.
        Locked {
            inner: self.inner.lock().unwrap_or_else(PoisonError::into_inner),
            earliest: &self.earliest,
        }
    }

    /// Records a new call with `deadline` under the next request ID to
    /// `info.peer`, and calls `send` with that ID while the table is still
    /// locked, so that the IDs to each target follow send order. If `send`
    /// refuses, nothing is recorded and the ID goes to the next call.
    /// Returns the call's ticket and ID (`info.call.request` is replaced).
    ///
    /// `send` runs under the table's lock: it must be short and must not
    /// touch the table (hand a frame to the transport without waking
    /// anyone; wake after this returns).
    pub(crate) fn begin<E>(
        &self,
        mut info: CallInfo,
        deadline: Instant,
        send: impl FnOnce(RequestId) -> Result<(), E>,
    ) -> Result<(Ticket, RequestId), BeginError<E>> {
        // A new call changes the earliest deadline only if it is due
        // before every waiting one: published below, not on release.
        let mut guard = self.lock_slots();
        let inner = &mut *guard;
        let id = inner
            .ids
            .peek(info.peer)
            .map_err(|_| BeginError::Exhausted)?;
        let Some(slot) = inner.free.pop() else {
            return Err(BeginError::Full);
        };
        if inner.pending.insert(id, deadline, slot).is_err() {
            inner.free.push(slot);
            return Err(BeginError::Full);
        }
        if let Err(refused) = send(id) {
            inner.pending.remove(id);
            inner.free.push(slot);
            return Err(BeginError::Send(refused));
        }
        inner.ids.commit(info.peer);
        let due = deadline.as_nanos();
        if due < self.earliest.load(Ordering::Relaxed) {
            self.earliest.store(due, Ordering::Release);
        }
        info.call.request = id;
        let entry = &mut inner.slots[slot as usize];
        entry.info = Some(info);
        entry.state = State::Waiting(None);
        let ticket = Ticket {
            slot,
            generation: entry.generation,
        };
        Ok((ticket, id))
    }

    /// Polls the call: its outcome once it finished (freeing the slot),
    /// otherwise registers the waker.
    pub(crate) fn poll(&self, ticket: Ticket, cx: &mut Context<'_>) -> Poll<CallOutcome> {
        let mut inner = self.lock_slots();
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
        let mut inner = self.lock_slots();
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
        let inner = self.lock_slots();
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
        // Nothing due (as of the last release of the lock): no lock.
        if now.as_nanos() < self.earliest.load(Ordering::Acquire) {
            return;
        }
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
        self.lock_slots().pending.len()
    }

    /// Slots in use: waiting calls plus finished ones whose future has not
    /// taken the outcome yet.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.capacity - self.lock_slots().free.len()
    }

    /// The earliest deadline of a waiting call, as of the last release of
    /// the lock (without taking it). A deadline of [`Instant::MAX`], which
    /// never passes, counts as none.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let earliest = self.earliest.load(Ordering::Acquire);
        (earliest != NO_DEADLINE).then(|| Instant::from_nanos(earliest))
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
mod tests;
