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
//! Calls are paced per (target, domain) lane (see `flow.rs`): a call
//! beyond its lane's window **waits** in the table, with its encoded
//! frame and without a request ID, in a second deadline table of its own
//! (`calls/waiting.rs`). When a call of the lane ends, the owner sends the
//! oldest waiting one, stamping its ID then. A call that failed here while
//! its target may still run it stays in the pending table as **owed**,
//! counted against its lane, until its late response arrives or its owed
//! deadline passes.
//!
//! A [`Ticket`] (slot index plus generation) names a call from its future;
//! the generation makes a stale ticket harmless after the slot is reused.
//! No user code runs under the lock, and wakers are woken after it is
//! released.
//!
//! Every change to the deadline tables publishes their earliest deadline
//! in an atomic (on release of the lock, or at once when a new call is
//! due before all others), so the owner's checks that run every round of
//! progress (anything to expire? how long may the owner wait?) read one
//! atomic instead of taking the lock. A call begun on another thread
//! meanwhile is seen at the next round: the client that began it has
//! woken the owner anyway.

mod begin;
mod ending;
mod locked;
mod waiting;
mod wakers;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah_core::wire::{Call, Header};
use dinah_core::{
    DomainId, Instant, LateResult, MAX_TABLE_CAPACITY, PendingSlot, PendingTable, Rank, RequestId,
    RequestSequencer,
};

use super::flow::{Flow, LaneId};
use crate::domain::JobCanceller;
use crate::runtime::error::RuntimeError;
use crate::runtime::stats::FlowStats;
use crate::transport::Frame;
use crate::transport::TransportHandle;

pub(crate) use begin::{BeginError, Begun, Pacing};
use locked::NO_DEADLINE;
pub(crate) use waiting::LocalRelease;
use waiting::Waiting;
use wakers::Wakers;

/// How a call ended, as delivered to its future.
pub(crate) enum CallOutcome {
    /// A result frame, validated into `header` when it arrived (or encoded
    /// by this rank's own job): the future decodes the output.
    Frame { header: Header, frame: Frame },
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
    /// The lane the call is paced in.
    lane: Option<LaneId>,
    /// The call's frame while it waits for room in its lane.
    waiting: Option<Waiting>,
}

/// What the pending table holds per request ID.
#[derive(Debug, Clone, Copy)]
enum Entry {
    /// A call waiting for its outcome, in this slot.
    Call(u32),
    /// A call this rank no longer waits for whose target may still be
    /// running it, counted against this lane.
    Owed(LaneId),
}

struct Inner {
    pending: PendingTable<Entry, Box<[PendingSlot<Entry>]>>,
    /// Calls waiting for room in their lane, by their waiting key.
    held: PendingTable<u32, Box<[PendingSlot<u32>]>>,
    /// The next waiting key.
    next_key: u64,
    slots: Box<[Slot]>,
    free: Vec<u32>,
    /// The next request ID to each target.
    ids: RequestSequencer<Box<[u64]>>,
    flow: Flow,
    /// Owed entries in `pending`.
    owed: usize,
    /// Bytes of the frames of waiting calls.
    held_bytes: u64,
    /// Waiting calls to this rank released by the owner, to submit.
    local: Vec<LocalRelease>,
    counts: FlowCounts,
}

/// Counts of the pacing of calls since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct FlowCounts {
    /// Calls that waited for room in their lane.
    waited: u64,
    /// Calls refused at once because their lane was full
    /// ([`Pacing::FailFast`]).
    refused_busy: u64,
    /// Owed calls whose late response never came (their owed deadline
    /// passed).
    owed_expired: u64,
}

/// A call its caller stopped waiting for ([`Calls::abandon`]).
#[derive(Debug)]
pub(crate) enum Abandoned {
    /// It was sent: its target may run it, so a cancellation should
    /// follow.
    Sent(CallInfo),
    /// It was still waiting for room: never sent, nothing to cancel.
    Unsent,
}

pub(crate) struct Calls {
    inner: Mutex<Inner>,
    /// The earliest deadline in the tables in nanoseconds ([`NO_DEADLINE`]
    /// if none), as of the last release of the lock.
    earliest: AtomicU64,
    capacity: usize,
    handle: TransportHandle,
    /// The most bytes waiting calls' frames may hold.
    held_budget: u64,
    /// Set when `Inner::local` has calls to submit.
    local_ready: AtomicBool,
    /// Bytes of waiting calls' frames sent since the owner last took them.
    released_bytes: AtomicU64,
    /// Waiting calls that failed when released, since the owner last took
    /// them.
    release_failures: AtomicU64,
    /// Set when the transport refused a released call for now: the owner
    /// retries the waiting lanes.
    stalled: AtomicBool,
}

impl Inner {
    fn next_deadline(&self) -> Option<Instant> {
        match (self.pending.next_deadline(), self.held.next_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Finishes the call in `slot` with `outcome`; returns its waker.
    /// Inlined so that the outcome is built in its slot rather than
    /// built, then copied in.
    #[inline]
    fn finish(&mut self, slot: u32, outcome: CallOutcome) -> Option<Waker> {
        let entry = &mut self.slots[slot as usize];
        entry.canceller = None;
        match std::mem::replace(&mut entry.state, State::Ready(outcome)) {
            State::Waiting(waker) => waker,
            _ => None,
        }
    }

    fn release_slot(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        entry.generation = entry.generation.wrapping_add(1);
        entry.info = None;
        entry.state = State::Vacant;
        entry.canceller = None;
        entry.lane = None;
        entry.waiting = None;
        self.free.push(slot);
    }

    /// Keeps the sent call `id` of `lane` counted until its late response
    /// arrives or `until`; if the owed entries already take the table's
    /// spare half (the other half is for calls waiting for an outcome),
    /// its count ends now. Returns the lane if its count ended.
    fn owe(&mut self, id: RequestId, lane: LaneId, until: Option<Instant>) -> Option<LaneId> {
        let spare = self.pending.capacity().saturating_sub(self.slots.len());
        let Some(until) = until.filter(|_| self.owed < spare) else {
            return Some(lane);
        };
        match self.pending.insert(id, until, Entry::Owed(lane)) {
            Ok(()) => {
                self.owed += 1;
                None
            }
            Err(_) => Some(lane),
        }
    }
}

/// How long a call that failed here at `failed` stays owed: as long again
/// as its deadline, `after`. A target that honours the deadline it was
/// given has long finished the job by then; only its response can be
/// missing (dropped because nobody waited for it any more).
fn owed_until(failed: Instant, after: Duration) -> Instant {
    failed.checked_add(after).unwrap_or(Instant::MAX)
}

impl Calls {
    /// A table for `capacity` calls (non-zero, at most the core tables'
    /// maximum: validated limits guarantee both) paced per target rank and
    /// per domain of `domains`, sent through `handle`, whose waiting
    /// frames hold at most `held_budget` bytes.
    pub(crate) fn new(
        capacity: usize,
        handle: TransportHandle,
        domains: Vec<DomainId>,
        held_budget: u64,
    ) -> Self {
        let world = handle.world();
        // Room for every call plus as many owed ones.
        let entries = capacity.saturating_mul(2).min(MAX_TABLE_CAPACITY);
        let storage: Box<[PendingSlot<Entry>]> = (0..entries).map(|_| PendingSlot::EMPTY).collect();
        let pending =
            PendingTable::with_storage(storage).expect("validated limits size the pending table");
        let storage: Box<[PendingSlot<u32>]> = (0..capacity).map(|_| PendingSlot::EMPTY).collect();
        let held =
            PendingTable::with_storage(storage).expect("validated limits size the pending table");
        let slots = (0..capacity)
            .map(|_| Slot {
                generation: 0,
                info: None,
                state: State::Vacant,
                canceller: None,
                lane: None,
                waiting: None,
            })
            .collect();
        let free = (0..capacity as u32).rev().collect();
        let counters = vec![0; world.get() as usize].into_boxed_slice();
        let ids = RequestSequencer::with_storage(counters, world)
            .expect("one counter per rank of the world");
        Self {
            inner: Mutex::new(Inner {
                pending,
                held,
                next_key: 1,
                slots,
                free,
                ids,
                flow: Flow::new(domains, world, capacity),
                owed: 0,
                held_bytes: 0,
                local: Vec::new(),
                counts: FlowCounts::default(),
            }),
            earliest: AtomicU64::new(NO_DEADLINE),
            capacity,
            handle,
            held_budget,
            local_ready: AtomicBool::new(false),
            released_bytes: AtomicU64::new(0),
            release_failures: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
        }
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
                inner.release_slot(ticket.slot);
                Poll::Ready(outcome)
            }
            State::Vacant => Poll::Ready(CallOutcome::Failed(RuntimeError::Cancelled)),
        }
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

    /// The future was dropped: forgets the call, if it was still waiting
    /// for its outcome, after cancelling a local call's job. A sent call
    /// stays owed to its lane until its late response arrives or as long
    /// again as its deadline has passed.
    pub(crate) fn abandon(&self, ticket: Ticket) -> Option<Abandoned> {
        let mut wake = Wakers::default();
        let (abandoned, canceller) = {
            let mut inner = self.lock();
            let entry = inner.slots.get_mut(ticket.slot as usize)?;
            if entry.generation != ticket.generation {
                return None;
            }
            let waiting = matches!(entry.state, State::Waiting(_));
            let (info, lane) = (entry.info, entry.lane);
            let canceller = entry.canceller.take();
            let abandoned = match info {
                Some(_) if waiting && Self::unhold(&mut inner, ticket.slot) => {
                    Some(Abandoned::Unsent)
                }
                Some(info) if waiting => {
                    let id = info.call.request;
                    let until = inner.pending.deadline(id);
                    inner.pending.remove(id);
                    let until = until.map(|at| owed_until(at, info.deadline_after));
                    if let Some(done) = lane.and_then(|lane| inner.owe(id, lane, until)) {
                        inner.flow.give(done);
                        self.release_lane(&mut inner, done, &mut wake);
                    }
                    Some(Abandoned::Sent(info))
                }
                _ => None,
            };
            inner.release_slot(ticket.slot);
            (abandoned, canceller)
        };
        if let (Some(_), Some(canceller)) = (&abandoned, canceller) {
            canceller.cancel();
        }
        wake.wake();
        abandoned
    }

    /// Is the call still waiting for its outcome?
    pub(crate) fn is_waiting(&self, ticket: Ticket) -> bool {
        let inner = self.lock_slots();
        inner.slots.get(ticket.slot as usize).is_some_and(|entry| {
            entry.generation == ticket.generation && matches!(entry.state, State::Waiting(_))
        })
    }

    /// Finishes `request` with the outcome `make` builds from its
    /// identity; its lane's next waiting call goes out. (The caller has
    /// checked that the answer came from the request's target.)
    ///
    /// # Errors
    ///
    /// [`LateResult`] if `request` is not pending (expired, dropped, or
    /// already finished); an owed call's count ends, nothing else changes.
    pub(crate) fn complete(
        &self,
        request: RequestId,
        make: impl FnOnce(&CallInfo) -> CallOutcome,
    ) -> Result<(), LateResult> {
        let mut wake = Wakers::default();
        let result = {
            let mut inner = self.lock();
            let (lane, result) = match inner.pending.remove(request) {
                Some(Entry::Call(slot)) => {
                    let entry = &inner.slots[slot as usize];
                    let info = entry.info.expect("a pending slot has its call");
                    let lane = entry.lane;
                    wake.push(inner.finish(slot, make(&info)));
                    (lane, Ok(()))
                }
                Some(Entry::Owed(lane)) => {
                    inner.owed -= 1;
                    (Some(lane), Err(LateResult { id: request }))
                }
                None => (None, Err(LateResult { id: request })),
            };
            if let Some(lane) = lane {
                inner.flow.give(lane);
                self.release_lane(&mut inner, lane, &mut wake);
            }
            result
        };
        wake.wake();
        result
    }

    /// Calls waiting for an outcome (sent, or waiting for room).
    pub(crate) fn pending(&self) -> usize {
        let inner = self.lock_slots();
        inner.pending.len() - inner.owed + inner.held.len()
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

    /// The pacing of calls so far.
    pub(crate) fn flow_stats(&self) -> FlowStats {
        let inner = self.lock_slots();
        FlowStats {
            waiting: inner.held.len(),
            waited: inner.counts.waited,
            refused_busy: inner.counts.refused_busy,
            owed: inner.owed,
            owed_expired: inner.counts.owed_expired,
        }
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
