//! The barrier: every rank waits until all ranks have reached it.
//!
//! A dissemination barrier over the runtime's own action, [`Arrive`]. In
//! round `k` (`k = 0, 1, ...` while `2^k < n`), rank `r` tells rank
//! `r + 2^k` that it arrived, and waits until rank `r - 2^k` told it the
//! same (all modulo the world size `n`). After `ceil(log2 n)` rounds every
//! rank has heard, directly or through others, from every rank, so none
//! leaves before all arrived. Each round costs one call and one wait, and
//! the calls go through the serving path like any other: deduplicated,
//! bounded by the caller's deadline, failed with a transport error when
//! the peer is gone.
//!
//! Barriers are numbered per rank (epochs). A rank can be at most one
//! epoch ahead of another (to leave epoch `e` it must have heard from
//! every rank in `e`), so arrivals are kept in two sets of round bits, one
//! per epoch parity.

use std::future::poll_fn;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use dinah_core::{Instant, Rank, RuntimeState};

use super::caller::SpawnOptions;
use super::client::RuntimeClient;
use super::error::RuntimeError;
use super::hub::Hub;
use super::running::{self, RunningDeadline};
use crate::action::{
    Action, ActionError, CodecError, SegmentReader, SegmentWriter, WireValue, action_id, schema_id,
};

/// "Rank `origin` reached round `round` of barrier `epoch`": the runtime's
/// own action, registered on every rank (so it is part of the hello
/// fingerprint) and run on the owner thread.
pub(crate) struct Arrive {
    epoch: u64,
    round: u8,
}

impl Arrive {
    /// Records this arrival in `barriers` (the handler).
    ///
    /// # Errors
    ///
    /// As [`Barriers::record`].
    pub(crate) fn record(self, barriers: &Barriers) -> Result<(), ActionError> {
        barriers.record(self.epoch, self.round)
    }
}

impl WireValue for Arrive {
    const SCHEMA_ID: u64 = schema_id("dinah.barrier.Arrive/1");

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        (self.epoch, self.round).encode(out)
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let (epoch, round) = <(u64, u8)>::decode(input)?;
        Ok(Self { epoch, round })
    }
}

impl Action for Arrive {
    const ID: u128 = action_id("dinah.barrier.Arrive/1");
    type Output = ();
}

/// This rank's side of the barriers: the arrivals heard and the barrier in
/// progress, if any.
#[derive(Default)]
pub(crate) struct Barriers {
    state: Mutex<State>,
    /// The running barrier's deadline in nanoseconds, or 0: read by the
    /// owner on every round without the lock.
    deadline: RunningDeadline,
}

#[derive(Default)]
struct State {
    /// Barriers this rank has left (successfully or not).
    left: u64,
    /// Round bits heard, per epoch parity.
    arrived: [u64; 2],
    /// Whether a barrier is running here, and who waits for it.
    running: bool,
    waiter: Option<Waker>,
}

impl Barriers {
    /// Records an arrival for `(epoch, round)` from a peer and wakes the
    /// waiting barrier.
    ///
    /// # Errors
    ///
    /// An [`ActionError`] if the epoch is not this rank's current or next
    /// one, or the round was heard before: the ranks are out of step (they
    /// did not all call the barrier the same number of times, or a barrier
    /// failed on some of them).
    pub(crate) fn record(&self, epoch: u64, round: u8) -> Result<(), ActionError> {
        let mut state = self.lock();
        if epoch < state.left || epoch > state.left + 1 || round >= 64 {
            return Err(ActionError::new("barrier arrival out of step"));
        }
        let bits = &mut state.arrived[(epoch & 1) as usize];
        let bit = 1_u64 << round;
        if *bits & bit != 0 {
            return Err(ActionError::new("barrier arrival heard twice"));
        }
        *bits |= bit;
        running::wake(&mut state.waiter);
        Ok(())
    }

    /// Starts a barrier that must end by `deadline`; returns its epoch.
    fn begin(&self, deadline: Instant) -> Result<u64, RuntimeError> {
        let mut state = self.lock();
        if state.running {
            return Err(RuntimeError::BarrierInProgress);
        }
        state.running = true;
        self.deadline.set(deadline);
        Ok(state.left)
    }

    /// Ends the running barrier of `epoch`: its arrivals are forgotten, so
    /// the parity's bits are clean for epoch `epoch + 2`.
    fn end(&self, epoch: u64) {
        let mut state = self.lock();
        state.arrived[(epoch & 1) as usize] = 0;
        state.left = epoch + 1;
        state.running = false;
        state.waiter = None;
        self.deadline.clear();
    }

    /// Takes the arrival of `(epoch, round)` if it was heard; otherwise
    /// remembers `cx`'s waker.
    fn take_arrival(&self, epoch: u64, round: u8, cx: &Context<'_>) -> Poll<()> {
        let mut state = self.lock();
        let bits = &mut state.arrived[(epoch & 1) as usize];
        let bit = 1_u64 << round;
        if *bits & bit != 0 {
            *bits &= !bit;
            return Poll::Ready(());
        }
        running::remember(&mut state.waiter, cx);
        Poll::Pending
    }

    /// The running barrier's deadline, if any.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline.get()
    }

    /// Wakes the running barrier if its deadline passed by `now` (the
    /// owner, every round), so it fails even under an executor that polls
    /// only when woken.
    pub(crate) fn expire(&self, now: Instant) {
        if self.deadline.passed(now) {
            self.wake();
        }
    }

    /// Wakes the running barrier so it looks again (a peer went down).
    pub(crate) fn wake(&self) {
        running::wake(&mut self.lock().waiter);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Ends the barrier's epoch however the barrier ends (success, error, or
/// its future dropped).
struct EpochGuard<'a> {
    hub: &'a Hub,
    epoch: u64,
}

impl Drop for EpochGuard<'_> {
    fn drop(&mut self) {
        self.hub.barriers.end(self.epoch);
    }
}

impl RuntimeClient {
    /// Waits until every rank of the world has called `barrier`, or fails
    /// after `timeout`.
    ///
    /// Every rank must call it the same number of times, one at a time;
    /// the runtime must be progressed meanwhile (by
    /// [`Runtime::block_on`](crate::Runtime::block_on), as
    /// [`Runtime::barrier`](crate::Runtime::barrier) does, or a
    /// [`RuntimeThread`](crate::RuntimeThread)). Handlers of other calls
    /// keep being served while a rank waits. It takes `ceil(log2 n)` rounds
    /// of one small call each.
    ///
    /// # Errors
    ///
    /// - [`RuntimeError::DeadlineExceeded`] if some rank did not arrive in
    ///   time;
    /// - [`RuntimeError::Transport`] if a rank this one waits for or
    ///   notifies is gone;
    /// - [`RuntimeError::BarrierInProgress`] if this rank is already in a
    ///   barrier;
    /// - [`RuntimeError::State`] unless the runtime is running,
    ///   [`RuntimeError::InvalidDeadline`] for a zero timeout;
    /// - any error of the barrier's calls (for example a remote rank that
    ///   is shutting down).
    ///
    /// After a failed barrier the ranks may be out of step; later barriers
    /// then fail rather than let ranks through early.
    pub async fn barrier(&self, timeout: Duration) -> Result<(), RuntimeError> {
        let hub = &*self.hub;
        let state = hub.state.load();
        if state != RuntimeState::Running {
            return Err(RuntimeError::State { state });
        }
        if timeout.is_zero() {
            return Err(RuntimeError::InvalidDeadline);
        }
        let deadline = hub
            .clock
            .now()
            .checked_add(timeout)
            .ok_or(RuntimeError::InvalidDeadline)?;
        let epoch = hub.barriers.begin(deadline)?;
        let _guard = EpochGuard { hub, epoch };
        let size = hub.world.get();
        let me = hub.rank.get();
        let mut distance = 1_u32;
        let mut round = 0_u8;
        while distance < size {
            let to = rank_at(hub, (me + distance) % size);
            let left = deadline.saturating_duration_since(hub.clock.now());
            if left.is_zero() {
                return Err(RuntimeError::DeadlineExceeded { after: timeout });
            }
            self.spawn_on_with(to, Arrive { epoch, round }, SpawnOptions::deadline(left))
                .await?;
            poll_fn(|cx| {
                if hub.barriers.take_arrival(epoch, round, cx).is_ready() {
                    return Poll::Ready(Ok(()));
                }
                if hub.clock.now() >= deadline {
                    return Poll::Ready(Err(RuntimeError::DeadlineExceeded { after: timeout }));
                }
                if let Some(gone) = super::caller::any_rank_down(hub) {
                    return Poll::Ready(Err(gone));
                }
                Poll::Pending
            })
            .await?;
            distance = distance.saturating_mul(2);
            round += 1;
        }
        Ok(())
    }
}

/// Rank `index`, which is below the world size by construction.
fn rank_at(hub: &Hub, index: u32) -> Rank {
    Rank::new(index, hub.world).unwrap_or(hub.rank)
}
