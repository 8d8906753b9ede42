//! The mailbox of collective deliveries: the runtime's own action that
//! carries one round's value, and the bounded store that keeps deliveries
//! by epoch and round until their receiver gets there.

use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use dinah_core::Instant;

use super::super::error::RuntimeError;
use super::super::hub::Hub;
use super::super::running::{self, RunningDeadline};
use crate::action::{
    Action, ActionError, CodecError, SegmentReader, SegmentWriter, WireValue, action_id, schema_id,
};

/// The most deliveries a rank keeps for collectives it has not reached.
const MAILBOX: usize = 64;

/// The handler's answer when the mailbox is full (the sender retries).
pub(super) const MAILBOX_FULL: &str = "collective mailbox full";

/// "Here is the value of round `round` of collective `epoch`": the
/// runtime's own action, registered on every rank and run on the owner
/// thread. The value travels as one group of its type's records, with the
/// type's schema ID.
pub(crate) struct Deliver {
    pub(super) epoch: u64,
    pub(super) round: u8,
    pub(super) schema: u64,
    pub(super) value: Vec<u8>,
}

impl Deliver {
    /// Keeps this delivery in `collectives` (the handler); the mailbox
    /// holds at most `budget` bytes.
    ///
    /// # Errors
    ///
    /// As [`Collectives::record`].
    pub(crate) fn record(self, collectives: &Collectives, budget: u64) -> Result<(), ActionError> {
        collectives.record(self, budget)
    }
}

impl WireValue for Deliver {
    const SCHEMA_ID: u64 = schema_id("dinah.collective.Deliver/1");

    fn encode(&self, out: &mut SegmentWriter) -> Result<(), CodecError> {
        (self.epoch, self.round, self.schema).encode(out)?;
        out.push(&self.value);
        Ok(())
    }

    fn decode(input: &mut SegmentReader<'_>) -> Result<Self, CodecError> {
        let (epoch, round, schema) = <(u64, u8, u64)>::decode(input)?;
        let value = input.next_segment()?.to_vec();
        Ok(Self {
            epoch,
            round,
            schema,
            value,
        })
    }
}

impl Action for Deliver {
    const ID: u128 = action_id("dinah.collective.Deliver/1");
    type Output = ();
}

/// This rank's side of the collectives: the deliveries kept and the
/// collective in progress, if any.
#[derive(Default)]
pub(crate) struct Collectives {
    state: Mutex<State>,
    /// The running collective's deadline in nanoseconds, or 0: read by the
    /// owner on every round without the lock.
    deadline: RunningDeadline,
}

#[derive(Default)]
struct State {
    /// Collectives this rank has left (successfully or not).
    left: u64,
    running: bool,
    mailbox: Vec<Deliver>,
    /// Bytes of the values in the mailbox.
    bytes: u64,
    waiter: Option<Waker>,
}

impl Collectives {
    /// Keeps a delivery from a peer and wakes the running collective.
    ///
    /// # Errors
    ///
    /// An [`ActionError`] if the delivery is for a collective this rank has
    /// left, was heard before (the ranks are out of step), or does not fit
    /// the mailbox (the sender tries again).
    fn record(&self, delivery: Deliver, budget: u64) -> Result<(), ActionError> {
        let mut state = self.lock();
        if delivery.epoch < state.left {
            return Err(ActionError::new("collective delivery out of step"));
        }
        if state
            .mailbox
            .iter()
            .any(|kept| kept.epoch == delivery.epoch && kept.round == delivery.round)
        {
            return Err(ActionError::new("collective delivery heard twice"));
        }
        let bytes = delivery.value.len() as u64;
        if state.mailbox.len() >= MAILBOX || state.bytes.saturating_add(bytes) > budget {
            return Err(ActionError::new(MAILBOX_FULL));
        }
        state.bytes += bytes;
        state.mailbox.push(delivery);
        running::wake(&mut state.waiter);
        Ok(())
    }

    /// Starts a collective that must end by `deadline`; returns its epoch.
    pub(super) fn begin(&self, deadline: Instant) -> Result<u64, RuntimeError> {
        let mut state = self.lock();
        if state.running {
            return Err(RuntimeError::CollectiveInProgress);
        }
        state.running = true;
        self.deadline.set(deadline);
        Ok(state.left)
    }

    /// Ends the running collective of `epoch`, dropping whatever of it is
    /// still in the mailbox (it failed before taking it).
    pub(super) fn end(&self, epoch: u64) {
        let mut state = self.lock();
        state.left = epoch + 1;
        state.running = false;
        state.waiter = None;
        let State { mailbox, bytes, .. } = &mut *state;
        mailbox.retain(|kept| {
            let stale = kept.epoch <= epoch;
            if stale {
                *bytes -= kept.value.len() as u64;
            }
            !stale
        });
        self.deadline.clear();
    }

    /// Takes the delivery of `(epoch, round)` if it arrived; otherwise
    /// remembers `cx`'s waker.
    pub(super) fn take(&self, epoch: u64, round: u8, cx: &Context<'_>) -> Poll<Deliver> {
        let mut state = self.lock();
        let found = state
            .mailbox
            .iter()
            .position(|kept| kept.epoch == epoch && kept.round == round);
        if let Some(at) = found {
            let delivery = state.mailbox.swap_remove(at);
            state.bytes -= delivery.value.len() as u64;
            return Poll::Ready(delivery);
        }
        running::remember(&mut state.waiter, cx);
        Poll::Pending
    }

    /// The running collective's deadline, if any.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline.get()
    }

    /// Wakes the running collective if its deadline passed by `now` (the
    /// owner, every round).
    pub(crate) fn expire(&self, now: Instant) {
        if self.deadline.passed(now) {
            self.wake();
        }
    }

    /// Wakes the running collective so it looks again (a peer went down).
    pub(crate) fn wake(&self) {
        running::wake(&mut self.lock().waiter);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Ends the collective's epoch however it ends (success, error, or its
/// future dropped).
pub(super) struct EpochGuard<'a> {
    pub(super) hub: &'a Hub,
    pub(super) epoch: u64,
}

impl Drop for EpochGuard<'_> {
    fn drop(&mut self) {
        self.hub.collectives.end(self.epoch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(epoch: u64, round: u8, bytes: usize) -> Deliver {
        Deliver {
            epoch,
            round,
            schema: 1,
            value: vec![0; bytes],
        }
    }

    #[test]
    fn the_mailbox_keeps_deliveries_by_epoch_and_round_within_its_bounds() {
        let collectives = Collectives::default();
        let waker = Waker::noop();
        let cx = Context::from_waker(waker);
        collectives.record(delivery(1, 0, 4), 100).unwrap();
        collectives.record(delivery(0, 2, 4), 100).unwrap();
        let twice = collectives.record(delivery(0, 2, 4), 100).unwrap_err();
        assert!(twice.text().contains("twice"));
        let full = collectives.record(delivery(2, 0, 93), 100).unwrap_err();
        assert_eq!(full.text(), MAILBOX_FULL);
        let epoch = collectives.begin(Instant::MAX).unwrap();
        assert_eq!(epoch, 0);
        assert!(matches!(
            collectives.begin(Instant::MAX),
            Err(RuntimeError::CollectiveInProgress)
        ));
        assert!(collectives.take(0, 1, &cx).is_pending());
        assert!(matches!(collectives.take(0, 2, &cx), Poll::Ready(d) if d.round == 2));
        collectives.end(0);
        // Epoch 0 is over: its deliveries are refused, epoch 1's was kept.
        assert!(collectives.record(delivery(0, 3, 1), 100).is_err());
        assert_eq!(collectives.begin(Instant::MAX).unwrap(), 1);
        assert!(matches!(collectives.take(1, 0, &cx), Poll::Ready(_)));
        collectives.end(1);
        for round in 0..MAILBOX as u8 {
            collectives.record(delivery(5, round, 0), 100).unwrap();
        }
        let full = collectives.record(delivery(6, 0, 0), 100).unwrap_err();
        assert_eq!(full.text(), MAILBOX_FULL);
    }
}
