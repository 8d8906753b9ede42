//! Calls waiting for room in their lane: held with their frame, released
//! in order as the lane's calls end.
//!
//! Releasing happens under the table's lock, on whichever thread ended a
//! call of the lane (the owner, nearly always): a call to a peer is
//! stamped with the next request ID and handed to the transport there and
//! then, so IDs keep following send order; a call to this rank is stamped
//! and queued for the owner to submit to its domain outside the lock
//! ([`Calls::take_local_releases`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Waker;

use dinah_core::wire::{Channel, stamp_request_id};

use crate::transport::Frame;
use dinah_core::{Instant, LimitField, Rank, RequestId};

use super::{BeginError, CallInfo, CallOutcome, Calls, Entry, Inner, State, Ticket, Wakers};
use crate::runtime::caller::flow::LaneId;
use crate::runtime::error::{RuntimeError, Side};
use crate::transport::{PeerStatus, SendErrorKind};

/// How releasing a waiting call went.
enum Released {
    /// Sent, or queued for submission to this rank.
    Sent,
    /// The transport could not take it now: it waits at the front again.
    Blocked,
}

/// A waiting call's frame and its key in the waiting table.
pub(super) struct Waiting {
    frame: Frame,
    key: RequestId,
    deadline: Instant,
}

/// A call to this rank, recorded under its request ID, to submit to its
/// domain.
#[derive(Debug)]
pub(crate) struct LocalRelease {
    pub(crate) ticket: Ticket,
    /// Its identity, with its request ID.
    pub(crate) info: CallInfo,
    pub(crate) deadline: Instant,
    /// Its request frame, stamped.
    pub(crate) frame: Frame,
}

impl Calls {
    /// Records a call that waits for room in `lane`, behind those already
    /// waiting there.
    pub(super) fn hold(
        &self,
        inner: &mut Inner,
        info: CallInfo,
        deadline: Instant,
        frame: Frame,
        lane: LaneId,
    ) -> Result<Ticket, BeginError> {
        let bytes = frame.len() as u64;
        if inner.held_bytes.saturating_add(bytes) > self.held_budget {
            return Err(BeginError::WaitingBytes);
        }
        let Some(slot) = inner.free.pop() else {
            return Err(BeginError::Full);
        };
        let key = RequestId::new(inner.next_key).map_err(|_| BeginError::Exhausted)?;
        if inner.held.insert(key, deadline, slot).is_err() {
            inner.free.push(slot);
            return Err(BeginError::Full);
        }
        inner.next_key += 1;
        inner.held_bytes += bytes;
        inner.counts.waited += 1;
        inner.flow.push(lane, slot);
        let entry = &mut inner.slots[slot as usize];
        entry.info = Some(info);
        entry.state = State::Waiting(None);
        entry.lane = Some(lane);
        entry.waiting = Some(Waiting {
            frame,
            key,
            deadline,
        });
        Ok(Ticket {
            slot,
            generation: entry.generation,
        })
    }

    /// Takes the call in `slot` out of the waiting calls, if it waits
    /// there; returns whether it did.
    pub(super) fn unhold(inner: &mut Inner, slot: u32) -> bool {
        let entry = &mut inner.slots[slot as usize];
        let (Some(waiting), Some(lane)) = (entry.waiting.take(), entry.lane) else {
            return false;
        };
        inner.held.remove(waiting.key);
        inner.held_bytes -= waiting.frame.len() as u64;
        inner.flow.unlink(lane, slot);
        crate::transport::frame_buffers::give_frame(waiting.frame);
        true
    }

    /// Fails the waiting call in `slot` with the error `make` builds (it
    /// was never sent: nothing to cancel); returns its waker.
    pub(super) fn fail_waiting(
        inner: &mut Inner,
        slot: u32,
        make: impl Fn(&CallInfo) -> RuntimeError,
    ) -> Option<Waker> {
        let info = inner.slots[slot as usize].info?;
        Self::unhold(inner, slot);
        inner.finish(slot, CallOutcome::Failed(make(&info)))
    }

    /// Sends (or queues for submission) the oldest waiting calls of `lane`
    /// while the lane has room and the transport takes them; wakers of
    /// calls that fail on the way go to `wake`.
    #[inline]
    pub(super) fn release_lane(&self, inner: &mut Inner, lane: LaneId, wake: &mut Wakers) {
        // The common case, checked where the call ends: nothing waits.
        if inner.flow.has_waiting(lane) {
            self.release_waiting(inner, lane, wake);
        }
    }

    /// [`release_lane`](Self::release_lane) once a call waits.
    fn release_waiting(&self, inner: &mut Inner, lane: LaneId, wake: &mut Wakers) {
        let peer = inner.flow.peer(lane);
        let window = inner.flow.window(&self.handle, peer);
        while inner.flow.below(lane, window) {
            let Some(slot) = inner.flow.pop(lane) else {
                break;
            };
            match self.release(inner, lane, slot) {
                Ok(Released::Sent) => {}
                Ok(Released::Blocked) => {
                    // The transport's lane is full: the call waits at the
                    // front again, and the owner retries every round.
                    self.stalled.store(true, Ordering::Release);
                    break;
                }
                Err(error) => {
                    self.release_failures.fetch_add(1, Ordering::Relaxed);
                    wake.push(inner.finish(slot, CallOutcome::Failed(error)));
                }
            }
        }
    }

    /// Sends the waiting call in `slot` (already out of its lane's queue)
    /// under the next request ID, or queues it for submission if it is to
    /// this rank. A send the transport cannot take now puts the call back
    /// at the front of its lane, unchanged.
    fn release(
        &self,
        inner: &mut Inner,
        lane: LaneId,
        slot: u32,
    ) -> Result<Released, RuntimeError> {
        let entry = &mut inner.slots[slot as usize];
        let (Some(waiting), Some(mut info)) = (entry.waiting.take(), entry.info) else {
            return Err(RuntimeError::Cancelled);
        };
        inner.held.remove(waiting.key);
        inner.held_bytes -= waiting.frame.len() as u64;
        let peer = info.peer;
        let local = peer == self.handle.rank();
        match self.handle.peer_status(peer) {
            PeerStatus::Leaving if !local => return Err(RuntimeError::ShuttingDown),
            PeerStatus::Down if !local => return Err(refused(&self.handle, peer, None)),
            _ => {}
        }
        let exhausted = RuntimeError::ResourceExhausted {
            limit: LimitField::MaxPendingCalls,
            side: Side::Local,
        };
        let id = inner.ids.peek(peer).map_err(|_| exhausted.clone())?;
        if inner
            .pending
            .insert(id, waiting.deadline, Entry::Call(slot))
            .is_err()
        {
            return Err(exhausted);
        }
        let Waiting {
            mut frame,
            key,
            deadline,
        } = waiting;
        stamp_request_id(frame.head_mut(), id).expect("a waiting call keeps its request frame");
        if local {
            info.call.request = id;
            inner.local.push(LocalRelease {
                ticket: Ticket {
                    slot,
                    generation: inner.slots[slot as usize].generation,
                },
                info,
                deadline,
                frame,
            });
            self.local_ready.store(true, Ordering::Release);
            // Released on a client thread (a call abandoned or refused
            // there), the owner must come and submit it.
            self.handle.wakeup().wake();
        } else {
            let bytes = frame.len() as u64;
            match self.handle.try_send_quiet(peer, Channel::Action, frame) {
                Ok(()) => {
                    self.released_bytes.fetch_add(bytes, Ordering::Relaxed);
                }
                Err(no)
                    if matches!(
                        no.kind(),
                        SendErrorKind::QueueFull { .. } | SendErrorKind::RetainedBytes { .. }
                    ) =>
                {
                    inner.pending.remove(id);
                    let frame = no.into_inner();
                    // The key is free: nothing else took it meanwhile.
                    let _ = inner.held.insert(key, deadline, slot);
                    inner.held_bytes += frame.len() as u64;
                    inner.slots[slot as usize].waiting = Some(Waiting {
                        frame,
                        key,
                        deadline,
                    });
                    inner.flow.push_front(lane, slot);
                    return Ok(Released::Blocked);
                }
                Err(no) => {
                    inner.pending.remove(id);
                    return Err(refused(&self.handle, peer, Some(no.kind())));
                }
            }
            info.call.request = id;
        }
        inner.ids.commit(peer);
        inner.flow.take(lane);
        inner.slots[slot as usize].info = Some(info);
        Ok(Released::Sent)
    }

    /// Retries the lanes whose release the transport refused (its lane
    /// was full), if any: the owner, every round. Returns whether it
    /// tried.
    pub(crate) fn retry_stalled(&self) -> bool {
        // A load first: the flag is rarely set, and a swap every round
        // would be a locked instruction every round.
        if !self.stalled.load(Ordering::Relaxed) || !self.stalled.swap(false, Ordering::Acquire) {
            return false;
        }
        let mut wake = Wakers::default();
        {
            let mut inner = self.lock();
            let lanes: Vec<LaneId> = inner.flow.all_waiting().collect();
            for lane in lanes {
                self.release_lane(&mut inner, lane, &mut wake);
            }
        }
        wake.wake();
        true
    }

    /// `peer`'s window may have grown (its hello arrived): releases what
    /// its lanes have room for.
    pub(crate) fn pump_peer(&self, peer: Rank) {
        let mut wake = Wakers::default();
        {
            let mut inner = self.lock();
            let lanes: Vec<LaneId> = inner.flow.waiting_lanes(peer).collect();
            for lane in lanes {
                self.release_lane(&mut inner, lane, &mut wake);
            }
        }
        wake.wake();
    }

    /// Moves the released calls to this rank into `out`, for the owner to
    /// submit.
    pub(crate) fn take_local_releases(&self, out: &mut Vec<LocalRelease>) {
        if self.local_ready.load(Ordering::Relaxed)
            && self.local_ready.swap(false, Ordering::Acquire)
        {
            out.append(&mut self.lock_slots().local);
        }
    }

    /// The call to this rank `request` (of `ticket`) could not be
    /// submitted: forgets it (its future is told by the caller), or, if
    /// `error` is given, fails it with that. If it had already failed here
    /// (and was owed), its debt ends: it never ran. Either way its lane's
    /// next waiting call goes out.
    pub(crate) fn unsubmitted(
        &self,
        ticket: Ticket,
        request: RequestId,
        error: Option<RuntimeError>,
    ) {
        let mut wake = Wakers::default();
        {
            let mut inner = self.lock();
            let lane = match inner.pending.get(request).copied() {
                Some(Entry::Call(slot)) if slot == ticket.slot => {
                    inner.pending.remove(request);
                    let lane = inner.slots[slot as usize].lane;
                    match error {
                        Some(error) => wake.push(inner.finish(slot, CallOutcome::Failed(error))),
                        None => inner.release_slot(slot),
                    }
                    lane
                }
                Some(Entry::Owed(lane)) => {
                    inner.pending.remove(request);
                    inner.owed -= 1;
                    Some(lane)
                }
                _ => None,
            };
            if let Some(lane) = lane {
                inner.flow.give(lane);
                self.release_lane(&mut inner, lane, &mut wake);
            }
        }
        wake.wake();
    }

    /// Bytes of waiting calls sent, and waiting calls that failed when
    /// released (the transport refused them, their peer was gone), since
    /// the last call (for the metrics).
    pub(crate) fn take_release_counts(&self) -> (u64, u64) {
        let take = |counter: &AtomicU64| match counter.load(Ordering::Relaxed) {
            0 => 0,
            _ => counter.swap(0, Ordering::Relaxed),
        };
        (take(&self.released_bytes), take(&self.release_failures))
    }

    /// Are calls to this rank released and waiting to be submitted?
    pub(crate) fn has_local_releases(&self) -> bool {
        self.local_ready.load(Ordering::Relaxed)
    }
}

/// The error of a released call the transport refused (`None`: the peer
/// is down).
fn refused(
    handle: &crate::transport::TransportHandle,
    peer: Rank,
    kind: Option<SendErrorKind>,
) -> RuntimeError {
    let exhausted = |limit| RuntimeError::ResourceExhausted {
        limit,
        side: Side::Local,
    };
    match kind {
        Some(SendErrorKind::QueueFull { .. }) => exhausted(LimitField::MaxSendTickets),
        Some(SendErrorKind::RetainedBytes { .. }) => exhausted(LimitField::MaxRetainedBytes),
        None | Some(SendErrorKind::PeerDown { .. }) => {
            crate::runtime::caller::issue::down(handle, peer)
        }
        Some(SendErrorKind::NoSuchRank { .. }) => RuntimeError::NoSuchRank { rank: peer },
        Some(_) => RuntimeError::ShuttingDown,
    }
}
