//! Calls that end without an answer: by their deadline, because their
//! target went down, or all at once (shutdown, a failed transport).

use std::sync::atomic::Ordering;

use dinah_core::{Instant, Rank, RequestId};

use super::{CallInfo, CallOutcome, Calls, Entry, Inner, State, Wakers, owed_until};
use crate::runtime::error::RuntimeError;

impl Calls {
    /// Fails up to `max` calls whose deadline passed by `now` with
    /// `DeadlineExceeded`, earliest first, appending the identities of
    /// those that were sent to `expired` (for cancellations); returns how
    /// many that were never sent expired too. Owed calls whose owed
    /// deadline passed stop counting against their lane.
    pub(crate) fn expire(&self, now: Instant, max: usize, expired: &mut Vec<CallInfo>) -> usize {
        // Nothing due (as of the last release of the lock): no lock.
        if now.as_nanos() < self.earliest.load(Ordering::Acquire) {
            return 0;
        }
        let mut unsent = 0;
        let mut wake = Wakers::default();
        let mut cancellers = Vec::new();
        {
            let mut inner = self.lock();
            for _ in 0..max {
                if let Some((id, entry)) = inner.pending.pop_expired(now) {
                    let lane = match entry {
                        Entry::Call(slot) => {
                            let entry = &mut inner.slots[slot as usize];
                            let info = entry.info.expect("a pending slot has its call");
                            let lane = entry.lane;
                            cancellers.extend(entry.canceller.take());
                            let error = RuntimeError::DeadlineExceeded {
                                after: info.deadline_after,
                            };
                            wake.push(inner.finish(slot, CallOutcome::Failed(error)));
                            expired.push(info);
                            let until = Some(owed_until(now, info.deadline_after));
                            lane.and_then(|lane| inner.owe(id, lane, until))
                        }
                        Entry::Owed(lane) => {
                            inner.owed -= 1;
                            inner.counts.owed_expired += 1;
                            Some(lane)
                        }
                    };
                    if let Some(lane) = lane {
                        inner.flow.give(lane);
                        self.release_lane(&mut inner, lane, &mut wake);
                    }
                } else if let Some((_, slot)) = inner.held.pop_expired(now) {
                    unsent += 1;
                    wake.push(Self::fail_waiting(&mut inner, slot, |info| {
                        RuntimeError::DeadlineExceeded {
                            after: info.deadline_after,
                        }
                    }));
                } else {
                    break;
                }
            }
        }
        cancellers.iter().for_each(|c| {
            c.cancel();
        });
        wake.wake();
        unsent
    }

    /// Fails every call to `peer` with `error` (it went down); returns
    /// how many.
    pub(crate) fn fail_peer(&self, peer: Rank, error: &RuntimeError) -> usize {
        self.fail_where(Some(peer), |_| error.clone(), &mut Vec::new())
    }

    /// Fails every call with the error `make` builds, appending the
    /// identities of those that were sent to `failed`; returns how many.
    pub(crate) fn fail_all(
        &self,
        make: impl Fn(&CallInfo) -> RuntimeError,
        failed: &mut Vec<CallInfo>,
    ) -> usize {
        self.fail_where(None, make, failed)
    }

    /// Fails the calls to `peer` (every call if `None`) and forgets their
    /// lanes' counts.
    fn fail_where(
        &self,
        peer: Option<Rank>,
        make: impl Fn(&CallInfo) -> RuntimeError,
        failed: &mut Vec<CallInfo>,
    ) -> usize {
        let mut wake = Wakers::default();
        let mut cancellers = Vec::new();
        let mut count = 0;
        {
            let mut inner = self.lock();
            for slot in 0..inner.slots.len() as u32 {
                let entry = &inner.slots[slot as usize];
                let Some(info) = entry.info else { continue };
                if !matches!(entry.state, State::Waiting(_))
                    || peer.is_some_and(|peer| peer != info.peer)
                {
                    continue;
                }
                count += 1;
                if entry.waiting.is_some() {
                    wake.push(Self::fail_waiting(&mut inner, slot, &make));
                    continue;
                }
                inner.pending.remove(info.call.request);
                cancellers.extend(inner.slots[slot as usize].canceller.take());
                wake.push(inner.finish(slot, CallOutcome::Failed(make(&info))));
                failed.push(info);
            }
            Self::forget_owed(&mut inner, peer);
            match peer {
                Some(peer) => inner.flow.reset_peer(peer),
                None => inner.flow.reset(),
            }
        }
        cancellers.iter().for_each(|c| {
            c.cancel();
        });
        wake.wake();
        count
    }

    /// Drops the owed entries of calls to `peer` (all if `None`).
    fn forget_owed(inner: &mut Inner, peer: Option<Rank>) {
        if inner.owed == 0 {
            return;
        }
        let owed: Vec<RequestId> = inner
            .pending
            .iter()
            .filter_map(|(id, _, entry)| match *entry {
                Entry::Owed(lane) if peer.is_none_or(|p| inner.flow.peer(lane) == p) => Some(id),
                _ => None,
            })
            .collect();
        for id in owed {
            inner.pending.remove(id);
            inner.owed -= 1;
        }
    }
}
